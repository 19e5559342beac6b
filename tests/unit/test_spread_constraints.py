# SPDX-License-Identifier: Apache-2.0
"""nova_ext:spread_constraints: the grammar, and the skew arithmetic."""

from oslo_utils.fixture import uuidsentinel as uuids

from nova import test
import testtools

from nova_ext.scheduler import failure_domains
from nova_ext.scheduler.filters import failure_domain as fd_filter
from nova_ext.scheduler import spread_constraints as sc
from nova_ext.scheduler.weights import failure_domain_spread
from tests.unit.test_failure_domains import group
from tests.unit.test_failure_domains import host
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


class SkewArithmeticTest(testtools.TestCase):

    def test_minimum_over_eligible_domains(self):
        self.assertEqual(0, sc.skew_minimum([]))
        self.assertEqual(1, sc.skew_minimum([3, 1, 2]))
        self.assertEqual(0, sc.skew_minimum([3, 0, 2]))

    def test_min_domains_makes_the_minimum_zero_when_too_few(self):
        self.assertEqual(1, sc.skew_minimum([1, 2], min_domains=2))
        self.assertEqual(0, sc.skew_minimum([1, 2], min_domains=3))
        self.assertEqual(1, sc.skew_minimum([1, 2, 1], min_domains=3))

    def test_skew(self):
        # (members + 1) - minimum <= skew
        self.assertTrue(sc.skew_allows(0, 0, 1))
        self.assertFalse(sc.skew_allows(1, 0, 1))
        self.assertTrue(sc.skew_allows(1, 0, 2))
        self.assertTrue(sc.skew_allows(3, 2, 2))
        self.assertFalse(sc.skew_allows(4, 2, 2))

    def test_allows_max_and_skew(self):
        self.assertTrue(sc.allows(sc.Constraint('rack', 'max', 2), 1, 0))
        self.assertFalse(sc.allows(sc.Constraint('rack', 'max', 2), 2, 0))
        self.assertTrue(sc.allows(sc.Constraint('rack', 'skew', 1), 1, 1))
        self.assertFalse(sc.allows(sc.Constraint('rack', 'skew', 1), 2, 1))


