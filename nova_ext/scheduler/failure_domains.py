# SPDX-License-Identifier: Apache-2.0
"""Failure domains: which domain a host is in, and what a request asks for.

Shared by FailureDomainAntiAffinityFilter (hard) and
FailureDomainSpreadWeigher (soft).

Operators declare domains in host-aggregate metadata, one key per level::

    openstack aggregate set --property nova_ext:failure_domain:rack=r12 agg-r12

Users ask for spread with a server group plus either a scheduler hint or a
flavor extra spec (the same keys)::

    nova_ext:spread_level=rack
    nova_ext:spread_max_per_domain=2      # optional, [nova_ext] default 1

or several constraints at once (:mod:`nova_ext.scheduler.spread_constraints`,
not together with the two keys above)::

    nova_ext:spread_constraints=rack:max=1;row:skew=1,min_domains=3,soft

When both carry a key the flavor's value wins: the flavor is the operator's
policy, the hint is the user's wish.

A second source (``[nova_ext] failure_domain_sources``): placement traits
``CUSTOM_NOVA_EXT_FD_<LEVEL>_<DOMAIN>`` on a host's compute-node provider,
which the nova-ext libvirt driver reports from the compute's own ``[nova_ext]
failure_domain``. Aggregates win where both name a domain.
"""

import collections
import functools
import itertools
import threading
import time
import typing as ty
import weakref

import os_traits
from oslo_config import cfg
from oslo_log import log as logging

from nova_ext import cache
from nova_ext import conf as ext_conf
from nova_ext import numbers
from nova_ext.scheduler import aggregate_keys
from nova_ext.scheduler import host_facts
from nova_ext.scheduler import spread_constraints

CONF = cfg.CONF
ext_conf.register_opts(CONF)
LOG = logging.getLogger(__name__)

AGGREGATE_KEY_PREFIX = aggregate_keys.FAILURE_DOMAIN_PREFIX
TRAIT_PREFIX = 'CUSTOM_NOVA_EXT_FD_'
SPREAD_LEVEL = 'nova_ext:spread_level'
SPREAD_MAX_PER_DOMAIN = 'nova_ext:spread_max_per_domain'
SPREAD_CONSTRAINTS = spread_constraints.KEY
HOST_LEVEL = spread_constraints.HOST_LEVEL


# Policies whose members may be spread; an affinity group asks the opposite.
SPREADABLE_POLICIES = ('anti-affinity', 'soft-anti-affinity')

# The domain of a host with no (or a conflicting) domain at a level.
NO_DOMAIN = None


class InvalidSpreadRequest(ValueError):
    """The request's spread hint or extra spec cannot be honoured."""


class SpreadRequest(ty.NamedTuple):
    """One spread constraint of a request, with the group's members counted
    at its level. ``kind`` 'max' (``max_per_domain``) or 'skew' (``skew``,
    ``min_domains``); ``hard`` ones are the filter's, every one is weighed.
    """

    level: str
    # None for a skew constraint
    max_per_domain: ty.Optional[int]
    # members of the request's server group per failure domain
    members_per_domain: collections.Counter
    # [nova_ext] hosts_without_failure_domain == 'host', read once
    own_domain: bool
    # {resource provider name: set of domains} at ``level`` from traits
    trait_domains: dict = {}
    # 'aggregates' in [nova_ext] failure_domain_sources, read once
    use_aggregates: bool = True
    group: ty.Any = None
    # {id(aggregate): its domain at ``level`` or None}: the hosts of a
    # rack share its aggregate object, so each is read once per request
    aggregate_domains: ty.Optional[dict] = None
    # {host state: its domain at ``level``}, filled as hosts are asked
    # (:func:`host_domain_memo`), shared by the constraints at ``level``
    host_domains: ty.Optional[dict] = None
    kind: str = spread_constraints.MAX
    skew: ty.Optional[int] = None
    min_domains: ty.Optional[int] = None
    hard: bool = True

    def domain_of(self, host_state):
        return host_domain(host_state, self.level, self.own_domain,
                           self.trait_domains, self.use_aggregates,
                           self.aggregate_domains)

    def domains_of(self, host_states):
        """[:meth:`domain_of` of each host], at a lower price per host for
        the many candidates of a request: each host is placed once per
        request and level (the filter and then the weigher ask for the same
        hosts), from the request's memo of its aggregates' domains.
        """
        if self.host_domains is None:
            return list(map(self.domain_of, host_states))
        return self.host_domains.of(host_states)

    def members_in(self, domain):
        """Members of the group in ``domain`` (0 for an empty domain)."""
        return self.members_per_domain.get(domain, 0)

    @property
    def constraint(self):
        return spread_constraints.Constraint(
            self.level, self.kind,
            self.max_per_domain if self.kind == spread_constraints.MAX
            else self.skew, self.min_domains, self.hard)

    def eligible_domains(self, host_states):
        """The domains the skew is measured over: those of ``host_states``
        (the candidates left by placement and the earlier filters) plus
        those already holding members.
        """
        domains = set(self.members_per_domain)
        domains.update(self.domains_of(host_states))
        domains.discard(NO_DOMAIN)
        return domains

    def minimum(self, host_states):
        """The skew's reference: the least members in an eligible domain
        (0 while fewer than ``min_domains`` are eligible); 0 for ``max``.
        """
        if self.kind != spread_constraints.SKEW:
            return 0
        return spread_constraints.skew_minimum(
            [self.members_in(domain)
             for domain in self.eligible_domains(host_states)],
            self.min_domains)

    def allows(self, domain, minimum):
        """Whether one more member may go to ``domain`` (``minimum``: from
        :meth:`minimum` over the same candidates).
        """
        return spread_constraints.allows(
            self.constraint, self.members_in(domain), minimum)


