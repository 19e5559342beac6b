# SPDX-License-Identifier: Apache-2.0
"""Where hosts are and what a request asks, as nova-scheduler reads them.

The one module of :mod:`nova_ext.maintenance` that calls
:mod:`nova_ext.scheduler.failure_domains`: the audit, the planner and the
drain judge spread exactly as the scheduler does (aggregate metadata
``nova_ext:failure_domain:<level>``, then compute-provider traits, then
``[nova_ext] hosts_without_failure_domain``; the request's hint, flavor
extra spec or ``[nova_ext] default_spread_level``), and when the scheduler
changes how it learns these facts, only this module follows.
"""

from nova_ext.scheduler import cloud
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import spread_constraints

HOST_LEVEL = spread_constraints.HOST_LEVEL
SPREADABLE_POLICIES = failure_domains.SPREADABLE_POLICIES


class UnreadableSpread(ValueError):
    """A stored request whose spread keys the scheduler would refuse."""


class HostDomains(object):
    """``of(host, level)``: the host's domain at ``level`` (at ``host``
    level, the host's own name), or None when it is in none there.

    ``aggregates``: Nova's aggregate objects (``.hosts``, ``.metadata``),
    as nova-scheduler's HostManager holds them; the compute traits read as
    nova-scheduler reads them (the live cloud's, cached for ``[nova_ext]
    failure_domain_cache_seconds``).
    """

    def __init__(self, aggregates, conf):
        self._domains = failure_domains.Domains(
            list(aggregates), cloud.LiveCloud().failure_domain_traits, conf)

    def of(self, host, level):
        if level == HOST_LEVEL:
            return host
        domain = self._domains.of(host, level)
        return None if domain is failure_domains.NO_DOMAIN else domain


def constraints_asked(spec_obj, group, default_level=None):
    """(constraints, whether they come from ``[nova_ext]
    default_spread_level``) that the stored RequestSpec ``spec_obj`` of a
    member of ``group`` asks; ((), False) when it asks for none.

    The scheduler reads the default level for its weigher alone, so the
    constraint it makes of it is returned soft. UnreadableSpread, naming
    the key, when the scheduler would refuse the request.
    """
    spec_obj.instance_group = group
    try:
        spread = failure_domains.spread_asked(spec_obj)
        if spread is not None:
            return tuple(spread.constraints), False
        if default_level:
            spread = failure_domains.spread_asked(spec_obj, default_level)
            if spread is not None:
                return tuple(constraint._replace(hard=False)
                             for constraint in spread.constraints), True
    except failure_domains.InvalidSpreadRequest as error:
        raise UnreadableSpread(str(error))
    return (), False
