# SPDX-License-Identifier: Apache-2.0
"""failure_domain: full failure domains never come back from placement.

Enable with ``[nova_ext] request_filters = failure_domain``. It acts on a
request whose server group has the policy ``anti-affinity`` and asks for a
failure-domain spread with the scheduler hint or flavor extra spec
``nova_ext:spread_level=<level>`` (and ``nova_ext:spread_max_per_domain``,
default ``[nova_ext] default_max_per_domain``): the domains that already
hold that many members of the group are left out of the placement query.

* a domain declared by aggregate metadata
  ``nova_ext:failure_domain:<level>=<domain>``: every aggregate carrying it
  becomes a forbidden aggregate (``member_of=!in:``, placement 1.32);
* a domain declared by compute traits ``CUSTOM_NOVA_EXT_FD_<LEVEL>_<DOMAIN>``
  (``[nova_ext] failure_domain_sources``): that trait becomes forbidden;
* declared both ways: both.

Why: Nova's filters only see the first ``[scheduler] max_placement_results``
(default 1,000) candidates; when those are all in full domains,
FailureDomainAntiAffinityFilter rejects them all although other domains
have room. Here every candidate placement returns is in a domain with
room, so the cap hides none of them.

Members are counted as FailureDomainAntiAffinityFilter counts them: where
placement says they are, read inside the group's spread lock
(:mod:`nova_ext.scheduler.spread_scheduling`, which leaves out the server
being scheduled or moved), else the conductor's ``instance_group.hosts``.
With ``nova_ext:spread_constraints`` each hard ``max`` constraint excludes
its full domains (``host``-level ones excepted: a host is its own domain,
declared nowhere). Skew constraints are left to the filter: whether a
domain is too far ahead depends on the least filled eligible domain, and
which domains are eligible depends on the candidates placement is about to
return, so no exclusion here is provably safe.

A domain is excluded only when every host the exclusion would remove is
in that domain by the filter's own rules (aggregates win over traits; a
host in conflicting aggregates or with two domain traits is in none), so
the pre-filter never removes a host the filter would accept; the filter
stays the exact check. Soft-anti-affinity groups and malformed requests
are left alone: the filter refuses the latter with a reason.

The aggregates declaring domains at a level (one API-database query, 41 ms
for 100 aggregates of 20 hosts) are remembered for ``[nova_ext]
failure_domain_cache_seconds``, as the filter remembers the domains of
members' hosts.
"""

import collections

from oslo_log import log as logging

from nova.scheduler import request_filter
from nova.scheduler import utils as scheduler_utils

from nova_ext import cache
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import request_filters

LOG = logging.getLogger(__name__)

HARD_POLICY = 'anti-affinity'

# level -> [(aggregate uuid, domain, hosts)]
aggregates_by_level = cache.TTLLookup('failure_domain_cache_seconds')


def _aggregates_at_level(ctxt, level):
    key = failure_domains.AGGREGATE_KEY_PREFIX + level
    return [(aggregate.uuid, aggregate.metadata[key],
             tuple(aggregate.hosts or ()))
            for aggregate in request_filters.aggregates_with_key(ctxt, key)]


class _Declared(object):
    """Where domains at one level are declared: {domain: aggregate uuids}
    and {host: aggregate domains} from the aggregates, plus the request's
    trait domains ({provider name: domains}).
    """

    def __init__(self, ctxt, request):
        self.request = request
        self.aggregates = collections.defaultdict(set)
        self.hosts_of_aggregates = collections.defaultdict(set)
        self.aggregate_domains = collections.defaultdict(set)
        if request.use_aggregates:
            self._read_aggregates(ctxt)
        self.trait_hosts = collections.defaultdict(set)
        for host, domains in request.trait_domains.items():
            for domain in domains:
                self.trait_hosts[domain].add(host)

    def _read_aggregates(self, ctxt):
        listing = aggregates_by_level.get(
            self.request.level,
            lambda level: _aggregates_at_level(ctxt, level))
        for uuid, domain, hosts in listing:
            self.aggregates[domain].add(uuid)
            self.hosts_of_aggregates[domain].update(hosts)
            for host in hosts:
                self.aggregate_domains[host].add(domain)

    def domain_of(self, host):
        """The host's domain by :func:`failure_domains.host_domain`'s
        rules; None when it has none (its own domain is never excluded).
        """
        declared = self.aggregate_domains.get(host, ())
        if len(declared) == 1:
            return next(iter(declared))
        from_traits = self.request.trait_domains.get(host, ())
        if len(from_traits) == 1:
            return next(iter(from_traits))
        return None

    def all_in(self, hosts, domain):
        return all(self.domain_of(host) == domain for host in hosts)