class Memo(dict):
    """``compute(key)`` for each key asked, computed once. Per domain: a
    request's candidates share a few hundred domains at most, and what a
    constraint says of a domain is the same for all its hosts. Per set of
    aggregates: the hosts of a rack share theirs.
    """

    def __init__(self, compute):
        super().__init__()
        self.compute = compute

    def __missing__(self, key):
        value = self[key] = self.compute(key)
        return value


def _normalized(text):
    return os_traits.normalize_name(text)[len('CUSTOM_'):]


def trait_prefix(level):
    return TRAIT_PREFIX + _normalized(level) + '_'


def domain_trait(level, domain):
    """The placement trait saying "in ``domain`` at ``level``"."""
    return trait_prefix(level) + _normalized(domain)


def _requested(spec_obj, key):
    """Return (value, source) of ``key``: flavor extra spec, else hint."""
    flavor = spec_obj.flavor if 'flavor' in spec_obj else None
    extra_specs = (flavor.extra_specs or {}) if flavor else {}
    if key in extra_specs:
        return extra_specs[key], 'flavor extra spec'
    value = spec_obj.get_scheduler_hint(key)
    if isinstance(value, list):
        # a hint repeated on the command line arrives as a list
        value = value[0] if len(value) == 1 else value
    if value is not None:
        return value, 'scheduler hint'
    return None, None


def host_domain(host_state, level, own_domain=None, trait_domains=None,
                use_aggregates=True, aggregate_domains=None):
    """The host's failure domain at ``level``, or NO_DOMAIN.

    A host in two aggregates naming different domains at one level is
    misconfigured: it gets NO_DOMAIN and a warning, rather than a guess.
    Without an aggregate domain, the domain its provider's traits name
    (``trait_domains``: {provider name: domains}), if exactly one.
    ``own_domain`` (default: from nova.conf) makes a host without a domain
    a domain of its own. ``aggregate_domains``, a dict kept for one request,
    remembers each aggregate's domain by the object's id.
    """
    if level == HOST_LEVEL:
        return 'host:' + host_state.host
    found = NO_DOMAIN
    if use_aggregates:
        found = _aggregates_domain(
            host_state, level, AGGREGATE_KEY_PREFIX + level,
            {} if aggregate_domains is None else aggregate_domains)
    if found is NO_DOMAIN:
        return _domain_without_aggregates(host_state, own_domain,
                                          trait_domains)
    return found


