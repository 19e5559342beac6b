# SPDX-License-Identifier: Apache-2.0
"""Failure-domain spread that holds while members are scheduled concurrently.

Driven by ``[nova_ext] coordination_backend_url``, ``spread_lock_timeout``,
``spread_coordination_unavailable``, ``spread_coordination_retry_seconds``
and ``spread_serialize_groups``; installed at nova-scheduler's start by
:func:`nova_ext.scheduler.activate`.

The conductor reads a group's hosts (``instance_group.hosts``) before it asks
the scheduler, so members created at the same moment (parallel API clients,
Nova running ``select_destinations`` concurrently, several schedulers) all
see an empty group and may all land in one rack. Here each request of a
group with a failure-domain spread takes a lock named after the group's uuid
(an in-process lock, then a tooz lock shared by every scheduler), and inside
it the members are counted where placement says they are now: their
allocations, written by the claim of the previous lock holder before it let
go. The moving server itself (cold or live migration, resize, evacuation,
unshelve) is never counted.

Nova has no hook around one scheduling request (filters and weighers see one
host list, request filters run before placement is asked), so this module
wraps ``SchedulerManager.select_destinations``: every request runs inside
its :class:`~nova_ext.scheduler.scheduling_request.SchedulingRequest`, and
only those asking for a spread take a lock.
"""

import collections
from concurrent import futures
import functools
import os
import tempfile
import threading
import time
import urllib.parse

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging as messaging
import tenacity
from tooz import coordination

from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils

from nova_ext import cache
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import scheduling_request
from nova_ext import upstream

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

LOCK_PREFIX = 'nova-ext-spread-'

# {resource provider uuid: host}; a compute node's provider keeps its name
_provider_names = {}

# {member uuid: (host, monotonic time read)}: where placement said a member
# in flight (claimed, no host recorded in its cell yet) is, kept by this
# process for IN_FLIGHT_SECONDS. Such a member stays in the failure domains
# it was claimed in until it records a host (a reschedule keeps them), so a
# burst's requests read each member from placement once per process instead
# of once per later request. A member whose build failed with no
# reschedule keeps being counted until its entry ages out: counted too
# often, never too little.
_in_flight_hosts = {}
IN_FLIGHT_SECONDS = 120
IN_FLIGHT_KEPT = 10000


class CoordinationUnavailable(Exception):
    """The coordination backend cannot be reached."""


class LocalLocks(object):
    """One in-process lock per server group, kept only while a thread holds
    it or waits for it: a scheduler sees every spread group created in its
    lifetime, and remembering one lock for each would grow without bound.
    Waits are bounded by the caller (``[nova_ext] spread_lock_timeout``).
    """

    def __init__(self):
        self._guard = threading.Lock()
        # {group uuid: [lock, threads holding or waiting for it]}
        self._entries = {}

    def acquire(self, group_uuid, timeout):
        """True once this thread holds the group's lock; False after
        ``timeout`` seconds.
        """
        with self._guard:
            entry = self._entries.get(group_uuid)
            if entry is None:
                entry = self._entries[group_uuid] = [threading.Lock(), 0]
            # counted before waiting, so that no release drops the entry
            # while this thread is about to wait on its lock
            entry[1] += 1
        acquired = False
        try:
            acquired = entry[0].acquire(timeout=timeout)
        finally:
            if not acquired:
                with self._guard:
                    self._forget(group_uuid, entry)
        return acquired

    def release(self, group_uuid):
        with self._guard:
            entry = self._entries[group_uuid]
            entry[0].release()
            self._forget(group_uuid, entry)

    def _forget(self, group_uuid, entry):
        entry[1] -= 1
        if not entry[1]:
            del self._entries[group_uuid]

    def __len__(self):
        """Groups with a lock held or awaited in this process."""
        with self._guard:
            return len(self._entries)


