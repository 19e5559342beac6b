# SPDX-License-Identifier: Apache-2.0
"""EmbeddedNova: Nova's in-process services, configured through nova.conf.

The functional tests and the sandbox command both start clouds from this
class; everything they do to the cloud goes through the REST API, as an
operator (``admin_api``) or a user (``api``) would.
"""

import os
import sys
import time

# Imported before Nova's test fixtures start: its first import calls
# os.uname, which their GenericPoisonFixture forbids, and BinPackingWeigher
# needs it when the scheduler loads the weighers.
import numpy  # noqa: F401
from oslo_config import cfg
import sqlalchemy

import nova.conf
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import fixtures as func_fixtures
from nova.tests.functional import integrated_helpers

from nova_ext import activation
from nova_ext import cache
from nova_ext import conf as ext_conf
from nova_ext import quota
from nova_ext.quota import db as quota_db
from nova_ext import upstream

CONF = nova.conf.CONF
# In a real service the [nova_ext] options register when Nova imports our
# plugins; here nova.conf is applied before the scheduler starts.
ext_conf.register_opts(CONF)

REQUEST_FILTERS = 'nova.scheduler.request_filter.ALL_REQUEST_FILTERS'
NOVA_DEFAULT_FILTERS = [
    'ComputeFilter', 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
    'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter',
]


def apply_config_file(conf, path):
    """Apply every option of a nova.conf file on top of the running config.

    Nova's fixtures already configured databases and messaging for the
    embedded cloud; this adds what an operator's nova.conf says, with
    oslo.config's own parser and types (multi-valued options included).
    """
    sections = {}
    cfg.ConfigParser(path, sections).parse()
    for section, options in sections.items():
        group = None if section == 'DEFAULT' else section
        for name, values in options.items():
            opt = upstream.registered_opt(conf, name, group)
            if opt.multi:
                value = [v for v in values]
            else:
                value = values[-1]
            conf.set_override(name, value, group=group)


