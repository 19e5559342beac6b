# SPDX-License-Identifier: Apache-2.0
"""Placement request pre-filters inside a real nova-scheduler.

What a pre-filter excludes must never come back from placement: the tests
record which hosts reach Nova's Python filters, not only where servers land.
"""

import io

import fixtures

from keystoneauth1 import adapter
from keystoneauth1 import session
from keystoneauth1 import token_endpoint

from nova.scheduler import host_manager
from nova.tests.functional.api import client

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
                ('host1 ', 'no resource provider named host1 '),
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