class Coordination(object):
    """One tooz coordinator per process, started on first use; after a
    failure it is left alone for ``spread_coordination_retry_seconds``.
    """

    def __init__(self):
        self._coordinator = None
        self._url = None
        self._failed_until = 0.0
        self._last_error = None
        self._guard = threading.Lock()
        self.local_locks = LocalLocks()
        # {group uuid: tooz lock}, most recently used last. A lock object is
        # reused rather than made per request: tooz's mysql driver builds a
        # client (PyMySQL: a TLS context, ~40 ms) per lock object, and only
        # reconnects on each acquire. One thread at a time uses a group's
        # object, the holder of its local lock.
        self._backend_locks = collections.OrderedDict()

    def _started(self):
        with self._guard:
            if time.monotonic() < self._failed_until:
                raise CoordinationUnavailable(self._last_error)
            if self._coordinator is None:
                url = backend_url()
                try:
                    coordinator = coordination.get_coordinator(
                        url, ('nova-ext-scheduler-%d' % os.getpid()).encode())
                    _bounded(coordinator.start, START_TIMEOUT,
                             start_heart=False)
                except Exception as error:
                    self._failed(url, error)
                self._coordinator, self._url = coordinator, url
            return self._coordinator

    def _failed(self, url, error):
        self._coordinator = None
        self._backend_locks.clear()
        self._last_error = 'coordination backend %s is unreachable: %s' % (
            redacted(url), error)
        retry = CONF.nova_ext.spread_coordination_retry_seconds
        self._failed_until = time.monotonic() + retry
        raise CoordinationUnavailable(self._last_error)

    def acquire(self, group_uuid, timeout):
        """The group's backend lock, acquired; None when ``timeout`` passed
        (``[nova_ext] spread_lock_timeout`` less the time already waited).
        Raises CoordinationUnavailable.

        The backend gets ``ACQUIRE_MARGIN`` seconds beyond ``timeout`` to
        answer: a driver blocked on a hung connection is abandoned then,
        and a lock it obtains after that is released as soon as it comes.
        """
        lock = self._backend_lock(self._started(), group_uuid)
        try:
            if _bounded(lock.acquire, timeout + ACQUIRE_MARGIN,
                        late=functools.partial(self._release_late, lock),
                        blocking=timeout):
                return lock
            return None
        except NoAnswer as error:
            # the abandoned acquire still runs on this object: the next
            # request of the group gets a fresh one. A backend that does not
            # answer is unavailable (tooz's redis driver retries a refused
            # connection for ~55 s before it says so): refused or scheduled
            # without the lock as configured, and left alone for
            # spread_coordination_retry_seconds.
            self._forget_backend_lock(group_uuid, lock)
            LOG.warning("nova-ext: the coordination backend did not answer "
                        "the spread lock request of server group %s: %s",
                        group_uuid, error)
            with self._guard:
                self._failed(self._url, error)
        except tenacity.RetryError:
            # tooz's SQL drivers raise it rather than return False when the
            # lock stays held: the group is busy, the backend is fine
            return None
        except Exception as error:
            with self._guard:
                self._failed(self._url, error)

    def _backend_lock(self, coordinator, group_uuid):
        with self._guard:
            lock = self._backend_locks.pop(group_uuid, None)
            if lock is None:
                lock = coordinator.get_lock(
                    (LOCK_PREFIX + group_uuid).encode())
            self._backend_locks[group_uuid] = lock
            while len(self._backend_locks) > BACKEND_LOCKS_KEPT:
                self._backend_locks.popitem(last=False)
            return lock

    def _forget_backend_lock(self, group_uuid, lock):
        with self._guard:
            if self._backend_locks.get(group_uuid) is lock:
                del self._backend_locks[group_uuid]

    def _release_late(self, lock, acquired):
        if acquired:
            LOG.warning("nova-ext: spread lock %s was granted after its "
                        "request gave up; releasing it", lock.name)
            self.release(lock)

    def release(self, lock):
        """Release ``lock``; whether the backend confirmed it was still
        held. A lock it could not release is forgotten: the next request of
        the group gets a fresh lock object (and connection).
        """
        try:
            released = lock.release()
        except Exception as error:
            # the backend drops the lock with the connection it lost
            LOG.warning("nova-ext: releasing spread lock %s failed: %s",
                        lock.name, error)
            released = False
        if released is False:
            with self._guard:
                for group_uuid, kept in list(self._backend_locks.items()):
                    if kept is lock:
                        del self._backend_locks[group_uuid]
            return False
        return True


# Backend lock objects kept for reuse (least recently used dropped first):
# a dropped one holds no lock and no connection between requests.
BACKEND_LOCKS_KEPT = 256

_coordination = Coordination()

# tooz's drivers retry a refused connection for a long time (redis: 15
# tries, over a minute), longer than the RPC timeout of the conductor
# waiting for this scheduler: give up on starting well before that.
START_TIMEOUT = 5

# A healthy backend answers a lock request within its blocking timeout plus
# one round trip; one that has not after this much more is stalled (a hung
# TCP connection blocks a driver far beyond its timeout) and is treated as
# unavailable. Generous: a loaded scheduler must not take a slow answer for
# an outage.
ACQUIRE_MARGIN = 3


