# SPDX-License-Identifier: Apache-2.0
"""Failure-domain spread when its lock, its backend or a compute fails.

Given two nova-scheduler processes, four fake computes in two racks
(aggregate metadata; cmp1, in rack r1, runs a driver whose every spawn
fails and is disabled except in the reschedule cases) and a test-only
weigher (:mod:`tests.system.gate_filter`) that can hold one request still
in the middle of its decision, inside its group's turn and spread lock
(the other requests of that turn wait to decide), when a burst of creates
of one server group (``rack``, at most one member per rack) is in flight
and

* the nova-scheduler process holding the group's lock is killed (SIGKILL),
* the coordination backend (a private redis) dies, and comes back,
* MariaDB drops the lock holder's connection (``KILL CONNECTION``),
* the compute chosen for a member fails its spawn,
* another member is scheduled while a failed member waits for the
  conductor to claim its alternate (a conductor-side hold,
  :mod:`tests.system.reschedule_gate`),

then, after everything settles: no rack holds more members than the
maximum, nothing is left in BUILD, every ERROR server carries a fault that
names why (the rack limit, the lost lock, the unreachable backend, Nova's
RPC timeout: MessagingTimeout), and the next burst spreads as before
without restarting Nova.

One cloud serves every case; a case that needs other scheduler options
restarts the two schedulers with them.
"""

import concurrent.futures
import os
import signal
import time

import testtools

from nova_ext.scheduler import coordination
from tests.system import cloud
from tests.system import failing_driver
from tests.system import gate_filter
from tests.system import processes
from tests.system import reschedule_gate

RACKS = {'r1': ('cmp1', 'cmp2'), 'r2': ('cmp3', 'cmp4')}
FAILING = 'cmp1'
MAXIMUM = 1
BURST = 8

CONF = '\n'.join([
    '[DEFAULT]',
    # a request sent to a killed scheduler fails after this (Nova's call
    # monitor: no heartbeat from the server within the timeout)
    'rpc_response_timeout = 20',
    '[filter_scheduler]',
    'available_filters = nova.scheduler.filters.all_filters',
    'available_filters = nova_ext.scheduler.filters.all_filters',
    'enabled_filters = ComputeFilter,'
    'ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,'
    'FailureDomainAntiAffinityFilter',
    # Nova's weighers (RAMWeigher puts the failing compute first) and the
    # gate, which weighs every host alike
    'weight_classes = nova.scheduler.weights.all_weighers,'
    'tests.system.gate_filter.GateWeigher',
    # every other host an alternate: the rack-mate of the failing compute
    # among them whatever the weighers' order (with Nova's default of 3,
    # two alternates, both may be in the other rack: nova-ext drops them)
    '[scheduler]',
    'max_attempts = 4',
    '[nova_ext]',
    'spread_lock_timeout = 60',
])

# Nova's RAMWeigher prefers cmp1 (the failing driver has twice the
# memory), then cmp2, its rack-mate, then the hosts of r2
LESS_RAM = '[DEFAULT]\nreserved_host_memory_mb = 100000\n'

# What an ERROR member's fault may say, by cause.
OVER_LIMIT = 'max %d per rack' % MAXIMUM
LOCK_WAIT = 'waiting for the spread lock'
RPC_TIMEOUT = 'MessagingTimeout'
LOST = 'was lost while this request was scheduled'
UNREACHABLE = 'coordination backend %s is unreachable'

# NOVA_EXT_SPREAD_FAULTS_BROKEN=<how> runs the cases with a protection
# removed, to see them fail: 'unlocked' ([nova_ext] spread_serialize_groups
# = False), 'schedule' (spread_coordination_unavailable = schedule).
BROKEN = os.environ.get('NOVA_EXT_SPREAD_FAULTS_BROKEN', '')


