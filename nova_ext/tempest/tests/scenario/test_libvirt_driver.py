# SPDX-License-Identifier: Apache-2.0
"""nova-ext's libvirt driver seen from the API, placement and libvirt:
the failure-domain traits its computes report, and the live definition of
a guest it built (read through a read-only libvirt connection to the
compute's libvirtd, ``[nova_ext] libvirt_uri``).
"""

from xml.etree import ElementTree

from tempest import config
from tempest.lib.common.utils import test_utils
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from nova_ext.tempest.tests import base

CONF = config.CONF
TRAIT_PREFIX = 'CUSTOM_NOVA_EXT_FD_'
DISABLED_TRAIT = 'COMPUTE_STATUS_DISABLED'
GUEST_NS = 'urn:nova-ext:guest:1'


class LibvirtDriverTest(base.NovaExtTest):
    """Given computes running nova-ext's libvirt driver with a failure
    domain, their resource providers carry the failure-domain traits it
    reports (what the failure-domain filter reads), and a server booted
    there runs a domain with every guest mutator's change.
    """

    feature = 'libvirt_driver'

    def libvirt_hypervisors(self):
        return [h for h in self.os_admin.hypervisor_client.list_hypervisors(
            detail=True)['hypervisors']
            if h['hypervisor_type'] == 'QEMU' and h['state'] == 'up']

    def fd_traits(self, provider):
        return sorted(t for t in self.providers.list_resource_provider_traits(
            provider)['traits'] if t.startswith(TRAIT_PREFIX))

    @decorators.idempotent_id('7d0cbb0e-3f0c-4d35-a1b9-2c5a4c51d207')
    def test_computes_report_failure_domain_traits(self):
        # from microversion 2.53 a hypervisor's id is its provider's
        reported = {h['service']['host']: self.fd_traits(h['id'])
                    for h in self.libvirt_hypervisors()}
        self.assertTrue(any(reported.values()),
                        'no libvirt compute reports %s* traits: %s'
                        % (TRAIT_PREFIX, reported))

    def use_host(self, hypervisor):
        """Enable the host's service for this test if it is disabled (a
        cloud may keep its libvirt host for targeted boots) and wait until
        placement offers it again.
        """
        host = hypervisor['service']['host']
        service = self.services.list_services(
            binary='nova-compute', host=host)['services'][0]
        if service['status'] == 'disabled':
            self.services.update_service(service['id'], status='enabled')
            self.addCleanup(self.services.update_service, service['id'],
                            status='disabled',
                            disabled_reason=service['disabled_reason'])

        def offered():
            return DISABLED_TRAIT not in \
                self.providers.list_resource_provider_traits(
                    hypervisor['id'])['traits']

        if not test_utils.call_until_true(offered, base.BUILD_TIMEOUT, 1):
            raise lib_exc.TimeoutException(
                '%s still carries %s' % (host, DISABLED_TRAIT))
        return host

    @decorators.idempotent_id('7d0cbb0e-3f0c-4d35-a1b9-2c5a4c51d208')
    def test_live_domain_has_every_mutators_change(self):
        if not CONF.nova_ext.libvirt_uri:
            raise self.skipException('[nova_ext] libvirt_uri is unset')
        # here: libvirt-python is needed only with [nova_ext] libvirt_uri
        import libvirt

        connection = libvirt.openReadOnly(CONF.nova_ext.libvirt_uri)
        self.addCleanup(connection.close)
        mine = [h for h in self.libvirt_hypervisors()
                if h['hypervisor_hostname'] == connection.getHostname()]
        self.assertTrue(mine, 'no QEMU hypervisor named %s is up' %
                        connection.getHostname())
        host = self.use_host(mine[0])
        flavor = self.create_flavor({
            'nova_ext:oem_strings': 'asset=tempest-1;owner=nova-ext',
            'nova_ext:memory_sharing': 'false',
            'nova_ext:spread_level': CONF.nova_ext.spread_level})
        server = self.boot(flavor, host=host, client=self.admin_servers)
        self.assertEqual(host, self.host_of(server))

        domain = connection.lookupByName(
            server['OS-EXT-SRV-ATTR:instance_name'])
        self.assertTrue(domain.isActive())
        xml = ElementTree.fromstring(domain.XMLDesc(0))
        # oem_strings
        self.assertEqual(['asset=tempest-1', 'owner=nova-ext'],
                         [e.text for e in xml.findall(
                             './sysinfo/oemStrings/entry')])
        # memory_sharing
        self.assertIsNotNone(xml.find('./memoryBacking/nosharepages'))
        # domain_metadata: this compute's failure domains, the flavor's
        # spread level
        guest = xml.find('./metadata/{%s}guest' % GUEST_NS)
        self.assertIsNotNone(guest, ElementTree.tostring(xml))
        domains = {e.get('level'): e.text
                   for e in guest.findall('{%s}failureDomain' % GUEST_NS)}
        traits = self.fd_traits(mine[0]['id'])
        self.assertEqual(
            sorted('%s%s_%s' % (TRAIT_PREFIX, level.upper(), name.upper())
                   for level, name in domains.items()), traits)
        self.assertEqual(CONF.nova_ext.spread_level,
                         guest.find('{%s}spreadLevel' % GUEST_NS).text)

        self.delete_server(server['id'])
        self.assertNotIn(server['OS-EXT-SRV-ATTR:instance_name'],
                         [d.name() for d in connection.listAllDomains()])