class SpreadRequestsTest(test.NoDBTestCase):
    """What the filter and weigher make of the key."""

    def setUp(self):
        super().setUp()
        failure_domains._last_spread_request.clear()
        self.addCleanup(failure_domains._last_spread_request.clear)
        # r1 holds two members (h1, h2), r2 one (h3), r3 none
        self.hosts = [host('h1', 'r1'), host('h2', 'r1'), host('h3', 'r2'),
                      host('h4', 'r2'), host('h5', 'r3'), host('h6', 'r3')]
        self.group = group(hosts=['h1', 'h2', 'h3'],
                           members=[uuids.m1, uuids.m2, uuids.m3])
        self.group.name = 'web'

    def _requests(self, value, source='hint', hosts=None, **extra):
        hints = {KEY: value} if source == 'hint' else {}
        specs = {KEY: value} if source == 'flavor' else {}
        hints.update(extra.get('hints', {}))
        specs.update(extra.get('specs', {}))
        spec = request(hints=hints, extra_specs=specs, group=self.group)
        return spec, failure_domains.spread_requests(
            spec, self.hosts if hosts is None else hosts)

    def _passing(self, value, hosts=None):
        spec, _requests = self._requests(value, hosts=hosts)
        return [h.host for h in fd_filter.FailureDomainAntiAffinityFilter(
        ).filter_all(self.hosts if hosts is None else hosts, spec)]

    def test_one_request_per_constraint_counted_at_its_level(self):
        _spec, requests = self._requests('rack:max=3;host:skew=1,soft')
        self.assertEqual(['rack', 'host'], [r.level for r in requests])
        self.assertEqual({'r1': 2, 'r2': 1}, requests[0].members_per_domain)
        self.assertEqual({'host:h1': 1, 'host:h2': 1, 'host:h3': 1},
                         requests[1].members_per_domain)
        self.assertEqual([True, False], [r.hard for r in requests])

    def test_skew_minimum_over_candidates_and_member_domains(self):
        _spec, (rack,) = self._requests('rack:skew=1')
        self.assertEqual(0, rack.minimum(self.hosts))
        # without r3's hosts the emptiest eligible rack is r2
        self.assertEqual(1, rack.minimum(self.hosts[:4]))
        # r1 holds members: it stays eligible with no candidate in it
        self.assertEqual({'r1', 'r2'},
                         rack.eligible_domains(self.hosts[3:4]))

    def test_filter_skew(self):
        # r3 empty: only r3 may take one more with skew 1
        self.assertEqual(['h5', 'h6'], self._passing('rack:skew=1'))
        self.assertEqual(['h3', 'h4', 'h5', 'h6'],
                         self._passing('rack:skew=2'))
        # without r3 among the candidates the minimum is r2's 1
        self.assertEqual(['h3', 'h4'], self._passing('rack:skew=1',
                                                     self.hosts[:4]))
        # ... unless three racks must be eligible: the minimum is then 0
        self.assertEqual([], self._passing('rack:skew=1,min_domains=3',
                                           self.hosts[:4]))

    def test_filter_applies_every_hard_constraint_and_no_soft_one(self):
        self.assertEqual(['h4', 'h5', 'h6'],
                         self._passing('rack:max=2;host:max=1'))
        self.assertEqual(['h3', 'h4', 'h5', 'h6'],
                         self._passing('rack:max=2;host:max=1,soft'))

    def test_flavor_wins_over_hint_for_the_whole_key(self):
        spec = request(hints={KEY: 'rack:max=1'},
                       extra_specs={KEY: 'row:max=5'}, group=self.group)
        (only,) = failure_domains.spread_requests(spec, self.hosts)
        self.assertEqual(('row', 5), (only.level, only.max_per_domain))

    def test_old_keys_mean_one_hard_max(self):
        spec = request(hints={failure_domains.SPREAD_LEVEL: 'rack'},
                       group=self.group)
        (only,) = failure_domains.spread_requests(spec, self.hosts)
        self.assertEqual(sc.Constraint('rack', 'max', 1), only.constraint)

    def test_old_and_new_keys_together_are_refused_naming_both(self):
        for extra in ({'hints': {failure_domains.SPREAD_LEVEL: 'rack'}},
                      {'specs': {failure_domains.SPREAD_MAX_PER_DOMAIN:
                                 '2'}}):
            error = self.assertRaises(
                failure_domains.InvalidSpreadRequest, self._requests,
                'rack:max=1', **extra)
            self.assertIn(KEY, str(error))
            self.assertIn('cannot be combined', str(error))

    def test_malformed_hint_names_the_hint(self):
        error = self.assertRaises(failure_domains.InvalidSpreadRequest,
                                  self._requests, 'rack:skew=0')
        self.assertIn('scheduler hint ' + KEY, str(error))

    def test_hint_without_group_is_refused(self):
        spec = request(hints={KEY: 'rack:max=1'})
        error = self.assertRaises(failure_domains.InvalidSpreadRequest,
                                  failure_domains.spread_requests, spec, [])
        self.assertIn(KEY + ' needs a server group', str(error))

    def test_weigher_soft_violation_ranks_below_any_member_count(self):
        spec, _requests = self._requests('rack:skew=1,soft')
        weigher = failure_domain_spread.FailureDomainSpreadWeigher()
        state = weigher.prepare(spec, self.hosts)
        weights = {h.host: weigher.weigh(h, state) for h in self.hosts}
        # r3 (no member, within skew) first; r2 (1 member, breaks skew 1
        # against r3's 0) and r1 below it
        self.assertEqual(0, weights['h5'])
        self.assertLess(weights['h3'], -1)
        self.assertLess(weights['h1'], weights['h3'])

    def test_weigher_old_keys_unchanged(self):
        spec = request(hints={failure_domains.SPREAD_LEVEL: 'rack'},
                       group=self.group)
        weigher = failure_domain_spread.FailureDomainSpreadWeigher()
        state = weigher.prepare(spec, self.hosts)
        self.assertEqual([-2, -2, -1, -1, 0, 0],
                         [weigher.weigh(h, state) for h in self.hosts])

    def test_spread_constraints_take_the_group_spread_lock(self):
        # the members must be counted inside the group's lock, as for
        # nova_ext:spread_level
        from nova_ext.scheduler import spread_scheduling
        spec = request(hints={KEY: 'host:skew=1,soft'}, group=self.group)
        self.assertIs(self.group, spread_scheduling._spread_group(spec))
        spec = request(group=self.group)
        self.assertIsNone(spread_scheduling._spread_group(spec))
