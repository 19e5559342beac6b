# SPDX-License-Identifier: Apache-2.0
"""The spread lock's backend: which one it uses, how it behaves when the
backend fails or stalls, and that its lock objects are reused and bounded
(the lock itself on MariaDB and Redis: tests/system).
"""

import os
import threading
import time

import fixtures
from oslo_config import fixture as config_fixture
import tenacity
import testtools

from nova_ext.scheduler import coordination

LOCKS = '/var/lib/nova/locks'


class BackendUrlTest(testtools.TestCase):

    def test_mysql_and_mariadb_give_advisory_locks_on_that_server(self):
        for url in ('mysql+pymysql://nova:pw@db:3307/nova_api?charset=utf8',
                    'mariadb+pymysql://nova:pw@db:3307/nova_api'):
            self.assertEqual(
                'mysql://nova:pw@db:3307/nova_api',
                coordination.derived_backend_url(url, LOCKS))

    def test_postgresql_gives_its_advisory_locks(self):
        self.assertEqual(
            'postgresql://nova:pw@pg/nova_api',
            coordination.derived_backend_url(
                'postgresql+psycopg2://nova:pw@pg/nova_api', LOCKS))

    def test_anything_else_gives_a_lock_directory(self):
        for url in ('sqlite:////var/lib/nova/api.sqlite', 'sqlite://', '',
                    None):
            self.assertEqual(
                'file://' + LOCKS,
                coordination.derived_backend_url(url, LOCKS))

    def test_password_is_hidden_in_messages(self):
        self.assertEqual('mysql://nova:***@db/nova_api',
                         coordination.redacted(
                             'mysql://nova:secret@db/nova_api'))
        self.assertEqual('redis://127.0.0.1:6379',
                         coordination.redacted('redis://127.0.0.1:6379'))

    def test_explicit_url_wins(self):
        conf = self.useFixture(config_fixture.Config())
        coordination.CONF.import_group('api_database', 'nova.conf')
        conf.config(group='api_database',
                    connection='mysql+pymysql://nova@db/nova_api')
        self.assertEqual('mysql://nova@db/nova_api',
                         coordination.backend_url())
        conf.config(group='nova_ext',
                    coordination_backend_url='redis://r:6379')
        self.assertEqual('redis://r:6379', coordination.backend_url())


class CoordinationTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config())
        self.coordination = coordination.Coordination()

    def test_file_lock_excludes_a_second_holder_and_frees_on_release(self):
        lock_dir = self.useFixture(fixtures.TempDir()).path
        self.conf.config(group='nova_ext',
                         coordination_backend_url='file://' + lock_dir)
        lock = self.coordination.acquire('g1', 1)
        self.assertIsNotNone(lock)
        other = coordination.Coordination()
        self.assertIsNone(other.acquire('g1', 1))
        # another group never waits
        self.assertIsNotNone(other.acquire('g2', 1))
        self.coordination.release(lock)
        self.assertIsNotNone(other.acquire('g1', 1))
        self.assertTrue(os.listdir(lock_dir))

    def test_unreachable_backend_is_not_retried_within_the_window(self):
        self.conf.config(group='nova_ext',
                         coordination_backend_url='redis://127.0.0.1:1',
                         spread_coordination_retry_seconds=60)
        first = self.assertRaises(coordination.CoordinationUnavailable,
                                  self.coordination.acquire, 'g', 1)
        self.assertIn('redis://127.0.0.1:1 is unreachable', str(first))
        # the second request fails at once with the same reason, without
        # a connection attempt: the URL now points somewhere else entirely
        self.conf.config(group='nova_ext',
                         coordination_backend_url='file:///nonexistent')
        second = self.assertRaises(coordination.CoordinationUnavailable,
                                   self.coordination.acquire, 'g', 1)
        self.assertEqual(str(first), str(second))


class StalledLock(object):
    """A tooz lock whose backend answers only when the test says so, as a
    driver blocked on a hung TCP connection would.
    """

    name = b'nova-ext-spread-g'

    def __init__(self, grants=True):
        self.grants = grants
        self.answer = threading.Event()
        self.asked = []
        self.released = threading.Event()

    def acquire(self, blocking=True):
        self.asked.append(blocking)
        self.answer.wait(10)
        if isinstance(self.grants, Exception):
            raise self.grants
        return self.grants

    def release(self):
        self.released.set()
        return True


class FakeBackend(coordination.Coordination):
    """A started coordinator whose every lock is ``lock``."""

    def __init__(self, lock):
        super().__init__()
        self.lock = lock

    def _started(self):
        return self

    def get_lock(self, name):
        return self.lock