def host_domain_memo(level, own_domain, trait_domains, use_aggregates,
                     aggregate_domains, aggregate_sets=None):
    """A :class:`host_facts.PerHost` of :func:`host_domain` at ``level`` for
    the hosts of one request (``aggregate_domains``: the request's memo of
    its aggregates' domains; ``aggregate_sets(host_states)``: the request's
    :func:`host_facts.aggregate_sets`). What :func:`host_domain` decides
    once per call, it decides here once per request: a call per host costs
    at 10,000 candidates.

    With aggregates as a source, the hosts are placed by their sets of
    aggregates (a tuple of aggregate objects: the hosts of a rack share
    theirs, and Nova's objects hash by identity), each set once, at a price
    per host paid without Python bytecode: 10,000 candidates share a few
    hundred sets. A host whose aggregates name no domain, or disagree, is
    placed alone: the disagreement logged, then traits, then its own domain.
    """
    if level == HOST_LEVEL or not use_aggregates:
        return host_facts.PerHost(functools.partial(map, functools.partial(
            host_domain, level=level, own_domain=own_domain,
            trait_domains=trait_domains, use_aggregates=use_aggregates,
            aggregate_domains=aggregate_domains)))
    key = AGGREGATE_KEY_PREFIX + level
    read_sets = aggregate_sets or host_facts.read_aggregate_sets
    by_aggregates = Memo(functools.partial(_agreed_domain, key,
                                           aggregate_domains))

    def domain_of(host_state):
        found = _aggregates_domain(host_state, level, key, aggregate_domains)
        if found is NO_DOMAIN:
            return _domain_without_aggregates(host_state, own_domain,
                                              trait_domains)
        return found

    def domains_of(host_states):
        domains = list(map(by_aggregates.__getitem__,
                           read_sets(host_states)))
        if NO_DOMAIN in domains:
            for index, (host_state, domain) in enumerate(
                    zip(host_states, domains)):
                if domain is NO_DOMAIN:
                    domains[index] = domain_of(host_state)
        return domains

    return host_facts.PerHost(domains_of)


def _named_domains(aggregates, key, aggregate_domains):
    """(domain, other) that ``aggregates`` name under ``key``: ``other`` is
    a second, different domain one of them names, else None; the domain is
    NO_DOMAIN when none names one. ``aggregate_domains``: {id(aggregate):
    its domain under ``key``}, for one request.
    """
    found = NO_DOMAIN
    for aggregate in aggregates:
        try:
            domain = aggregate_domains[id(aggregate)]
        except KeyError:
            domain = aggregate_domains[id(aggregate)] = (
                aggregate.metadata.get(key))
        if domain is None or domain == found:
            continue
        if found is NO_DOMAIN:
            found = domain
            continue
        return found, domain
    return found, None


def _agreed_domain(key, aggregate_domains, aggregates):
    """The one domain ``aggregates`` name under ``key``, else NO_DOMAIN."""
    found, other = _named_domains(aggregates, key, aggregate_domains)
    return found if other is None else NO_DOMAIN


def _aggregates_domain(host_state, level, key, aggregate_domains):
    """The domain the host's aggregates name under ``key``; NO_DOMAIN when
    none does, or when two disagree (logged).
    """
    found, other = _named_domains(host_state.aggregates, key,
                                  aggregate_domains)
    if other is None:
        return found
    LOG.warning("nova-ext: host %(host)s is in aggregates declaring "
                "different %(key)s (%(first)s, %(second)s); it is "
                "treated as being in no failure domain at level "
                "%(level)s", {'host': host_state.host, 'key': key,
                              'first': found, 'second': other,
                              'level': level})
    return NO_DOMAIN


def _domain_without_aggregates(host_state, own_domain, trait_domains):
    """The domain of a host its aggregates do not place: its provider's
    one trait domain, else its own (``own_domain``), else NO_DOMAIN.
    """
    if trait_domains:
        from_traits = trait_domains.get(host_state.nodename, ())
        if len(from_traits) == 1:
            return next(iter(from_traits))
    if own_domain is None:
        own_domain = CONF.nova_ext.hosts_without_failure_domain == 'host'
    if own_domain:
        return 'host:' + host_state.host
    return NO_DOMAIN


