# SPDX-License-Identifier: Apache-2.0
"""Drain and repair plans (nova_ext.maintenance.plan), case by case: given
racks and where a group's members run, when a drain or a rebalance is
planned, then these moves, to these kinds of host, and these servers
blocked with these reasons.
"""

import testtools

from nova_ext.maintenance import plan
from nova_ext.scheduler import spread_constraints
from tests.unit import test_maintenance_judge

LEVELS = ['rack', 'row']
RACKS = {'r1': ['h1', 'h2'], 'r2': ['h3', 'h4'], 'r3': ['h5', 'h6'],
         'r4': ['h7', 'h8']}


def layout(racks=None, rows=None, usable=None):
    return test_maintenance_judge.layout(racks or RACKS, usable, rows)


def case(text, placement, policy='soft-anti-affinity', max_per_host=1):
    return plan.Case('g1', 'web', policy, tuple(spread_constraints.parse(
        text, LEVELS)) if text else (), placement, max_per_host)


def drained(hosts, racks=None, rows=None):
    full = layout(racks, rows)
    return full.without(hosts)


def destinations(group_plan):
    return [(m.server, dict(m.destination)) for m in group_plan.moves]


class DrainPlanTest(testtools.TestCase):

    def test_a_member_goes_to_the_free_rack(self):
        # Given rack:max=1 with r4 free, when r3 is drained
        found = plan.drain(case('rack:max=1', {'a': 'h1', 'b': 'h3',
                                               'c': 'h5'}),
                           drained(RACKS['r3']), {'c'})
        # Then c goes to a host of r4, and nothing is blocked
        self.assertEqual([('c', {'rack': 'r4'})], destinations(found))
        self.assertEqual([], found.blocked)
        self.assertEqual((0,), found.baseline)
        self.assertEqual((0,), found.final)

    def test_every_rack_full_blocks_with_the_filters_words(self):
        found = plan.drain(case('rack:max=1', {'a': 'h1', 'b': 'h3',
                                               'c': 'h5', 'd': 'h7'}),
                           drained(RACKS['r3']), {'c'})
        self.assertEqual([], found.moves)
        [blocked] = found.blocked
        self.assertEqual(('c', 'h5'), (blocked.server, blocked.host))
        self.assertEqual('rack:max=1 refuses rack r1 (1 member), r2 (1 '
                         'member), r4 (1 member) (max 1)', blocked.reason)

    def test_skew_sends_the_member_to_the_least_filled(self):
        # r1: 2, r2: 2, r3: 1 (drained), r4: 1
        found = plan.drain(case('rack:skew=1', {
            'a': 'h1', 'b': 'h2', 'c': 'h3', 'd': 'h4', 'e': 'h5',
            'f': 'h7'}), drained(RACKS['r3']), {'e'})
        self.assertEqual([('e', {'rack': 'r4'})], destinations(found))

    def test_two_levels_together(self):
        rows = {'a': RACKS['r1'] + RACKS['r2'],
                'b': RACKS['r3'] + RACKS['r4']}
        # rack:max=1;row:max=1 -- b leaves r3 (row b): r4 is in row b
        # too, which holds nothing else once b left; r2 is in row a,
        # which holds a
        found = plan.drain(case('rack:max=1;row:max=1',
                                {'a': 'h1', 'b': 'h5'}),
                           drained(RACKS['r3'], rows=rows), {'b'})
        self.assertEqual([('b', {'rack': 'r4', 'row': 'b'})],
                         destinations(found))
        # with a third member in r4 nothing is left for b
        found = plan.drain(case('rack:max=1;row:max=1',
                                {'a': 'h1', 'b': 'h5', 'c': 'h7'}),
                           drained(RACKS['r3'], rows=rows), {'b'})
        self.assertEqual(['b'], [item.server for item in found.blocked])
        self.assertEqual('rack:max=1 refuses rack r1 (1 member), r4 (1 '
                         'member) (max 1); row:max=1 refuses row a (1 '
                         'member), b (1 member) (max 1)',
                         found.blocked[0].reason)

    def test_a_server_that_cannot_move_is_named_with_why(self):
        found = plan.drain(case('rack:max=1', {'a': 'h1', 'c': 'h5'}),
                           drained(RACKS['r3']), {'c'},
                           pinned={'c': 'status SHUTOFF: ...'})
        self.assertEqual([('c', 'status SHUTOFF: ...')],
                         [(b.server, b.reason) for b in found.blocked])

    def test_affinity_group_members_do_not_leave_alone(self):
        found = plan.drain(case(None, {'a': 'h5', 'b': 'h5'},
                                policy='affinity'),
                           drained(['h5']), {'a', 'b'})
        self.assertEqual(2, len(found.blocked))
        self.assertIn("affinity group web: Nova moves no member away",
                      found.blocked[0].reason)

    def test_anti_affinity_hosts_taken_are_named(self):
        # r4 has one host, which holds a member: the rack allows a second
        # member (max=2), Nova's anti-affinity does not
        racks = {'r3': ['h5'], 'r4': ['h7']}
        found = plan.drain(case('rack:max=2', {'a': 'h7', 'b': 'h5'},
                                policy='anti-affinity'),
                           drained(['h5'], racks=racks), {'b'})
        self.assertEqual('no usable host to go to: the others are '
                         'disabled, down, in maintenance or being drained, '
                         'or in no rack; anti-affinity leaves out h7, which '
                         'holds a member', found.blocked[0].reason)

    def test_a_move_nova_could_make_worse_waits(self):
        # rack:skew=2, A holds 3, B 1, C 1 (on the drained h5; h6, also in
        # C, stays). Nova accepts B or C for it: C keeps things as they
        # are, B leaves C empty and A 3 above it.
        racks = {'A': ['h1'], 'B': ['h3'], 'C': ['h5', 'h6']}
        found = plan.drain(case('rack:skew=2', {
            'a1': 'h1', 'a2': 'h1', 'a3': 'h1', 'b': 'h3', 'c': 'h5'}),
            drained(['h5'], racks=racks), {'c'})
        self.assertEqual([], found.moves)
        self.assertEqual('Nova may move it to rack B, which would leave '
                         'rack:skew=2 further from holding than at the '
                         'start; it waits for a move that makes that safe',
                         found.blocked[0].reason)

    def test_server_in_no_group(self):
        move, blocked = plan.plan_groupless('s', 'h5', drained(['h5']))
        self.assertEqual(('s', 'h5', ()), (move.server, move.source,
                                           move.destination))
        self.assertIsNone(blocked)
        move, blocked = plan.plan_groupless(
            's', 'h5', layout({'r3': ['h5']}).without(['h5']))
        self.assertIsNone(move)
        self.assertIn('no usable host', blocked.reason)


