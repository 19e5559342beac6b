# SPDX-License-Identifier: Apache-2.0
"""nova_ext:spread_constraints: the grammar, the arithmetic, and what the
filter and the weigher make of it.
"""

from oslo_utils.fixture import uuidsentinel as uuids

from nova import test
import testtools

from nova_ext.scheduler import failure_domains
from nova_ext.scheduler.filters import failure_domain as fd_filter
from nova_ext.scheduler import spread_constraints as sc
from nova_ext.scheduler import spread_requests
from nova_ext.scheduler.weights import failure_domain_spread
from tests.unit.test_failure_domains import group
from tests.unit.test_failure_domains import host
from tests.unit.test_failure_domains import opened
from tests.unit.test_failure_domains import racks
from tests.unit.test_failure_domains import request

LEVELS = ['rack', 'row', 'power']
KEY = sc.KEY


class ParseTest(testtools.TestCase):

    def test_examples(self):
        self.assertEqual(
            [sc.Constraint('rack', 'max', 1), sc.Constraint('row', 'max', 3)],
            sc.parse('rack:max=1;row:max=3', LEVELS))
        self.assertEqual(
            [sc.Constraint('rack', 'skew', 1, 3, True)],
            sc.parse('rack:skew=1,min_domains=3', LEVELS))
        self.assertEqual(
            [sc.Constraint('rack', 'max', 1),
             sc.Constraint('host', 'skew', 1, None, False)],
            sc.parse('rack:max=1;host:skew=1,soft', LEVELS))
        self.assertEqual([sc.Constraint('row', 'skew', 2, None, True)],
                         sc.parse('row:skew=2,hard', LEVELS))
        # one of each kind on a level is fine
        self.assertEqual(2, len(sc.parse('rack:max=2;rack:skew=1', LEVELS)))
        # a hint repeated once arrives as a list
        self.assertEqual([sc.Constraint('rack', 'max', 1)],
                         sc.parse(['rack:max=1'], LEVELS))

    def test_str_is_the_canonical_form(self):
        for text in ('rack:max=1', 'rack:skew=1,min_domains=3,soft'):
            self.assertEqual(text, str(sc.parse(text, LEVELS)[0]))

    def test_malformed_values_name_key_constraint_and_form(self):
        for bad in ('', ' ', 'rack', 'rack:', 'rakc:max=1', 'rack:max',
                    'rack:max=0', 'rack:max=+1', 'rack:max=01',
                    'rack:max=1_0', 'rack:skew=0', 'rack:max=1,min_domains=2',
                    'rack:skew=1,min_domains=0', 'rack:skew=1,soft,hard',
                    'rack:skew=1,min_domains=2,min_domains=3',
                    'rack:skew=1,fuzzy', 'rack:max=1;', 'rack:max=1;;',
                    'rack:max=1;rack:max=2', 'rack:max=1 ', ':max=1',
                    'rack:min=1', 'rack:max=\uff13', 'rack:soft', 42, None,
                    ['rack:max=1', 'row:max=1']):
            error = self.assertRaises(ValueError, sc.parse, bad, LEVELS,
                                      source='scheduler hint')
            self.assertIn('scheduler hint ' + KEY, str(error), bad)
            self.assertIn("<level>:max=<N>|skew=<N>", str(error), bad)

    def test_the_offending_constraint_is_named(self):
        error = self.assertRaises(ValueError, sc.parse,
                                  'rack:max=1;row:skew=0', LEVELS)
        self.assertIn("'row:skew=0'", str(error))
        error = self.assertRaises(ValueError, sc.parse,
                                  'rack:max=1;rack:max=2', LEVELS)
        self.assertIn("'rack:max=2' repeats a max rule", str(error))

    def test_host_is_always_a_level_and_configured_levels_follow(self):
        self.assertEqual('host', sc.parse('host:max=1', [])[0].level)
        self.assertRaises(ValueError, sc.parse, 'rack:max=1', ['pdu'])