class _CheckedAggregates(object):
    """When :func:`warn_near_misses` last walked the candidates, against
    which keys, and the aggregate objects it has checked. nova-scheduler's
    HostManager shares one object per aggregate between its hosts and
    replaces it when the aggregate changes, so an object is checked once in
    its life.
    """

    def __init__(self):
        self.clear()

    def clear(self):
        self.keys = None
        self.walked_at = None
        self.objects = weakref.WeakSet()

    def due(self, keys):
        """True when the candidates should be walked now."""
        now = time.monotonic()
        if keys != self.keys:
            self.clear()
            self.keys = keys
        elif (self.walked_at is not None and now - self.walked_at
              < CONF.nova_ext.failure_domain_cache_seconds):
            return False
        self.walked_at = now
        return True


_checked_aggregates = _CheckedAggregates()
cache.register_reset(_checked_aggregates.clear)


def warn_near_misses(aggregate_sets):
    """Log what nova-ext would ignore in the candidates' aggregates
    (:func:`aggregate_keys.warn_near_misses`, keys from ``[nova_ext]
    failure_domain_levels``). ``aggregate_sets()``: the request's
    :func:`host_facts.aggregate_sets` of its candidates, asked only when the
    candidates are walked: at most once per ``[nova_ext]
    failure_domain_cache_seconds``, the period nova-ext trusts what it read
    about domains. Each aggregate object is checked once in its life.
    """
    keys = aggregate_keys.keys_read(CONF)
    checked = _checked_aggregates
    if not checked.due(keys):
        return
    for aggregate in host_facts.each_aggregate(aggregate_sets()):
        if aggregate not in checked.objects:
            aggregate_keys.warn_near_misses(aggregate, keys)
            checked.objects.add(aggregate)


def narrow(spec_obj, requests, host_states, kept):
    """A filter kept of ``host_states`` those ``kept`` says (a truth value
    per host, in order): what ``spec_obj`` and its spread ``requests``
    remember of those hosts in their order (names, aggregates, domains)
    follows, so that the weighers, handed the hosts kept, read none again.
    """
    # one list of the hosts kept, shared by what follows them (each only
    # replaces it, never changes it)
    kept_hosts = list(itertools.compress(host_states, kept))
    host_facts.narrow(spec_obj, host_states, kept, kept_hosts)
    if _last_spread_request.spec_obj is spec_obj:
        _last_spread_request.narrow(host_states, kept_hosts)
    # the constraints at one level share theirs
    memos = {id(request.host_domains): request.host_domains
             for request in requests if request.host_domains is not None}
    for host_domains in memos.values():
        host_domains.narrow(host_states, kept, kept_hosts)


def _members_per_host(group, instance_uuid, candidates):
    """How many members of ``group`` each host holds.

    ``group.hosts`` holds the members' hosts (deduplicated by the conductor,
    plus one entry per instance already placed in this multi-create request);
    a candidate host's own instance list (``candidates``: {host name: host
    state}) corrects the count where one host holds several members.
    """
    counts = collections.Counter(group.hosts or [])
    members = set(group.members or [])
    members.discard(instance_uuid)
    for host in list(counts):
        host_state = candidates.get(host)
        if host_state is not None:
            on_host = len(members.intersection(host_state.instances))
            if on_host > counts[host]:
                counts[host] = on_host
    return counts


class LiveMembers(threading.local):
    """Where the members of the group being scheduled in this thread are,
    read from placement inside the group's spread lock
    (:mod:`nova_ext.scheduler.spread_scheduling`), and why the filter left
    no host, for the NoValidHost reason.
    """

    group_uuid = None
    counted = None
    # len(group.hosts) when counted: Nova appends one host per server
    # already placed by this (multi-create) request
    hosts_seen = 0
    why_no_host = None

    def set(self, group_uuid, counted, hosts_seen):
        self.group_uuid = group_uuid
        self.counted = counted
        self.hosts_seen = hosts_seen
        self.why_no_host = None

    def per_host(self, group):
        """{host: members}, or None when nothing was counted for ``group``."""
        if self.group_uuid is None or self.group_uuid != group.uuid:
            return None
        placed_now = collections.Counter((group.hosts or [])[
            self.hosts_seen:])
        return self.counted + placed_now

    def no_host_because(self, reason):
        self.why_no_host = reason

    def reason(self):
        return self.why_no_host

    def clear(self):
        self.set(None, None, 0)


live_members = LiveMembers()


