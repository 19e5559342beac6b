# SPDX-License-Identifier: Apache-2.0
"""Failure domains after nova-scheduler's workers die and are replaced.

Given one nova-scheduler process with two workers and four fake computes,
and rack aggregates created after the scheduler started (its workers learn
them from Nova's aggregate updates; the parent process, which only watches
its workers, never does), when both workers are killed with SIGKILL (what
the kernel's OOM killer does) and the parent forks new ones, then a burst of
spread creates is scheduled by the new workers as by the old: every server
ACTIVE, no rack over the group's maximum, no "in no rack" refusal.

Without nova-ext re-reading the aggregates once in each new process
(``nova_patches._aggregate_view_of_this_process``), the new workers
see the aggregates as they stood when the scheduler started — none — and
refuse every spread request (issue 35).
"""

import concurrent.futures
import os
import signal
import time

import testtools

from tests.system import cloud

RACKS = {'r1': ('cmp1', 'cmp2'), 'r2': ('cmp3', 'cmp4')}
SERVERS = 8
PER_RACK = 4


def _children(pid):
    """The pids of ``pid``'s child processes (Linux /proc)."""
    with open('/proc/%d/task/%d/children' % (pid, pid)) as f:
        return {int(child) for child in f.read().split()}


class SchedulerWorkerRespawnTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.cloud = self.useFixture(cloud.LoopbackNova('\n'.join([
            '[filter_scheduler]',
            'available_filters = nova.scheduler.filters.all_filters',
            'available_filters = nova_ext.scheduler.filters.all_filters',
            'enabled_filters = ComputeFilter,ServerGroupAntiAffinityFilter,'
            'ServerGroupAffinityFilter,FailureDomainAntiAffinityFilter',
            'weight_classes = nova.scheduler.weights.all_weighers,'
            'nova_ext.scheduler.weights.all_weighers',
        ]), computes=[h for hosts in RACKS.values() for h in hosts],
            schedulers=1, scheduler_workers=2))
        self.addOnException(lambda exc_info: self.addDetail(
            'service logs', testtools.content.text_content(
                self.cloud.logs())))
        self.call('PUT', '/os-quota-sets/admin', {'quota_set': {
            'instances': -1, 'cores': -1, 'ram': -1}})
        self.flavor = self.call('POST', '/flavors', {'flavor': {
            'name': 'tiny', 'ram': 128, 'vcpus': 1, 'disk': 1}})[
                'flavor']['id']

    def call(self, method, path, body=None):
        status, answer = self.cloud.request(method, path, body)
        self.assertLess(status, 300, answer)
        return answer

    def test_replaced_workers_know_the_racks(self):
        # Given racks made while the scheduler runs
        self.cloud.make_racks(RACKS)
        # When both workers die and the parent forks new ones
        parent = self.cloud.scheduler.process.pid
        workers = self.wait_for_workers(parent, 2, set())
        for worker in workers:
            os.kill(worker, signal.SIGKILL)
        self.wait_for_workers(parent, 2, workers)
        # Then a burst of spread creates is scheduled as before
        group = self.call('POST', '/os-server-groups', {'server_group': {
            'name': 'g', 'policy': 'soft-anti-affinity'}})[
                'server_group']['id']
        hints = {'group': group,
                 'nova_ext:spread_constraints': 'rack:max=%d' % PER_RACK}

        def create(number):
            return self.cloud.request('POST', '/servers', {
                'server': {'name': 'g-%d' % number, 'flavorRef': self.flavor,
                           'imageRef': cloud.IMAGE, 'networks': 'none'},
                'os:scheduler_hints': hints})

        with concurrent.futures.ThreadPoolExecutor(SERVERS) as pool:
            answers = list(pool.map(create, range(SERVERS)))
        self.assertEqual({202}, {status for status, _ in answers}, answers)
        servers = self.settle('g')
        faults = [s['fault']['message'] for s in servers
                  if s['status'] == 'ERROR']
        self.assertEqual([], faults)
        per_rack = {rack: 0 for rack in RACKS}
        for server in servers:
            host = server['OS-EXT-SRV-ATTR:host']
            per_rack[[r for r, hosts in RACKS.items() if host in hosts][0]] \
                += 1
        self.assertEqual({'r1': PER_RACK, 'r2': PER_RACK}, per_rack)

    def wait_for_workers(self, parent, count, gone, timeout=120):
        """The ``count`` worker pids of ``parent``, none of them in
        ``gone``, once the new ones have started listening.
        """
        deadline = time.monotonic() + timeout
        while True:
            workers = _children(parent) - gone
            if len(workers) == count:
                break
            if time.monotonic() > deadline:
                self.fail('nova-scheduler (pid %d) has workers %s, not %d '
                          'new ones, after %ds' % (parent, sorted(workers),
                                                   count, timeout))
            time.sleep(0.5)
        # a forked worker connects to RabbitMQ before it takes requests;
        # a request sent meanwhile waits in the queue for it
        return workers

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
