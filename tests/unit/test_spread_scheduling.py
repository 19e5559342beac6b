# SPDX-License-Identifier: Apache-2.0
"""The spread lock: which backend it uses, how it behaves when the backend
fails or stalls, and that its in-process locks do not pile up (the lock
itself on MariaDB and Redis: tests/system).
"""

import collections
import os
import threading
import time
import types

import fixtures
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids
import tenacity
import testtools

from nova import exception
from nova import objects
from nova import test

from nova_ext.scheduler.filters import failure_domain
from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import spread_scheduling

LOCKS = '/var/lib/nova/locks'


class BackendUrlTest(testtools.TestCase):

    def test_mysql_and_mariadb_give_advisory_locks_on_that_server(self):
        for url in ('mysql+pymysql://nova:pw@db:3307/nova_api?charset=utf8',
                    'mariadb+pymysql://nova:pw@db:3307/nova_api'):
            self.assertEqual(
                'mysql://nova:pw@db:3307/nova_api',
                spread_scheduling.derived_backend_url(url, LOCKS))

    def test_postgresql_gives_its_advisory_locks(self):
        self.assertEqual(
            'postgresql://nova:pw@pg/nova_api',
            spread_scheduling.derived_backend_url(
                'postgresql+psycopg2://nova:pw@pg/nova_api', LOCKS))

    def test_anything_else_gives_a_lock_directory(self):
        for url in ('sqlite:////var/lib/nova/api.sqlite', 'sqlite://', '',
                    None):
            self.assertEqual(
                'file://' + LOCKS,
                spread_scheduling.derived_backend_url(url, LOCKS))

    def test_password_is_hidden_in_messages(self):
        self.assertEqual('mysql://nova:***@db/nova_api',
                         spread_scheduling.redacted(
                             'mysql://nova:secret@db/nova_api'))
        self.assertEqual('redis://127.0.0.1:6379',
                         spread_scheduling.redacted('redis://127.0.0.1:6379'))

    def test_explicit_url_wins(self):
        conf = self.useFixture(config_fixture.Config())
        spread_scheduling.CONF.import_group('api_database', 'nova.conf')
        conf.config(group='api_database',
                    connection='mysql+pymysql://nova@db/nova_api')
        self.assertEqual('mysql://nova@db/nova_api',
                         spread_scheduling.backend_url())
        conf.config(group='nova_ext',
                    coordination_backend_url='redis://r:6379')
        self.assertEqual('redis://r:6379', spread_scheduling.backend_url())


class CoordinationTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config())
        self.coordination = spread_scheduling.Coordination()

    def test_file_lock_excludes_a_second_holder_and_frees_on_release(self):
        lock_dir = self.useFixture(fixtures.TempDir()).path
        self.conf.config(group='nova_ext',
                         coordination_backend_url='file://' + lock_dir)
        lock = self.coordination.acquire('g1', 1)
        self.assertIsNotNone(lock)
        other = spread_scheduling.Coordination()
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
        first = self.assertRaises(spread_scheduling.CoordinationUnavailable,
                                  self.coordination.acquire, 'g', 1)
        self.assertIn('redis://127.0.0.1:1 is unreachable', str(first))
        # the second request fails at once with the same reason, without
        # a connection attempt: the URL now points somewhere else entirely
        self.conf.config(group='nova_ext',
                         coordination_backend_url='file:///nonexistent')
        second = self.assertRaises(spread_scheduling.CoordinationUnavailable,
                                   self.coordination.acquire, 'g', 1)
        self.assertEqual(str(first), str(second))


