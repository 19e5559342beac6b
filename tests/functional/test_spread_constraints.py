# SPDX-License-Identifier: Apache-2.0
"""nova_ext:spread_constraints inside a real Nova.

Given six hosts in three racks (r1: host1-2, r2: host3-4, r3: host5-6) and
two rows (row1: r1 and r2, row2: r3), when users boot the members of a
server group with several spread constraints (max per domain, skew, min
domains, hard or soft, from a hint or a flavor), then the filter enforces
the hard ones, the weigher follows the soft ones, and a malformed request
fails alone with a reason naming the key.
"""

from tests.functional import base

KEY = 'nova_ext:spread_constraints'
ROWS = {'row1': ['host1', 'host2', 'host3', 'host4'],
        'row2': ['host5', 'host6']}


class SpreadConstraintsTest(base.RackedTestCase):

    def setUp(self):
        super().setUp()
        self.set_failure_domains('row', ROWS)

    def _boot_all(self, prefix, count, group, hints=None, flavor=None):
        return [self.boot('%s-%d' % (prefix, i), flavor or self.flavor,
                          group, hints) for i in range(count)]

    def _racks(self, servers):
        racks = [self.rack(s) for s in servers]
        return {r: racks.count(r) for r in base.RACKS}

    def _force(self, name, group, host, zone='nova'):
        """A member put on ``host`` by the admin (no filter runs)."""
        return self.boot(name, self.flavor, group, zone=zone + ':' + host)

    # -- skew ----------------------------------------------------------------

    def test_skew_counts_member_domains_outside_the_candidates(self):
        # soft-anti-affinity: hosts holding members stay candidates
        group = self.create_server_group('skew', 'soft-anti-affinity')
        self.create_aggregate('az1', base.RACKS['r1'] + base.RACKS['r2'],
                              {'availability_zone': 'az1'})
        for name, host in (('m1', 'host1'), ('m2', 'host2'), ('m3', 'host3'),
                           ('m4', 'host4')):
            self._force(name, group, host, 'az1')
        self._force('m5', group, 'host5')
        # r1: 2, r2: 2, r3: 1 members. In az1 only r1 and r2 are
        # candidates, but r3 holds a member: the least filled eligible
        # rack holds 1, and a third member in r1 or r2 is 2 ahead.
        hints = {KEY: 'rack:skew=1'}
        server = self.boot('in-az1', self.flavor, group, hints, zone='az1',
                           expected_state='ERROR')
        self.assertNoValidHost(server, 'rack:skew=1: the least filled '
                               'eligible rack is r3 with 1 (no host left '
                               'there); every rack left is more than 1 '
                               'above it: r1 (2), r2 (2)')
        # outside az1 rack r3 is a candidate: the member goes there
        server = self.boot('anywhere', self.flavor, group, hints)
        self.assertEqual('r3', self.rack(server))
        # skew 2 lets az1 take it
        self.boot('in-az1-skew2', self.flavor, group, {KEY: 'rack:skew=2'},
                  zone='az1')

    def test_skew_keeps_racks_level_as_the_group_grows(self):
        group = self.create_server_group('level', 'soft-anti-affinity')
        servers = []
        for i in range(6):
            servers.append(self.boot('lv-%d' % i, self.flavor, group,
                                     {KEY: 'rack:skew=1'}))
            counts = self._racks(servers).values()
            self.assertLessEqual(max(counts) - min(counts), 1, counts)

    def test_a_multi_create_with_skew_fills_the_racks_evenly(self):
        # six servers in one request, three racks of two hosts, room
        # everywhere: the second server may go back to the first's rack
        # (the request is legal as a whole), so all six are placed 2/2/2;
        # before, the racks ahead were refused for good after the first
        # servers and the request failed
        group = self.create_server_group('batch')
        server = self._build_server(name='batch', flavor_id=self.flavor,
                                    networks='none')
        server.update(min_count=6, max_count=6)
        self.api.post_server({'server': server, 'os:scheduler_hints': {
            'group': group, KEY: 'rack:skew=1'}})
        servers = self._wait_for_assert(lambda: self._all_in(
            'batch', 6, 'ACTIVE'), max_retries=100, sleep=0.1)
        self.assertEqual({'r1': 2, 'r2': 2, 'r3': 2}, self._racks(servers))

    # -- min domains ---------------------------------------------------------

    def test_min_domains_beyond_the_racks_caps_each_rack_at_the_skew(self):
        group = self.create_server_group('mind')
        hints = {KEY: 'rack:skew=1,min_domains=4'}
        servers = self._boot_all('md', 3, group, hints)
        self.assertEqual({'r1': 1, 'r2': 1, 'r3': 1}, self._racks(servers))
        fourth = self.boot('md-3', self.flavor, group, hints,
                           expected_state='ERROR')
        self.assertNoValidHost(fourth, 'rack:skew=1,min_domains=4: fewer '
                               'than 4 racks are eligible, so the least '
                               'filled counts as 0; every rack left is more '
                               'than 1 above it: r1 (1) and 2 more')
        # (the whole list is the scheduler log's: the fault has no room)
        # three racks are enough for min_domains=3: the minimum is 1 now
        self.boot('md-ok', self.flavor, group,
                  {KEY: 'rack:skew=1,min_domains=3'})

    # -- two levels ----------------------------------------------------------

    def test_rack_and_row_limits_hold_together(self):
        # rack:max=2 alone admits 6, row:max=3 alone 6 (3 in row1, 3 in
        # r3): together row1 takes 3 and r3 2.
        group = self.create_server_group('two', 'soft-anti-affinity')
        hints = {KEY: 'rack:max=2;row:max=3'}
        servers = self._boot_all('two', 5, group, hints)
        counts = self._racks(servers)
        self.assertEqual(2, counts['r3'])
        self.assertEqual(3, counts['r1'] + counts['r2'])
        sixth = self.boot('two-5', self.flavor, group, hints,
                          expected_state='ERROR')
        self.assertNoValidHost(sixth, '(max 2 per rack)')
        self.assertIn('every row left is full (max 3 per row): row1 (3)',
                      sixth['fault']['message'])

    def test_host_level_without_aggregates(self):
        group = self.create_server_group('hosts', 'soft-anti-affinity')
        hints = {KEY: 'host:max=1'}
        servers = self._boot_all('h', 6, group, hints)
        self.assertEqual(6, len({self.host_of(s) for s in servers}))
        seventh = self.boot('h-6', self.flavor, group, hints,
                            expected_state='ERROR')
        self.assertNoValidHost(seventh, '(max 1 per host)')

    # -- soft and hard -------------------------------------------------------

    def test_soft_constraint_is_weighed_not_enforced(self):
        # Nova's weighers and nova-ext's multiplier at their defaults
        # (RackedTestCase turns the weigher off)
        self.flags(failure_domain_spread_weight_multiplier=1.0,
                   group='nova_ext')
        group = self.create_server_group('soft')
        hints = {KEY: 'rack:max=1,soft'}
        servers = self._boot_all('soft', 3, group, hints)
        self.assertEqual({'r1': 1, 'r2': 1, 'r3': 1}, self._racks(servers))
        # a fourth breaks the constraint but is not refused
        self.boot('soft-3', self.flavor, group, hints)

    def test_hard_constraint_is_enforced(self):
        group = self.create_server_group('hard')
        hints = {KEY: 'rack:max=1,hard'}
        self._boot_all('hard', 3, group, hints)
        fourth = self.boot('hard-3', self.flavor, group, hints,
                           expected_state='ERROR')
        self.assertNoValidHost(fourth, '(max 1 per rack)')

    def test_the_reason_arrives_whole_whatever_the_group_is_called(self):
        # a name that leaves the whole reason (with the name) 245
        # characters long: under 255, but Nova puts its own 25 in front
        name = 'tier-' + 'a' * 79
        group = self.create_server_group(name)
        hints = {KEY: 'rack:max=1'}
        self._boot_all('named', 3, group, hints)
        fourth = self.boot('named-3', self.flavor, group, hints,
                           expected_state='ERROR')
        self.assertNoValidHost(fourth, 'rack:max=1: every rack left is '
                               'full (max 1 per rack): r1 (1)')
        self.assertTrue(fourth['fault']['message'].endswith(
            '(server group %s)' % group), fourth['fault']['message'])

    # -- flavor, hint and the old keys ---------------------------------------

    def test_flavor_wins_over_hint(self):
        flavor = self.create_flavor('two-per-rack',
                                    extra_specs={KEY: 'rack:max=2'})
        group = self.create_server_group('fl')
        # the hint alone would stop at three
        servers = self._boot_all('fl', 4, group, {KEY: 'rack:max=1'},
                                 flavor=flavor)
        self.assertLessEqual(max(self._racks(servers).values()), 2)

    def test_old_keys_and_new_key_together_are_refused_naming_both(self):
        flavor = self.create_flavor('new', extra_specs={KEY: 'rack:max=2'})
        group = self.create_server_group('both')
        server = self.boot('both', flavor, group,
                           {'nova_ext:spread_level': 'rack'},
                           expected_state='ERROR')
        self.assertNoValidHost(server, 'flavor extra spec ' + KEY + ' and '
                               'scheduler hint nova_ext:spread_level cannot '
                               'be combined')

    def test_old_keys_still_mean_one_hard_max(self):
        group = self.create_server_group('old')
        hints = {'nova_ext:spread_level': 'rack',
                 'nova_ext:spread_max_per_domain': '1'}
        self._boot_all('old', 3, group, hints)
        fourth = self.boot('old-3', self.flavor, group, hints,
                           expected_state='ERROR')
        self.assertNoValidHost(fourth, '(max 1 per rack)')

    def test_malformed_hint_fails_one_request_naming_it(self):
        group = self.create_server_group('bad')
        server = self.boot('bad', self.flavor, group,
                           {KEY: 'rack:max=1;row:skew=0'},
                           expected_state='ERROR')
        self.assertNoValidHost(server, 'scheduler hint ' + KEY)
        self.assertIn("'row:skew=0'", server['fault']['message'])
        # the scheduler keeps serving
        self.boot('fine', self.flavor, group, {KEY: 'rack:max=1'})
