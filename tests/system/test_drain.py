# SPDX-License-Identifier: Apache-2.0
"""Audit, repair and drain a loaded multi-process Nova with the real
``nova-ext-manage`` console script.

The cloud (tests/system/cloud.py): placement, nova-api, nova-conductor,
nova-scheduler with nova-ext's filter and the maintenance request filter,
six fake-driver computes in three racks and two rows, on MariaDB and
RabbitMQ. nova-ext-manage reads Nova's databases and placement through the
cloud's nova.conf and moves servers through nova-api with openstacksdk (a
clouds.yaml, as an operator's).

1. A host re-racked by the operator breaks two groups: ``spread audit``
   exits 2 naming them; ``spread rebalance --execute`` repairs both; the
   audit exits 0.
2. ``host drain --domain rack=r3 --dry-run`` plans: which servers go, which
   are blocked and why (a ``rack:max=1`` group whose other racks are full,
   a stopped server under ``--live``).
3. The drain, interrupted by SIGINT after its first move: the move in
   flight finishes, the command exits 130 saying so.
4. Run again, it finishes: what is left on the rack is what the plan
   blocked. With ``--cold`` the stopped server moves too (cold migration,
   confirmed).

After every step: no server lost, none left MIGRATING, RESIZE,
VERIFY_RESIZE or ERROR, and no hard constraint is further from holding
than before the step -- judged by the reference model
(tests/reference/spread_model.py) from where nova-api says the servers
are, apart from the product's own audit.
"""

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time

import testtools

from tests.reference import spread_model as model
from tests.system import cloud

RACKS = {'r1': ('cmp1', 'cmp2'), 'r2': ('cmp3', 'cmp4'), 'r3': ('cmp5',)}
ROWS = {'a': ('cmp1', 'cmp2'), 'b': ('cmp3', 'cmp4', 'cmp5')}
# group: (constraints, hosts of its members)
GROUPS = {
    'max': ('rack:max=1', ('cmp1', 'cmp5')),
    'skew': ('rack:skew=1', ('cmp1', 'cmp2', 'cmp3', 'cmp4', 'cmp5')),
    'two': ('rack:max=1;row:max=1', ('cmp2', 'cmp5')),
    'full': ('rack:max=1', ('cmp1', 'cmp3', 'cmp5')),
    'drift': ('rack:max=1', ('cmp2', 'cmp4')),
}
LOOSE = {'load': 'cmp5', 'stopped': 'cmp5'}
SETTLED = ('ACTIVE', 'SHUTOFF')


