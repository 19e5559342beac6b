# SPDX-License-Identifier: Apache-2.0
"""Failure-domain spread under racing creates, with real Nova processes.

Given two nova-scheduler processes with two workers each, six fake computes
in three racks (aggregate metadata) and the failure-domain filter, when 20
creates of members of one server group (single creates from many client
threads, plus multi-creates with min/max count) arrive at once, then, after
everything settles: no rack holds more ACTIVE members than the group's
maximum, as many are ACTIVE as the racks allow, every other server is ERROR
with a fault naming the limit, and nothing is left in BUILD. Repeated for
hard and soft anti-affinity, one and two per rack.

``NOVA_EXT_SPREAD_RACE_UNLOCKED=1`` runs the same bursts with
``[nova_ext] spread_serialize_groups = False`` (the lock switched off), to
see them fail.
"""

import concurrent.futures
import os
import time

import testtools

from tests.system import cloud

RACKS = {'r1': ('cmp1', 'cmp2'), 'r2': ('cmp3', 'cmp4'),
         'r3': ('cmp5', 'cmp6')}
REQUESTS = 20
BURSTS = (('anti-affinity', 1), ('soft-anti-affinity', 2),
          ('anti-affinity', 1), ('soft-anti-affinity', 2))


class SpreadRaceTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        unlocked = os.environ.get('NOVA_EXT_SPREAD_RACE_UNLOCKED') == '1'
        self.cloud = self.useFixture(cloud.LoopbackNova('\n'.join([
            '[filter_scheduler]',
            'available_filters = nova.scheduler.filters.all_filters',
            'available_filters = nova_ext.scheduler.filters.all_filters',
            'enabled_filters = ComputeFilter,ServerGroupAntiAffinityFilter,'
            'ServerGroupAffinityFilter,FailureDomainAntiAffinityFilter',
            'weight_classes = nova.scheduler.weights.all_weighers,'
            'nova_ext.scheduler.weights.all_weighers',
            # Nova's own answer to racing schedulers: spread the choice
            # over the best few hosts rather than all picking the best one
            'host_subset_size = 2',
            '[nova_ext]',
            'spread_serialize_groups = %s' % (not unlocked),
        ]), computes=[h for hosts in RACKS.values() for h in hosts],
            schedulers=2, scheduler_workers=2))
        self.addOnException(lambda exc_info: self.addDetail(
            'service logs', testtools.content.text_content(
                self.cloud.logs())))
        self.cloud.make_racks(RACKS)
        # four bursts of 20: Nova's default quota (10 instances) is not
        # what is under test
        self.call('PUT', '/os-quota-sets/admin', {'quota_set': {
            'instances': -1, 'cores': -1, 'ram': -1}})
        self.flavor = self.call('POST', '/flavors', {'flavor': {
            'name': 'tiny', 'ram': 128, 'vcpus': 1, 'disk': 1}})[
                'flavor']['id']

    def call(self, method, path, body=None):
        status, answer = self.cloud.request(method, path, body)
        self.assertLess(status, 300, answer)
        return answer

    def test_bursts_of_members_never_exceed_the_rack_limit(self):
        outcome = []
        for burst, (policy, maximum) in enumerate(BURSTS):
            outcome.append(self.burst(burst, policy, maximum))
        self.addDetail('outcome', testtools.content.text_content(
            '\n'.join(outcome)))

    def burst(self, number, policy, maximum):
        name = 'b%d' % number
        group = self.call('POST', '/os-server-groups', {'server_group': {
            'name': name, 'policy': policy}})['server_group']['id']
        hints = {'group': group, 'nova_ext:spread_level': 'rack',
                 'nova_ext:spread_max_per_domain': str(maximum)}

        def create(i):
            server = {'name': '%s-%d' % (name, i), 'flavorRef': self.flavor,
                      'imageRef': cloud.IMAGE, 'networks': 'none'}
            if i % 8 == 0:
                server.update(min_count=2, max_count=3)
            return self.cloud.request('POST', '/servers', {
                'server': server, 'os:scheduler_hints': hints})

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(REQUESTS) as pool:
            answers = list(pool.map(create, range(REQUESTS)))
        self.assertEqual({202}, {status for status, _ in answers}, answers)
        servers = self.settle(name)
        took = time.monotonic() - started

        active = [s for s in servers if s['status'] == 'ACTIVE']
        per_rack = {rack: 0 for rack in RACKS}
        for server in active:
            per_rack[self.rack_of(server['OS-EXT-SRV-ATTR:host'])] += 1
        summary = ('burst %d (%s, max %d per rack): %d requests, %d servers,'
                   ' %d ACTIVE %s, %d ERROR, settled in %.1f s' % (
                       number, policy, maximum, REQUESTS, len(servers),
                       len(active), per_rack, len(servers) - len(active),
                       took))
        self.assertLessEqual(max(per_rack.values()), maximum, summary)
        self.assertEqual(maximum * len(RACKS), len(active), summary)
        for server in servers:
            if server['status'] == 'ERROR':
                self.assertIn('max %d per rack' % maximum,
                              server['fault']['message'], summary)
        return summary

    @staticmethod
    def rack_of(host):
        return [rack for rack, hosts in RACKS.items() if host in hosts][0]

    def settle(self, prefix, timeout=240):
        deadline = time.monotonic() + timeout
        while True:
            servers = [s for s in self.call('GET', '/servers/detail?all_'
                                            'tenants=1')['servers']
                       if s['name'].startswith(prefix + '-')]
            if servers and all(s['status'] in ('ACTIVE', 'ERROR')
                               for s in servers):
                return servers
            if time.monotonic() > deadline:
                self.fail('servers still building after %ds: %s' % (
                    timeout, sorted(s['status'] for s in servers)))
            time.sleep(2)