def requested_level(spec_obj):
    """The level the request spreads at (hint, flavor or [nova_ext]
    default_spread_level), or its ``nova_ext:spread_constraints``,
    unvalidated; None when it asks for no spread.
    """
    constraints, _source = _requested(spec_obj, SPREAD_CONSTRAINTS)
    if constraints:
        return constraints
    level, _source = _requested(spec_obj, SPREAD_LEVEL)
    return level or CONF.nova_ext.default_spread_level


class _LastSpreadRequest(threading.local):
    """The last :func:`spread_requests` answer of this thread, and what it
    was computed from.
    """

    # the request itself is kept, so that its id is not reused meanwhile
    spec_obj = None
    key = None
    answer = None
    # the candidate hosts the answer corrected its count with, in order;
    # the same less those a filter dropped (:func:`narrow`); as a set when
    # asked about other hosts (host states hash by identity)
    hosts = ()
    kept = ()
    hosts_set = None

    def clear(self):
        self.spec_obj = self.key = self.answer = self.hosts_set = None
        self.hosts = self.kept = ()

    def release(self, spec_obj):
        if self.spec_obj is spec_obj:
            self.clear()

    def remember(self, spec_obj, key, answer, host_states):
        self.spec_obj, self.key, self.answer = spec_obj, key, answer
        self.hosts = self.kept = list(host_states)
        self.hosts_set = None

    def counted_with(self, host_states):
        """Whether the answer's count saw every one of ``host_states``: at
        the price of one comparison in C for the hosts a filter kept,
        handed on in order; else at a lookup per host.
        """
        if host_states == self.kept:
            return True
        if self.hosts_set is None:
            self.hosts_set = frozenset(self.hosts)
        return self.hosts_set.issuperset(host_states)

    def narrow(self, host_states, kept_hosts):
        if host_states == self.kept:
            self.kept = kept_hosts


_last_spread_request = _LastSpreadRequest()
cache.register_reset(_last_spread_request.clear)
host_facts.register_release(_last_spread_request.release)


def _spread_request_key(spec_obj, host_states, default_level):
    group = spec_obj.instance_group if 'instance_group' in spec_obj else None
    options = CONF.nova_ext
    return (spec_obj.instance_uuid, default_level,
            None if group is None else (group.uuid, len(group.hosts or ())),
            live_members.group_uuid, live_members.hosts_seen,
            id(live_members.counted),
            tuple(options.failure_domain_levels),
            options.default_max_per_domain,
            options.hosts_without_failure_domain,
            tuple(options.failure_domain_sources))


def spread_requests(spec_obj, host_states, default_level=None):
    """Parse what ``spec_obj`` asks and count its group per domain, one
    SpreadRequest per constraint, in the order asked.

    Returns [] when the request asks for no spread. Raises
    InvalidSpreadRequest, naming the key, when the request is malformed.

    The filter and then the weigher ask this for the same request, the
    weigher with the hosts that passed: it gets the filter's answer, whose
    count was corrected with the instance lists of every host the weigher
    sees (:func:`_members_per_host`) and more. At 10,000 hosts that halves
    nova-ext's cost per request. Another instance of a multi-create
    (another member placed), a new spread lock count, other hosts or another
    configuration get a new answer.
    """
    key = _spread_request_key(spec_obj, host_states, default_level)
    last = _last_spread_request
    if (last.spec_obj is spec_obj and last.key == key
            and last.counted_with(host_states)):
        return last.answer
    answer = _spread_requests(spec_obj, host_states, default_level)
    last.remember(spec_obj, key, answer, host_states)
    return answer


