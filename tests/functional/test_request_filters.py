# SPDX-License-Identifier: Apache-2.0
"""Placement request pre-filters inside a real nova-scheduler.

What a pre-filter excludes must never come back from placement: the tests
record which hosts reach Nova's Python filters, not only where servers land.
"""

import io
import urllib.parse

import fixtures

from keystoneauth1 import adapter
from keystoneauth1 import session
from keystoneauth1 import token_endpoint

from nova.scheduler.client import report
from nova.scheduler import host_manager
from nova.tests.functional.api import client
from placement.objects import allocation_candidate

from nova_ext.cmd import manage
from tests.functional import base
from tests.functional import test_plugin_discovery


class PreFilterTestCase(base.NovaExtTestCase):

    def setUp(self):
        super().setUp()
        self.hosts_seen_by_filters = []
        real = host_manager.HostManager.get_filtered_hosts

        def spy(manager, hosts, spec_obj, index=0):
            hosts = list(hosts)
            self.hosts_seen_by_filters.append({h.host for h in hosts})
            return real(manager, hosts, spec_obj, index)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.host_manager.HostManager.get_filtered_hosts',
            spy))
        self.flavor = self.create_flavor('m1')

    def manage(self, *argv):
        """Run nova-ext-manage against this cloud's placement."""
        placement = adapter.Adapter(session.Session(
            auth=token_endpoint.Token(self.placement_fixture.endpoint,
                                      'admin')), service_type='placement')
        out = io.StringIO()
        args = manage.build_parser().parse_args(list(argv))
        self.assertEqual(0, manage.HostCommands.maintenance(
            args, placement, 'CUSTOM_NOVA_EXT_MAINTENANCE', out))
        return out.getvalue()


class MaintenanceTest(PreFilterTestCase):
    NOVA_EXT_FLAGS = {'request_filters': 'maintenance'}

    def test_hosts_in_maintenance_never_reach_the_filters(self):
        for host in ('host1', 'host2', 'host3'):
            self.assertIn('maintenance on', self.manage(
                'host', 'maintenance', 'on', host))
        for i in range(3):
            server = self.boot('s%d' % i, self.flavor)
            self.assertEqual('host4', self.host_of(server))
        self.assertEqual([{'host4'}] * 3, self.hosts_seen_by_filters)

    def test_no_trait_yet_forbids_nothing_and_creates_nothing(self):
        # No host was ever put in maintenance: the trait does not exist,
        # and scheduling neither needs it nor creates it.
        trait_url = '/traits/CUSTOM_NOVA_EXT_MAINTENANCE'
        servers = [self.boot('s%d' % i, self.flavor) for i in range(2)]
        self.assertEqual(404, self.placement.get(
            trait_url, version='1.6').status)
        self.assertEqual([set(self.HOSTS)] * 2, self.hosts_seen_by_filters)
        # The first "maintenance on" creates it, and the next request of
        # the same scheduler already leaves that host out.
        self.manage('host', 'maintenance', 'on', self.host_of(servers[1]))
        self.assertEqual(204, self.placement.get(
            trait_url, version='1.6').status)
        self.boot('s2', self.flavor)
        self.assertEqual(set(self.HOSTS) - {self.host_of(servers[1])},
                         self.hosts_seen_by_filters[-1])

    def test_marking_survives_compute_periodic_updates(self):
        self.manage('host', 'maintenance', 'on', 'host2')
        self._run_periodics()
        self.assertEqual('host2\n', self.manage('host', 'maintenance',
                                                'list'))
        self.assertIn('CUSTOM_NOVA_EXT_MAINTENANCE', self._get_provider_traits(
            self._get_provider_uuid_by_host('host2')))
        self.assertIn('COMPUTE_NODE', self._get_provider_traits(
            self._get_provider_uuid_by_host('host2')))

    def test_off_returns_the_host_and_keeps_other_traits(self):
        self.manage('host', 'maintenance', 'on', 'host1')
        self.assertIn('(already)',
                      self.manage('host', 'maintenance', 'on', 'host1'))
        self.manage('host', 'maintenance', 'off', 'host1')
        self.assertEqual('', self.manage('host', 'maintenance', 'list'))
        self.assertIn('COMPUTE_NODE', self._get_provider_traits(
            self._get_provider_uuid_by_host('host1')))

    def test_admin_may_target_a_host_in_maintenance(self):
        for host in self.HOSTS:
            self.manage('host', 'maintenance', 'on', host)
        refused = self.boot('user', self.flavor, expected_state='ERROR')
        self.assertNoValidHost(refused)
        server = self.boot('admin', self.flavor, zone='nova:host1',
                           hints={'nova_ext:ignore_maintenance': 'true'})
        self.assertEqual('host1', self.host_of(server))

    def test_override_hint_from_a_user_is_refused_with_reason(self):
        server = self.boot('sneaky', self.flavor,
                           hints={'nova_ext:ignore_maintenance': 'true'},
                           expected_state='ERROR')
        self.assertNoValidHost(
            server, 'not allowed by policy nova_ext:ignore_maintenance')

    def test_policy_can_grant_the_override_to_members(self):
        # what an operator writes in policy.yaml
        self.policy.set_rules({'nova_ext:ignore_maintenance': 'role:member'},
                              overwrite=False)
        for host in self.HOSTS:
            self.manage('host', 'maintenance', 'on', host)
        server = self.boot('member', self.flavor,
                           hints={'nova_ext:ignore_maintenance': 'true'})
        self.assertIn(self.host_of(server), self.HOSTS)

    def test_only_the_host_named_exactly_is_marked(self):
        # A prefix, another case, a trailing space, a name that would add
        # a second query parameter unquoted: each names no host, and
        # nothing is marked.
        placement = adapter.Adapter(session.Session(
            auth=token_endpoint.Token(self.placement_fixture.endpoint,
                                      'admin')), service_type='placement')
        for host, message in (
                ('host', 'no resource provider named host in placement'),
                ('HOST1', 'no resource provider named HOST1'),
                ('host1 ', 'leading or trailing whitespace'),
                ('host1&name=host2', 'no resource provider named host1&'),
                ('host1\n', 'not a compute node name')):
            args = manage.build_parser().parse_args(
                ['host', 'maintenance', 'on', host])
            error = self.assertRaises(
                manage.CommandError, manage.HostCommands.maintenance, args,
                placement, 'CUSTOM_NOVA_EXT_MAINTENANCE', io.StringIO())
            self.assertIn(message, str(error))
        self.assertEqual('', self.manage('host', 'maintenance', 'list'))

    def test_activation_is_logged_once(self):
        log = self.stdlog.logger.output
        self.assertEqual(1, log.count(
            'nova-ext: request filters active: maintenance'))