def _hard_spreads(request_spec):
    """The request's hard ``max`` constraints (SpreadRequests), [] when it
    asks for none (malformed requests too: the filter names their mistake).
    Skew constraints are left to the filter: the least filled eligible
    domain depends on candidates placement has not returned yet.
    """
    if scheduler_utils.request_is_rebuild(request_spec):
        return []
    group = (request_spec.instance_group
             if 'instance_group' in request_spec else None)
    if group is None or group.policy != HARD_POLICY:
        return []
    try:
        requests = failure_domains.spread_requests(request_spec, [])
    except failure_domains.InvalidSpreadRequest as error:
        LOG.debug('failure_domain request filter: leaving instance %s to '
                  'FailureDomainAntiAffinityFilter: %s',
                  request_spec.instance_uuid, error)
        return []
    return [request for request in requests
            if request.hard and request.kind == 'max']


def _full_domains(request):
    return sorted(domain for domain, members
                  in request.members_per_domain.items()
                  if members >= request.max_per_domain and
                  not str(domain).startswith('host:'))


def _exclusions(declared, full):
    """(forbidden aggregate uuids, forbidden traits, domains excluded)."""
    level = declared.request.level
    aggregates, traits, excluded = set(), set(), []
    for domain in full:
        by_aggregate = declared.aggregates.get(domain, set())
        if by_aggregate and declared.all_in(
                declared.hosts_of_aggregates[domain], domain):
            aggregates |= by_aggregate
            excluded.append(domain)
        by_trait = declared.trait_hosts.get(domain, set())
        if by_trait and declared.all_in(by_trait, domain):
            traits.add(failure_domains.trait_prefix(level) + domain)
            if domain not in excluded:
                excluded.append(domain)
        if domain not in excluded:
            LOG.debug('failure_domain request filter: %s %s is full but '
                      'stays in the query: nothing declares it, or a host '
                      'its exclusion would remove is in another domain by '
                      'the filter\'s rules', level, domain)
    return aggregates, traits, excluded


def _reason(request, excluded):
    group = request.group
    return ('failure_domain request filter left %s %s out of the placement '
            'query: %s already hold%s the maximum of %d member%s of server '
            'group %s (%s)' % (
                request.level, ', '.join(excluded),
                'it' if len(excluded) == 1 else 'they',
                's' if len(excluded) == 1 else '', request.max_per_domain,
                '' if request.max_per_domain == 1 else 's', group.name,
                group.uuid))


@request_filter.trace_request_filter
def exclude_full_domains(ctxt, request_spec):
    aggregates, traits, reasons = set(), set(), []
    for request in _hard_spreads(request_spec):
        full = _full_domains(request)
        if not full:
            continue
        forbidden, forbidden_traits, excluded = _exclusions(
            _Declared(ctxt, request), full)
        aggregates |= forbidden
        traits |= forbidden_traits
        LOG.debug('failure_domain request filter: instance %s: %s %s full; '
                  'forbidden aggregates %s, traits %s',
                  request_spec.instance_uuid, request.level, ', '.join(full),
                  ','.join(sorted(forbidden)) or 'none',
                  ','.join(sorted(forbidden_traits)) or 'none')
        if excluded:
            reasons.append(_reason(request, excluded))
    if aggregates:
        request_filters.destination(request_spec).append_forbidden_aggregates(
            aggregates)
    request_spec.root_forbidden.update(traits)
    if not reasons:
        return False
    # Placement may now have nothing to return: the NoValidHost then says
    # why rather than nothing (spread_scheduling reads it).
    failure_domains.live_members.no_host_because('; '.join(reasons))
    return True
