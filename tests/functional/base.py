"""A whole Nova in one process, configured the way an operator would.

Nova's own functional fixtures start the API (real WSGI app, real policy),
conductor, scheduler, several fake-driver computes and placement (its real
WSGI app over sqlite). Tests drive it only through the REST API, as an
operator (``admin_api``) and a user (``api``) would.
"""

import os
import sys

import nova.conf
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import fixtures as func_fixtures
from nova.tests.functional import integrated_helpers

from nova_ext import conf as ext_conf

# In a real service the [nova_ext] options register when Nova imports our
# plugins; tests set them before the scheduler starts, so register them now.
ext_conf.register_opts(nova.conf.CONF)

NOVA_DEFAULT_FILTERS = [
    'ComputeFilter', 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
    'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter',
]

# The three lines an operator adds to nova.conf to enable nova-ext's
# scheduler plugins beside Nova's own (docs/source/scheduler.rst).
AVAILABLE_FILTERS = ['nova.scheduler.filters.all_filters',
                     'nova_ext.scheduler.filters.all_filters']
WEIGHT_CLASSES = ['nova.scheduler.weights.all_weighers',
                  'nova_ext.scheduler.weights.all_weighers']


class NovaExtTestCase(test.TestCase,
                      integrated_helpers.PlacementInstanceHelperMixin):
    """Start Nova with nova-ext enabled through nova.conf options.

    Subclasses describe the cloud: ``HOSTS`` (compute host names, started in
    order), ``ENABLED_FILTERS`` and ``WEIGHT_CLASSES``; ``NOVA_EXT_FLAGS``
    sets ``[nova_ext]`` options; ``SCHEDULER_FLAGS`` sets
    ``[filter_scheduler]`` options (e.g. to zero upstream multipliers).
    """

    REQUIRES_LOCKING = False
    HOSTS = ['host1', 'host2', 'host3', 'host4']
    ENABLED_FILTERS = NOVA_DEFAULT_FILTERS
    WEIGHT_CLASSES = WEIGHT_CLASSES
    NOVA_EXT_FLAGS = {}
    SCHEDULER_FLAGS = {}
    COMPUTE_DRIVER = 'fake.MediumFakeDriver'
    microversion = 'latest'

    def setUp(self):
        super().setUp()
        # A wheel install puts api-paste.ini under <venv>/etc/nova, not under
        # Nova's default state_path (the site-packages directory).
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        self.flags(compute_driver=self.COMPUTE_DRIVER)
        self.flags(available_filters=AVAILABLE_FILTERS,
                   enabled_filters=self.ENABLED_FILTERS,
                   weight_classes=self.WEIGHT_CLASSES,
                   group='filter_scheduler')
        if self.SCHEDULER_FLAGS:
            self.flags(group='filter_scheduler', **self.SCHEDULER_FLAGS)
        if self.NOVA_EXT_FLAGS:
            self.flags(group='nova_ext', **self.NOVA_EXT_FLAGS)

        self.policy = self.useFixture(nova_fixtures.RealPolicyFixture())
        self.neutron = self.useFixture(nova_fixtures.NeutronFixture(self))
        self.glance = self.useFixture(nova_fixtures.GlanceFixture(self))
        self.useFixture(nova_fixtures.CinderFixture(self))
        self.placement = self.useFixture(func_fixtures.PlacementFixture()).api
        self.useFixture(nova_fixtures.CastAsCallFixture(self))
        self.useFixture(nova_fixtures.AllServicesCurrent())
        self.notifier = self.useFixture(
            nova_fixtures.NotificationFixture(self))

        self.api_fixture = api_fixture = self.useFixture(
            nova_fixtures.OSAPIFixture(api_version='v2.1'))
        self.admin_api = api_fixture.admin_api
        self.admin_api.microversion = self.microversion
        self.api = api_fixture.api
        self.api.microversion = self.microversion

        self.start_service('conductor')
        self.scheduler_service = self.start_service('scheduler')
        for host in self.HOSTS:
            self._start_compute(host)

    # -- operator actions, through the REST API --------------------------

    def set_failure_domains(self, level, domains):
        """Create one aggregate per domain: ``{'r1': ['host1', ...]}``."""
        for domain, hosts in domains.items():
            self.create_aggregate(
                '%s-%s' % (level, domain), hosts,
                {'nova_ext:failure_domain:%s' % level: domain})

    def create_aggregate(self, name, hosts, metadata=None):
        agg_id = self._create_aggregate(name)
        for host in hosts:
            self.admin_api.add_host_to_aggregate(agg_id, host)
        if metadata:
            self.admin_api.post_aggregate_action(
                agg_id, {'set_metadata': {'metadata': metadata}})
        return agg_id

    def create_flavor(self, name, vcpu=1, memory_mb=512, disk=1,
                      extra_specs=None):
        flavor_id = self._create_flavor(
            name=name, vcpu=vcpu, memory_mb=memory_mb, disk=disk,
            ephemeral=0, extra_spec=extra_specs)
        return flavor_id

    def create_server_group(self, name, policy='anti-affinity', rules=None):
        body = {'name': name, 'policy': policy}
        if rules:
            body['rules'] = rules
        return self.api.post_server_groups(body)['id']

    # -- user actions --------------------------------------------------------

    def boot(self, name, flavor_id, group=None, hints=None,
             image=None, expected_state='ACTIVE'):
        """Boot one server; return it as the admin sees it."""
        server = self._build_server(
            name=name, flavor_id=flavor_id, networks='none',
            image_uuid=image)
        hints = dict(hints or {})
        if group:
            hints['group'] = group
        body = {'server': server}
        if hints:
            body['os:scheduler_hints'] = hints
        created = self.api.post_server(body)
        server = self._wait_for_state_change(created, expected_state)
        return self.admin_api.get_server(server['id'])

    @staticmethod
    def host_of(server):
        return server['OS-EXT-SRV-ATTR:host']

    def assertNoValidHost(self, server, reason_contains=None):
        self.assertEqual('ERROR', server['status'])
        fault = server['fault']
        self.assertIn('No valid host', fault['message'])
        if reason_contains:
            self.assertIn(reason_contains, fault['message'])