def _constraints_asked(spec_obj, default_level):
    """(constraints, what asked for them, its source or None) from the
    request's keys; ([], None, None) when it asks for no spread.
    """
    raw, source = _requested(spec_obj, SPREAD_CONSTRAINTS)
    if raw is not None:
        for old_key in (SPREAD_LEVEL, SPREAD_MAX_PER_DOMAIN):
            _value, old_source = _requested(spec_obj, old_key)
            if old_source is not None:
                raise InvalidSpreadRequest(
                    "%s %s and %s %s cannot be combined: %s says everything "
                    "%s and %s say (e.g. %s=rack:max=2); give one or the "
                    "other" % (source, SPREAD_CONSTRAINTS, old_source,
                               old_key, SPREAD_CONSTRAINTS, SPREAD_LEVEL,
                               SPREAD_MAX_PER_DOMAIN, SPREAD_CONSTRAINTS))
        try:
            constraints = spread_constraints.parse(
                raw, CONF.nova_ext.failure_domain_levels,
                SPREAD_CONSTRAINTS, source)
        except ValueError as error:
            raise InvalidSpreadRequest(str(error))
        return constraints, '%s=%s' % (SPREAD_CONSTRAINTS, raw), source

    level, level_source = _requested(spec_obj, SPREAD_LEVEL)
    if level is None:
        level, level_source = default_level, None
    if level is None:
        return [], None, None
    known = CONF.nova_ext.failure_domain_levels
    if level not in known:
        raise InvalidSpreadRequest(
            "%s %s=%r is not a failure-domain level; known levels: %s"
            % (level_source or '[nova_ext] default_spread_level',
               SPREAD_LEVEL, level, ', '.join(known)))

    raw_max, max_source = _requested(spec_obj, SPREAD_MAX_PER_DOMAIN)
    if raw_max is None:
        max_per_domain = CONF.nova_ext.default_max_per_domain
    else:
        try:
            max_per_domain = numbers.parse_whole_number(raw_max, minimum=1)
        except ValueError as error:
            raise InvalidSpreadRequest("%s %s=%r %s" % (
                max_source, SPREAD_MAX_PER_DOMAIN, raw_max, error))
    return ([spread_constraints.Constraint(
        level, spread_constraints.MAX, max_per_domain)],
        '%s=%s' % (SPREAD_LEVEL, level), level_source)


def _spread_requests(spec_obj, host_states, default_level):
    constraints, asked, source = _constraints_asked(spec_obj, default_level)
    if not constraints:
        return []
    group = spec_obj.instance_group if 'instance_group' in spec_obj else None
    key = asked.partition('=')[0]
    if group is None:
        if source == 'scheduler hint':
            raise InvalidSpreadRequest(
                "scheduler hint %s needs a server group: add --hint "
                "group=<server group uuid>" % key)
        # a flavor (or the default) only spreads servers booted in a group
        return []
    if group.policy not in SPREADABLE_POLICIES:
        if source is None:
            return []
        raise InvalidSpreadRequest(
            "%s %s conflicts with server group %s policy %r"
            % (source, asked, group.uuid, group.policy))

    own_domain = CONF.nova_ext.hosts_without_failure_domain == 'host'
    use_aggregates = 'aggregates' in CONF.nova_ext.failure_domain_sources
    if use_aggregates:
        warn_near_misses(functools.partial(host_facts.aggregate_sets,
                                           spec_obj, host_states))
    per_host = live_members.per_host(group)
    # the candidates on the members' hosts, by name: the names are read
    # once per request (the image weigher reads them too), and picked out
    # in passes that pay no Python bytecode per host
    members_hosts = (set(group.hosts or ()) if per_host is None
                     else set(per_host))
    names = host_facts.names(spec_obj, host_states)
    on_members_hosts = list(map(members_hosts.__contains__, names))
    candidates = dict(zip(itertools.compress(names, on_members_hosts),
                          itertools.compress(host_states, on_members_hosts)))
    if per_host is None:
        per_host = _members_per_host(group, spec_obj.instance_uuid,
                                     candidates)
    # each level is counted once, whatever number of constraints name it
    counted = {}
    requests = []
    for constraint in constraints:
        if constraint.level not in counted:
            counted[constraint.level] = _count_at_level(
                constraint.level, per_host, candidates, own_domain,
                use_aggregates, functools.partial(host_facts.aggregate_sets,
                                                  spec_obj))
        per_domain, trait_domains, aggregate_domains, host_domains = (
            counted[constraint.level])
        is_max = constraint.kind == spread_constraints.MAX
        requests.append(SpreadRequest(
            constraint.level, constraint.value if is_max else None,
            per_domain, own_domain, trait_domains, use_aggregates, group,
            aggregate_domains, host_domains, kind=constraint.kind,
            skew=None if is_max else constraint.value,
            min_domains=constraint.min_domains, hard=constraint.hard))
    return requests