class NoAnswer(TimeoutError):
    """A call to the coordination backend did not return in time."""


def _bounded(function, timeout, late=None, **kwargs):
    """``function(**kwargs)`` in a helper thread; NoAnswer after
    ``timeout`` seconds. The thread is left to finish on its own; if
    ``function`` then returns, ``late(result)`` runs in it, to undo what
    nobody waits for any more.
    """
    outcome = {}
    done = threading.Event()
    # decides whether the result goes to the caller or to ``late``, even
    # when the call returns just as the caller stops waiting
    handover = threading.Lock()

    def run():
        try:
            outcome['result'] = function(**kwargs)
        except Exception as error:  # noqa: handed to the caller
            outcome['error'] = error
        finally:
            with handover:
                done.set()
                abandoned = outcome.get('abandoned', False)
        if abandoned and late is not None and 'result' in outcome:
            try:
                late(outcome['result'])
            except Exception:
                LOG.exception("nova-ext: cleaning up after %s answered "
                              "late failed", function)

    threading.Thread(target=run, daemon=True,
                     name='nova-ext-coordination').start()
    if not done.wait(timeout):
        with handover:
            if not done.is_set():
                outcome['abandoned'] = True
                raise NoAnswer('no answer within %.1fs' % timeout)
    if 'error' in outcome:
        raise outcome['error']
    return outcome.get('result')


def reset():
    """Forget the coordinator and its failures, and that this process read
    the aggregates, as a fresh process would.
    """
    global _coordination, _view_checked_in
    _coordination = Coordination()
    _provider_names.clear()
    _in_flight_hosts.clear()
    _view_checked_in = None


cache.register_reset(reset)


def backend_url():
    """``[nova_ext] coordination_backend_url``, else a tooz URL for the
    server behind ``[api_database] connection``, else a lock directory.
    """
    if CONF.nova_ext.coordination_backend_url:
        return CONF.nova_ext.coordination_backend_url
    return derived_backend_url(CONF.api_database.connection,
                               _lock_dir())


def _lock_dir():
    try:
        lock_path = CONF.oslo_concurrency.lock_path
    except cfg.NoSuchOptError:
        lock_path = None
    return os.path.join(lock_path or tempfile.gettempdir(),
                        'nova-ext-spread-locks')


def derived_backend_url(connection, lock_dir):
    """The tooz URL for a database URL: its server's advisory locks for
    MySQL/MariaDB and PostgreSQL; ``file://lock_dir`` otherwise.
    """
    parts = urllib.parse.urlsplit(connection or '')
    dialect = parts.scheme.split('+')[0]
    scheme = {'mysql': 'mysql', 'mariadb': 'mysql',
              'postgresql': 'postgresql', 'postgres': 'postgresql'}.get(
                  dialect)
    if scheme is None or not parts.hostname:
        return 'file://' + lock_dir
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path, '', ''))


