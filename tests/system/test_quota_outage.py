# SPDX-License-Identifier: Apache-2.0
"""Per-flavor quota while its database is gone, with real Nova processes.

Given nova-ext's tables in a database of their own (``[nova_ext_database]
connection``, as doc/source/quota.rst shows it) reached through a MariaDB
user of their own, and a project with room for K instances of the gpu
class, when that user is locked and its connections cut in the middle of a
burst of creates from parallel clients, then unlocked while the burst goes
on: every create sent while it is locked is refused with HTTP 403 and the
"could not be checked" reason (fails closed), creates pass again once it is
unlocked without any service restarted, and the project never ends over K.
"""

import concurrent.futures
import re
import threading
import time
import uuid

import pymysql
import testtools

from tests.system import cloud
from tests.system import processes

# room for what the burst creates before the outage (at most 8: the first
# create, four answers, three more in flight) and some after it
K = 10
PROJECT = 'demo'
USER_TOKEN = 'demo:%s' % PROJECT
UNAVAILABLE = 'Quota could not be checked, so the request is refused'
OVER = 'Quota exceeded for instances of flavor class gpu'


class QuotaUser:
    """A database and a MariaDB user of its own for nova-ext's tables,
    which the test can lock (cutting the user's connections) and unlock.
    """

    def __init__(self):
        name = 'nxtq_%s' % uuid.uuid4().hex[:12]
        self.database = self.user = name
        self.password = uuid.uuid4().hex

    def url(self):
        host, port = processes.MARIADB
        return 'mysql+pymysql://%s:%s@%s:%d/%s' % (
            self.user, self.password, host, port, self.database)

    def create(self):
        with processes.Databases.connect() as connection:
            cursor = connection.cursor()
            cursor.execute('CREATE DATABASE %s' % self.database)
            cursor.execute("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'"
                           % (self.user, self.password))
            cursor.execute("GRANT ALL ON %s.* TO '%s'@'%%'"
                           % (self.database, self.user))

    def drop(self):
        with processes.Databases.connect() as connection:
            cursor = connection.cursor()
            cursor.execute("DROP USER IF EXISTS '%s'@'%%'" % self.user)
            cursor.execute('DROP DATABASE IF EXISTS %s' % self.database)

    def lock(self):
        """New connections refused, the open ones cut: from the services'
        side, the quota database is gone.
        """
        with processes.Databases.connect() as connection:
            cursor = connection.cursor()
            cursor.execute("ALTER USER '%s'@'%%' ACCOUNT LOCK" % self.user)
            cursor.execute('SELECT id FROM information_schema.processlist '
                           'WHERE user = %s', (self.user,))
            for (thread_id,) in cursor.fetchall():
                try:
                    cursor.execute('KILL CONNECTION %d' % thread_id)
                except pymysql.MySQLError:
                    pass  # ended on its own meanwhile

    def unlock(self):
        with processes.Databases.connect() as connection:
            connection.cursor().execute(
                "ALTER USER '%s'@'%%' ACCOUNT UNLOCK" % self.user)


class QuotaOutageTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        processes.require_services()
        self.quota = QuotaUser()
        self.quota.create()
        self.addCleanup(self.quota.drop)
        self.cloud = self.useFixture(cloud.LoopbackNova('\n'.join([
            '[quota]', 'instances = -1', 'cores = -1', 'ram = -1',
            '[nova_ext]', 'quota_driver = per_flavor', 'quota_classes = gpu',
            '[nova_ext_database]', 'connection = %s' % self.quota.url(),
            # a request finds the user locked at once, not after oslo.db's
            # default ten retries of ten seconds
            'max_retries = 1', 'retry_interval = 1',
        ])))
        self.addOnException(lambda exc_info: self.addDetail(
            'service logs', testtools.content.text_content(
                self.cloud.logs())))

    def test_creates_fail_closed_while_the_quota_database_is_gone(self):
        flavor = self.gpu_flavor()
        self.manage('quota', 'set', '--project', PROJECT, '--class', 'gpu',
                    '--instances', str(K))
        services = self.running_services()
        # one create before: the path works
        status, body = self.create(flavor, 0)
        self.assertEqual(202, status, body)

        answers = []  # (sent, answered, status, body)
        stop = threading.Event()
        counter = iter(range(1, 10000))
        lock = threading.Lock()

        def client():
            while not stop.is_set():
                with lock:
                    number = next(counter)
                sent = time.monotonic()
                status, body = self.create(flavor, number)
                with lock:
                    answers.append((sent, time.monotonic(), status, body))
                time.sleep(0.2)

        def answered_after(moment):
            with lock:
                return len([a for a in answers if a[0] > moment])

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            clients = [pool.submit(client) for _ in range(4)]
            self.wait_for(lambda: answered_after(0) >= 4)
            self.quota.lock()
            locked = time.monotonic()
            self.wait_for(lambda: answered_after(locked) >= 8)
            unlocking = time.monotonic()
            self.quota.unlock()
            unlocked = time.monotonic()
            self.wait_for(lambda: answered_after(unlocked) >= 12)
            stop.set()
            for future in clients:
                future.result()

        during = [(status, body) for sent, answered, status, body in answers
                  if locked < sent and answered < unlocking]
        after = [(status, body) for sent, _answered, status, body in answers
                 if sent > unlocked]
        self.assertGreaterEqual(len(during), 8)
        for status, body in during:
            self.assertEqual(403, status, body)
            self.assertIn(UNAVAILABLE, str(body))
        # back: accepted, or refused over the limit, never unavailable
        self.assertEqual(set(), {status for status, _ in after} - {202, 403},
                         after)
        self.assertIn(202, [status for status, _ in after], after)
        for status, body in after:
            self.assertNotIn(UNAVAILABLE, str(body))
            if status == 403:
                self.assertIn(OVER, str(body))
        for sent, _answered, status, body in answers:
            if status == 403:
                self.assertTrue(OVER in str(body) or UNAVAILABLE in str(body),
                                body)

        servers = self.cloud.settle(USER_TOKEN)
        states = [s['status'] for s in servers]
        active = states.count('ACTIVE')
        self.assertLessEqual(active, K, states)
        for server in servers:
            if server['status'] == 'ERROR':
                message = server['fault']['message']
                self.assertTrue(OVER in message or UNAVAILABLE in message,
                                message)
        usage = self.manage('quota', 'usage', '--project', PROJECT,
                            '--class', 'gpu')
        used = int(re.search(r'instances\s*\|\s*(\d+)\s*\|', usage).group(1))
        self.assertEqual(active, used, usage)
        self.assertLessEqual(used, K, usage)
        # nothing was restarted to get there
        self.assertEqual(services, self.running_services())
        codes = [status for _, _, status, _ in answers]
        self.addDetail('outcome', testtools.content.text_content(
            '%d creates: %d while locked (all 403), %d after (%d accepted); '
            '%d servers: %d ACTIVE (limit %d)' % (
                len(codes), len(during), len(after),
                [s for s, _ in after].count(202), len(servers), active, K)))

    # -- helpers --------------------------------------------------------------

    def gpu_flavor(self):
        status, body = self.cloud.request('POST', '/flavors', {'flavor': {
            'name': 'gpu.tiny', 'ram': 128, 'vcpus': 1, 'disk': 1}})
        self.assertEqual(200, status, body)
        flavor = body['flavor']['id']
        status, body = self.cloud.request(
            'POST', '/flavors/%s/os-extra_specs' % flavor,
            {'extra_specs': {'nova_ext:quota_class': 'gpu'}})
        self.assertEqual(200, status, body)
        return flavor

    def create(self, flavor, number):
        return self.cloud.request('POST', '/servers', {'server': {
            'name': 'outage-%d' % number, 'flavorRef': flavor,
            'imageRef': cloud.IMAGE, 'networks': 'none'}}, token=USER_TOKEN)

    def manage(self, *args):
        return processes.run('nova-ext-manage', '--config-file',
                             self.cloud.conf, *args)

    def running_services(self):
        found = [self.cloud.api, self.cloud.conductor, self.cloud.placement]
        found += self.cloud.scheduler_processes
        self.assertEqual([], [p for p in found
                              if p.process.poll() is not None])
        return sorted(p.process.pid for p in found)

    def wait_for(self, condition, timeout=300):
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                self.fail('not within %ds' % timeout)
            time.sleep(0.2)
