# SPDX-License-Identifier: Apache-2.0
"""What nova-ext's tempest tests share: admin and user clients, the
microversion, servers booted and waited for without tempest's unstable
helpers, cleanup of everything a test creates.
"""

from tempest import config
from tempest.lib.common import api_microversion_fixture
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib import exceptions as lib_exc
from tempest import test

CONF = config.CONF
# 2.37: --nic none; 2.53: a hypervisor's id is its provider's UUID; 2.74:
# boot on a requested host through the scheduler; 2.86: nova-api validates
# extra specs.
MICROVERSION = '2.86'
# 1.6: resource provider traits (placement answers 404 below it)
PLACEMENT_MICROVERSION = '1.6'
BUILD_TIMEOUT = 300


class NovaExtTest(test.BaseTestCase):

    credentials = ['primary', 'admin']
    # feature in [nova_ext_feature_enabled] the class needs, if any
    feature = None

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.nova:
            raise cls.skipException('Nova is not available')
        if cls.feature and not getattr(CONF.nova_ext_feature_enabled,
                                       cls.feature):
            raise cls.skipException(
                '[nova_ext_feature_enabled] %s is False' % cls.feature)

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.servers = cls.os_primary.servers_client
        cls.admin_servers = cls.os_admin.servers_client
        cls.flavors = cls.os_admin.flavors_client
        cls.aggregates = cls.os_admin.aggregates_client
        cls.server_groups = cls.os_primary.server_groups_client
        cls.services = cls.os_admin.services_client
        cls.providers = cls.os_admin.resource_providers_client
        cls.placement = cls.os_admin.placement_client

    def setUp(self):
        super().setUp()
        # tempest's service clients take the compute microversion from this
        # fixture for every request; a client attribute set by hand is reset.
        self.useFixture(api_microversion_fixture.APIMicroversionFixture(
            compute_microversion=MICROVERSION,
            placement_microversion=PLACEMENT_MICROVERSION))

    # disk=1: Nova's default policy lets only admins boot a zero-disk
    # flavor from an image (os_compute_api:servers:create:zero_disk_flavor)
    def create_flavor(self, extra_specs=None, ram=64, vcpus=1, disk=1):
        flavor = self.flavors.create_flavor(
            name=data_utils.rand_name('nova-ext'), ram=ram, vcpus=vcpus,
            disk=disk)['flavor']
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        self.flavors.delete_flavor, flavor['id'])
        if extra_specs:
            self.flavors.set_flavor_extra_spec(flavor['id'], **extra_specs)
        return flavor['id']

    def create_aggregate(self, hosts, metadata):
        aggregate = self.aggregates.create_aggregate(
            name=data_utils.rand_name('nova-ext'))['aggregate']

        def delete():
            for host in hosts:
                test_utils.call_and_ignore_notfound_exc(
                    self.aggregates.remove_host, aggregate['id'], host=host)
            self.aggregates.delete_aggregate(aggregate['id'])

        self.addCleanup(delete)
        for host in hosts:
            self.aggregates.add_host(aggregate['id'], host=host)
        self.aggregates.set_metadata(aggregate['id'], metadata=metadata)
        return aggregate

    def compute_hosts(self):
        return sorted(
            service['host'] for service in self.services.list_services(
                binary='nova-compute')['services']
            if service['state'] == 'up' and service['status'] == 'enabled')

    def boot(self, flavor, hints=None, host=None, wait_for='ACTIVE',
             client=None):
        """Boot one server and wait for ``wait_for``; return the admin
        view (with OS-EXT-SRV-ATTR:host and the fault).
        """
        kwargs = {'name': data_utils.rand_name('nova-ext'),
                  'imageRef': CONF.compute.image_ref, 'flavorRef': flavor,
                  'networks': 'none'}
        if hints:
            kwargs['scheduler_hints'] = hints
        if host:
            kwargs['host'] = host
        client = client or self.servers
        server = client.create_server(**kwargs)['server']
        self.addCleanup(self.delete_server, server['id'])
        return self.wait_for(server['id'], wait_for)

    def wait_for(self, server_id, status):
        seen = {}

        def reached():
            seen['server'] = self.admin_servers.show_server(
                server_id)['server']
            if seen['server']['status'] == 'ERROR' and status != 'ERROR':
                raise AssertionError('server %s went to ERROR: %s' % (
                    server_id, seen['server'].get('fault')))
            return seen['server']['status'] == status

        if not test_utils.call_until_true(reached, BUILD_TIMEOUT, 1):
            raise lib_exc.TimeoutException(
                'server %s is %s, not %s, after %d s' % (
                    server_id, seen['server']['status'], status,
                    BUILD_TIMEOUT))
        return seen['server']

    def delete_server(self, server_id):
        test_utils.call_and_ignore_notfound_exc(
            self.admin_servers.delete_server, server_id)

        def gone():
            try:
                self.admin_servers.show_server(server_id)
            except lib_exc.NotFound:
                return True
            return False

        test_utils.call_until_true(gone, BUILD_TIMEOUT, 1)

    @staticmethod
    def host_of(server):
        return server['OS-EXT-SRV-ATTR:host']