class MaintenanceOverrideIsForTheCreateTest(PreFilterTestCase):
    """A server created on a host in maintenance on purpose never uses its
    override again: every move finds the other hosts in maintenance too,
    and fails rather than land on one.
    """
    NOVA_EXT_FLAGS = {'request_filters': 'maintenance'}

    def setUp(self):
        super().setUp()
        self.manage('host', 'maintenance', 'on', 'host1')
        self.server = self.boot(
            'on-purpose', self.flavor, zone='nova:host1',
            hints={'nova_ext:ignore_maintenance': 'true'})
        self.assertEqual('host1', self.host_of(self.server))
        for host in ('host2', 'host3', 'host4'):
            self.manage('host', 'maintenance', 'on', host)

    def attempt(self, action):
        # under the test's CastAsCall a NoValidHost of an asynchronous move
        # reaches the API as an error: what matters is where the server is
        try:
            self.admin_api.post_server_action(self.server['id'], action)
        except client.OpenStackApiException:
            pass
        return self._wait_for_server_parameter(
            self.server, {'OS-EXT-STS:task_state': None})

    def assertStillOnHost1(self, server):
        self.assertEqual('host1', self.host_of(server))
        self.assertIn('applies to that create only',
                      self.stdlog.logger.output)

    def test_cold_migrate(self):
        self.assertStillOnHost1(self.attempt({'migrate': None}))

    def test_live_migrate(self):
        self.assertStillOnHost1(self.attempt(
            {'os-migrateLive': {'host': None, 'block_migration': 'auto'}}))

    def test_evacuate(self):
        self.computes['host1'].stop()
        service = self.admin_api.get_services(
            host='host1', binary='nova-compute')[0]
        self.admin_api.put_service_force_down(service['id'], True)
        self.assertStillOnHost1(self.attempt({'evacuate': {}}))

    def test_unshelve(self):
        self._shelve_server(self.server)
        unshelved = self.attempt({'unshelve': None})
        self.assertEqual('SHELVED_OFFLOADED', unshelved['status'])
        self.assertIsNone(self.host_of(unshelved))
        self.assertIn('applies to that create only',
                      self.stdlog.logger.output)


