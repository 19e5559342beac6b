# SPDX-License-Identifier: Apache-2.0
"""A server group's spread requests, scheduled in turns.

Driven by ``[nova_ext] spread_lock_timeout`` and the coordination options
(:mod:`nova_ext.scheduler.coordination`); used by the request wrapper,
:mod:`nova_ext.scheduler.spread_requests`.

A request of a group with a failure-domain spread must see every member of
the group where it is now, and no other member may be placed between that
count and the request's claim in placement. So one scheduler process at a
time holds the group's spread lock (a tooz lock every scheduler shares).
Within the process holding it, the group's requests need not queue one by
one: they take the lock together, in a **turn**.

1. The first request of the group to arrive in a process opens a turn: it
   waits for the process's previous turn of the group, if any, then takes
   the group's lock. Every request of the group arriving meanwhile joins
   the turn (the lock is what they all wait for).
2. With the lock held, the group's members are counted once, for the whole
   turn (``counted``, :class:`~nova_ext.scheduler.cloud.Cloud`
   ``group_members``: the members built, and those earlier turns claimed
   hosts for, from the spread ledger).
3. The turn's requests are scheduled at once, each through Nova's own
   filters, weighers and claims. What depends on the count -- a request's
   *decision*, from reading the members to reserving the host it claims
   -- is made by one request at a time (:meth:`Turn.decide`), each seeing
   the members counted plus every host the turn reserved so far
   (:meth:`Turn.members`). The claims in placement, the slow part under a
   burst, run in parallel, outside the decision.
4. When the last request of the turn is done, the turn writes its claims
   to the spread ledger (``record_claims``, :mod:`nova_ext.scheduler.
   spread_ledger`), so that the group's next turn counts them with one
   query, and releases the lock; only then do the turn's requests hand
   their hosts back to Nova (:meth:`Turn.done`): had the backend lost the
   lock meanwhile, each request checks its own hosts again before any is
   used.

Requests arriving while a turn runs wait for the next one. A turn's work
is thus one lock, one count and the decisions; a burst of N members of one
group costs a few turns per scheduler process, not N lock holds, and a
member's wait for the lock is a turn or two of its process.

State: :data:`_turns`, this process's newest turn of each group with a
turn waiting or running, each turn from its opening to its end (its last
request done); a group without requests in flight has no entry, so the
registry is bounded by the groups being scheduled at once.
"""

import threading
import time

from oslo_log import log as logging

from nova_ext import cache
from nova_ext.scheduler import coordination
from nova_ext.scheduler import group_members

LOG = logging.getLogger(__name__)


class TimedOut(Exception):
    """No turn of the group got its lock within the request's wait."""


