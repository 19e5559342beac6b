# SPDX-License-Identifier: Apache-2.0
"""Near misses in host-aggregate metadata: reported, never guessed.

Aggregate metadata keys are free text. ``Nova_Ext:failure_domain:rack`` or
``nova_ext:failure_domain:rack `` (a trailing space) is not the key nova-ext
reads, so the aggregate silently declares nothing; ``r1 `` as a domain is a
different domain from ``r1``. The failure-domain filter and weigher call
:func:`warn_near_misses` for each aggregate they read: it logs one warning
naming the aggregate, the key and what was probably meant, once per
aggregate and problem per process.
"""

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_ext:'

_reported = set()


def near_misses(metadata, key):
    """Problems with ``key`` (an exact nova-ext key) in ``metadata``."""
    problems = []
    for name, value in (metadata or {}).items():
        if name != key and name.strip().lower() == key.lower():
            problems.append('key %r is not %r (case or spaces differ); it '
                            'is ignored' % (name, key))
        elif name == key and isinstance(value, str) and (
                value != value.strip()):
            problems.append('%s=%r has surrounding whitespace: a domain of '
                            'its own, not %r' % (key, value, value.strip()))
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


def warn_near_misses(aggregate, key):
    name = _field(aggregate, 'name', 'uuid', 'id')
    for problem in near_misses(_field(aggregate, 'metadata'), key):
        if (name, problem) in _reported:
            continue
        _reported.add((name, problem))
        LOG.warning('nova-ext: aggregate %s: %s', name, problem)
