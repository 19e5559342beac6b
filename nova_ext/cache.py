"""Short-lived memory of what plugins look up in databases.

nova-scheduler answers many requests a second; a plugin that needs a
database answer per request (which hosts run an image, which rack a host
no longer among the candidates is in) asks once per ``[nova_ext]`` TTL
option instead. Thread-safe: nova-scheduler serves requests from several
threads.
"""

import threading

import cachetools
from oslo_config import cfg

CONF = cfg.CONF


class TTLLookup:
    """``get(key, compute)`` returns ``compute(key)``, remembered for
    ``[nova_ext] <ttl_option>`` seconds (0: not remembered).
    """

    def __init__(self, ttl_option, maxsize=1024):
        self._ttl_option = ttl_option
        self._maxsize = maxsize
        self._lock = threading.Lock()
        self._cache = None

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

    def clear(self):
        with self._lock:
            self._cache = None
