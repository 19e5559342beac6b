# SPDX-License-Identifier: Apache-2.0
"""FailureDomainAntiAffinityFilter inside a real Nova.

Given hosts in racks declared with aggregate metadata, when users boot the
members of an anti-affinity server group asking for rack spread, then no
rack holds more members than they asked for.
"""

from tests.functional import base


class FailureDomainFilterTest(base.RackedTestCase):

    def test_group_of_four_spread_one_per_rack_over_three_racks(self):
        group = self.create_server_group('web')
        hints = {'nova_ext:spread_level': 'rack'}
        servers = [self.boot('web-%d' % i, self.flavor, group, hints)
                   for i in range(3)]
        racks = [self.rack(s) for s in servers]
        self.assertCountEqual(['r1', 'r2', 'r3'], racks)

        fourth = self.boot('web-3', self.flavor, group, hints,
                           expected_state='ERROR')
        self.assertNoValidHost(fourth)

    def test_max_two_per_rack_from_flavor_extra_spec(self):
        flavor = self.create_flavor('spread2', extra_specs={
            'nova_ext:spread_level': 'rack',
            'nova_ext:spread_max_per_domain': '2'})
        # soft-anti-affinity: Nova alone would let a 7th member in
        group = self.create_server_group('db', policy='soft-anti-affinity')
        servers = [self.boot('db-%d' % i, flavor, group) for i in range(6)]
        racks = [self.rack(s) for s in servers]
        self.assertEqual({'r1': 2, 'r2': 2, 'r3': 2},
                         {r: racks.count(r) for r in base.RACKS})
        seventh = self.boot('db-6', flavor, group, expected_state='ERROR')
        self.assertNoValidHost(seventh)

    def test_multi_create_in_one_request_spreads(self):
        servers = self._multi_create_with_rack_spread('batch', 3)
        racks = sorted(self.rack(s) for s in servers)
        self.assertEqual(['r1', 'r2', 'r3'], racks)

    def test_multi_create_of_four_over_three_racks_fails_whole(self):
        self._multi_create_with_rack_spread('batch4', 4, status='ERROR')

    def test_unknown_level_hint_fails_one_request_with_reason(self):
        group = self.create_server_group('typo')
        server = self.boot('typo', self.flavor, group,
                           {'nova_ext:spread_level': 'rakc'},
                           expected_state='ERROR')
        self.assertNoValidHost(server, "nova_ext:spread_level='rakc'")
        # the scheduler keeps serving
        ok = self.boot('fine', self.flavor, group,
                       {'nova_ext:spread_level': 'rack'})
        self.assertEqual('ACTIVE', ok['status'])

    def test_bad_max_hint_names_the_hint(self):
        group = self.create_server_group('badmax')
        server = self.boot('badmax', self.flavor, group,
                           {'nova_ext:spread_level': 'rack',
                            'nova_ext:spread_max_per_domain': 'lots'},
                           expected_state='ERROR')
        self.assertNoValidHost(server, 'nova_ext:spread_max_per_domain')

    def test_spread_hint_without_group_is_refused(self):
        server = self.boot('lonely', self.flavor, None,
                           {'nova_ext:spread_level': 'rack'},
                           expected_state='ERROR')
        self.assertNoValidHost(server, 'needs a server group')

    def test_no_spread_request_means_no_restriction(self):
        group = self.create_server_group('plain')
        hosts = {self.host_of(self.boot('p-%d' % i, self.flavor, group))
                 for i in range(6)}
        self.assertEqual(6, len(hosts))

    def _multi_create_with_rack_spread(self, name, count, status='ACTIVE'):
        """One request for ``count`` servers; wait until all are in
        ``status`` and return them.
        """
        group = self.create_server_group(name)
        server = self._build_server(name=name, flavor_id=self.flavor,
                                    networks='none')
        server['min_count'] = count
        self.api.post_server({
            'server': server,
            'os:scheduler_hints': {'group': group,
                                   'nova_ext:spread_level': 'rack'}})

        def _all_settled():
            servers = [s for s in self.admin_api.get_servers()
                       if s['name'].startswith(name)]
            self.assertEqual(count, len(servers))
            self.assertEqual({status}, {s['status'] for s in servers})
            return servers
        self._wait_for_assert(_all_settled, max_retries=50, sleep=0.1)
        return [s for s in self.admin_api.get_servers()
                if s['name'].startswith(name)]
