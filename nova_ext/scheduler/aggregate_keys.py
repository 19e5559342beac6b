# SPDX-License-Identifier: Apache-2.0
"""The host-aggregate metadata keys nova-ext reads, and their near misses:
reported, never guessed.

Aggregate metadata keys are free text. ``Nova_Ext:failure_domain:rack``,
``nova_ext:failure_domain:rack `` (a trailing space) or
``nova_ext:failure_domian:rack`` is not a key nova-ext reads, so the
aggregate silently declares nothing; ``r1 `` as a domain is a different
domain from ``r1``. :func:`problems_in_aggregates` names each such problem,
and three places report them:

* the failure-domain filter and weigher call :func:`warn_near_misses` for
  each aggregate of a spread request's candidate hosts
  (``failure_domains.spread_requests``): one log warning naming the
  aggregate, once per aggregate and problem per process;
* ``nova-ext-manage explain`` lists them for the aggregates the host
  manager read;
* ``nova-ext-status upgrade check`` ("Aggregate metadata") lists them for
  every aggregate in the API database.

Every reader of aggregate metadata takes its key from here, so that
:func:`keys_read` is the whole list.
"""

import difflib
import functools

import cachetools
from oslo_config import cfg
from oslo_log import log as logging

from nova_ext import cache
from nova_ext import conf as ext_conf

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_ext:'
# + a level of [nova_ext] failure_domain_levels (nova_ext.failure_domains)
FAILURE_DOMAIN_PREFIX = NAMESPACE + 'failure_domain:'
# the host_class request filter
HOST_CLASS = NAMESPACE + 'host_class'
# Each [nova_ext] *_weight_multiplier option is the multiplier_option of a
# PerRequestWeigher, which aggregates override under multiplier_key(option).
MULTIPLIER_OPTIONS = tuple(opt.name for opt in ext_conf.ALL_OPTS
                           if opt.name.endswith('_weight_multiplier'))

# {(aggregate name, problem): True} already logged by warn_near_misses in
# this process, the REPORTED_KEPT most recent (an older one is logged
# again); cleared with nova-ext's other caches (cache.forget_all)
REPORTED_KEPT = 4096
_reported = cachetools.LRUCache(maxsize=REPORTED_KEPT)
cache.register_reset(_reported.clear)


def failure_domain_key(level):
    """The key declaring an aggregate's domain at ``level``."""
    return FAILURE_DOMAIN_PREFIX + level


def multiplier_key(option):
    """The key overriding the ``[nova_ext] option`` weigher multiplier."""
    return NAMESPACE + option


def keys_read(conf):
    """Every aggregate metadata key nova-ext reads with ``conf``:
    ``nova_ext:failure_domain:<level>`` for each level of ``[nova_ext]
    failure_domain_levels``, ``nova_ext:<option>`` for each weigher
    multiplier option, and ``nova_ext:host_class``.
    """
    return list(_keys_for_levels(tuple(conf.nova_ext.failure_domain_levels)))


# The scheduler checks the candidates' aggregates on every spread request:
# the key lists are built once per configuration, not per check.
@functools.lru_cache(maxsize=8)
def _keys_for_levels(levels):
    return tuple([failure_domain_key(level) for level in levels]
                 + [multiplier_key(option) for option in MULTIPLIER_OPTIONS]
                 + [HOST_CLASS])


@functools.lru_cache(maxsize=8)
def _index(keys):
    """(set of ``keys``, {folded key: key})."""
    return frozenset(keys), {_fold(key): key for key in keys}


def _fold(key):
    return ''.join(key.split()).lower()


def _names_something(key):
    """Keys whose value is compared as a name (a domain, a host class), so
    that a space makes it another name.
    """
    return key.startswith(FAILURE_DOMAIN_PREFIX) or key == HOST_CLASS


def _unread(key, keys):
    """Why ``key`` (in nova-ext's namespace, not read) is ignored, with the
    closest key read when there is one.
    """
    folded = _fold(key)
    # The shared namespace (and failure-domain prefix) would make every
    # key look close to every other: only what follows it is compared.
    for prefix in (FAILURE_DOMAIN_PREFIX, NAMESPACE):
        if not folded.startswith(prefix):
            continue
        candidates = {_fold(known)[len(prefix):]: known for known in keys
                      if _fold(known).startswith(prefix)}
        close = difflib.get_close_matches(folded[len(prefix):], candidates,
                                          n=1)
        if close:
            return ('key %r is not read by nova-ext; it is ignored (did you '
                    'mean %r?)' % (key, candidates[close[0]]))
        if prefix == FAILURE_DOMAIN_PREFIX:
            return ('key %r is not read by nova-ext; it is ignored (failure-'
                    'domain levels, [nova_ext] failure_domain_levels: %s)'
                    % (key, ', '.join(sorted(
                        known[len(prefix):] for known in candidates.values()))
                       or 'none'))
        break
    return 'key %r is not read by nova-ext; it is ignored' % key


def _problems(metadata, keys, by_fold):
    problems = []
    for key, value in sorted((metadata or {}).items()):
        if key in keys:
            if (_names_something(key) and isinstance(value, str)
                    and value != value.strip()):
                problems.append(
                    '%s=%r has surrounding whitespace: a %s of its own, not '
                    '%r' % (key, value, 'class' if key == HOST_CLASS
                            else 'domain', value.strip()))
        elif _fold(key) in by_fold:
            problems.append('key %r is not %r (case or spaces differ); it '
                            'is ignored' % (key, by_fold[_fold(key)]))
        elif _fold(key).startswith(NAMESPACE):
            problems.append(_unread(key, keys))
    return problems


def _field(aggregate, *names):
    for name in names:
        try:
            value = getattr(aggregate, name)
        except Exception:  # an object field that was not loaded
            continue
        if value is not None:
            return value
    return None


def problems_in_aggregates(aggregates, keys):
    """[(aggregate name, problem)] for the metadata of ``aggregates``
    against ``keys`` (:func:`keys_read`): keys differing from one read only
    by case or whitespace, domain and host-class values with surrounding
    whitespace, and ``nova_ext:`` keys (in any case) nova-ext does not read,
    with the closest key read when one is close. Other namespaces are not
    nova-ext's business.
    """
    key_set, by_fold = _index(tuple(keys))
    return [(_field(aggregate, 'name', 'uuid', 'id'), problem)
            for aggregate in aggregates
            for problem in _problems(_field(aggregate, 'metadata'), key_set,
                                     by_fold)]


def warn_near_misses(aggregate, keys=None):
    """Log each problem of ``aggregate`` (against ``keys``, default
    :func:`keys_read` of nova.conf) once per process.
    """
    if keys is None:
        keys = keys_read(CONF)
    for name, problem in problems_in_aggregates([aggregate], keys):
        if (name, problem) in _reported:
            continue
        _reported[name, problem] = True
        LOG.warning('nova-ext: aggregate %s: %s', name, problem)