class LocalLocksTest(testtools.TestCase):
    """Real threads on one LocalLocks; the entry of a group must be gone
    once nobody holds or waits on it.
    """

    def setUp(self):
        super().setUp()
        self.locks = spread_scheduling.LocalLocks()

    def _in_thread(self, function, *args):
        thread = threading.Thread(target=function, args=args, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        return thread

    def test_excludes_within_a_group_not_across_groups(self):
        self.assertTrue(self.locks.acquire('a', 1))
        results = {}
        self._in_thread(lambda: results.update(
            a=self.locks.acquire('a', 0.1),
            b=self.locks.acquire('b', 0.1))).join(10)
        self.assertEqual({'a': False, 'b': True}, results)
        self.locks.release('b')
        self.locks.release('a')
        self.assertEqual(0, len(self.locks))

    def test_concurrent_holders_and_a_timed_out_waiter_leave_nothing(self):
        holding = threading.Event()
        let_go = threading.Event()
        acquired, inside, most_inside = [], [0], [0]
        counter_guard = threading.Lock()

        def holder():
            acquired.append(self.locks.acquire('g', 10))
            holding.set()
            let_go.wait(10)
            self.locks.release('g')

        def member():
            got = self.locks.acquire('g', 10)
            acquired.append(got)
            if not got:
                return
            with counter_guard:
                inside[0] += 1
                most_inside[0] = max(most_inside[0], inside[0])
            time.sleep(0.005)
            with counter_guard:
                inside[0] -= 1
            self.locks.release('g')

        threads = [self._in_thread(holder)]
        self.assertTrue(holding.wait(10))
        threads += [self._in_thread(member) for _ in range(4)]
        # a waiter that gives up while the group is held and others wait
        gave_up = []
        self._in_thread(lambda: gave_up.append(
            self.locks.acquire('g', 0.05))).join(10)
        self.assertEqual([False], gave_up)
        self.assertEqual(1, len(self.locks))
        let_go.set()
        # and members arriving while earlier ones hold the lock
        threads += [self._in_thread(member) for _ in range(4)]
        for thread in threads:
            thread.join(10)
            self.assertFalse(thread.is_alive())
        self.assertEqual([True] * 9, acquired)
        self.assertEqual(1, most_inside[0])
        self.assertEqual(0, len(self.locks))

    def test_many_groups_over_time_leave_nothing(self):
        acquired = []

        def groups(offset):
            for i in range(2000):
                uuid = 'group-%d-%d' % (offset, i)
                acquired.append(self.locks.acquire(uuid, 1))
                self.locks.release(uuid)

        for thread in [self._in_thread(groups, n) for n in range(4)]:
            thread.join(30)
        self.assertEqual([True] * 8000, acquired)
        self.assertEqual(0, len(self.locks))


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


class FakeBackend(spread_scheduling.Coordination):
    """A started coordinator whose every lock is ``lock``."""

    def __init__(self, lock):
        super().__init__()
        self.lock = lock

    def _started(self):
        return self

    def get_lock(self, name):
        return self.lock


class NewLockPerName(spread_scheduling.Coordination):
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
        coordination = spread_scheduling.Coordination()
        first = coordination.acquire('g1', 1)
        coordination.release(first)
        second = coordination.acquire('g1', 1)
        self.assertIs(first, second)
        other = coordination.acquire('g2', 1)
        self.assertIsNot(first, other)
        coordination.release(second)
        coordination.release(other)

    def test_an_abandoned_acquire_keeps_its_object_to_itself(self):
        coordination = NewLockPerName()
        self.assertRaises(spread_scheduling.CoordinationUnavailable,
                          coordination.acquire, 'g', 0.1)
        coordination.prompt = True
        lock = coordination.acquire('g', 0.1)
        abandoned, fresh = coordination.made
        self.assertIs(fresh, lock)
        abandoned.answer.set()
        self.assertTrue(abandoned.released.wait(10))

    def test_objects_kept_are_bounded(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.spread_scheduling.BACKEND_LOCKS_KEPT', 2))
        coordination = NewLockPerName()
        coordination.prompt = True
        for group in ('g1', 'g2', 'g3'):
            coordination.release(coordination.acquire(group, 0.1))
        self.assertEqual(['g2', 'g3'], list(coordination._backend_locks))


class BoundedAcquireTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(config_fixture.Config())

    def test_stalled_backend_is_abandoned_and_a_late_grant_released(self):
        lock = StalledLock()
        started = time.monotonic()
        # a backend that does not answer is unavailable (refused or
        # scheduled without the lock as configured), not a busy group
        error = self.assertRaises(spread_scheduling.CoordinationUnavailable,
                                  FakeBackend(lock).acquire, 'g', 0.2)
        self.assertIn('no answer', str(error))
        waited = time.monotonic() - started
        bound = 0.2 + spread_scheduling.ACQUIRE_MARGIN
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
            self.assertRaises(spread_scheduling.CoordinationUnavailable,
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
        error = self.assertRaises(spread_scheduling.CoordinationUnavailable,
                                  FakeBackend(lock).acquire, 'g', 0.1)
        self.assertIn('connection reset', str(error))


class StalledBackendRequestTest(test.NoDBTestCase):
    """A whole spread request against a stalled backend."""

    def test_request_fails_as_unreachable_and_leaves_no_local_lock(self):
        self.flags(spread_lock_timeout=2, group='nova_ext')
        lock = StalledLock()
        backend = FakeBackend(lock)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.spread_scheduling._coordination', backend))
        spec = objects.RequestSpec(
            scheduler_hints={'nova_ext:spread_level': ['rack']},
            flavor=objects.Flavor(extra_specs={}),
            instance_group=objects.InstanceGroup(
                uuid=uuids.group, name='web', policy='anti-affinity',
                hosts=[], members=[]),
            instance_uuid=uuids.server)
        scheduled = []
        view = types.SimpleNamespace(enabled_filters=[
            failure_domain.FailureDomainAntiAffinityFilter()], aggs_by_id={})
        with scheduling_request.opened(spec, [uuids.server], view):
            started = time.monotonic()
            error = self.assertRaises(
                exception.NoValidHost,
                spread_scheduling._schedule_under_lock, None, spec,
                [uuids.server], lambda: scheduled.append(1))
        self.assertLess(time.monotonic() - started,
                        2 + spread_scheduling.ACQUIRE_MARGIN)
        # whole seconds (what is left of 2 s): tooz's SQL drivers wait
        # longer than asked for a fraction
        self.assertEqual([1], lock.asked)
        self.assertIn('is unreachable', str(error))
        self.assertIn('server group web', str(error))
        self.assertEqual([], scheduled)
        self.assertEqual(0, len(backend.local_locks))
        lock.answer.set()
        self.assertTrue(lock.released.wait(10))

    def test_no_lock_when_the_spread_filter_is_not_enabled(self):
        # nova-ext's hooks active (a cell mapping's ?plugin=nova_ext) but
        # its filter not in enabled_filters: nothing to serialise for
        lock = StalledLock()
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.spread_scheduling._coordination',
            FakeBackend(lock)))
        spec = objects.RequestSpec(
            scheduler_hints={'nova_ext:spread_level': ['rack']},
            flavor=objects.Flavor(extra_specs={}),
            instance_group=objects.InstanceGroup(
                uuid=uuids.group, name='web', policy='anti-affinity',
                hosts=[], members=[]),
            instance_uuid=uuids.server)
        view = types.SimpleNamespace(enabled_filters=[], aggs_by_id={})
        with scheduling_request.opened(spec, [uuids.server], view):
            self.assertEqual('scheduled', spread_scheduling.
                             _schedule_under_lock(None, spec, [uuids.server],
                                                  lambda: 'scheduled'))
        self.assertEqual([], lock.asked)


class LostLock(StalledLock):
    """Granted at once; its release finds the backend connection gone (a
    killed MariaDB connection: the server dropped the lock meanwhile).
    """

    def __init__(self):
        super().__init__()
        self.answer.set()

    def release(self):
        raise RuntimeError('(2013, Lost connection to MySQL server)')


class MembersCountTest(test.NoDBTestCase):
    """Given a group whose members are built (a host in their cell), in
    flight (claimed in placement, no host yet) or not yet scheduled, when
    later requests count it, then the built ones come from their records,
    each member in flight is read from placement once per process, and a
    member with no claim yet is read again by every request.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'nova.objects.InstanceGroup.get_by_uuid',
            lambda cls, ctxt, uuid: objects.InstanceGroup(
                uuid=uuid, members=[uuids.built, uuids.flying,
                                    uuids.waiting])))
        self.recorded = {uuids.built: 'h1'}
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.spread_scheduling._recorded_hosts',
            lambda ctxt, members: (
                {m: h for m, h in self.recorded.items() if m in members},
                set())))
        self.allocations = {uuids.flying: {uuids.rp2: {}}}
        self.reads = []

        def allocations_of(ctxt, consumer):
            self.reads.append(consumer)
            return {'allocations': self.allocations.get(consumer, {})}

        client = types.SimpleNamespace(get_allocs_for_consumer=allocations_of)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.report_client_singleton',
            lambda: client))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.spread_scheduling._provider_hosts',
            lambda ctxt, client, providers, cache: {
                uuids.rp2: 'h2', uuids.rp3: 'h3'}))
        spread_scheduling.reset()
        self.addCleanup(spread_scheduling.reset)

    def count(self):
        counts, _calls = spread_scheduling.members_per_host(
            None, uuids.group, set())
        return dict(counts)

    def test_members_in_flight_are_read_once_and_built_ones_never(self):
        self.assertEqual({'h1': 1, 'h2': 1}, self.count())
        self.assertEqual({uuids.flying, uuids.waiting}, set(self.reads))
        del self.reads[:]
        # the waiting member is claimed meanwhile (by another scheduler)
        self.allocations[uuids.waiting] = {uuids.rp3: {}}
        self.assertEqual({'h1': 1, 'h2': 1, 'h3': 1}, self.count())
        self.assertEqual([uuids.waiting], self.reads)

    def test_a_recorded_host_wins_over_what_placement_said(self):
        self.count()
        # built on the host of its claim's domain: its record counts
        self.recorded[uuids.flying] = 'h2b'
        self.assertEqual({'h1': 1, 'h2b': 1}, self.count())
        self.assertNotIn(uuids.flying, spread_scheduling._in_flight_hosts)

    def test_what_placement_said_ages_out(self):
        self.count()
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.spread_scheduling.IN_FLIGHT_SECONDS', 0))
        del self.allocations[uuids.flying]  # failed, claims given back
        del self.reads[:]
        self.assertEqual({'h1': 1}, self.count())
        self.assertIn(uuids.flying, self.reads)


class LostLockTest(test.NoDBTestCase):
    """Given the backend lost the group's lock while a request held it,
    when the request ends, then placement is counted again: the request's
    servers are kept only if every hard constraint still holds.
    """

    def setUp(self):
        super().setUp()
        self.backend = FakeBackend(LostLock())
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.spread_scheduling._coordination',
            self.backend))
        self.spec = objects.RequestSpec(
            scheduler_hints={'nova_ext:spread_constraints': ['rack:max=1']},
            flavor=objects.Flavor(extra_specs={}),
            instance_group=objects.InstanceGroup(
                uuid=uuids.group, name='web', policy='anti-affinity',
                hosts=[], members=[uuids.other, uuids.server]),
            instance_uuid=uuids.server)
        self.view = types.SimpleNamespace(
            enabled_filters=[
                failure_domain.FailureDomainAntiAffinityFilter()],
            aggs_by_id={1: objects.Aggregate(
                id=1, hosts=['h1', 'h2'], metadata={
                    'nova_ext:failure_domain:rack': 'r1'})})
        self.deleted = []
        client = types.SimpleNamespace(
            delete_allocation_for_instance=lambda ctxt, uuid, force:
                self.deleted.append(uuid),
            get_allocs_for_consumer=lambda ctxt, uuid: {})
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.report_client_singleton',
            lambda: client))
        self.counts = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.spread_scheduling.members_per_host',
            lambda ctxt, group, not_counted: (self.counts.pop(0), 1)))

    def schedule(self):
        selection = types.SimpleNamespace(service_host='h1')
        with scheduling_request.opened(self.spec, [uuids.server], self.view):
            return spread_scheduling._schedule_under_lock(
                None, self.spec, [uuids.server], lambda: [[selection]])

    def test_another_member_placed_meanwhile_undoes_the_request(self):
        # counted empty inside the lock; after it, another scheduler's
        # member is in r1 too
        self.counts = [collections.Counter(),
                       collections.Counter(h1=1, h2=1)]
        error = self.assertRaises(exception.NoValidHost, self.schedule)
        self.assertIn('spread lock of server group web', str(error))
        self.assertIn('rack:max=1 (rack r1: 2)', str(error))
        self.assertEqual([uuids.server], self.deleted)
        # the lost lock object is not reused: the group gets a fresh one
        self.assertEqual({}, dict(self.backend._backend_locks))

    def test_nothing_placed_meanwhile_keeps_the_request(self):
        self.counts = [collections.Counter(), collections.Counter(h1=1)]
        self.assertEqual([['h1']], [[s.service_host for s in per_server]
                                    for per_server in self.schedule()])
        self.assertEqual([], self.deleted)
        self.assertIn('placement, counted again, shows every constraint held',
                      self.stdlog.logger.output)
