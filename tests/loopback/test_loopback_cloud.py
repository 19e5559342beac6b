# SPDX-License-Identifier: Apache-2.0
"""The loopback cloud end to end: every service of both cells up, an
operator's openstack CLI session placing a server group across racks and
cells and counting a per-flavor limit across cells, ``quota check`` OK with
a superconductor and cell conductors, servers on the QEMU compute
(nova-ext's libvirt driver, real libvirtd), nova-ext's tempest plugin with
0 failures and no skips, and a curated upstream tempest subset.
"""

import collections
from xml.etree import ElementTree

import testtools
from testtools import content

from tests.loopback import hypervisor
from tests.loopback import loopback

EXPECTED_SKIPS = set()
GUEST_NS = '{urn:nova-ext:guest:1}'
# upstream tests the subset must pass at least (a selection that silently
# matched nothing would pass with 0 failures)
UPSTREAM_MIN_PASSED = 25


class LoopbackCloudTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.cloud = self.useFixture(loopback.LoopbackCloud())
        self.addOnException(lambda exc_info: self.addDetail(
            'service logs', content.text_content(self.cloud.logs())))

    def test_operator_session_and_tempest_plugin(self):
        # the QEMU compute starts with the others but is waited for in a
        # later phase: it may or may not be up yet at this count
        self.assertEqual(sorted(loopback.expected_services()),
                         [service for service in self.cloud.services_up
                          if service != ('nova-compute', hypervisor.HOST)])
        qemu = self.cloud.qemu_compute.hypervisor['hypervisor_hostname']
        self.assertEqual(list(loopback.COMPUTES), [
            h for h in self.cloud.hypervisors if h != qemu])

        found = self.cloud.operator_steps()
        rack_of = {host: rack for rack, hosts in loopback.RACKS
                   for host in hosts}
        for rack, hosts in loopback.RACKS:
            aggregate = found['racks']['rack-' + rack]
            self.assertEqual(sorted(hosts), sorted(aggregate['Hosts']))
            self.assertEqual({'nova_ext:failure_domain:rack': rack},
                             aggregate['Properties'])
        members = [found['spread-1'], found['spread-2']]
        self.assertEqual(['ACTIVE', 'ACTIVE'],
                         [m['status'] for m in members], found)
        # anti-affinity alone allows cmp1 + cmp3 (both r1): the rack
        # spread hint is what keeps them apart
        self.assertNotEqual(rack_of[members[0]['host']],
                            rack_of[members[1]['host']], found)
        # the third member, anti-affinity only: one of the two hosts left
        # (each rack holds one member already, so the rack limit would
        # refuse it); whichever two hosts the first two took, the group
        # now spans both cells
        # one request of four servers over two racks of two hosts with
        # rack:skew=1: 2/2 (it used to end with all four in ERROR)
        skew = found['multi-create skew']
        self.assertEqual(['ACTIVE'] * 4,
                         [s['status'] for s in skew.values()], skew)
        self.assertEqual({'r1': 2, 'r2': 2}, dict(collections.Counter(
            rack_of[s['host']] for s in skew.values())), skew)
        self.assertEqual('ACTIVE', found['spread-3']['status'], found)
        hosts = [found[name]['host']
                 for name in ('spread-1', 'spread-2', 'spread-3')]
        self.assertEqual(3, len(set(hosts)), found)
        self.assertEqual({'cell1', 'cell2'},
                         {loopback.CELL_OF[host] for host in hosts}, found)

        # one server of the limited flavor in each cell; the limit (2)
        # counts both, the third create is refused
        self.assertEqual(
            [('ACTIVE', 'cell1'), ('ACTIVE', 'cell2')],
            [(found[name]['status'], loopback.CELL_OF[found[name]['host']])
             for name in ('quota-cell1', 'quota-cell2')], found)
        self.assertRegex(found['quota usage'],
                         r'\|\s*instances\s*\|\s*2\s*\|\s*2\s*\|')
        self.assertIn('403', found['quota refused'])
        self.assertIn('Quota exceeded for instances of flavor %s: Requested '
                      '1, but already used 2 of 2' % found['cells flavor'],
                      found['quota refused'])
        self.assertEqual([], found['left'])

        # ImageLocalityWeigher asks every cell: the hosts running the image
        # (one server in each cell) are preferred, the others not
        self.assertEqual(
            {'cmp1': 1.0, 'cmp3': 1.0, 'cmp2': 0.0, 'cmp4': 0.0},
            {host['host']: [w['raw'] for w in host['weighers']
                            if w['weigher'] == 'ImageLocalityWeigher'][0]
             for host in found['image locality']['hosts']},
            found['image locality'])

        # maintenance and host classes hold in both cells
        self.assertEqual(['cmp2', 'cmp4'], sorted(found['in maintenance']))
        self.assert_one_per_cell_then_none(found['maintenance'],
                                           {'cmp1', 'cmp3'})
        self.assert_one_per_cell_then_none(found['host class'],
                                           {'cmp2', 'cmp4'})

        # nova-api and the superconductor agree; the cell conductors are
        # listed and need nothing
        check = found['quota check']
        for host, cell in loopback.CONDUCTORS.items():
            line = [row for row in check.splitlines()
                    if ' %s ' % host in row and 'nova-conductor' in row]
            self.assertEqual(1, len(line), check)
            self.assertIn('ok', line[0])
            if cell:
                self.assertIn('not needed (cell conductor)', line[0])
            else:
                self.assertIn('per_flavor', line[0])

        # Nothing was wrong so far (the QEMU compute's exploding mutator
        # comes next), so nova-ext logged nothing at WARNING or above in
        # any service: an operator alerting on those lines is not woken.
        self.assertEqual([], self.cloud.nova_ext_problems())

        self.check_qemu_compute()

        summary, output = self.cloud.run_tempest()
        self.addDetail('tempest', content.text_content(output[-30000:]))
        self.addDetail('timings and memory', content.text_content(
            self.cloud.report()))
        self.assertEqual(0, summary['failed'], output[-10000:])
        self.assertGreaterEqual(summary['ran'], 9, summary)
        self.assertEqual(summary['ran'], summary['passed'] +
                         summary['skipped'], summary)
        self.assertEqual(EXPECTED_SKIPS,
                         {reason for _, reason in summary['skips']},
                         summary)

        # upstream tempest.api.compute, the curated subset: 0 failures
        summary, output = self.cloud.run_upstream_tempest()
        self.addDetail('upstream tempest', content.text_content(
            output[-30000:]))
        self.assertEqual(0, summary['failed'], output[-10000:])
        self.assertGreaterEqual(summary['passed'], UPSTREAM_MIN_PASSED,
                                summary)

    def assert_one_per_cell_then_none(self, members, hosts):
        first, second, third = (members[name] for name in sorted(members))
        self.assertEqual(['ACTIVE', 'ACTIVE'],
                         [first['status'], second['status']], members)
        self.assertEqual(hosts, {first['host'], second['host']}, members)
        self.assertEqual('ERROR', third['status'], members)
        self.assertIn('No valid host', third['fault'], members)

    def check_qemu_compute(self):
        found = self.cloud.qemu_compute.boot_steps()
        self.addDetail('QEMU compute', content.text_content(
            '\n'.join('%s: %s' % (key, found[key]) for key in found
                      if key != 'log')))
        # the compute's failure domain is in placement
        self.assertIn('CUSTOM_NOVA_EXT_FD_RACK_' + hypervisor.RACK.upper(),
                      found['traits'])
        first, broken, second = (found[name] for name in (
            'qemu-1', 'qemu-boom', 'qemu-2'))
        # a server reached ACTIVE on the QEMU compute, its domain runs
        # with every mutator's change
        self.assertEqual(('ACTIVE', hypervisor.HOST),
                         (first['status'], first['host']), found)
        xml = ElementTree.fromstring(
            first['domains'][first['instance_name']])
        self.assertEqual('qemu', xml.get('type'))
        self.assertEqual(['asset=loopback-1'], [
            e.text for e in xml.findall('./sysinfo/oemStrings/entry')])
        self.assertIsNotNone(xml.find('./memoryBacking/nosharepages'))
        path = './metadata/{0}guest/{0}failureDomain'.format(GUEST_NS)
        self.assertEqual({'rack': hypervisor.RACK}, {
            e.get('level'): e.text for e in xml.findall(path)})
        # the mutator that raises fails that boot, naming it, and leaves
        # no domain behind
        self.assertEqual('ERROR', broken['status'], found)
        self.assertIn('nova-ext guest mutator exploding failed',
                      broken['fault'])
        self.assertEqual([first['instance_name']], sorted(broken['domains']))
        self.assertEqual(1, found['log'].count(
            'nova-ext: guest mutator exploding failed'))
        # the next boot on the same compute works
        self.assertEqual(('ACTIVE', hypervisor.HOST),
                         (second['status'], second['host']), found)
        self.assertEqual(sorted([first['instance_name'],
                                 second['instance_name']]),
                         sorted(second['domains']))
        # deleting the servers removes their domains
        self.assertEqual({}, found['domains_left'])
