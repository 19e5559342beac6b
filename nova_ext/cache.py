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
"""

import threading

import cachetools
from oslo_config import cfg

CONF = cfg.CONF

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
    ``[nova_ext] <ttl_option>`` seconds (0: not remembered).
    """

    def __init__(self, ttl_option, maxsize=1024):
        self._ttl_option = ttl_option
        self._maxsize = maxsize
        self._lock = threading.Lock()
        self._cache = None
        register_reset(self.clear)

    def _current_cache(self):
        ttl = getattr(CONF.nova_ext, self._ttl_option)
        if ttl <= 0:
            return None
        if self._cache is None or self._cache.ttl != ttl:
            self._cache = cachetools.TTLCache(self._maxsize, ttl)
        return self._cache

    def get(self, key, compute):
        with self._lock:
            cache = self._current_cache()
            if cache is not None and key in cache:
                return cache[key]
        value = compute(key)
        with self._lock:
            cache = self._current_cache()
            if cache is not None:
                cache[key] = value
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