def _count_at_level(level, per_host, candidates, own_domain, use_aggregates,
                    aggregate_sets):
    """(members per domain, trait domains, aggregate-domain memo,
    host-domain memo) at ``level``, members counted per host by
    ``per_host``; ``aggregate_sets``: the request's
    :func:`host_facts.aggregate_sets`.
    """
    trait_domains = {} if level == HOST_LEVEL else _trait_domains(level)
    aggregate_domains = {}
    host_domains = host_domain_memo(level, own_domain, trait_domains,
                                    use_aggregates, aggregate_domains,
                                    aggregate_sets)
    unlisted = [host for host in per_host if host not in candidates]
    unlisted_domains = _domains_of_unlisted_hosts(
        unlisted, level, own_domain, trait_domains, use_aggregates)
    per_domain = collections.Counter()
    for host, count in per_host.items():
        if host in candidates:
            domain = host_domains[candidates[host]]
        else:
            domain = unlisted_domains[host]
        if domain is not NO_DOMAIN:
            per_domain[domain] += count
    return per_domain, trait_domains, aggregate_domains, host_domains


def _domains_at_level(level):
    """{host: set of domains} for every host in an aggregate declaring a
    domain at ``level``: one API-database query.
    """
    from nova import context as nova_context
    from nova import objects

    key = AGGREGATE_KEY_PREFIX + level
    found = collections.defaultdict(set)
    for aggregate in objects.AggregateList.get_by_metadata_key(
            nova_context.get_admin_context(), key):
        # read once per aggregate: a field of a versioned object costs a
        # call, and a rack has dozens of hosts
        domain = aggregate.metadata[key]
        for host in aggregate.hosts:
            found[host].add(domain)
    return dict(found)


def _domains_from_traits(level):
    """{provider name: set of domains} for every provider with a
    ``CUSTOM_NOVA_EXT_FD_<LEVEL>_`` trait: one placement call to list the
    traits, one per trait (domain) for its providers.
    """
    from nova.scheduler.client import report

    prefix = trait_prefix(level)
    found = collections.defaultdict(set)
    try:
        # Inside: a client that cannot be built (no [placement]
        # credentials) is placement trouble too.
        client = report.report_client_singleton()
        resp = client.get('/traits?name=startswith:' + prefix,
                          version='1.6')
        resp.raise_for_status()
        for trait in resp.json()['traits']:
            resp = client.get('/resource_providers?required=' + trait,
                              version='1.18')
            resp.raise_for_status()
            for provider in resp.json()['resource_providers']:
                found[provider['name']].add(trait[len(prefix):])
    except Exception as error:
        # placement trouble must cost this source, not the scheduler
        LOG.warning("nova-ext: could not read the %s* traits from "
                    "placement (%s); failure domains at level %s come "
                    "from aggregates only for now", prefix, error, level)
        return {}
    return dict(found)


def _trait_domains(level):
    # a model of a cloud (the simulator's) declares domains by aggregates
    if cache.model() is not None or (
            'traits' not in CONF.nova_ext.failure_domain_sources):
        return {}
    return trait_domains_by_level.get(level, _domains_from_traits)


domains_by_level = cache.TTLLookup('failure_domain_cache_seconds')
trait_domains_by_level = cache.TTLLookup('failure_domain_cache_seconds')


def _domains_of_unlisted_hosts(hosts, level, own_domain, trait_domains,
                               use_aggregates=True):
    """Domains of members' hosts that are not among this request's candidates.

    Placement or an earlier filter (ServerGroupAntiAffinityFilter removes
    every member host) may have dropped such a host, but its members still
    count against its domain.
    """
    if not hosts:
        return {}
    if level == HOST_LEVEL:
        return {host: 'host:' + host for host in hosts}
    model = cache.model()
    if model is not None:
        known = model.domains_at_level(level)
    elif use_aggregates:
        known = domains_by_level.get(level, _domains_at_level)
    else:
        known = {}
    domains = {}
    for host in hosts:
        # libvirt names its compute node (the provider) after the host
        found = known.get(host) or trait_domains.get(host, ())
        if len(found) == 1:
            domains[host] = next(iter(found))
        else:
            domains[host] = 'host:' + host if own_domain else NO_DOMAIN
    return domains
