# SPDX-License-Identifier: Apache-2.0
"""Short-lived memory of what plugins look up in databases.

nova-scheduler answers many requests a second; a plugin that needs a
database answer per request (which hosts run an image, which rack a host
no longer among the candidates is in) asks once per ``[nova_ext]`` TTL
option instead. Thread-safe: nova-scheduler serves requests from several
threads.

Every such process-wide memory registers its reset here
(:func:`register_reset`; a :class:`TTLLookup` does so itself), so that
whoever needs "a fresh process" -- the sandbox and the tests that start
several clouds in one process -- calls :func:`forget_all` once instead of
knowing each module's private state.

The lookups themselves belong to the module that asks
(:mod:`nova_ext.scheduler.cloud` for the scheduler plugins' questions,
:mod:`nova_ext.quota.per_flavor` for the quota driver's); this module
only says how an answer is kept.
"""

import threading
import time

import cachetools
import futurist
from futurist import waiters
from oslo_config import cfg
from oslo_log import log as logging

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

_resets = []


def register_reset(reset):
    """Remember ``reset`` (no arguments) for :func:`forget_all`; returns it."""
    _resets.append(reset)
    return reset


def forget_all():
    """What nova-ext remembers in this process, forgotten: as if it had just
    started. Only modules already imported have registered anything, and
    only they can hold anything.
    """
    for reset in list(_resets):
        reset()


class TTLLookup:
    """``get(key, compute)`` returns ``compute(key)``, remembered for
    ``[nova_ext] <ttl_option>`` seconds (0: not remembered), at most
    ``maxsize`` keys.
    """

    # how many TTLs an answer is kept for
    _kept_for_ttls = 1

    def __init__(self, ttl_option, maxsize=1024, timer=time.monotonic):
        self._ttl_option = ttl_option
        self._maxsize = maxsize
        self._timer = timer
        self._lock = threading.Lock()
        self._cache = None
        register_reset(self.clear)

    def _ttl(self):
        return getattr(CONF.nova_ext, self._ttl_option)

    def _current_cache(self):
        ttl = self._ttl()
        if ttl <= 0:
            return None
        kept_for = ttl * self._kept_for_ttls
        if self._cache is None or self._cache.ttl != kept_for:
            self._cache = cachetools.TTLCache(self._maxsize, kept_for,
                                              timer=self._timer)
        return self._cache

    def get(self, key, compute):
        with self._lock:
            cache = self._current_cache()
            if cache is not None and key in cache:
                return cache[key]
        value = compute(key)
        self.put(key, value)
        return value

    def put(self, key, value):
        """Remember ``value`` for ``key`` (found fresh by other means)."""
        with self._lock:
            cache = self._current_cache()
            if cache is not None:
                cache[key] = value

    def clear(self):
        with self._lock:
            self._cache = None


class RefreshAheadLookup(TTLLookup):
    """``get(key, compute)`` returns ``compute(key)``, remembered for
    ``[nova_ext] <ttl_option>`` seconds; past them, the remembered answer
    still serves while one background thread asks again, so no request
    waits for the database but the first for a key. An answer is never
    used once twice the TTL old (the background asks failed, or no request
    came): the next request asks itself.

    For answers that steer a preference, where one a few seconds older is
    as good (which hosts have an image cached): a request that waits for a
    database round trip there pays more than the preference is worth.
    Every RefreshAheadLookup of the process asks through one background
    thread, one question at a time: a burst of expiries cannot flood the
    database. 0: not remembered.
    """

    # {key: (answer, when it was asked)}, dropped at twice the TTL
    _kept_for_ttls = 2

    def __init__(self, ttl_option, maxsize=1024, timer=time.monotonic):
        super().__init__(ttl_option, maxsize, timer)
        self._refreshing = {}
        # a refresh started before clear() must not fill the new cache
        self._generation = 0

    def get(self, key, compute):
        with self._lock:
            cache = self._current_cache()
            entry = None if cache is None else cache.get(key)
            if entry is not None:
                value, asked_at = entry
                if (self._timer() - asked_at >= self._ttl()
                        and key not in self._refreshing):
                    self._refreshing[key] = _background().submit(
                        self._refresh, key, compute, self._generation)
                return value
        asked_at = self._timer()
        value = compute(key)
        with self._lock:
            self._remember(key, value, asked_at, self._generation)
        return value

    def put(self, key, value):
        with self._lock:
            self._remember(key, value, self._timer(), self._generation)

    def _remember(self, key, value, asked_at, generation):
        # the lock is held; an answer asked before clear() is not kept
        cache = self._current_cache()
        if cache is not None and generation == self._generation:
            cache[key] = (value, asked_at)

    def _refresh(self, key, compute, generation):
        asked_at = self._timer()
        try:
            value = compute(key)
        except Exception:
            LOG.warning("nova-ext: asking again for %r failed; its last "
                        "answer serves until it is twice [nova_ext] %s old",
                        key, self._ttl_option, exc_info=True)
            with self._lock:
                self._refreshing.pop(key, None)
            return
        with self._lock:
            # one step: no request sees the old answer with no ask running
            self._refreshing.pop(key, None)
            self._remember(key, value, asked_at, generation)

    def wait_for_refreshes(self, timeout=None):
        """Wait until the background asks started so far have answered
        (tests, benchmarks: what they measure next must not share the CPU
        with them).
        """
        with self._lock:
            pending = list(self._refreshing.values())
        waiters.wait_for_all(pending, timeout)

    def clear(self):
        with self._lock:
            self._cache = None
            self._generation += 1


_executor = None
_executor_lock = threading.Lock()


def _background():
    """The thread every RefreshAheadLookup asks through, started on first
    use (in the worker process, after any fork).
    """
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = futurist.ThreadPoolExecutor(max_workers=1)
        return _executor
