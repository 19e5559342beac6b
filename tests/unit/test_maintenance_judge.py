# SPDX-License-Identifier: Apache-2.0
"""The standing-state judgement (nova_ext.maintenance.judge), case by case:
given hosts and where a group's members run, when a constraint is judged,
then it holds or not, by how many members, and which domains are over.
"""

import testscenarios
import testtools

from nova_ext.maintenance import judge
from nova_ext.scheduler import spread_constraints

LEVELS = ['rack', 'row']


def constraints(text):
    return tuple(spread_constraints.parse(text, LEVELS))


def layout(racks, usable=None, rows=None):
    """{rack: [hosts]} (and {row: [hosts]}); ``usable``: the hosts that
    are (default: all).
    """
    domains = {}
    for rack, hosts in racks.items():
        for host in hosts:
            domains.setdefault(host, {})['rack'] = rack
    for row, hosts in (rows or {}).items():
        for host in hosts:
            domains.setdefault(host, {})['row'] = row
    return judge.Layout(domains, domains if usable is None else usable)


RACKS = {'r1': ['h1', 'h2'], 'r2': ['h3', 'h4'], 'r3': ['h5', 'h6']}


class JudgeCases(testscenarios.WithScenarios, testtools.TestCase):

    # (constraint, layout, members, expected (holds, excess, over))
    scenarios = [
        ('max holds', dict(
            text='rack:max=1', layout=layout(RACKS),
            members={'a': 'h1', 'b': 'h3'}, expected=(True, 0, {}))),
        ('max: two in one rack', dict(
            text='rack:max=1', layout=layout(RACKS),
            members={'a': 'h1', 'b': 'h2', 'c': 'h3'},
            expected=(False, 1, {'r1': 2}))),
        ('max=2: three and four', dict(
            text='rack:max=2', layout=layout(RACKS),
            members={'a': 'h1', 'b': 'h2', 'c': 'h1', 'd': 'h3', 'e': 'h4',
                     'f': 'h3', 'g': 'h4'},
            expected=(False, 3, {'r1': 3, 'r2': 4}))),
        ('skew: an empty usable rack is the least', dict(
            text='rack:skew=1', layout=layout(RACKS),
            members={'a': 'h1', 'b': 'h2', 'c': 'h3'},
            expected=(False, 1, {'r1': 2}))),
        ('skew: an empty rack in maintenance is not eligible', dict(
            text='rack:skew=1',
            layout=layout(RACKS, usable=['h1', 'h2', 'h3', 'h4']),
            members={'a': 'h1', 'b': 'h2', 'c': 'h3'},
            expected=(True, 0, {}))),
        ('skew: a rack in maintenance holding a member stays eligible',
         dict(text='rack:skew=1',
              layout=layout(RACKS, usable=['h1', 'h2', 'h3', 'h4']),
              members={'a': 'h1', 'b': 'h2', 'c': 'h1', 'd': 'h3',
                       'e': 'h4', 'f': 'h3', 'g': 'h5'},
              # r3's one member is the least: 3 - 1 > 1 in r1 and r2
              expected=(False, 2, {'r1': 3, 'r2': 3}))),
        ('skew: fewer than min_domains eligible, the least is 0', dict(
            text='rack:skew=1,min_domains=4', layout=layout(RACKS),
            members={'a': 'h1', 'b': 'h2', 'c': 'h3', 'd': 'h4', 'e': 'h5',
                     'f': 'h6'},
            expected=(False, 3, {'r1': 2, 'r2': 2, 'r3': 2}))),
        ('skew: enough domains, level', dict(
            text='rack:skew=1,min_domains=3', layout=layout(RACKS),
            members={'a': 'h1', 'b': 'h2', 'c': 'h3', 'd': 'h4', 'e': 'h5',
                     'f': 'h6'},
            expected=(True, 0, {}))),
        ('a member on a host in no rack', dict(
            text='rack:max=2', layout=layout(
                RACKS, usable=['h1', 'h7'], rows={'a': ['h7']}),
            members={'a': 'h1', 'b': 'h7'}, expected=(False, 1, {}))),
        ('a member on no host counts nowhere', dict(
            text='rack:max=1', layout=layout(RACKS),
            members={'a': 'h1', 'b': None}, expected=(True, 0, {}))),
        ('host level: every host its own domain', dict(
            text='host:max=1', layout=layout(RACKS),
            members={'a': 'h1', 'b': 'h1'}, expected=(False, 1, {'h1': 2}))),
        ('hard together: a host without a row sets no rack minimum', dict(
            text='rack:skew=1;row:max=5', layout=layout(
                RACKS, rows={'a': ['h1', 'h2', 'h3', 'h4']}),
            members={'a': 'h1', 'b': 'h2', 'c': 'h3'},
            # r3's hosts have no row: not eligible, so r2 (1) is the least
            expected=(True, 0, {}))),
        ('soft constraints are judged among themselves', dict(
            text='rack:skew=1,soft;row:max=5', layout=layout(
                RACKS, rows={'a': ['h1', 'h2', 'h3', 'h4']}),
            members={'a': 'h1', 'b': 'h2', 'c': 'h3'},
            # the soft rack constraint is not judged with the hard row one:
            # r3 is eligible and empty
            expected=(False, 1, {'r1': 2}))),
    ]

    def test_verdict(self):
        # Given the hosts and where the members run
        found = constraints(self.text)
        # When the first constraint is judged with the others
        verdict = judge.judge_all(found, self.layout, self.members)[0]
        # Then
        holds, excess, over = self.expected
        self.assertEqual(holds, verdict.holds)
        self.assertEqual(excess, verdict.excess)
        self.assertEqual(over, verdict.over)
        # the excess is 0 exactly when the constraint holds
        self.assertEqual(verdict.holds, verdict.excess == 0)


class JudgeTest(testtools.TestCase):

    def test_hard_excess_and_no_worse(self):
        found = constraints('rack:max=1;row:max=1,soft')
        placed = {'a': 'h1', 'b': 'h2'}
        hard, _soft = judge.excess(found, layout(RACKS), placed)
        self.assertEqual((1,), hard)
        self.assertTrue(judge.no_worse((1,), (1,)))
        self.assertTrue(judge.no_worse((0,), (1,)))
        self.assertFalse(judge.no_worse((2,), (1,)))

    def test_least_and_limit(self):
        verdict = judge.judge(constraints('rack:skew=2')[0], ('rack',),
                              layout(RACKS), {'a': 'h1', 'b': 'h3'})
        self.assertEqual(('r3', 0), verdict.least)
        self.assertEqual(2, verdict.limit)
        self.assertEqual({'r1': ['a'], 'r2': ['b']}, verdict.members)

    def test_without_makes_hosts_unusable(self):
        drained = layout(RACKS).without(['h5', 'h6'])
        self.assertEqual({'h1', 'h2', 'h3', 'h4'}, set(drained.usable))
        self.assertEqual(frozenset({'r1', 'r2'}),
                         drained.usable_domains('rack', ('rack',)))
