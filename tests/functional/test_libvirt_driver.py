# SPDX-License-Identifier: Apache-2.0
"""nova-ext's libvirt driver in Nova's libvirt functional environment.

Real LibvirtDriver code over Nova's fakelibvirt: nova-compute loads our
driver through ``compute_driver = nova_ext_libvirt.LibvirtDriver`` after
``nova-ext-manage driver install`` (run as an operator would, in a
subprocess), servers are booted through the REST API, and the tests read the
domain XML the driver handed to libvirt.
"""

import os
import subprocess
import sys
from unittest import mock

import fixtures
from lxml import etree
import nova.conf
from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.api import client
from nova.tests.functional.libvirt import base
from oslo_utils import uuidutils

from nova_ext import cache
from nova_ext.virt.libvirt import driver as ext_driver
from nova_ext.virt.libvirt import mutators
from nova_ext.virt.libvirt.mutators import domain_metadata
from nova_ext.virt.libvirt import shim

CONF = nova.conf.CONF
ALL_MUTATORS = 'domain_metadata,oem_strings,memory_sharing'


def manage(*args):
    return subprocess.run(
        [sys.executable, '-m', 'nova_ext.cmd.manage'] + list(args),
        capture_output=True, text=True, timeout=120)


class LibvirtDriverTestCase(base.ServersTestBase):
    """Given a compute running nova-ext's driver with NOVA_EXT_FLAGS."""

    microversion = 'latest'
    NOVA_EXT_FLAGS = {}
    ADDITIONAL_FILTERS = []

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # Left installed afterwards on purpose: test classes run in parallel
        # workers, and removing it under another worker's compute start
        # would fail that test. The venv is the test suite's own.
        result = manage('driver', 'install')
        if result.returncode != 0:
            raise RuntimeError('driver install failed: %s' % result.stderr)

    def setUp(self):
        self.defined = {}  # domain name -> every XML defined, in order
        super().setUp()
        self.admin_api.microversion = 'latest'
        cache.forget_all()
        original_define = fakelibvirt.Connection.defineXML

        def define_and_record(connection, xml):
            domain = original_define(connection, xml)
            self.defined.setdefault(domain.name(), []).append(xml)
            return domain

        self.stub_out('nova.tests.fixtures.libvirt.Connection.defineXML',
                      define_and_record)

    def _setup_compute_service(self):
        # A wheel install puts api-paste.ini under <venv>/etc/nova.
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        self.flags(compute_driver=shim.COMPUTE_DRIVER)
        for name, value in self.NOVA_EXT_FLAGS.items():
            self.flags(group='nova_ext', **{name: value})

    def _setup_scheduler_service(self):
        self.flags(available_filters=[
            'nova.scheduler.filters.all_filters',
            'nova_ext.scheduler.filters.all_filters'],
            group='filter_scheduler')
        return super()._setup_scheduler_service()

    def boot(self, flavor_id, image_uuid=None, expected_state='ACTIVE',
             hints=None):
        body = {'server': self._build_server(
            flavor_id=flavor_id, networks='none',
            image_uuid=image_uuid or '155d900f-4e14-4e4c-a73d-069cbf4541e6')}
        if hints:
            body['os:scheduler_hints'] = hints
        server = self.api.post_server(body)
        self._wait_for_state_change(server, expected_state)
        return self.admin_api.get_server(server['id'])

    def domain_xml(self, server):
        """The last XML the driver defined for ``server``, parsed."""
        instance = objects.Instance.get_by_uuid(
            nova_context.get_admin_context(), server['id'])
        return etree.fromstring(self.defined[instance.name][-1])

    def flavor(self, extra_specs=None):
        return self._create_flavor(memory_mb=512, vcpu=1, disk=1,
                                   extra_spec=extra_specs)

    def image(self, properties):
        image = {
            'id': uuidutils.generate_uuid(),
            'name': 'nova-ext-image',
            'created_at': '2026-11-22T00:00:00.000000',
            'updated_at': '2026-11-22T00:00:00.000000',
            'deleted_at': None, 'deleted': False, 'status': 'active',
            'is_public': True, 'container_format': 'bare',
            'disk_format': 'qcow2', 'size': 1024, 'min_ram': 0,
            'min_disk': 0, 'properties': properties,
        }
        self.glance.create(None, image)
        return image['id']