class EmbeddedNova(test.TestCase,
                   integrated_helpers.PlacementInstanceHelperMixin):
    """Start Nova with nova-ext enabled through nova.conf.

    Subclasses describe the cloud: ``HOSTS`` (compute host names, started
    in order) and ``NOVA_CONF`` (the text of the nova.conf fragment that
    enables nova-ext, written to a file and loaded before any service
    starts). ``nova_conf_path`` points at that file once set up.
    """

    REQUIRES_LOCKING = False
    HOSTS = ['host1', 'host2', 'host3', 'host4']
    # Host -> cell name ('cell1', 'cell2' ...; see NUMBER_OF_CELLS).
    HOST_CELLS = {}
    NOVA_CONF = ''
    COMPUTE_DRIVER = 'fake.MediumFakeDriver'
    microversion = 'latest'

    def setUp(self):
        super().setUp()
        # A wheel install puts api-paste.ini under <venv>/etc/nova, not
        # under Nova's default state_path (the site-packages directory).
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        self.flags(compute_driver=self.COMPUTE_DRIVER)
        self.nova_conf_path = os.path.join(
            self.useFixture(nova_fixtures.fixtures.TempDir()).path,
            'nova.conf')
        with open(self.nova_conf_path, 'w') as f:
            f.write(self.NOVA_CONF)
        apply_config_file(CONF, self.nova_conf_path)

        self.policy = self.useFixture(nova_fixtures.RealPolicyFixture())
        self.neutron = self.useFixture(nova_fixtures.NeutronFixture(self))
        self.glance = self.useFixture(nova_fixtures.GlanceFixture(self))
        self.useFixture(nova_fixtures.CinderFixture(self))
        self.placement_fixture = self.useFixture(
            func_fixtures.PlacementFixture())
        self.placement = self.placement_fixture.api
        # Each embedded Nova starts like a fresh process: without the
        # request filters an earlier one activated.
        nova_filters = upstream.patch(
            REQUEST_FILTERS, list(upstream.request_filters()))
        self.addCleanup(upstream.patch, REQUEST_FILTERS, nova_filters)
        # ... and without what an earlier one remembered
        cache.forget_all()
        self.useFixture(nova_fixtures.CastAsCallFixture(self))
        self.useFixture(nova_fixtures.AllServicesCurrent())
        self.notifier = self.useFixture(
            nova_fixtures.NotificationFixture(self))

        self.api_fixture = self.useFixture(
            nova_fixtures.OSAPIFixture(api_version='v2.1'))
        self.admin_api = self.api_fixture.admin_api
        self.admin_api.microversion = self.microversion
        self.api = self.api_fixture.api
        self.api.microversion = self.microversion

        self._open_databases_like_a_nova_process()
        self.start_service('conductor')
        # what nova-scheduler does when it first opens the API database
        # through [api_database] connection = ...?plugin=nova_ext
        activation.activate_scheduler()
        self.scheduler_service = self.start_service('scheduler')
        for host in self.HOSTS:
            self._start_compute(host, cell_name=self.HOST_CELLS.get(host))

    def _open_databases_like_a_nova_process(self):
        """What nova-api and nova-conductor do when they first open the API
        database through ``connection = ...?plugin=nova_ext``.

        Nova's test fixtures hand out their own sqlite engines, so the
        embedded cloud opens an engine once through SQLAlchemy with our
        plugin in the URL: SQLAlchemy finds it by entry point, as in a real
        process. nova-ext's own tables go to a sqlite file unless the
        nova.conf names a database, created as ``db sync`` does.
        """
        quota.deactivate()
        self.addCleanup(quota.deactivate)
        self.addCleanup(quota_db.reset)
        self.addCleanup(activation.forget_recorded)
        if not CONF.nova_ext_database.connection:
            self.flags(connection='sqlite:///%s' % os.path.join(
                os.path.dirname(self.nova_conf_path), 'nova_ext.sqlite'),
                group='nova_ext_database')
        # nova-ext's tables, as "nova-ext-manage db sync" makes them: the
        # quota limits, the spread ledger the scheduler's turns write
        quota_db.reset()
        quota_db.sync(CONF)
        if not CONF.nova_ext.quota_driver:
            return
        # One process plays every service here: nothing to compare.
        self.useFixture(nova_fixtures.fixtures.MonkeyPatch(
            'nova_ext.activation.RECORD_ACTIVATIONS', False))
        sqlalchemy.create_engine(
            CONF.nova_ext_database.connection + '?plugin=nova_ext').dispose()

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
        return self._create_flavor(
            name=name, vcpu=vcpu, memory_mb=memory_mb, disk=disk,
            ephemeral=0, extra_spec=extra_specs)

    def create_server_group(self, name, policy='anti-affinity', rules=None):
        body = {'name': name, 'policy': policy}
        if rules:
            body['rules'] = rules
        return self.api.post_server_groups(body)['id']

    # -- user actions --------------------------------------------------------

    def boot(self, name, flavor_id, group=None, hints=None, image=None,
             expected_state='ACTIVE', zone=None):
        """Boot one server and wait for ``expected_state`` (None: for
        whatever state it settles in); return it as the admin sees it.
        ``zone`` ("nova:host3") needs ``admin_api``.
        """
        server = self._build_server(
            name=name, flavor_id=flavor_id, networks='none',
            image_uuid=image, az=zone)
        hints = dict(hints or {})
        if group:
            hints['group'] = group
        body = {'server': server}
        if hints:
            body['os:scheduler_hints'] = hints
        api = self.admin_api if zone else self.api
        created = api.post_server(body)
        if expected_state is None:
            return self._wait_for_settled(created)
        server = self._wait_for_state_change(created, expected_state)
        return self.admin_api.get_server(server['id'])

    def _wait_for_settled(self, server, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            server = self.admin_api.get_server(server['id'])
            if server['status'] != 'BUILD' or time.monotonic() > deadline:
                return server
            time.sleep(0.05)

    @staticmethod
    def host_of(server):
        return server['OS-EXT-SRV-ATTR:host']