class HostClassTest(PreFilterTestCase):
    NOVA_EXT_FLAGS = {'request_filters': 'host_class'}

    def setUp(self):
        super().setUp()
        self.create_aggregate('gpu-hosts', ['host1', 'host2'],
                              {'nova_ext:host_class': 'gpu'})

    def test_flavor_routes_to_tagged_hosts_inside_placement(self):
        gpu = self.create_flavor('gpu', extra_specs={
            'nova_ext:host_class': 'gpu'})
        hosts = {self.host_of(self.boot('g%d' % i, gpu)) for i in range(3)}
        self.assertLessEqual(hosts, {'host1', 'host2'})
        for seen in self.hosts_seen_by_filters:
            self.assertLessEqual(seen, {'host1', 'host2'})

    def test_image_property_routes_too(self):
        image = self._create_image({'nova_ext_host_class': 'gpu'})
        server = self.boot('img', self.flavor, image=image['id'])
        self.assertIn(self.host_of(server), ('host1', 'host2'))
        self.assertEqual([{'host1', 'host2'}], self.hosts_seen_by_filters)

    def test_unknown_class_names_it(self):
        fpga = self.create_flavor('fpga', extra_specs={
            'nova_ext:host_class': 'fpga'})
        server = self.boot('f', fpga, expected_state='ERROR')
        self.assertNoValidHost(server, 'nova_ext:host_class=fpga')
        self.assertIn('gpu', server['fault']['message'])
        self.assertEqual([], self.hosts_seen_by_filters)

    def test_requests_without_class_go_anywhere_by_default(self):
        self.boot('plain', self.flavor)
        self.assertEqual([set(self.HOSTS)], self.hosts_seen_by_filters)

    def test_isolation_keeps_unclassed_requests_off_classed_hosts(self):
        self.flags(host_class_isolation=True, group='nova_ext')
        self.boot('plain', self.flavor)
        self.assertEqual([{'host3', 'host4'}], self.hosts_seen_by_filters)


BOOM_MODULE = '''
def boom(ctxt, request_spec):
    if request_spec.get_scheduler_hint('acme_boom'):
        raise RuntimeError('acme exploded')
    return False
'''

BOOM_ENTRY_POINTS = '''
[nova_ext.scheduler.request_filters]
boom = acme_boom:boom
'''


class FailingPreFilterTest(PreFilterTestCase):
    NOVA_EXT_FLAGS = {'request_filters': 'boom,maintenance'}

    def setUp(self):
        test_plugin_discovery.install_fake_distribution(
            self, 'acme_boom', BOOM_MODULE, BOOM_ENTRY_POINTS)
        super().setUp()

    def test_raising_pre_filter_fails_one_request(self):
        server = self.boot('b', self.flavor, hints={'acme_boom': '1'},
                           expected_state='ERROR')
        self.assertNoValidHost(
            server, 'nova-ext request filter boom failed: acme exploded')
        ok = self.boot('ok', self.flavor)
        self.assertEqual('ACTIVE', ok['status'])
        self.assertIn('nova-ext: request filters active: boom, maintenance',
                      self.stdlog.logger.output)


RACK_SPREAD = {'nova_ext:spread_level': 'rack'}