class NewLockPerName(coordination.Coordination):
    """A started coordinator making a fresh StalledLock per get_lock,
    granted at once when ``prompt``.
    """

    def __init__(self):
        super().__init__()
        self.made = []
        self.prompt = False

    def _started(self):
        return self

    def get_lock(self, name):
        lock = StalledLock()
        if self.prompt:
            lock.answer.set()
        self.made.append(lock)
        return lock


class BackendLockReuseTest(testtools.TestCase):
    """tooz's mysql driver pays for a new client per lock object (PyMySQL
    builds a TLS context: ~40 ms): a group's object is reused.
    """

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config())

    def test_a_groups_lock_object_serves_its_next_requests(self):
        lock_dir = self.useFixture(fixtures.TempDir()).path
        self.conf.config(group='nova_ext',
                         coordination_backend_url='file://' + lock_dir)
        backend = coordination.Coordination()
        first = backend.acquire('g1', 1)
        backend.release(first)
        second = backend.acquire('g1', 1)
        self.assertIs(first, second)
        other = backend.acquire('g2', 1)
        self.assertIsNot(first, other)
        backend.release(second)
        backend.release(other)

    def test_an_abandoned_acquire_keeps_its_object_to_itself(self):
        backend = NewLockPerName()
        self.assertRaises(coordination.CoordinationUnavailable,
                          backend.acquire, 'g', 0.1)
        backend.prompt = True
        lock = backend.acquire('g', 0.1)
        abandoned, fresh = backend.made
        self.assertIs(fresh, lock)
        abandoned.answer.set()
        self.assertTrue(abandoned.released.wait(10))

    def test_objects_kept_are_bounded(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.coordination.BACKEND_LOCKS_KEPT', 2))
        backend = NewLockPerName()
        backend.prompt = True
        for group in ('g1', 'g2', 'g3'):
            backend.release(backend.acquire(group, 0.1))
        self.assertEqual({'g2', 'g3'}, set(backend._backend_locks))


class BoundedAcquireTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(config_fixture.Config())

    def test_stalled_backend_is_abandoned_and_a_late_grant_released(self):
        lock = StalledLock()
        started = time.monotonic()
        # a backend that does not answer is unavailable (refused or
        # scheduled without the lock as configured), not a busy group
        error = self.assertRaises(coordination.CoordinationUnavailable,
                                  FakeBackend(lock).acquire, 'g', 0.2)
        self.assertIn('no answer', str(error))
        waited = time.monotonic() - started
        bound = 0.2 + coordination.ACQUIRE_MARGIN
        self.assertGreaterEqual(waited, bound - 0.05)
        self.assertLess(waited, bound + 0.5)
        # the driver itself was asked to wait only the remaining time
        self.assertEqual([0.2], lock.asked)
        self.assertFalse(lock.released.is_set())
        # the backend finally grants it: nobody waits for it any more
        lock.answer.set()
        self.assertTrue(lock.released.wait(10))

    def test_late_refusal_or_error_releases_nothing(self):
        for grants in (False, RuntimeError('connection reset')):
            lock = StalledLock(grants)
            self.assertRaises(coordination.CoordinationUnavailable,
                              FakeBackend(lock).acquire, 'g', 0.1)
            lock.answer.set()
            self.assertFalse(lock.released.wait(0.3))

    def test_prompt_grant_is_returned_and_kept(self):
        lock = StalledLock()
        lock.answer.set()
        self.assertIs(lock, FakeBackend(lock).acquire('g', 0.2))
        self.assertFalse(lock.released.wait(0.3))

    def test_held_lock_reported_as_retry_error_is_a_timeout(self):
        # tooz's mysql and postgresql drivers raise RetryError when the
        # lock stays held; the backend works and must not be skipped
        lock = StalledLock(tenacity.RetryError(None))
        lock.answer.set()
        backend = FakeBackend(lock)
        self.assertIsNone(backend.acquire('g', 0.1))
        lock.grants = True
        self.assertIs(lock, backend.acquire('g', 0.1))

    def test_backend_error_makes_the_backend_unavailable(self):
        lock = StalledLock(RuntimeError('connection reset'))
        lock.answer.set()
        error = self.assertRaises(coordination.CoordinationUnavailable,
                                  FakeBackend(lock).acquire, 'g', 0.1)
        self.assertIn('connection reset', str(error))


class LostLock(StalledLock):
    """Granted at once; its release finds the backend connection gone (a
    killed MariaDB connection: the server dropped the lock meanwhile).
    """

    def __init__(self):
        super().__init__()
        self.answer.set()

    def release(self):
        raise RuntimeError('(2013, Lost connection to MySQL server)')