def oem_strings(xml):
    return [entry.text for entry in xml.findall('./sysinfo/oemStrings/entry')]


def nova_ext_metadata(xml):
    return xml.find('./metadata/{%s}guest' % domain_metadata.NAMESPACE_URI)


class TestLoading(LibvirtDriverTestCase):

    def test_compute_loads_the_driver_through_compute_driver(self):
        # When nova-compute starts with compute_driver set to the shim
        host = self.start_compute()
        # Then it runs nova-ext's subclass of Nova's driver and says so
        compute_driver = self.computes[host].driver
        self.assertIs(ext_driver.LibvirtDriver, type(compute_driver))
        self.assertIn("Loading compute driver 'nova_ext_libvirt."
                      "LibvirtDriver'", self.stdlog.logger.output)
        self.assertIn('nova-ext: libvirt driver active: guest mutators: '
                      'none', self.stdlog.logger.output)
        # And a server boots on it as on Nova's driver
        self.boot(self.flavor())

    def test_check_reports_the_driver_value(self):
        # What nova.conf says, read from the file named: ours, or Nova's
        # with a note. (The shim's own hint line also names our driver, so
        # the report line is matched whole.)
        directory = self.useFixture(fixtures.TempDir()).path
        for value, report in (
                ('nova_ext_libvirt.LibvirtDriver',
                 'nova.conf compute_driver: nova_ext_libvirt.LibvirtDriver\n'),
                ('libvirt.LibvirtDriver',
                 "nova.conf compute_driver: libvirt.LibvirtDriver (not "
                 "nova-ext's driver)\n")):
            conf = os.path.join(directory, value + '.conf')
            with open(conf, 'w') as handle:
                handle.write('[DEFAULT]\ncompute_driver = %s\n' % value)
            result = manage('--config-file', conf, 'driver', 'check')
            self.assertEqual(0, result.returncode,
                             result.stdout + result.stderr)
            self.assertIn(report, result.stdout)


class TestMutatorsOff(LibvirtDriverTestCase):

    def test_no_mutator_enabled_leaves_nova_s_domain(self):
        # Given a compute with no guest mutator enabled
        self.start_compute()
        # When a flavor asks for every mutator's change
        flavor = self.flavor({'nova_ext:oem_strings': 'asset=A1',
                              'nova_ext:memory_sharing': 'false',
                              'nova_ext:quota_class': 'gpu'})
        xml = self.domain_xml(self.boot(flavor))
        # Then the domain is what Nova builds
        self.assertEqual([], oem_strings(xml))
        self.assertIsNone(xml.find('./memoryBacking/nosharepages'))
        self.assertIsNone(nova_ext_metadata(xml))

    def setUp(self):
        super().setUp()
        self.flags(quota_classes=['gpu'], group='nova_ext')