class VerdictsTest(testtools.TestCase):
    """spread_constraints.verdicts, the rule every reader shares."""

    def verdict(self, text, members, domain, placed=None, remaining=0,
                eligible=None, fillable=None):
        constraint, = sc.parse(text, ['rack'])
        eligible = set(members) | {domain} if eligible is None else eligible
        return sc.verdicts(constraint, members, frozenset(eligible),
                           placed or {}, [domain], remaining,
                           eligible if fillable is None else fillable)[domain]

    def test_max(self):
        self.assertTrue(self.verdict('rack:max=2', {'r1': 1}, 'r1'))
        self.assertFalse(self.verdict('rack:max=2', {'r1': 2}, 'r1'))
        self.assertFalse(self.verdict('rack:max=2', {'r1': 1}, 'r1',
                                      placed={'r1': 1}))

    def test_skew_is_kubernetes_for_one_server(self):
        members = {'r1': 2, 'r2': 1, 'r3': 1}
        self.assertFalse(self.verdict('rack:skew=1', members, 'r1'))
        self.assertTrue(self.verdict('rack:skew=1', members, 'r2'))
        self.assertTrue(self.verdict('rack:skew=2', members, 'r1'))

    def test_min_domains_counts_the_least_as_zero_while_too_few(self):
        self.assertFalse(self.verdict('rack:skew=1,min_domains=3',
                                      {'r1': 1, 'r2': 1}, 'r1'))
        self.assertTrue(self.verdict('rack:skew=2,min_domains=3',
                                     {'r1': 1, 'r2': 1}, 'r1'))

    def test_a_domain_too_far_ahead_can_be_caught_up_by_the_rest(self):
        # 2/0 with skew 1 is illegal on its own, 2/2 is not: with two
        # servers still to come, r1 may take the second server
        self.assertFalse(self.verdict('rack:skew=1', {}, 'r1',
                                      placed={'r1': 1},
                                      eligible={'r1', 'r2'}))
        self.assertTrue(self.verdict('rack:skew=1', {}, 'r1',
                                     placed={'r1': 1}, remaining=2,
                                     eligible={'r1', 'r2'}))
        # ... but not when r2 has no host left for them
        self.assertFalse(self.verdict('rack:skew=1', {}, 'r1',
                                      placed={'r1': 1}, remaining=2,
                                      eligible={'r1', 'r2'},
                                      fillable={'r1'}))

    def test_least_filled(self):
        self.assertEqual(('r2', 0), sc.least_filled({'r1': 1}, {'r1', 'r2'}))
        self.assertEqual((None, 0), sc.least_filled({'r1': 1}, {'r1', 'r2'},
                                                    min_domains=3))


class FilterAndWeigherTest(test.NoDBTestCase):
    """Given r1 holding two members (h1, h2), r2 one (h3) and r3 none, when
    a request of the group asks for constraints, then the filter passes
    and the weigher ranks ...
    """

    def setUp(self):
        super().setUp()
        self.aggregates = racks(r1=['h1', 'h2'], r2=['h3', 'h4'],
                                r3=['h5', 'h6'])
        self.hosts = [host('h%d' % i) for i in range(1, 7)]
        self.members = {'h1': 1, 'h2': 1, 'h3': 1}

    def spec(self, hints=None, extra_specs=None):
        spec = request(hints=hints, extra_specs=extra_specs,
                       group=group(hosts=['h1', 'h2', 'h3'],
                                   members=[uuids.m1, uuids.m2, uuids.m3]))
        opened(self, spec, self.aggregates, members=self.members)
        return spec

    def passing(self, value, hosts=None):
        return [h.host for h in fd_filter.FailureDomainAntiAffinityFilter(
        ).filter_all(self.hosts if hosts is None else hosts,
                     self.spec({KEY: value}))]

    def test_filter_skew(self):
        # r3 empty: only r3 may take one more with skew 1
        self.assertEqual(['h5', 'h6'], self.passing('rack:skew=1'))
        self.assertEqual(['h3', 'h4', 'h5', 'h6'],
                         self.passing('rack:skew=2'))
        # without r3 among the candidates the minimum is r2's 1
        self.assertEqual(['h3', 'h4'], self.passing('rack:skew=1',
                                                    self.hosts[:4]))
        # ... unless three racks must be eligible: the minimum is then 0
        self.assertEqual([], self.passing('rack:skew=1,min_domains=3',
                                          self.hosts[:4]))

    def test_filter_applies_every_hard_constraint_and_no_soft_one(self):
        self.assertEqual(['h4', 'h5', 'h6'],
                         self.passing('rack:max=2;host:max=1'))
        self.assertEqual(['h3', 'h4', 'h5', 'h6'],
                         self.passing('rack:max=2;host:max=1,soft'))

    def weights(self, spec):
        weigher = failure_domain_spread.FailureDomainSpreadWeigher()
        state = weigher.prepare(spec, self.hosts)
        return dict(zip([h.host for h in self.hosts],
                        weigher.weigh_all(self.hosts, state)))

    def test_weigher_soft_violation_ranks_below_any_member_count(self):
        weights = self.weights(self.spec({KEY: 'rack:skew=1,soft'}))
        # r3 (no member, within skew) first; r2 (1 member, breaks skew 1
        # against r3's 0) and r1 below it
        self.assertEqual(0, weights['h5'])
        self.assertLess(weights['h3'], -1)
        self.assertLess(weights['h1'], weights['h3'])

    def test_weigher_old_keys_unchanged(self):
        weights = self.weights(self.spec({failure_domains.SPREAD_LEVEL:
                                          'rack'}))
        self.assertEqual([-2, -2, -1, -1, 0, 0],
                         [weights[h.host] for h in self.hosts])

    def test_spread_constraints_take_the_group_spread_lock(self):
        # the members must be counted in the group's turn, as for
        # nova_ext:spread_level
        spec = request(hints={KEY: 'host:skew=1,soft'}, group=group())
        self.assertIsNotNone(spread_requests.needs_turn(
            opened(self, spec, self.aggregates, filters=[
                fd_filter.FailureDomainAntiAffinityFilter()]), spec))
        spec = request(group=group())
        self.assertIsNone(spread_requests.needs_turn(
            opened(self, spec, self.aggregates, filters=[
                fd_filter.FailureDomainAntiAffinityFilter()]), spec))
