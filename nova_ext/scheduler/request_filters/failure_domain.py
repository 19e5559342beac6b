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

Members are counted where they are (the request's cloud's
``group_members``), the server being scheduled or moved left out, as the
group's turn counts them (:mod:`nova_ext.scheduler.group_turns`) -- but
before the turn takes the group's lock, which is held from the count to
the claims only: a member placed meanwhile makes this count low, so the
pre-filter excludes less, never too much, and the filter, in the turn,
stays the exact check. Without the lock (``[nova_ext]
spread_serialize_groups = False``), the conductor's
``instance_group.hosts``. Hosts are placed in domains as the filter places
them, from the request's
:class:`~nova_ext.scheduler.scheduling_request.SchedulingRequest`
(nova-scheduler's view of the aggregates, the compute traits).

With ``nova_ext:spread_constraints`` each hard ``max`` constraint excludes
its full domains (``host``-level ones excepted: a host is its own
domain, declared nowhere). Skew constraints are left to the filter: whether
a domain is too far ahead depends on the least filled eligible domain, and
which domains are eligible depends on the candidates placement is about to
return, so no exclusion here is provably safe.

A domain is excluded only when every host the exclusion would remove is
in that domain by the filter's own rules (aggregates win over traits; a
host in conflicting aggregates or with two domain traits is in none), so
the pre-filter never removes a host the filter would accept; the filter
stays the exact check. Soft-anti-affinity groups and malformed requests
are left alone: the filter refuses the latter with a reason.
"""

import collections

from oslo_config import cfg
from oslo_log import log as logging

from nova.scheduler import request_filter
from nova.scheduler import utils as scheduler_utils

from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import group_members
from nova_ext.scheduler import request_filters
from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import spread_constraints

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

HARD_POLICY = 'anti-affinity'


class _Declared(object):
    """Where domains at one level are declared: {domain: aggregates
    declaring it} and {domain: hosts of those aggregates}, and {domain:
    providers whose traits name it}, with the request's rules for which
    domain a host is in.
    """

    def __init__(self, request, level):
        self.level = level
        self.domains = request.domains()
        key = failure_domains.AGGREGATE_KEY_PREFIX + level
        self.aggregates = collections.defaultdict(set)
        self.hosts_of_aggregates = collections.defaultdict(set)
        if self.domains.use_aggregates:
            for aggregate in request.aggregates:
                domain = aggregate.metadata.get(key)
                if domain is not None:
                    self.aggregates[domain].add(aggregate.uuid)
                    self.hosts_of_aggregates[domain].update(
                        aggregate.hosts or ())
        self.trait_hosts = collections.defaultdict(set)
        if self.domains.use_traits:
            for host, domains in request.cloud.failure_domain_traits(
                    level).items():
                for domain in domains:
                    self.trait_hosts[domain].add(host)

    def all_in(self, hosts, domain):
        return all(self.domains.of(host, self.level) == domain
                   for host in hosts)


def _hard_max(request):
    """The request's hard ``max`` constraints, [] when it asks for none
    (malformed requests too: the filter names their mistake). Skew
    constraints are left to the filter: the least filled eligible domain
    depends on candidates placement has not returned yet.
    """
    spec = request.spec_obj
    if scheduler_utils.request_is_rebuild(spec):
        return None, []
    group = spec.instance_group if 'instance_group' in spec else None
    if group is None or group.policy != HARD_POLICY:
        return None, []
    try:
        spread = request.spread()
    except failure_domains.InvalidSpreadRequest as error:
        LOG.debug('failure_domain request filter: leaving instance %s to '
                  'FailureDomainAntiAffinityFilter: %s', spec.instance_uuid,
                  error)
        return None, []
    if spread is None:
        return None, []
    return spread.group, [c for c in spread.hard
                          if c.kind == spread_constraints.MAX
                          and c.level != failure_domains.HOST_LEVEL]


def _members(ctxt, request, group):
    """{host: members}, the request's servers left out: as the request
    counted them already (explain, the simulator), else where the cloud
    says they are, as the group's turn counts them (read now, before the
    turn: a member placed meanwhile by another scheduler can only make
    this count low, and a low count excludes less, never too much), else
    the conductor's view of the group.
    """
    if (request.counted_members is not None
            or not CONF.nova_ext.spread_serialize_groups):
        return request.members()
    not_counted = set(request.instance_uuids)
    not_counted.add(request.spec_obj.instance_uuid)
    return group_members.per_host(
        request.cloud.group_members(ctxt, group.uuid), not_counted)


def _full_domains(request, members, constraint):
    members = failure_domains.per_domain(members, request.domains(),
                                         constraint.level)
    return sorted(domain for domain, count in members.items()
                  if count >= constraint.value
                  and not str(domain).startswith('host:'))


def _exclusions(declared, full):
    """(forbidden aggregate uuids, forbidden traits, domains excluded)."""
    aggregates, traits, excluded = set(), set(), []
    for domain in full:
        by_aggregate = declared.aggregates.get(domain, set())
        if by_aggregate and declared.all_in(
                declared.hosts_of_aggregates[domain], domain):
            aggregates |= by_aggregate
            excluded.append(domain)
        by_trait = declared.trait_hosts.get(domain, set())
        if by_trait and declared.all_in(by_trait, domain):
            traits.add(failure_domains.trait_prefix(declared.level) + domain)
            if domain not in excluded:
                excluded.append(domain)
        if domain not in excluded:
            LOG.debug('failure_domain request filter: %s %s is full but '
                      'stays in the query: nothing declares it, or a host '
                      'its exclusion would remove is in another domain by '
                      'the filter\'s rules', declared.level, domain)
    return aggregates, traits, excluded


def _reason(constraint, group, excluded):
    return ('failure_domain request filter left %s %s out of the placement '
            'query: %s already hold%s the maximum of %d member%s of server '
            'group %s (%s)' % (
                constraint.level, ', '.join(excluded),
                'it' if len(excluded) == 1 else 'they',
                's' if len(excluded) == 1 else '', constraint.value,
                '' if constraint.value == 1 else 's', group.name,
                group.uuid))


@request_filter.trace_request_filter
def exclude_full_domains(ctxt, request_spec):
    try:
        request = scheduling_request.of(request_spec)
    except scheduling_request.NotActivated:
        return False  # activation is what runs this pre-filter at all
    group, constraints = _hard_max(request)
    if not constraints:
        return False
    members = _members(ctxt, request, group)
    aggregates, traits, reasons = set(), set(), []
    for constraint in constraints:
        full = _full_domains(request, members, constraint)
        if not full:
            continue
        forbidden, forbidden_traits, excluded = _exclusions(
            _Declared(request, constraint.level), full)
        aggregates |= forbidden
        traits |= forbidden_traits
        LOG.debug('failure_domain request filter: instance %s: %s %s full; '
                  'forbidden aggregates %s, traits %s',
                  request_spec.instance_uuid, constraint.level,
                  ', '.join(full), ','.join(sorted(forbidden)) or 'none',
                  ','.join(sorted(forbidden_traits)) or 'none')
        if excluded:
            reasons.append(_reason(constraint, group, excluded))
    if aggregates:
        request_filters.destination(request_spec).append_forbidden_aggregates(
            aggregates)
    request_spec.root_forbidden.update(traits)
    if not reasons:
        return False
    # Placement may now have nothing to return: the NoValidHost then says
    # why rather than nothing
    request.refuse('; '.join(reasons))
    return True