class TestMutators(LibvirtDriverTestCase):
    NOVA_EXT_FLAGS = {'guest_mutators': ALL_MUTATORS,
                      'failure_domain': 'rack:r12,row:b',
                      'quota_classes': 'gpu'}

    def setUp(self):
        super().setUp()
        self.start_compute()

    def test_domain_metadata_names_failure_domains_and_classes(self):
        flavor = self.flavor({'nova_ext:host_class': 'gpu',
                              'nova_ext:quota_class': 'gpu',
                              'nova_ext:spread_level': 'rack'})
        metadata = nova_ext_metadata(self.domain_xml(self.boot(flavor)))
        ns = '{%s}' % domain_metadata.NAMESPACE_URI
        self.assertEqual(
            {'rack': 'r12', 'row': 'b'},
            {e.get('level'): e.text
             for e in metadata.findall(ns + 'failureDomain')})
        self.assertEqual('gpu', metadata.find(ns + 'hostClass').text)
        self.assertEqual('gpu', metadata.find(ns + 'flavorClass').text)
        self.assertEqual('rack', metadata.find(ns + 'spreadLevel').text)
        # Nova's own metadata is still there
        self.assertIsNotNone(xml_find_nova_instance(
            self.domain_xml(self.boot(flavor))))

    def test_oem_strings_from_flavor_then_image(self):
        flavor = self.flavor({'nova_ext:oem_strings':
                              'asset=A-1234;licence=win2022'})
        image = self.image(
            {'nova_ext_oem_strings': 'io.systemd.credential:hostname=web1'})
        xml = self.domain_xml(self.boot(flavor, image))
        self.assertEqual(['asset=A-1234', 'licence=win2022',
                          'io.systemd.credential:hostname=web1'],
                         oem_strings(xml))
        # the SMBIOS block Nova fills is kept; the guest is told to use it
        self.assertIsNotNone(xml.find('./sysinfo/system'))
        self.assertEqual('sysinfo', xml.find('./os/smbios').get('mode'))

    def test_no_oem_strings_asked_none_added(self):
        xml = self.domain_xml(self.boot(self.flavor()))
        self.assertEqual([], oem_strings(xml))

    def test_memory_sharing_off_by_flavor(self):
        xml = self.domain_xml(self.boot(
            self.flavor({'nova_ext:memory_sharing': 'false'})))
        self.assertIsNotNone(xml.find('./memoryBacking/nosharepages'))

    def test_memory_sharing_image_property_unless_flavor_says(self):
        image = self.image({'nova_ext_memory_sharing': 'false'})
        xml = self.domain_xml(self.boot(self.flavor(), image))
        self.assertIsNotNone(xml.find('./memoryBacking/nosharepages'))
        # the flavor is the operator's policy: it wins over the image
        xml = self.domain_xml(self.boot(
            self.flavor({'nova_ext:memory_sharing': 'true'}), image))
        self.assertIsNone(xml.find('./memoryBacking/nosharepages'))

    def test_hard_reboot_rebuilds_the_same_changes(self):
        flavor = self.flavor({'nova_ext:oem_strings': 'asset=A-1',
                              'nova_ext:memory_sharing': 'false'})
        server = self.boot(flavor)
        self._reboot_server(server, hard=True)
        instance = objects.Instance.get_by_uuid(
            nova_context.get_admin_context(), server['id'])
        self.assertEqual(2, len(self.defined[instance.name]))
        xml = self.domain_xml(server)
        self.assertEqual(['asset=A-1'], oem_strings(xml))
        self.assertIsNotNone(xml.find('./memoryBacking/nosharepages'))
        self.assertIsNotNone(nova_ext_metadata(xml))

    def test_rescue_builds_the_same_changes(self):
        flavor = self.flavor({'nova_ext:oem_strings': 'asset=A-2'})
        server = self.boot(flavor)
        # the image backend Nova's test base stubs out would have made it
        os.makedirs(os.path.join(CONF.instances_path, server['id']))
        self.api.post_server_action(server['id'], {'rescue': {}})
        self._wait_for_state_change(server, 'RESCUE')
        xml = self.domain_xml(server)
        self.assertEqual(['asset=A-2'], oem_strings(xml))
        self.assertIsNotNone(nova_ext_metadata(xml))

    def test_resize_builds_the_new_flavor_s_changes(self):
        # Given a server whose flavor asks for OEM strings and no KSM
        self.flags(allow_resize_to_same_host=True)
        server = self.boot(self.flavor({'nova_ext:oem_strings': 'asset=old',
                                        'nova_ext:memory_sharing': 'false'}))
        # When it is resized to a flavor asking for other strings and KSM
        bigger = self._create_flavor(
            memory_mb=1024, vcpu=1, disk=1,
            extra_spec={'nova_ext:oem_strings': 'asset=new'})
        # (no disk to copy: Nova's libvirt functional tests stub the same)
        with mock.patch('nova.virt.libvirt.driver.LibvirtDriver'
                        '.migrate_disk_and_power_off', return_value='{}'):
            self._resize_server(server, bigger)
        # Then the domain finish_migration defined carries the new flavor's
        xml = self.domain_xml(server)
        self.assertEqual('1048576', xml.find('./memory').text)
        self.assertEqual(['asset=new'], oem_strings(xml))
        self.assertIsNone(xml.find('./memoryBacking/nosharepages'))
        self.assertIsNotNone(nova_ext_metadata(xml))

    def test_bad_image_property_fails_that_build_only(self):
        # Given an image whose OEM strings no SMBIOS table can carry
        image = self.image({'nova_ext_oem_strings': ';'.join(
            'entry-%d' % i for i in range(17))})
        # When a user boots it
        server = self.boot(self.flavor(), image, expected_state='ERROR')
        # Then the fault names the mutator and the property
        message = server['fault']['message']
        self.assertIn('nova-ext guest mutator oem_strings', message)
        self.assertIn('nova_ext_oem_strings', message)
        # And nothing is left defined in libvirt
        connection = self.computes['compute1'].driver._host.get_connection()
        self.assertEqual([], connection.listAllDomains())
        # And the compute still serves the next boot
        self.assertEqual(
            'up', self.admin_api.get_services(
                binary='nova-compute')[0]['state'])
        self.boot(self.flavor())

    def test_invalid_extra_specs_are_refused_by_the_api(self):
        flavor = self.flavor()
        for key, value in (('nova_ext:memory_sharing', 'sometimes'),
                           ('nova_ext:oem_strings', ';'.join(['x'] * 17)),
                           ('nova_ext:oem_strings', '')):
            error = self.assertRaises(
                client.OpenStackApiException,
                self.admin_api.post_extra_spec, flavor,
                {'extra_specs': {key: value}})
            self.assertEqual(400, error.response.status_code)
            self.assertIn(key, error.response.text)