class DrainTest(testtools.TestCase):

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
            '[nova_ext]', 'request_filters = maintenance',
        ]), computes=[h for hosts in RACKS.values() for h in hosts]))
        self.addOnException(lambda exc_info: self.addDetail(
            'service logs', testtools.content.text_content(
                self.cloud.logs())))
        self.clouds_yaml = self.cloud.clouds_yaml()
        self.call('PUT', '/os-quota-sets/admin', {'quota_set': {
            'instances': -1, 'cores': -1, 'ram': -1}})
        self.flavor = self.call('POST', '/flavors', {'flavor': {
            'name': 'tiny', 'ram': 128, 'vcpus': 1, 'disk': 1}})[
                'flavor']['id']
        self.racks = self.cloud.make_racks(RACKS)
        self.cloud.make_racks(ROWS, level='row')
        self.load()

    def call(self, method, path, body=None):
        status, answer = self.cloud.request(method, path, body)
        self.assertLess(status, 300, (method, path, answer))
        return answer

    def load(self):
        """Every group's members and the loose servers, each on its host
        (forced, as an administrator places them).
        """
        boots = []
        for name, (constraints, hosts) in GROUPS.items():
            group = self.call('POST', '/os-server-groups', {'server_group': {
                'name': name, 'policy': 'soft-anti-affinity'}})[
                    'server_group']['id']
            hints = {'group': group,
                     'nova_ext:spread_constraints': constraints}
            boots += [('%s-%d' % (name, index), host, hints)
                      for index, host in enumerate(hosts, 1)]
        boots += [(name, host, {}) for name, host in LOOSE.items()]

        def boot(item):
            name, host, hints = item
            body = {'server': {'name': name, 'flavorRef': self.flavor,
                               'imageRef': cloud.IMAGE, 'networks': 'none',
                               'availability_zone': 'nova:' + host}}
            if hints:
                body['os:scheduler_hints'] = hints
            return self.call('POST', '/servers', body)['server']['id']

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            ids = dict(zip([b[0] for b in boots], pool.map(boot, boots)))
        self.settle(len(boots))
        self.call('POST', '/servers/%s/action' % ids['stopped'],
                  {'os-stop': None})
        self.settle(len(boots), stopped={'stopped'})

    def servers(self):
        return {s['name']: s for s in self.call(
            'GET', '/servers/detail?all_tenants=1')['servers']}

    def settle(self, count, stopped=(), timeout=240):
        deadline = time.monotonic() + timeout
        while True:
            servers = self.servers()
            wanted = {name: 'SHUTOFF' if name in stopped else 'ACTIVE'
                      for name in servers}
            if len(servers) == count and all(
                    s['status'] == wanted[n] for n, s in servers.items()):
                return servers
            if time.monotonic() > deadline:
                self.fail('servers not settled after %ds: %s' % (
                    timeout, {n: s['status'] for n, s in servers.items()}))
            time.sleep(1)

    def hosts(self):
        return {name: server['OS-EXT-SRV-ATTR:host']
                for name, server in self.servers().items()}

    # -- nova-ext-manage, as an operator runs it ------------------------

    def argv(self, *args):
        return [os.path.join(os.path.dirname(sys.executable),
                             'nova-ext-manage'), '--config-file',
                self.cloud.conf] + list(args)

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        env['OS_CLIENT_CONFIG_FILE'] = self.clouds_yaml
        env['OS_CLOUD'] = 'loopback'
        return env

    def manage(self, *args):
        result = subprocess.run(self.argv(*args), capture_output=True,
                                text=True, env=self.env(), timeout=600)
        self.addDetail('nova-ext-manage %s' % ' '.join(args),
                       testtools.content.text_content(
                           result.stdout + result.stderr))
        return result

    def audit(self):
        """``spread audit --json``: (exit code, {(group, constraint):
        excess}) of the hard constraints.
        """
        result = self.manage('spread', 'audit', '--json')
        self.assertIn(result.returncode, (0, 2), result.stderr)
        found = json.loads(result.stdout)
        return result.returncode, found, {
            (g['name'], c['constraint']): c['excess']
            for g in found['groups'] for c in g['constraints'] if c['hard']}

    def excess(self):
        """{(group, constraint): excess} of every hard constraint, judged
        by the reference model where nova-api says the members are.
        """
        cluster = model.Cluster(tuple(
            model.Host(host, {'rack': self.rack_of[host],
                              'row': self.row_of[host]},
                       enabled=host not in self.maintenance)
            for host in self.rack_of))
        hosts = self.hosts()
        found = {}
        for name, (text, members) in GROUPS.items():
            constraints = tuple(_constraint(part)
                                for part in text.split(';'))
            placed = {'%s-%d' % (name, index): hosts['%s-%d' % (name, index)]
                      for index in range(1, len(members) + 1)}
            for constraint, _holds, excess in model.standing_state(
                    cluster, placed, constraints):
                found[(name, constraint.text())] = excess
        return found

    def assertNoWorse(self, before, count):
        """No server lost or left moving; no hard constraint further from
        holding than in ``before``.
        """
        servers = self.servers()
        self.assertEqual(count, len(servers))
        states = {n: s['status'] for n, s in servers.items()}
        self.assertTrue(set(states.values()) <= set(SETTLED), states)
        now = self.excess()
        for key, excess in now.items():
            self.assertLessEqual(excess, before[key], key)
        return now

    def test_audit_repair_and_drain(self):
        count = len(self.servers())
        self.rack_of = {h: r for r, hosts in RACKS.items() for h in hosts}
        self.row_of = {h: r for r, hosts in ROWS.items() for h in hosts}
        self.maintenance = set()
        self.assertEqual(0, sum(self.excess().values()))

        # 1. the operator moves cmp4 from rack r2 into rack r1
        self.call('POST', '/os-aggregates/%s/action' % self.racks['r2'],
                  {'remove_host': {'host': 'cmp4'}})
        self.call('POST', '/os-aggregates/%s/action' % self.racks['r1'],
                  {'add_host': {'host': 'cmp4'}})
        self.rack_of['cmp4'] = 'r1'
        code, found, audited = self.audit()
        self.assertEqual(2, code)
        drifted = self.excess()
        self.assertEqual(drifted, audited)
        self.assertEqual({('drift', 'rack:max=1'): 1,
                          ('skew', 'rack:skew=1'): 1},
                         {k: v for k, v in drifted.items() if v})
        [drift] = [g for g in found['groups'] if g['name'] == 'drift']
        self.assertEqual('rack r1 holds 2 members (max 1): drift-1 on cmp2, '
                         'drift-2 on cmp4',
                         drift['constraints'][0]['causes'][0]['text'])
        result = self.manage('spread', 'rebalance', '--execute')
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
        self.assertIn('after: 0 hard constraints violated', result.stdout)
        repaired = self.assertNoWorse(drifted, count)
        self.assertEqual(0, sum(repaired.values()))

        # 2. the plan of draining rack r3
        self.maintenance = set(RACKS['r3'])
        on_rack = {n for n, h in self.hosts().items()
                   if h in RACKS['r3']}
        result = self.manage('host', 'drain', '--domain', 'rack=r3',
                             '--dry-run', '--json')
        self.assertEqual(2, result.returncode, result.stderr)
        planned = json.loads(result.stdout)['plan']
        blocked = {b['name']: b['reason'] for b in planned['blocked']}
        self.assertIn('rack:max=1 refuses rack', blocked['full-3'])
        self.assertIn('status SHUTOFF', blocked['stopped'])
        moving = {m['name'] for m in planned['moves']}
        self.assertEqual(on_rack, moving | set(blocked))
        self.assertGreaterEqual(len(moving), 3)

        # 3. the drain, SIGINT after its first move
        with open(os.path.join(self.cloud.dir, 'drain.out'), 'w+') as out:
            process = subprocess.Popen(
                self.argv('host', 'drain', '--domain', 'rack=r3',
                          '--parallel', '1'),
                stdout=out, stderr=subprocess.STDOUT, env=self.env(),
                text=True)
            deadline = time.monotonic() + 300
            while ': moved ' not in _read(out):
                self.assertIsNone(process.poll(), _read(out))
                self.assertLess(time.monotonic(), deadline, _read(out))
                time.sleep(0.2)
            process.send_signal(signal.SIGINT)
            self.assertEqual(130, process.wait(timeout=300), _read(out))
            text = _read(out)
        self.addDetail('interrupted drain', testtools.content.text_content(
            text))
        self.assertIn('SIGINT: starting no new move', text)
        # nothing started once the signal was taken
        self.assertNotIn('migration from', text.split(
            'starting no new move')[1])
        self.assertIn('interrupted by SIGINT', text)
        self.assertIn('not started', text)
        left = {n for n, h in self.hosts().items() if h in RACKS['r3']}
        self.assertLess(len(left), len(on_rack))
        self.assertGreater(len(left), len(blocked))
        now = self.assertNoWorse(repaired, count)

        # 4. run again: it finishes; what is left is what the plan blocked
        result = self.manage('host', 'drain', '--domain', 'rack=r3')
        self.assertEqual(2, result.returncode, result.stdout + result.stderr)
        self.assertIn('cmp5: maintenance on (already)', result.stdout)
        left = {n for n, h in self.hosts().items() if h in RACKS['r3']}
        self.assertEqual(set(blocked), left)
        now = self.assertNoWorse(now, count)
        # --cold moves the stopped server too, and confirms it
        result = self.manage('host', 'drain', '--domain', 'rack=r3',
                             '--cold')
        self.assertEqual(2, result.returncode, result.stdout + result.stderr)
        self.assertIn('stopped: confirmed the cold migration', result.stdout)
        left = {n for n, h in self.hosts().items() if h in RACKS['r3']}
        self.assertEqual({'full-3'}, left)
        self.assertEqual('SHUTOFF', self.servers()['stopped']['status'])
        self.assertNoWorse(now, count)


def _read(stream):
    stream.flush()
    with open(stream.name) as again:
        return again.read()


def _constraint(text):
    """``rack:max=1`` as the reference model's Constraint (hard)."""
    level, _colon, rule = text.partition(':')
    kind, _equals, value = rule.partition('=')
    return model.Constraint(level, kind, int(value))