class SpreadFaultsTest(testtools.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cloud = cloud.LoopbackNova(
            CONF, computes=[h for hosts in RACKS.values() for h in hosts],
            schedulers=2, compute_conf=dict({FAILING: '\n'.join([
                '[DEFAULT]',
                'compute_driver = %s.FailingDriver' % failing_driver.NAME,
                ''])}, **{host: LESS_RAM for host in RACKS['r2']}))
        imports = os.environ.get('NOVA_EXT_TEST_IMPORTS')
        os.environ['NOVA_EXT_TEST_IMPORTS'] = ' '.join([
            failing_driver.__name__, reschedule_gate.__name__])
        try:
            cls.cloud.setUp()
        finally:
            if imports is None:
                del os.environ['NOVA_EXT_TEST_IMPORTS']
            else:
                os.environ['NOVA_EXT_TEST_IMPORTS'] = imports
        cls.scheduler_conf = ''
        try:
            cls._prepare()
        except Exception:
            cls.cloud.cleanUp()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cloud.cleanUp()
        super().tearDownClass()

    @classmethod
    def _prepare(cls):
        call = cls._call
        cls.cloud.make_racks(RACKS)
        call('PUT', '/os-quota-sets/admin', {'quota_set': {
            'instances': -1, 'cores': -1, 'ram': -1}})
        cls.flavor = call('POST', '/flavors', {'flavor': {
            'name': 'tiny', 'ram': 128, 'vcpus': 1, 'disk': 1}})[
                'flavor']['id']
        cls.failing_service = call(
            'GET', '/os-services?binary=nova-compute&host=%s' % FAILING)[
                'services'][0]['id']
        cls._set_failing_compute('disabled')

    @classmethod
    def _call(cls, method, path, body=None):
        status, answer = cls.cloud.request(method, path, body)
        if status >= 300:
            raise AssertionError('%s %s: %d %s' % (method, path, status,
                                                   answer))
        return answer

    @classmethod
    def _set_failing_compute(cls, status):
        cls._call('PUT', '/os-services/%s' % cls.failing_service,
                  {'status': status})

    def setUp(self):
        super().setUp()
        self.addOnException(lambda exc_info: self.addDetail(
            'service logs', testtools.content.text_content(
                self.cloud.logs())))
        self.gate = gate_filter.gate_path(self.cloud.dir)
        self.addCleanup(self.open_gate)
        self.reschedule_gate = reschedule_gate.gate_path(self.cloud.dir)
        self.addCleanup(self.open_gate, self.reschedule_gate)

    def call(self, method, path, body=None):
        return self._call(method, path, body)

    def use_schedulers(self, conf=''):
        """The two schedulers running with ``conf`` added to CONF."""
        if BROKEN == 'unlocked':
            conf += '\n[nova_ext]\nspread_serialize_groups = False\n'
        if BROKEN == 'schedule':
            conf += ('\n[nova_ext]\nspread_coordination_unavailable = '
                     'schedule\n')
        alive = len(self.cloud.scheduler_pids()) == self.cloud.schedulers
        if conf != type(self).scheduler_conf or not alive:
            self.cloud.restart_schedulers(conf)
            type(self).scheduler_conf = conf
        else:
            self.cloud.wait_for_schedulers()

    # the gates: one request of the burst held in its decision, inside the
    # group's lock (self.gate), or one reschedule held in the conductor
    # (self.reschedule_gate)

    def close_gate(self, gate=None):
        gate = gate or self.gate
        for path in (gate + '.holder', gate + '.taken'):
            if os.path.exists(path):
                os.remove(path)
        open(gate, 'w').close()

    def held(self, gate=None, timeout=180):
        """(process id, instance uuid) of the request the gate holds."""
        gate = gate or self.gate
        deadline = time.monotonic() + timeout
        while not os.path.exists(gate + '.holder'):
            if time.monotonic() > deadline:
                self.fail('nothing reached %s within %ds' % (gate, timeout))
            time.sleep(0.5)
        with open(gate + '.holder') as f:
            pid, uuid = f.read().split()
        return int(pid), uuid

    def open_gate(self, gate=None):
        gate = gate or self.gate
        for path in (gate, gate + '.taken'):
            if os.path.exists(path):
                os.remove(path)

    # the burst

    def group(self, name):
        return self.call('POST', '/os-server-groups', {'server_group': {
            'name': name, 'policy': 'soft-anti-affinity'}})[
                'server_group']['id']

    def start_burst(self, name, group, count=BURST):
        """``count`` parallel creates of members of ``group``, named
        ``<name>-<i>``; a future of their (status, body) answers.
        """
        hints = {'group': group, 'nova_ext:spread_level': 'rack',
                 'nova_ext:spread_max_per_domain': str(MAXIMUM)}

        def create(i):
            return self.cloud.request('POST', '/servers', {
                'server': {'name': '%s-%d' % (name, i),
                           'flavorRef': self.flavor,
                           'imageRef': cloud.IMAGE, 'networks': 'none'},
                'os:scheduler_hints': hints})

        pool = concurrent.futures.ThreadPoolExecutor(count)
        self.addCleanup(pool.shutdown)
        return pool.submit(lambda: list(pool.map(create, range(count))))

    def burst(self, name, count=BURST):
        """A burst of a new group's members, settled; its servers."""
        answers = self.start_burst(name, self.group(name), count).result()
        self.assertEqual({202}, {status for status, _ in answers}, answers)
        return self.settle(name, count)

    def servers(self, prefix):
        return [s for s in self.call('GET', '/servers/detail?all_tenants=1')[
            'servers'] if s['name'].startswith(prefix + '-')]

    def settle(self, prefix, count=BURST, timeout=300):
        deadline = time.monotonic() + timeout
        while True:
            servers = self.servers(prefix)
            if len(servers) >= count and all(
                    s['status'] in ('ACTIVE', 'ERROR') for s in servers):
                return servers
            if time.monotonic() > deadline:
                self.fail('servers still building after %ds: %s' % (
                    timeout, sorted(s['status'] for s in servers)))
            time.sleep(2)

    def wait_active(self, prefix, count, timeout=240):
        deadline = time.monotonic() + timeout
        while True:
            active = [s for s in self.servers(prefix)
                      if s['status'] == 'ACTIVE']
            if len(active) >= count:
                return active
            if time.monotonic() > deadline:
                self.fail('%d of %d servers ACTIVE after %ds' % (
                    len(active), count, timeout))
            time.sleep(1)

    def check(self, servers, *reasons):
        """No rack over the maximum, nothing in BUILD, every ERROR server
        with a fault naming one of ``reasons``; the per-rack count.
        """
        per_rack = {rack: 0 for rack in RACKS}
        for server in servers:
            self.assertIn(server['status'], ('ACTIVE', 'ERROR'))
            if server['status'] == 'ACTIVE':
                per_rack[self.rack_of(server['OS-EXT-SRV-ATTR:host'])] += 1
        summary = '%s: %s' % (per_rack, sorted(
            (s['name'], s['status'], s.get('OS-EXT-SRV-ATTR:host'),
             s.get('fault', {}).get('message')) for s in servers))
        self.addDetail('outcome %s' % servers[0]['name'].split('-')[0],
                       testtools.content.text_content(summary))
        self.assertLessEqual(max(per_rack.values()), MAXIMUM, summary)
        for server in servers:
            if server['status'] == 'ERROR':
                message = server.get('fault', {}).get('message', '')
                self.assertTrue(any(r in message for r in reasons),
                                '%s: %r names none of %s' % (
                                    server['name'], message, reasons))
        return per_rack

    @staticmethod
    def rack_of(host):
        return [rack for rack, hosts in RACKS.items() if host in hosts][0]

    def by_uuid(self, servers, uuid):
        return [s for s in servers if s['id'] == uuid][0]

    # the MariaDB locks

    def lock_name(self, group):
        return coordination.LOCK_PREFIX + group

    def lock_holder(self, group):
        """The id of the MariaDB connection holding the group's lock."""
        with processes.Databases.connect() as connection:
            cursor = connection.cursor()
            cursor.execute('SELECT IS_USED_LOCK(%s)', (self.lock_name(group),))
            return cursor.fetchone()[0]

    def wait_for_lock_waiter(self, group, timeout=120):
        """Until a connection other than the holder's waits in GET_LOCK for
        the group's lock: a request of the other scheduler queues behind
        the holder.
        """
        deadline = time.monotonic() + timeout
        while True:
            with processes.Databases.connect() as connection:
                cursor = connection.cursor()
                cursor.execute(
                    "SELECT ID FROM information_schema.PROCESSLIST WHERE "
                    "INFO LIKE %s AND INFO LIKE 'SELECT GET_LOCK%%'",
                    ('%' + self.lock_name(group) + '%',))
                waiting = [row[0] for row in cursor.fetchall()]
            if waiting:
                return waiting
            if time.monotonic() > deadline:
                self.fail('no request waited for the spread lock of group %s '
                          'within %ds: the lock does not serialise the group'
                          % (group, timeout))
            time.sleep(0.5)

    # the cases

    def test_scheduler_killed_while_holding_the_lock(self):
        """Given two schedulers and a burst of one group, one request held
        in its decision inside the group's lock (MariaDB GET_LOCK), and a
        request of the other scheduler waiting for that lock; when the
        holder's nova-scheduler process is killed with SIGKILL, then
        MariaDB frees the lock with the dead connection and the other
        scheduler places one member per rack; the requests the dead
        scheduler had taken (the held one's turn, and those waiting for the
        next) end ERROR with Nova's RPC timeout ("MessagingTimeout"), the
        rest ERROR over the rack limit, none in BUILD.

        The operator sees: ERROR servers with a MessagingTimeout fault
        after ``rpc_response_timeout``; nothing stays locked.
        """
        self.use_schedulers()
        self.close_gate()
        group = self.group('kill')
        answers = self.start_burst('kill', group)
        pid, held = self.held()
        self.assertIn(pid, self.cloud.scheduler_pids())
        self.wait_for_lock_waiter(group)
        os.kill(pid, signal.SIGKILL)
        self.assertEqual({202}, {s for s, _ in answers.result()})
        servers = self.settle('kill')
        per_rack = self.check(servers, OVER_LIMIT, RPC_TIMEOUT, LOCK_WAIT)
        # the survivor went on once the holder died
        self.assertEqual({rack: MAXIMUM for rack in RACKS}, per_rack)
        held = self.by_uuid(servers, held)
        self.assertEqual('ERROR', held['status'])
        self.assertIn(RPC_TIMEOUT, held['fault']['message'])

    def test_coordination_backend_dies_and_returns(self):
        """Given the schedulers locking in a private redis
        (``coordination_backend_url``, ``spread_coordination_unavailable =
        refuse``, ``spread_coordination_retry_seconds = 2``) and a burst of
        one group with one request held in its decision inside the lock;
        when redis is killed, then the held request and the others of its
        turn, whose lock release redis cannot confirm, keep their hosts
        only because the group, counted again, shows the rack limit held
        (or are refused over the limit), and every other request of the
        burst ends ERROR with "coordination backend redis://... is
        unreachable"; when redis is back, then after the retry period a new
        burst spreads one per rack, without restarting Nova.

        The operator sees: ERROR servers whose fault names the unreachable
        backend; scheduler warnings "refusing spread request: coordination
        backend ... is unreachable"; no spread broken.
        """
        port = processes.free_port()
        url = 'redis://127.0.0.1:%d' % port
        redis = self.redis(port)
        self.use_schedulers('\n'.join([
            '[nova_ext]',
            # tooz's redis driver retries a refused connection for about
            # 55 s before it raises; meanwhile the burst's other requests
            # queue on the group's in-process lock behind the one waiting
            # for redis. Above 55 s each of them reaches the backend and is
            # refused as unreachable; at the default 30 s they would fail
            # "timed out waiting for the spread lock" (true, and no less
            # safe, but not the fault this case shows)
            'spread_lock_timeout = 90',
            'coordination_backend_url = %s' % url,
            'spread_coordination_unavailable = refuse',
            'spread_coordination_retry_seconds = 2', '']))
        self.close_gate()
        answers = self.start_burst('redis', self.group('redis'))
        self.held()
        os.kill(redis.process.pid, signal.SIGKILL)
        redis.process.wait()
        self.open_gate()
        self.assertEqual({202}, {s for s, _ in answers.result()})
        servers = self.settle('redis')
        self.check(servers, UNREACHABLE % url, OVER_LIMIT)
        self.assertIn(UNREACHABLE % url, ' '.join(
            s.get('fault', {}).get('message', '') for s in servers))
        self.assertIn('ERROR', [s['status'] for s in servers])

        self.redis(port)
        # past spread_coordination_retry_seconds: the next request tries
        # the backend again
        time.sleep(4)
        per_rack = self.check(self.burst('back'), OVER_LIMIT)
        self.assertEqual({rack: MAXIMUM for rack in RACKS}, per_rack)

    def redis(self, port):
        return self.useFixture(processes.Process(
            ['/usr/bin/redis-server', '--port', str(port), '--bind',
             '127.0.0.1', '--save', '', '--appendonly', 'no'],
            os.path.join(self.cloud.dir, 'redis-%d.log' % port)))

    def test_lock_connection_killed_while_held(self):
        """Given the default backend (MariaDB GET_LOCK on the API database's
        server), a burst of one group and one request held in its decision
        inside the group's lock; when MariaDB kills the holder's connection
        (``KILL CONNECTION``), then the other scheduler takes the lock and
        places one member per rack while the holder still runs; the held
        request then claims the host it decided on, the turn's release is
        not confirmed, each request of the turn counts the group again,
        finds its rack full, gives its claim back and ends ERROR with "the
        spread lock of server group ... was lost while this request was
        scheduled"; no rack over its limit, none in BUILD, and the next
        burst spreads as before.

        The operator sees: that fault on the server, the scheduler warning
        "releasing spread lock ... failed" then "refusing spread request".
        """
        self.use_schedulers()
        self.close_gate()
        group = self.group('lost')
        answers = self.start_burst('lost', group)
        _pid, held = self.held()
        self.wait_for_lock_waiter(group)
        holder = self.lock_holder(group)
        self.assertIsNotNone(holder)
        with processes.Databases.connect() as connection:
            connection.cursor().execute('KILL CONNECTION %d' % holder)
        # the other scheduler fills every rack while the holder still runs
        self.wait_active('lost', len(RACKS))
        self.open_gate()
        self.assertEqual({202}, {s for s, _ in answers.result()})
        servers = self.settle('lost')
        per_rack = self.check(servers, OVER_LIMIT, LOST, LOCK_WAIT)
        self.assertEqual({rack: MAXIMUM for rack in RACKS}, per_rack)
        held = self.by_uuid(servers, held)
        self.assertEqual('ERROR', held['status'])
        self.assertIn(LOST, held['fault']['message'])

        per_rack = self.check(self.burst('after', 4), OVER_LIMIT)
        self.assertEqual({rack: MAXIMUM for rack in RACKS}, per_rack)

    def test_reschedule_after_failed_spawn_keeps_the_spread(self):
        """Given cmp1 (rack r1, the host Nova's RAMWeigher prefers) failing
        every spawn; when a burst of one group is created, then the member
        sent to cmp1 is rescheduled by Nova to an alternate that nova-ext
        kept in rack r1 (cmp2), one member per rack is ACTIVE, none on
        cmp1, every other ERROR over the rack limit.

        The operator sees: the build failure in cmp1's log and instance
        actions; the spread as if the first host had not failed.
        """
        self.use_schedulers()
        self._set_failing_compute('enabled')
        self.addCleanup(self._set_failing_compute, 'disabled')
        servers = self.burst('resched', 6)
        per_rack = self.check(servers, OVER_LIMIT)
        self.assertEqual({rack: MAXIMUM for rack in RACKS}, per_rack)
        self.assertNotIn(FAILING, [s.get('OS-EXT-SRV-ATTR:host')
                                   for s in servers])
        with open(os.path.join(self.cloud.dir, FAILING + '.log')) as f:
            self.assertIn(failing_driver.MESSAGE % FAILING, f.read())

    def test_member_being_rescheduled_keeps_its_rack(self):
        """Given cmp1 (rack r1, preferred by Nova's RAMWeigher) failing
        every spawn and a member sent there, whose failed build cmp1 has
        given back (no host, no allocation in placement) while the
        conductor is held before it claims the alternate nova-ext kept in
        r1 (cmp2); when another member of the group is created meanwhile,
        then it is counted against r1 all the same (where the failed
        member last tried to build, from its instance actions) and goes to
        r2; once the conductor goes on, the first member is ACTIVE on
        cmp2: one member per rack.

        The schedulers are restarted while the reschedule is held, so that
        no scheduler process remembers where it claimed the first member:
        the count must find it in Nova's records. Without that count the
        second member took cmp2 (the host RAMWeigher prefers once cmp1 is
        disabled) and the reschedule then put a second member in r1.
        """
        self.use_schedulers()
        self._set_failing_compute('enabled')
        self.addCleanup(self._set_failing_compute, 'disabled')
        self.close_gate(self.reschedule_gate)
        group = self.group('window')
        hints = {'group': group, 'nova_ext:spread_level': 'rack',
                 'nova_ext:spread_max_per_domain': str(MAXIMUM)}

        def create(name):
            status, answer = self.cloud.request('POST', '/servers', {
                'server': {'name': name, 'flavorRef': self.flavor,
                           'imageRef': cloud.IMAGE, 'networks': 'none'},
                'os:scheduler_hints': hints})
            self.assertEqual(202, status, answer)
            return answer['server']['id']

        first = create('window-0')
        self.assertEqual(first, self.held(self.reschedule_gate)[1])
        # the window: cmp1 gave the member's host and claim back
        held = self.call('GET', '/servers/%s' % first)['server']
        self.assertEqual(('BUILD', None),
                         (held['status'], held['OS-EXT-SRV-ATTR:host']))
        self._set_failing_compute('disabled')
        self.cloud.restart_schedulers(type(self).scheduler_conf)
        second = create('window-1')
        servers = self.wait_active('window', 1)
        self.assertEqual([second], [s['id'] for s in servers])
        self.assertEqual('r2', self.rack_of(
            servers[0]['OS-EXT-SRV-ATTR:host']))
        self.open_gate(self.reschedule_gate)
        servers = self.settle('window', 2)
        per_rack = self.check(servers, OVER_LIMIT)
        self.assertEqual({rack: MAXIMUM for rack in RACKS}, per_rack)
        self.assertEqual('cmp2', self.by_uuid(servers, first)[
            'OS-EXT-SRV-ATTR:host'])