def xml_find_nova_instance(xml):
    return xml.find('./metadata/{http://openstack.org/xmlns/libvirt/nova/'
                    '1.1}instance')


class ExplodingMutator(mutators.GuestMutator):
    """A third-party mutator with a bug, installed for these tests only
    (tests/functional/mutator_plugins holds its distribution metadata).
    """

    def mutate(self, guest, instance, image_meta, driver):
        if (instance.flavor.extra_specs or {}).get('nova_ext:quota_class'):
            raise KeyError('bug in a third-party mutator')


class TestRaisingMutator(LibvirtDriverTestCase):
    NOVA_EXT_FLAGS = {'guest_mutators': 'memory_sharing,exploding',
                      'quota_classes': 'boom'}

    def setUp(self):
        # as in a nova-compute started after the plugin was installed
        self.useFixture(fixtures.MonkeyPatch('sys.path', sys.path + [
            os.path.join(os.path.dirname(__file__), 'mutator_plugins')]))
        self.useFixture(fixtures.MonkeyPatch(
            'stevedore.extension.ExtensionManager.ENTRY_POINT_CACHE', {}))
        super().setUp()
        self.start_compute('compute1')
        self.start_compute('compute2')

    def test_raising_mutator_fails_one_build_not_the_service(self):
        # When a mutator raises for one flavor
        server = self.boot(self.flavor({'nova_ext:quota_class': 'boom'}),
                           expected_state='ERROR')
        # Then that server is in ERROR with a fault naming the mutator,
        # without trying the other host (it would fail the same way)
        message = server['fault']['message']
        self.assertIn('nova-ext guest mutator exploding failed', message)
        self.assertIn('bug in a third-party mutator', message)
        self.assertEqual(1, self.stdlog.logger.output.count(
            'nova-ext: guest mutator exploding failed'))
        # And nothing stays defined in libvirt on either host
        for compute in self.computes.values():
            connection = compute.driver._host.get_connection()
            self.assertEqual([], connection.listAllDomains())
        # And the next boot, with the mutators before it applied, works
        xml = self.domain_xml(self.boot(
            self.flavor({'nova_ext:memory_sharing': 'false'})))
        self.assertIsNotNone(xml.find('./memoryBacking/nosharepages'))