class RebalancePlanTest(testtools.TestCase):

    def test_two_in_one_rack(self):
        found = plan.rebalance(case('rack:max=1', {'a': 'h1', 'b': 'h2',
                                                   'c': 'h5'}), layout())
        self.assertEqual(1, len(found.moves))
        move = found.moves[0]
        self.assertIn(move.server, ('a', 'b'))
        self.assertIn(dict(move.destination)['rack'], ('r2', 'r4'))
        self.assertEqual('rack:max=1: rack r1 holds 2 (at most 1)', move.why)
        self.assertEqual(((1,), (0,), 1), (found.baseline, found.final,
                                           found.lower_bound))

    def test_skew_levels_with_fewest_moves(self):
        # r1: 4, others 0, skew 1 -> 4/0/0/0 to 1/1/1/1: three moves
        found = plan.rebalance(case('rack:skew=1', {
            'a': 'h1', 'b': 'h1', 'c': 'h2', 'd': 'h2'}), layout())
        self.assertEqual(3, len(found.moves))
        self.assertEqual(3, found.lower_bound)
        self.assertEqual((0,), found.final)
        self.assertEqual({'r2', 'r3', 'r4'}, {
            dict(m.destination)['rack'] for m in found.moves})

    def test_a_host_in_no_rack(self):
        racks = dict(RACKS)
        domains = layout(racks)
        domains.domains['h9'] = {}
        found = plan.rebalance(case('rack:max=1', {'a': 'h1', 'b': 'h9'}),
                               domains)
        self.assertEqual([('b', 'rack:max=1: its host is in no rack')],
                         [(m.server, m.why) for m in found.moves])

    def test_what_cannot_be_repaired_is_blocked(self):
        # five members, four racks, max=1
        found = plan.rebalance(case('rack:max=1', {
            'a': 'h1', 'b': 'h2', 'c': 'h3', 'd': 'h5', 'e': 'h7'}),
            layout())
        self.assertEqual([], found.moves)
        self.assertEqual(['a', 'b'], [b.server for b in found.blocked])
        self.assertIn('rack:max=1 refuses rack', found.blocked[0].reason)

    def test_soft_constraints_after_the_hard_ones(self):
        rows = {'a': RACKS['r1'] + RACKS['r2'],
                'b': RACKS['r3'] + RACKS['r4']}
        found = plan.rebalance(case('rack:max=2;row:skew=1,soft', {
            'a': 'h1', 'b': 'h2', 'c': 'h3'}), layout(rows=rows))
        # no hard violation; the soft row skew (3 in row a, 0 in row b)
        # is 2 members above; one move to row b repairs it (2 and 1)
        self.assertEqual(1, len(found.moves))
        self.assertEqual('b', dict(found.moves[0].destination)['row'])
        self.assertEqual((2, 0), (found.soft_before, found.soft_after))

    def test_budget_barriers(self):
        found = plan.rebalance(case('rack:skew=1', {
            'a': 'h1', 'b': 'h1', 'c': 'h2', 'd': 'h2'}), layout(),
            budget=3)
        # moving out of r1 in any order and any overlap is never worse
        self.assertEqual([False, False, False],
                         [m.barrier for m in found.moves])

    def test_describe_class(self):
        self.assertEqual('any host', plan.describe_class((), ()))
        self.assertEqual('rack r1, row a',
                         plan.describe_class(('rack', 'row'), ('r1', 'a')))
