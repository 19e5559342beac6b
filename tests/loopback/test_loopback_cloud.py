"""The loopback cloud end to end: every service up, an operator's
openstack CLI session placing a server group across racks, and nova-ext's
tempest plugin with 0 failures.
"""

import testtools
from testtools import content

from tests.loopback import loopback

# the only tempest skip expected here: the computes run Nova's fake driver
EXPECTED_SKIPS = {'[nova_ext_feature_enabled] libvirt_driver is False'}


class LoopbackCloudTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.cloud = self.useFixture(loopback.LoopbackCloud())
        self.addOnException(lambda exc_info: self.addDetail(
            'service logs', content.text_content(self.cloud.logs())))

    def test_operator_session_and_tempest_plugin(self):
        expected = {('nova-conductor', 'ctl'), ('nova-scheduler', 'ctl')}
        expected |= {('nova-compute', host) for host in loopback.COMPUTES}
        self.assertEqual(sorted(expected), self.cloud.services_up)
        self.assertEqual(list(loopback.COMPUTES), self.cloud.hypervisors)

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
        # anti-affinity alone allows cmp1 + cmp2 (both r1): the rack
        # spread hint is what keeps them apart
        self.assertNotEqual(rack_of[members[0]['host']],
                            rack_of[members[1]['host']], found)
        self.assertEqual([], found['left'])

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