class TestUnusableMutator(LibvirtDriverTestCase):
    NOVA_EXT_FLAGS = {'guest_mutators': 'domain_metadata,no_such_mutator'}

    def test_unknown_mutator_fails_builds_not_the_service(self):
        self.start_compute()
        self.assertIn('guest mutator no_such_mutator named in [nova_ext] '
                      'guest_mutators is unusable', self.stdlog.logger.output)
        server = self.boot(self.flavor(), expected_state='ERROR')
        self.assertIn('no_such_mutator', server['fault']['message'])
        self.assertEqual(
            'up', self.admin_api.get_services(
                binary='nova-compute')[0]['state'])


class TestFailureDomainTraits(LibvirtDriverTestCase):
    ADDITIONAL_FILTERS = ['FailureDomainAntiAffinityFilter']

    def start_compute_in(self, hostname, failure_domain):
        self.flags(failure_domain=failure_domain, group='nova_ext')
        return self.start_compute(hostname)

    def traits(self, hostname):
        return set(self._get_provider_traits(
            self.compute_rp_uuids[hostname]))

    def test_compute_reports_its_domains_and_keeps_other_traits(self):
        host = self.start_compute_in('compute1', 'rack:r-12,row:b')
        self.assertLessEqual({'CUSTOM_NOVA_EXT_FD_RACK_R_12',
                              'CUSTOM_NOVA_EXT_FD_ROW_B'}, self.traits(host))
        # an operator's trait survives the compute's periodic update
        rp = self.compute_rp_uuids[host]
        traits = self.placement.get(
            '/resource_providers/%s/traits' % rp, version='1.6').body
        self.placement.put('/traits/CUSTOM_OPERATOR_TAG', None,
                           version='1.6')
        self.placement.put(
            '/resource_providers/%s/traits' % rp,
            {'traits': traits['traits'] + ['CUSTOM_OPERATOR_TAG'],
             'resource_provider_generation':
                 traits['resource_provider_generation']}, version='1.6')
        self._run_periodics()
        current = self.traits(host)
        self.assertIn('CUSTOM_OPERATOR_TAG', current)
        self.assertIn('COMPUTE_NET_VIF_MODEL_VIRTIO', current)  # Nova's
        self.assertIn('CUSTOM_NOVA_EXT_FD_RACK_R_12', current)

    def test_moved_host_drops_its_old_domain(self):
        host = self.start_compute_in('compute1', 'rack:r1')
        self.flags(failure_domain='rack:r2', group='nova_ext')
        self.restart_compute_service(host)
        traits = self.traits(host)
        self.assertIn('CUSTOM_NOVA_EXT_FD_RACK_R2', traits)
        self.assertNotIn('CUSTOM_NOVA_EXT_FD_RACK_R1', traits)

    def test_spread_filter_reads_domains_from_compute_traits(self):
        # Given two hosts in rack r1 and one in rack r2, told only by the
        # computes' own nova.conf (no aggregate declares a domain)
        self.start_compute_in('compute1', 'rack:r1')
        self.start_compute_in('compute2', 'rack:r1')
        self.start_compute_in('compute3', 'rack:r2')
        rack = {'compute1': 'r1', 'compute2': 'r1', 'compute3': 'r2'}
        group = self.api.post_server_groups(
            {'name': 'db', 'policy': 'anti-affinity'})['id']
        flavor = self.flavor()
        hints = {'group': group, 'nova_ext:spread_level': 'rack'}
        # When three members of a group spread per rack are booted
        placed = [self.boot(flavor, hints=hints) for _ in range(2)]
        # Then the first two are in different racks
        self.assertEqual(
            {'r1', 'r2'},
            {rack[s['OS-EXT-SRV-ATTR:host']] for s in placed})
        # And the third finds no rack left
        third = self.boot(flavor, hints=hints, expected_state='ERROR')
        self.assertIn('No valid host', third['fault']['message'])