class FailureDomainTestCase(PreFilterTestCase):
    """Six hosts in three racks of two, and placement generates at most 2
    candidates per query (placement's ``[placement]
    max_allocation_candidates = 2``).

    That is the cap a spread request meets: Nova asks placement without
    ``[scheduler] max_placement_results`` when the request names a server
    group (``resources_from_request_spec``: "Don't limit allocation
    candidates when using affinity/anti-affinity"; see
    CandidateLimitLiftedForGroupsTest), but placement stops generating at
    its own maximum. It visits root providers in an order of its own (from
    sets hashed on resource class names, so it changes from process to
    process); here it visits them in uuid order, and rack r1 is made of the
    first two providers, r2 of the next two: as long as nothing is
    excluded from the query, placement offers r1 only.
    """

    HOSTS = ['host1', 'host2', 'host3', 'host4', 'host5', 'host6']
    ENABLED_FILTERS = base.NOVA_DEFAULT_FILTERS + [
        'FailureDomainAntiAffinityFilter']
    PLACEMENT_MAX_CANDIDATES = 2
    # the soft twin would steer members to empty racks by itself
    NOVA_EXT_FLAGS = {'request_filters': 'failure_domain',
                      'failure_domain_spread_weight_multiplier': 0.0}

    def setUp(self):
        super().setUp()
        self.placement_queries = []
        real = report.SchedulerReportClient.get_allocation_candidates

        def spy(client, context, resources):
            self.placement_queries.append(dict(urllib.parse.parse_qsl(
                resources.to_querystring())))
            return real(client, context, resources)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.SchedulerReportClient.'
            'get_allocation_candidates', spy))
        self.placement_fixture.conf_fixture.config(
            max_allocation_candidates=self.PLACEMENT_MAX_CANDIDATES,
            group='placement')
        real_generators = allocation_candidate._get_areq_list_generators

        def in_provider_order(context, by_root, suffixes):
            return real_generators(context, dict(sorted(by_root.items())),
                                   suffixes)

        self.useFixture(fixtures.MonkeyPatch(
            'placement.objects.allocation_candidate.'
            '_get_areq_list_generators', in_provider_order))
        hosts = [rp['name'] for rp in sorted(self._get_all_providers(),
                                             key=lambda rp: rp['uuid'])]
        self.racks = {'r1': hosts[:2], 'r2': hosts[2:4], 'r3': hosts[4:]}
        self.rack_of = {h: r for r, hosts in self.racks.items()
                        for h in hosts}
        self.declare_racks()

    def declare_racks(self):
        self.set_failure_domains('rack', self.racks)

    def unfiltered_candidates(self):
        """The hosts of the candidates placement returns to a query for the
        flavor that excludes nothing.
        """
        body = self.placement.get(
            '/allocation_candidates?resources=VCPU:1,MEMORY_MB:512,DISK_GB:1',
            version='1.32').body
        names = {rp['uuid']: rp['name'] for rp in self._get_all_providers()}
        return {names[uuid] for uuid in body['provider_summaries']}

    def assertOnlyRackR1IsReachableUnfiltered(self):
        self.assertEqual(set(self.racks['r1']), self.unfiltered_candidates())

    def rack(self, server):
        return self.rack_of[self.host_of(server)]

    def rack_aggregates(self, *racks):
        return {aggregate['uuid'] for aggregate in self.admin_api.api_get(
            '/os-aggregates').body['aggregates']
            if aggregate['name'] in ['rack-' + rack for rack in racks]}

    @staticmethod
    def forbidden_aggregates(query):
        member_of = query.get('member_of', '')
        if not member_of.startswith('!in:'):
            return set()
        return set(member_of[len('!in:'):].split(','))

    def racks_seen_by_filters(self):
        return [{self.rack_of[h] for h in hosts}
                for hosts in self.hosts_seen_by_filters]

    def boot_one_per_rack(self, name, flavor=None, hints=RACK_SPREAD):
        """Three members, one per rack; each request's filters saw only the
        rack with room that placement lists first.
        """
        group = self.create_server_group(name)
        servers = [self.boot('%s-%d' % (name, i), flavor or self.flavor,
                             group, hints) for i in range(3)]
        self.assertEqual(['r1', 'r2', 'r3'], [self.rack(s) for s in servers])
        self.assertEqual([{'r1'}, {'r2'}, {'r3'}],
                         self.racks_seen_by_filters())
        return group, servers