class Turn(object):
    """One turn of a server group's requests in this process.

    ``locked``: the backend lock held, or None when the turn runs without
    one (``spread_coordination_unavailable = schedule``); ``counted``:
    {member: hosts} as counted when the lock was taken; ``reserved``:
    {server: host} for each server the turn's requests claimed a host for.
    """

    def __init__(self, group_uuid, previous):
        self.group_uuid = group_uuid
        self.previous = previous
        # requests admitted and not yet done (the opener among them)
        self.requests = 1
        self.admitted = 1
        self.running = False
        self.ready = threading.Event()
        self.ended = threading.Event()
        self.failure = None
        self.locked = None
        self.clean = True
        # why the turn's claims could not be written to the ledger, if so
        self.unrecorded = None
        self.counted = {}
        self.reserved = {}
        # bumped by every reservation and every reservation given back
        self.version = 0
        self.opened_at = time.monotonic()
        self.running_at = None
        # what the turn's hold went to besides its requests' own passes
        # and claims (the debug line at its end)
        self.count_ms = 0.0
        # the requests' claims in placement, summed (they may overlap)
        self.claims_ms = 0.0
        self.ledger_ms = 0.0
        self.release_ms = 0.0
        # re-entered: a reservation asks its request whether the host is
        # still allowed, which reads the members under the same guard
        self._guard = threading.RLock()
        self._deciding = threading.Lock()
        self._decider = None

    # -- the members, and the decisions -------------------------------------

    def members(self, not_counted):
        """({host: members there}, the version it reflects): the members
        counted plus the servers the turn reserved a host for, leaving out
        ``not_counted`` (the servers of the request asking).
        """
        with self._guard:
            counts = group_members.per_host(self.counted, not_counted)
            counts.update(host for server, host in self.reserved.items()
                          if server not in not_counted)
            return counts, self.version

    def decide(self, request, timeout):
        """Make ``request`` the one deciding, once per decision: it holds
        the turn's decision until :meth:`decided`. False when another
        request held it for ``timeout`` seconds.
        """
        if self._decider is request:
            return True
        if not self._deciding.acquire(timeout=timeout):
            return False
        self._decider = request
        return True

    def deciding(self, request):
        return self._decider is request

    def decided(self, request):
        """End ``request``'s decision, if it is deciding."""
        if self._decider is request:
            self._decider = None
            self._deciding.release()

    def reserve(self, server, host, allowed):
        """Reserve ``host`` for ``server`` if ``allowed(version)`` (called
        with the turn's version, under the turn's guard, so that nothing
        is reserved meanwhile) says so; whether it did.
        """
        with self._guard:
            if not allowed(self.version):
                return False
            self.reserved[server] = host
            self.version += 1
            return True

    def claimed(self, seconds):
        """A request of the turn spent ``seconds`` on a claim."""
        with self._guard:
            self.claims_ms += seconds * 1000

    def give_back(self, servers):
        """Forget the reservations of ``servers`` (their claims failed, or
        were given back).
        """
        with self._guard:
            for server in servers:
                if self.reserved.pop(server, None) is not None:
                    self.version += 1

    # -- the turn's life ----------------------------------------------------

    def _open(self, deadline, count, on_unavailable, record):
        self._record = record
        try:
            if self.previous is not None and not self.previous.ended.wait(
                    max(0.0, deadline - time.monotonic())):
                raise TimedOut()
            try:
                # whole seconds: tooz's MySQL driver waits int(timeout) on
                # the server and then tries again until the fraction has
                # passed too, up to twice as long as asked
                self.locked = coordination.process_coordination().acquire(
                    self.group_uuid,
                    max(1, int(deadline - time.monotonic())))
            except coordination.CoordinationUnavailable as error:
                on_unavailable(error)  # raises, or the turn runs unlocked
            else:
                if self.locked is None:
                    raise TimedOut()
            started = time.monotonic()
            try:
                self.counted = count()
            finally:
                self.count_ms = (time.monotonic() - started) * 1000
        except BaseException as error:
            self.failure = error
            self._end(release=True)
            raise
        with _registry:
            # admission closes: later requests form the next turn
            self.running = True
            self.running_at = time.monotonic()
        self.ready.set()

    def done(self, timeout):
        """This request is done scheduling; wait for the rest of the turn
        (at most ``timeout`` seconds) and for the lock's release. Whether
        the backend confirmed the lock was held throughout (None: the turn
        did not end within ``timeout``, the lock still held).
        """
        with _registry:
            self.requests -= 1
            last = not self.requests
        if last:
            self._end(release=True)
        elif not self.ended.wait(timeout):
            LOG.warning("nova-ext: the turn of server group %s did not end "
                        "within %ds; this request's hosts are used without "
                        "waiting for it", self.group_uuid, timeout)
            return None
        return self.clean

    def _left(self):
        """A request left without scheduling (its own wait timed out); the
        last to leave a running turn ends it.
        """
        with _registry:
            self.requests -= 1
            last = not self.requests and self.running
        if last:
            self._end(release=True)

    def _end(self, release):
        ending = time.monotonic()
        if self.running_at is not None:
            # before the lock goes: the next turn counts from the ledger
            try:
                self._record(dict(self.reserved), self.counted)
            except Exception as error:
                LOG.error("nova-ext: the claims of a turn of server group "
                          "%s could not be written to the spread ledger: "
                          "%s", self.group_uuid, error)
                self.unrecorded = error
        releasing = time.monotonic()
        self.ledger_ms = (releasing - ending) * 1000
        if self.locked is not None and release:
            self.clean = coordination.process_coordination().release(
                self.locked)
        self.release_ms = (time.monotonic() - releasing) * 1000
        with _registry:
            if _turns.get(self.group_uuid) is self:
                del _turns[self.group_uuid]
        if self.running_at is not None:
            # the rest of the hold: the requests' passes and decisions
            LOG.debug("nova-ext: spread lock of server group %s: a turn of "
                      "%d requests held it %.0f ms (count %.0f ms, claims "
                      "%.0f ms, ledger %.0f ms, release %.0f ms)%s",
                      self.group_uuid, self.admitted,
                      (time.monotonic() - self.running_at) * 1000
                      + self.count_ms, self.count_ms, self.claims_ms,
                      self.ledger_ms, self.release_ms,
                      '' if self.clean else '; the backend lost it')
        self.ended.set()
        self.ready.set()


# {group uuid: this process's newest turn of the group}, while it waits or
# runs (module docstring); guarded by _registry, which also guards every
# turn's admission and request count
_turns = {}
_registry = threading.Lock()


def _forget():
    with _registry:
        _turns.clear()


cache.register_reset(_forget)


def take(group_uuid, timeout, count, on_unavailable, record):
    """The group's :class:`Turn` this request is scheduled in, once it
    runs: joined, or opened (the previous turn of the group in this process
    waited for, the lock taken, ``count()`` run) when no turn of the group
    is waiting to run. Raises TimedOut after ``timeout`` seconds, and
    whatever opening the turn raised (``on_unavailable(error)``: what a
    backend that cannot be reached means, which may raise). The turn ends
    with ``record(claimed, counted)`` (its claims, for the group's next
    turn), before it releases the lock.

    Returns (turn, seconds waited).
    """
    started = time.monotonic()
    deadline = started + timeout
    while True:
        with _registry:
            turn = _turns.get(group_uuid)
            if turn is not None and not turn.running and turn.failure is None:
                turn.requests += 1
                turn.admitted += 1
                opener = False
            else:
                turn = _turns[group_uuid] = Turn(group_uuid, turn)
                opener = True
        if opener:
            try:
                turn._open(deadline, count, on_unavailable, record)
            except TimedOut:
                pass  # the request may try again, below
        elif not turn.ready.wait(max(0.0, deadline - time.monotonic())):
            turn._left()
            raise TimedOut()
        if turn.failure is None:
            return turn, time.monotonic() - started
        if not isinstance(turn.failure, TimedOut):
            raise turn.failure
        if time.monotonic() >= deadline:
            raise TimedOut()
        # the turn's opener waited less long than this request may: the
        # request tries again, in a turn of its own or one opening now
