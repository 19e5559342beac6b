# SPDX-License-Identifier: Apache-2.0
"""The spread lock's backend: one tooz lock per server group, shared by
every nova-scheduler.

Driven by ``[nova_ext] coordination_backend_url`` (unset: derived from
``[api_database] connection``, see :func:`backend_url`),
``spread_coordination_retry_seconds``, and the time a request may wait
(``spread_lock_timeout``, which :mod:`nova_ext.scheduler.group_turns`
hands down). A lock is named after the group's uuid
(:data:`LOCK_PREFIX`).

Only one thread of a process asks for a group's lock at a time: the opener
of the group's turn in that process (:mod:`nova_ext.scheduler.
group_turns`); this module knows nothing of requests.

A backend that cannot be reached raises :class:`CoordinationUnavailable`;
what a request then does is ``[nova_ext] spread_coordination_unavailable``'s
(the turn's). A backend that does not answer at all is bounded here
(:func:`_bounded`): tooz's drivers block on a hung connection far beyond
their own timeouts.

State: one :class:`Coordination` per process (:data:`_coordination`), with
its tooz coordinator, its last failure and the lock objects it keeps for
reuse (at most :data:`BACKEND_LOCKS_KEPT`); :func:`reset` replaces it.
"""

import functools
import os
import tempfile
import threading
import time
import urllib.parse

import cachetools
from oslo_config import cfg
from oslo_log import log as logging
import tenacity
from tooz import coordination

from nova_ext import cache

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

LOCK_PREFIX = 'nova-ext-spread-'

# Backend lock objects kept for reuse (least recently used dropped first):
# a dropped one holds no lock and no connection between turns.
BACKEND_LOCKS_KEPT = 256


class CoordinationUnavailable(Exception):
    """The coordination backend cannot be reached."""


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
        # {group uuid: tooz lock}, the BACKEND_LOCKS_KEPT most recently
        # used. A lock object is reused rather than made per turn: tooz's
        # mysql driver builds a client (PyMySQL: a TLS context, ~40 ms) per
        # lock object, and only reconnects on each acquire. One thread at a
        # time uses a group's object: the opener of the group's turn in this
        # process (nova_ext.scheduler.group_turns).
        self._backend_locks = cachetools.LRUCache(maxsize=BACKEND_LOCKS_KEPT)

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
            lock = self._backend_locks.get(group_uuid)
            if lock is None:
                lock = self._backend_locks[group_uuid] = coordinator.get_lock(
                    (LOCK_PREFIX + group_uuid).encode())
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


# The process's coordinator: made at import, replaced by reset() (as a
# fresh process would have it); lives as long as the process.
_coordination = Coordination()


def process_coordination():
    """This process's :class:`Coordination`."""
    return _coordination


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
    """Forget the coordinator and its failures, as a fresh process would."""
    global _coordination
    _coordination = Coordination()


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