class FailureDomainPreFilterTest(FailureDomainTestCase):

    def test_free_racks_beyond_the_candidate_cap_are_reached(self):
        self.assertOnlyRackR1IsReachableUnfiltered()
        group, _servers = self.boot_one_per_rack('web')
        self.assertEqual(
            [set(), self.rack_aggregates('r1'),
             self.rack_aggregates('r1', 'r2')],
            [self.forbidden_aggregates(q) for q in self.placement_queries])

        fourth = self.boot('web-3', self.flavor, group, RACK_SPREAD,
                           expected_state='ERROR')
        self.assertNoValidHost(
            fourth, 'failure_domain request filter left rack r1, r2, r3 out '
            'of the placement query')
        # placement had nothing left to return
        self.assertEqual(3, len(self.hosts_seen_by_filters))

    def test_flavor_extra_spec_spread_is_pre_filtered_too(self):
        flavor = self.create_flavor('spread1', extra_specs={
            'nova_ext:spread_level': 'rack',
            'nova_ext:spread_max_per_domain': '1'})
        self.boot_one_per_rack('db', flavor, {})
        self.assertEqual(self.rack_aggregates('r1', 'r2'),
                         self.forbidden_aggregates(self.placement_queries[2]))

    def test_rack_below_its_maximum_stays_in_the_query(self):
        group = self.create_server_group('two')
        hints = dict(RACK_SPREAD, **{'nova_ext:spread_max_per_domain': '2'})
        racks = [self.rack(self.boot('two-%d' % i, self.flavor, group, hints))
                 for i in range(3)]
        self.assertEqual(['r1', 'r1', 'r2'], racks)
        self.assertEqual(
            [set(), set(), self.rack_aggregates('r1')],
            [self.forbidden_aggregates(q) for q in self.placement_queries])

    def test_soft_anti_affinity_group_is_left_alone(self):
        group = self.create_server_group('soft', policy='soft-anti-affinity')
        first = self.boot('soft-0', self.flavor, group, RACK_SPREAD)
        self.assertEqual('r1', self.rack(first))
        second = self.boot('soft-1', self.flavor, group, RACK_SPREAD,
                           expected_state=None)
        self.assertEqual([set(), set()], [self.forbidden_aggregates(q)
                                          for q in self.placement_queries])
        self.assertEqual([{'r1'}, {'r1'}], self.racks_seen_by_filters())
        # FailureDomainAntiAffinityFilter holds soft groups to the maximum
        # too, but only among the candidates placement returned: here none
        self.assertNoValidHost(second)

    def test_cold_migrated_member_is_not_counted_against_its_own_rack(self):
        # moving a server is an admin action
        self.api = self.admin_api
        _group, servers = self.boot_one_per_rack('cold')
        mover = servers[2]
        moved = self._migrate_server(mover)
        self.assertEqual('r3', self.rack(moved))
        self.assertNotEqual(self.host_of(mover), self.host_of(moved))
        # r3 holds the mover alone: not full
        self.assertEqual(self.rack_aggregates('r1', 'r2'),
                         self.forbidden_aggregates(self.placement_queries[-1]))
        self._confirm_resize(moved)


class SpreadConstraintsPreFilterTest(FailureDomainTestCase):
    """nova_ext:spread_constraints: each hard max constraint leaves its
    full domains out of the query. Rows: row1 is racks r1 and r2, row2 is
    rack r3.
    """

    def declare_racks(self):
        super().declare_racks()
        self.set_failure_domains('row', {
            'row1': self.racks['r1'] + self.racks['r2'],
            'row2': self.racks['r3']})

    def aggregates(self, *names):
        return {aggregate['uuid'] for aggregate in self.admin_api.api_get(
            '/os-aggregates').body['aggregates']
            if aggregate['name'] in names}

    def test_full_racks_and_full_rows_are_both_excluded(self):
        group = self.create_server_group('rows')
        hints = {'nova_ext:spread_constraints': 'rack:max=1;row:max=2'}
        racks = [self.rack(self.boot('rows-%d' % i, self.flavor, group,
                                     hints)) for i in range(3)]
        self.assertEqual(['r1', 'r2', 'r3'], racks)
        self.assertEqual(
            [set(), self.aggregates('rack-r1'),
             self.aggregates('rack-r1', 'rack-r2', 'row-row1')],
            [self.forbidden_aggregates(q) for q in self.placement_queries])

    def test_a_full_row_sends_the_second_member_to_the_other_row(self):
        group = self.create_server_group('row1')
        hints = {'nova_ext:spread_constraints': 'rack:max=2;row:max=1'}
        racks = [self.rack(self.boot('row1-%d' % i, self.flavor, group,
                                     hints)) for i in range(2)]
        self.assertEqual(['r1', 'r3'], racks)
        third = self.boot('row1-2', self.flavor, group, hints,
                          expected_state='ERROR')
        self.assertNoValidHost(third, 'failure_domain request filter left '
                               'row row1, row2 out of the placement query')

    def test_skew_is_left_to_the_filter(self):
        group = self.create_server_group('skew')
        first = self.boot('skew-0', self.flavor, group,
                          {'nova_ext:spread_constraints': 'rack:skew=1'})
        self.assertEqual('r1', self.rack(first))
        # placement's cap offers rack r1 only: fewer than three racks are
        # eligible, the least filled counts as 0 and r1 is 1 ahead
        second = self.boot('skew-1', self.flavor, group, {
            'nova_ext:spread_constraints': 'rack:skew=1,min_domains=3'},
            expected_state='ERROR')
        self.assertNoValidHost(second, 'rack:skew=1,min_domains=3')
        # without min_domains r1 is the only eligible rack (candidates'
        # and members' racks): a second member there keeps the skew, the
        # documented consequence of a cap hiding racks
        third = self.boot('skew-2', self.flavor, group,
                          {'nova_ext:spread_constraints': 'rack:skew=1'})
        self.assertEqual('r1', self.rack(third))
        # the pre-filter excluded nothing: skew is the filter's
        self.assertEqual([set(), set(), set()], [
            self.forbidden_aggregates(q) for q in self.placement_queries])