def redacted(url):
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(':' + parts.password + '@', ':***@', 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _spread_group(spec_obj):
    """The request's server group when it asks for a failure-domain spread
    (a malformed ask counts: the filter refuses it inside the lock).
    """
    if 'instance_group' not in spec_obj or not spec_obj.instance_group:
        return None
    group = spec_obj.instance_group
    if group.policy not in failure_domains.SPREADABLE_POLICIES:
        return None
    try:
        level = failure_domains.requested_level(spec_obj)
    except Exception:
        return None
    return group if level else None


def _provider_hosts(context, client, provider_uuids, cache):
    """{provider uuid: host} for compute-node providers: the name of the
    provider's root, asked from placement once per provider and process.
    """
    hosts = {}
    for uuid in provider_uuids:
        if uuid not in cache:
            resp = client.get('/resource_providers/%s' % uuid,
                              version='1.14',
                              global_request_id=context.global_id)
            if not resp:
                continue
            provider = resp.json()
            root = provider.get('root_provider_uuid') or uuid
            if root != uuid:
                resp = client.get('/resource_providers/%s' % root,
                                  version='1.14',
                                  global_request_id=context.global_id)
                provider = resp.json() if resp else {}
            # a compute node's provider is named after its node, which is
            # its host for every driver but ironic
            cache[uuid] = provider.get('name')
        if cache.get(uuid):
            hosts[uuid] = cache[uuid]
    return hosts


def members_per_host(context, group_uuid, not_counted):
    """{host: members of the group there}, leaving out the servers in
    ``not_counted`` (the ones this request places or moves). Returns
    (counter, placement calls made).

    A member whose instance records a host (set by the compute's claim) is
    counted there: one query of the API database for the members' cells,
    one per cell. Only the members in flight -- claimed by an earlier
    request of the group but not yet built, so without a host in their cell
    -- are read from **placement** (their allocations, ``MEMBER_READS`` at
    a time), where that request's claim was written before it let go of
    the lock. So the count costs a request the members still being built,
    not the whole group (every member's allocations read by every request
    would be about 5,000 placement reads for a burst of 100, all under the
    group's lock).
    """
    group = objects.InstanceGroup.get_by_uuid(context, group_uuid)
    members = [member for member in group.members or []
               if member not in not_counted]
    recorded, failed = _recorded_hosts(context, members)
    counts = collections.Counter(recorded.values())
    fresh_after = time.monotonic() - IN_FLIGHT_SECONDS
    in_flight = []
    for member in members:
        if member in recorded or member in failed:
            _in_flight_hosts.pop(member, None)
            continue
        known = _in_flight_hosts.get(member)
        if known is not None and known[1] > fresh_after:
            counts[known[0]] += 1
        else:
            in_flight.append(member)
    if not in_flight:
        return counts, 0
    client = report.report_client_singleton()

    def providers_of(member):
        return list(client.get_allocs_for_consumer(
            context, member).get('allocations', {}))

    with futures.ThreadPoolExecutor(
            max_workers=MEMBER_READS,
            thread_name_prefix='nova-ext-members') as executor:
        hosts_of_member = dict(zip(in_flight,
                                   executor.map(providers_of, in_flight)))
    providers = {uuid for uuids in hosts_of_member.values() for uuid in uuids}
    provider_host = _provider_hosts(context, client, providers,
                                    _provider_names)
    read_at = time.monotonic()
    for member, uuids in hosts_of_member.items():
        hosts = {provider_host[u] for u in uuids if u in provider_host}
        for host in hosts:
            counts[host] += 1
        if len(hosts) == 1:
            _in_flight_hosts[member] = (hosts.pop(), read_at)
    if len(_in_flight_hosts) > IN_FLIGHT_KEPT:
        for member, (_host, when) in list(_in_flight_hosts.items()):
            if when <= fresh_after:
                _in_flight_hosts.pop(member, None)
    return counts, len(in_flight)


def _recorded_hosts(context, members):
    """({member: host} for the members whose instance records a host,
    {members in cell0}): the members that failed to schedule hold nothing.
    """
    recorded, failed = {}, set()
    if not members:
        return recorded, failed
    cells = {}
    for mapping in objects.InstanceMappingList.get_by_instance_uuids(
            context, members):
        cell = mapping.cell_mapping if 'cell_mapping' in mapping else None
        if cell is None:
            continue  # not scheduled yet, or scheduled and not yet created
        if cell.uuid == objects.CellMapping.CELL0_UUID:
            failed.add(mapping.instance_uuid)
            continue
        cells.setdefault(cell.uuid, (cell, []))[1].append(
            mapping.instance_uuid)
    for cell, uuids in cells.values():
        with nova_context.target_cell(context, cell) as cell_context:
            instances = objects.InstanceList.get_by_filters(
                cell_context, {'uuid': uuids, 'deleted': False},
                expected_attrs=[])
        for instance in instances:
            if instance.host:
                recorded[instance.uuid] = instance.host
    return recorded, failed


# Allocation reads in flight at once when a spread request counts its
# group: placement answers them in parallel, and a group of 100 members
# counted one read at a time is most of a request's time under the lock.
MEMBER_READS = 8


def _holds_allocations(context, instance_uuids):
    """Whether any of ``instance_uuids`` holds allocations in placement
    already: a move, not a create.
    """
    client = report.report_client_singleton()
    return any(client.get_allocs_for_consumer(context, uuid).get(
        'allocations') for uuid in instance_uuids)


def _refuse(reason):
    LOG.warning("nova-ext: refusing spread request: %s", reason)
    raise exception.NoValidHost(reason=reason)


def _scheduled_with_spread(scheduler, context, spec_obj, instance_uuids,
                           call):
    """Nova's ``select_destinations`` (``call()``) inside the request's
    :class:`SchedulingRequest`, each server's alternates kept in its
    failure domains.
    """
    _aggregate_view_of_this_process(scheduler.host_manager)
    return scheduled_in_request(scheduler, spec_obj, instance_uuids, None,
                                call)


def _schedule_under_lock(context, spec_obj, instance_uuids, call):
    """Nova's ``_schedule`` (``call()``: filter, weigh and claim, once
    placement answered) under the group's spread lock when the request
    asks for a spread, with the members counted from placement inside it.
    """
    group = _spread_group(spec_obj)
    if group is None or scheduler_utils.request_is_rebuild(spec_obj):
        return call()
    try:
        request = scheduling_request.of(spec_obj)
    except scheduling_request.NotActivated:
        return call()
    if not CONF.nova_ext.spread_serialize_groups:
        return call()
    if not any(type(enabled).__name__ == SPREAD_FILTER
               for enabled in request.enabled_filters):
        # nothing judges the spread (nova-ext's hooks are active, e.g.
        # through a cell mapping's ?plugin=nova_ext, but its filter is not
        # in enabled_filters): the group is scheduled as Nova alone would
        return call()
    timeout = CONF.nova_ext.spread_lock_timeout
    started = time.monotonic()
    local_locks = _coordination.local_locks
    if not local_locks.acquire(group.uuid, timeout):
        _refuse('timed out after %ds waiting for the spread lock of server '
                'group %s (%s)' % (timeout, group.name, group.uuid))
    try:
        try:
            # whole seconds: tooz's MySQL driver waits int(timeout) on the
            # server and then tries again until the fraction has passed
            # too, up to twice as long as asked
            lock = _coordination.acquire(
                group.uuid,
                max(1, int(timeout - (time.monotonic() - started))))
        except CoordinationUnavailable as error:
            if CONF.nova_ext.spread_coordination_unavailable == 'refuse':
                _refuse('%s; server group %s (%s) is not scheduled without '
                        'it ([nova_ext] spread_coordination_unavailable = '
                        'refuse)' % (error, group.name, group.uuid))
            LOG.warning("nova-ext: scheduling server group %s without the "
                        "spread lock: %s", group.uuid, error)
            _count(context, request, group, instance_uuids)
            return call()
        if lock is None:
            _refuse('timed out after %ds waiting for the spread lock of '
                    'server group %s (%s)' % (timeout, group.name,
                                              group.uuid))
        waited = time.monotonic() - started
        held = time.monotonic()
        clean = False
        try:
            _count(context, request, group, instance_uuids)
            selections = call()
        finally:
            clean = _coordination.release(lock)
            LOG.debug("nova-ext: spread lock of server group %s: waited "
                      "%.0f ms, held %.0f ms", group.uuid, waited * 1000,
                      (time.monotonic() - held) * 1000)
        if not clean:
            _verified(context, request, group, instance_uuids, selections)
        return selections
    finally:
        local_locks.release(group.uuid)


def _count(context, request, group, instance_uuids):
    """Count the group's members from placement into ``request``."""
    started = time.monotonic()
    not_counted = set(instance_uuids or [])
    not_counted.add(request.spec_obj.instance_uuid)
    try:
        per_host, calls = members_per_host(context, group.uuid,
                                           not_counted)
        request.moves = _holds_allocations(context, sorted(not_counted))
    except Exception as error:
        _refuse('could not read where the members of server group %s (%s) '
                'are from placement: %s' % (group.name, group.uuid, error))
    LOG.debug("nova-ext: server group %s counted from placement in %.0f ms "
              "(%d allocation reads): %s", group.uuid,
              (time.monotonic() - started) * 1000, calls, dict(per_host))
    request.count(per_host)


def _verified(context, request, group, instance_uuids, selections):
    """The backend could not confirm the lock was still held when it was
    released (its connection or session was lost): another scheduler may
    have placed members of the group meanwhile. Count the group again
    from placement, this request's servers included, and keep the
    placements only if every hard constraint still holds; else give the
    claims back and refuse.
    """
    per_host, _calls = members_per_host(context, group.uuid, set())
    placed = [selection[0].service_host for selection in selections]
    broken = request.broken_by(per_host, placed)
    if not broken:
        LOG.warning("nova-ext: the spread lock of server group %s could not "
                    "be released cleanly (the coordination backend lost "
                    "it); placement, counted again, shows every constraint "
                    "held: %s kept", group.uuid, ', '.join(placed))
        return
    if not request.moves:
        client = report.report_client_singleton()
        for uuid in instance_uuids or [request.spec_obj.instance_uuid]:
            client.delete_allocation_for_instance(context, uuid, force=True)
    _refuse('the spread lock of server group %s (%s) was lost while this '
            'request was scheduled and the group changed meanwhile: %s; '
            'nothing was kept, try again' % (
                group.name, group.uuid, '; '.join(broken)))


def scheduled_in_request(scheduler, spec_obj, instance_uuids, members, call):
    """``call()`` inside the request's :class:`SchedulingRequest`; its
    NoValidHost carries nova-ext's reason, if a plugin gave one.
    """
    with scheduling_request.opened(spec_obj, instance_uuids,
                                   scheduler.host_manager,
                                   members=members) as request:
        try:
            selections = call()
        except exception.NoValidHost:
            if request.why_no_host:
                raise exception.NoValidHost(reason=request.why_no_host)
            raise
        return request.alternates_kept_in_domains(selections)


# The process whose HostManager's aggregate view is known to be its own: a
# nova-scheduler worker forked by its parent inherits the parent's view as
# the scheduler's start read it, and Nova sends aggregate changes to the
# workers only, so a worker forked later (after a crash) would never see
# the changes made meanwhile. Each process re-reads the aggregates once,
# before its first request.
_view_checked_in = None
_view_lock = threading.Lock()


def _aggregate_view_of_this_process(host_manager):
    global _view_checked_in
    if _view_checked_in == os.getpid():
        return
    with _view_lock:
        if _view_checked_in == os.getpid():
            return
        try:
            aggregates = objects.AggregateList.get_all(
                nova_context.get_admin_context())
        except Exception as error:
            # the next request tries again; meanwhile the view Nova has
            LOG.warning("nova-ext: could not re-read the aggregates in "
                        "this scheduler process (%s); failure domains come "
                        "from the aggregates as this process inherited "
                        "them until a request succeeds in reading them",
                        error)
            return
        upstream.reload_aggregate_view(host_manager, list(aggregates))
        _view_checked_in = os.getpid()
        LOG.debug("nova-ext: aggregates re-read in process %d (%d)",
                  os.getpid(), len(aggregates))


SPREAD_FILTER = 'FailureDomainAntiAffinityFilter'
SELECT_DESTINATIONS = ('nova.scheduler.manager.SchedulerManager.'
                       'select_destinations')
SCHEDULE = 'nova.scheduler.manager.SchedulerManager._schedule'
SENTINEL = 'nova.scheduler.manager.SchedulerManager._sentinel'
_original = None


def install():
    """Wrap SchedulerManager.select_destinations (the request) and
    ``_schedule`` (its filtering, weighing and claims, under the group's
    lock) once per process.
    """
    global _original
    if _original is not None:
        return
    original = _original = upstream.get(SELECT_DESTINATIONS)
    original_schedule = upstream.get(SCHEDULE)

    def schedule_locked(self, context, spec_obj, instance_uuids,
                        alloc_reqs_by_rp_uuid, provider_summaries,
                        allocation_request_version=None,
                        return_alternates=False):
        return _schedule_under_lock(
            context, spec_obj, instance_uuids, functools.partial(
                original_schedule, self, context, spec_obj, instance_uuids,
                alloc_reqs_by_rp_uuid, provider_summaries,
                allocation_request_version, return_alternates))

    schedule_locked.__wrapped__ = original_schedule
    upstream.patch(SCHEDULE, schedule_locked)
    # the default Nova's RPC signature uses for "spec_obj not given"
    sentinel = upstream.get(SENTINEL)

    @messaging.expected_exceptions(exception.NoValidHost)
    def spread_locked(self, context, request_spec=None,
                      filter_properties=None, spec_obj=sentinel,
                      instance_uuids=None, return_objects=False,
                      return_alternates=False):
        def call():
            try:
                return original(
                    self, context, request_spec=request_spec,
                    filter_properties=filter_properties, spec_obj=spec_obj,
                    instance_uuids=instance_uuids,
                    return_objects=return_objects,
                    return_alternates=return_alternates)
            except messaging.ExpectedException as wrapped:
                # Nova's own decorator wrapped a NoValidHost for the RPC
                # server; ours wraps it again on the way out.
                raise wrapped.exc_info[1].with_traceback(wrapped.exc_info[2])
        if spec_obj is sentinel:
            return call()
        return _scheduled_with_spread(self, context, spec_obj,
                                      instance_uuids, call)

    spread_locked.__wrapped__ = original
    upstream.patch(SELECT_DESTINATIONS, spread_locked)