class CandidateCapWithoutPreFilterTest(FailureDomainTestCase):
    """What the pre-filter is for: with the filter alone, the two candidates
    placement generates are in the full rack and the free ones are never
    seen.
    """

    NOVA_EXT_FLAGS = {'failure_domain_spread_weight_multiplier': 0.0}

    def test_free_racks_beyond_the_cap_are_never_seen(self):
        group = self.create_server_group('web')
        first = self.boot('web-0', self.flavor, group, RACK_SPREAD)
        self.assertEqual('r1', self.rack(first))
        self.assertOnlyRackR1IsReachableUnfiltered()
        second = self.boot('web-1', self.flavor, group, RACK_SPREAD,
                           expected_state='ERROR')
        self.assertNoValidHost(second, 'every rack left is full (max 1 per '
                               'rack): r1 (1)')
        self.assertEqual([{'r1'}, {'r1'}], self.racks_seen_by_filters())


class TraitDeclaredRacksTest(FailureDomainTestCase):
    """Racks the computes report as CUSTOM_NOVA_EXT_FD_RACK_<rack> traits
    (the nova-ext libvirt driver's ``[nova_ext] failure_domain``), with no
    aggregate: the full ones are forbidden traits.
    """

    NOVA_EXT_FLAGS = dict(FailureDomainTestCase.NOVA_EXT_FLAGS,
                          failure_domain_sources='traits')

    def declare_racks(self):
        for rack, hosts in self.racks.items():
            trait = 'CUSTOM_NOVA_EXT_FD_RACK_' + rack.upper()
            self._create_trait(trait)
            for host in hosts:
                provider = self._get_provider_uuid_by_host(host)
                self._set_provider_traits(provider, self._get_provider_traits(
                    provider) + [trait])

    def test_full_racks_are_forbidden_traits(self):
        self.assertOnlyRackR1IsReachableUnfiltered()
        self.boot_one_per_rack('web')
        self.assertEqual(
            [set(), {'R1'}, {'R1', 'R2'}],
            [self.forbidden_racks(q) for q in self.placement_queries])
        self.assertEqual(set(), set().union(*map(
            self.forbidden_aggregates, self.placement_queries)))

    @staticmethod
    def forbidden_racks(query):
        prefix = '!CUSTOM_NOVA_EXT_FD_RACK_'
        return {trait[len(prefix):] for trait
                in query.get('root_required', '').split(',')
                if trait.startswith(prefix)}


class CandidateLimitLiftedForGroupsTest(FailureDomainTestCase):
    """Nova's own cap, ``[scheduler] max_placement_results``, is not sent
    for a request naming a server group: every host reaches the filters,
    with or without the pre-filter.
    """

    NOVA_FLAGS = {'scheduler': {'max_placement_results': 2}}
    NOVA_EXT_FLAGS = {'failure_domain_spread_weight_multiplier': 0.0}
    PLACEMENT_MAX_CANDIDATES = -1

    def test_group_requests_ask_placement_without_a_limit(self):
        group = self.create_server_group('web')
        self.boot('web-0', self.flavor, group, RACK_SPREAD)
        self.boot('plain', self.flavor)
        self.assertEqual(['r1', 'r2', 'r3'], sorted(
            self.racks_seen_by_filters()[0]))
        self.assertNotIn('limit', self.placement_queries[0])
        self.assertEqual('2', self.placement_queries[1]['limit'])
