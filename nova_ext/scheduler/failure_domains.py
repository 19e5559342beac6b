# SPDX-License-Identifier: Apache-2.0
"""Failure domains: which domain a host is in, what a request asks for, and
what its constraints say of the hosts for the server being placed.

Shared by the failure_domain request filter, FailureDomainAntiAffinityFilter
(hard constraints), FailureDomainSpreadWeigher (soft), ``nova-ext-manage
explain`` and the simulator, which all read one
:class:`~nova_ext.scheduler.scheduling_request.SchedulingRequest`.

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
import itertools
import time
import typing as ty
import weakref

import cachetools
import os_traits
from oslo_config import cfg
from oslo_log import log as logging

from nova_ext import cache
from nova_ext import conf as ext_conf
from nova_ext import numbers
from nova_ext.scheduler import aggregate_keys
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


def _normalized(text):
    return os_traits.normalize_name(text)[len('CUSTOM_'):]


def trait_prefix(level):
    return TRAIT_PREFIX + _normalized(level) + '_'


def domain_trait(level, domain):
    """The placement trait saying "in ``domain`` at ``level``"."""
    return trait_prefix(level) + _normalized(domain)


# -- what a request asks ------------------------------------------------------

class Spread(ty.NamedTuple):
    """What a request asks: its server group and its constraints, in the
    order asked (:class:`spread_constraints.Constraint`).
    """

    group: ty.Any
    constraints: ty.Tuple[spread_constraints.Constraint, ...]

    @property
    def hard(self):
        return tuple(c for c in self.constraints if c.hard)

    @property
    def soft(self):
        return tuple(c for c in self.constraints if not c.hard)

    def levels(self):
        return list(dict.fromkeys(c.level for c in self.constraints))


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


def spread_asked(spec_obj, default_level=None):
    """The request's :class:`Spread`, or None when it asks for none.
    ``default_level``: ``[nova_ext] default_spread_level``, for the weigher
    (a soft spread of every spreadable group that names no level).

    Raises InvalidSpreadRequest, naming the key, when the request is
    malformed.
    """
    constraints, asked, source = _constraints_asked(spec_obj, default_level)
    if not constraints:
        return None
    group = spec_obj.instance_group if 'instance_group' in spec_obj else None
    key = asked.partition('=')[0]
    if group is None:
        if source == 'scheduler hint':
            raise InvalidSpreadRequest(
                "scheduler hint %s needs a server group: add --hint "
                "group=<server group uuid>" % key)
        # a flavor (or the default) only spreads servers booted in a group
        return None
    if group.policy not in SPREADABLE_POLICIES:
        if source is None:
            return None
        raise InvalidSpreadRequest(
            "%s %s conflicts with server group %s policy %r"
            % (source, asked, group.uuid, group.policy))
    return Spread(group, tuple(constraints))


# -- where hosts are ----------------------------------------------------------

class Domains(object):
    """Which domain each host is in, at each level, for one request.

    From the aggregates of nova-scheduler's HostManager (``aggregates``:
    its aggregate objects, which Nova keeps current as operators change
    them), then the compute-node provider's traits (``[nova_ext]
    failure_domain_sources``; ``traits(level)``: {provider name: domains},
    the request's cloud's ``failure_domain_traits``), then ``[nova_ext]
    hosts_without_failure_domain``. A host that two aggregates place in
    different domains at one level is in none there (a warning, once per
    process). Each level is worked out once per request, for every host.
    """

    def __init__(self, aggregates, traits, conf=CONF):
        self.aggregates = aggregates
        self._trait_domains = traits
        self.options = placing_options(conf)
        self.own_domain, self.use_aggregates, self.use_traits = self.options
        # {level: {host name: domain}} and {level: {provider: domains}}
        self._levels = {}
        self._traits = {}

    def traits_read(self):
        """{level: the answer of ``traits(level)`` these domains read}."""
        return dict(self._traits)

    def of(self, host, level):
        """``host``'s domain at ``level``, or NO_DOMAIN."""
        return self.at(level)[host]

    def at(self, level):
        """{host: its domain at ``level``} for any host asked (a dict that
        places a host the first time it is asked).
        """
        found = self._levels.get(level)
        if found is None:
            found = self._levels[level] = _Level(self, level)
        return found

    def _place(self, host, level):
        """The domain of a host no aggregate places at ``level``: its
        compute node provider's trait (the provider is named after its
        host for every driver but ironic), else its own domain or none.
        """
        if level == HOST_LEVEL:
            return 'host:' + host
        domain = self._from_traits(host, level)
        if domain is NO_DOMAIN and self.own_domain:
            return 'host:' + host
        return domain

    def _read_aggregates(self, level):
        """{host: its domain, NO_DOMAIN when two aggregates disagree}."""
        if not self.use_aggregates:
            return {}
        key = AGGREGATE_KEY_PREFIX + level
        declared = {}
        placed = []
        for aggregate in self.aggregates:
            domain = aggregate.metadata.get(key)
            if domain is not None:
                hosts = aggregate.hosts or ()
                declared.update(dict.fromkeys(hosts, domain))
                placed.append((domain, hosts))
        if sum(len(hosts) for _domain, hosts in placed) > len(declared):
            # a host in two aggregates: in no domain if they disagree
            named = collections.defaultdict(set)
            for domain, hosts in placed:
                for host in hosts:
                    named[host].add(domain)
            for host, domains in named.items():
                if len(domains) > 1:
                    declared[host] = NO_DOMAIN
                    _warn_conflict(host, key, sorted(domains), level)
        return declared

    def _from_traits(self, provider, level):
        if not self.use_traits:
            return NO_DOMAIN
        found = self._traits.get(level)
        if found is None:
            found = self._traits[level] = self._trait_domains(level)
        domains = found.get(provider, ())
        return next(iter(domains)) if len(domains) == 1 else NO_DOMAIN


def placing_options(conf=CONF):
    """(own domain for a host in none, aggregates a source, traits a
    source): the options that decide where a host is.
    """
    options = conf.nova_ext
    return (options.hosts_without_failure_domain == 'host',
            'aggregates' in options.failure_domain_sources,
            'traits' in options.failure_domain_sources)


# {(host, key, domains): True} already warned about in this process: a
# conflict is a fact about the operator's aggregates, logged once rather
# than per request; the WARNED_KEPT most recent (an older one is warned
# again), cleared with nova-ext's other caches (cache.forget_all)
WARNED_KEPT = 4096
_conflicts_warned = cachetools.LRUCache(maxsize=WARNED_KEPT)
cache.register_reset(_conflicts_warned.clear)


class _Level(dict):
    """{host: domain} at one level of a request's :class:`Domains`: the
    aggregates' answers read at once, the others as hosts are asked.
    """

    def __init__(self, domains, level):
        super().__init__(() if level == HOST_LEVEL
                         else domains._read_aggregates(level))
        self.domains = domains
        self.level = level

    def __missing__(self, host):
        domain = self[host] = self.domains._place(host, self.level)
        return domain


def _warn_conflict(host, key, domains, level):
    entry = (host, key, tuple(domains))
    if entry in _conflicts_warned:
        return
    _conflicts_warned[entry] = True
    LOG.warning("nova-ext: host %(host)s is in aggregates declaring "
                "different %(key)s (%(domains)s); it is treated as being "
                "in no failure domain at level %(level)s: fix the "
                "aggregates", {'host': host, 'key': key,
                               'domains': ', '.join(domains), 'level': level})


class _CheckedAggregates(object):
    """When :func:`warn_near_misses` last looked at the aggregates, against
    which keys, and the aggregate objects it has checked. nova-scheduler's
    HostManager replaces an aggregate's object when the aggregate changes,
    so an object is checked once in its life.
    """

    def __init__(self):
        self.clear()

    def clear(self):
        self.keys = None
        self.walked_at = None
        self.objects = weakref.WeakSet()

    def due(self, keys):
        """True when the aggregates should be looked at now."""
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


def warn_near_misses(aggregates):
    """Log what nova-ext would ignore in ``aggregates``' metadata
    (:func:`aggregate_keys.warn_near_misses`), at most once per
    ``[nova_ext] failure_domain_cache_seconds``, each aggregate object once
    in its life.
    """
    keys = aggregate_keys.keys_read(CONF)
    checked = _checked_aggregates
    if not checked.due(keys):
        return
    for aggregate in aggregates:
        if aggregate not in checked.objects:
            aggregate_keys.warn_near_misses(aggregate, keys)
            checked.objects.add(aggregate)


# -- members ------------------------------------------------------------------

def members_seen_by_conductor(hosts, members, host_states):
    """{host: members there}, from what the conductor read before
    scheduling (``hosts``: the group's, each host once), corrected by the
    instance lists of ``host_states`` (a host holding several of
    ``members``, the group's members less the servers being scheduled or
    moved). Used when the group is scheduled without its spread lock, which
    counts members where they are (:mod:`nova_ext.scheduler.group_turns`).
    """
    counts = collections.Counter(hosts)
    for host_state in host_states:
        if host_state.host in counts:
            on_host = len(members.intersection(host_state.instances))
            counts[host_state.host] = max(counts[host_state.host], on_host)
    return counts


# -- what the constraints say of hosts ----------------------------------------

class Refusal(ty.NamedTuple):
    """Why a constraint refuses a host."""

    # TOGETHER: each constraint alone allows the host, all together leave
    # the request's later servers no way (``domain``: the host's domains)
    constraint: ty.Any
    domain: ty.Any  # NO_DOMAIN: the host has none at the level
    members: int  # in the domain: the group's, plus this request's servers


TOGETHER = 'together'


class DomainCounts(object):
    """Where a request's group stands at the levels of ``constraints``:
    each host's domains, the members and the request's servers placed so
    far per domain, and each constraint's eligible domains. What
    FailureDomainSpreadWeigher ranks by; :class:`Judgement` adds what the
    constraints allow.

    ``request``: the :class:`SchedulingRequest`, for the members, the
    servers placed so far and the request's candidates; ``hosts``: the
    hosts the server may go to now (Nova hands the filters those that
    passed for the previous server).

    The eligible domains of each constraint are those of the request's
    candidates that have a domain at every level judged, plus those holding
    members; a host without a domain at one of the levels is refused by
    all (Kubernetes leaves such a node out of every constraint).
    """

    def __init__(self, request, constraints, hosts):
        self.constraints = tuple(constraints)
        domains = request.domains()
        # {host state: its domain at each constraint's level}, shared by
        # every judgement of the request at the same levels
        candidates = request.candidates
        self.signature = request.signatures(
            tuple(c.level for c in self.constraints),
            hosts if candidates is None or candidates is hosts
            else itertools.chain(candidates, hosts))
        members = request.members()
        placed = collections.Counter(request.placed())
        self.members = [per_domain(members, domains, c.level)
                        for c in self.constraints]
        self.placed = [per_domain(placed, domains, c.level)
                       for c in self.constraints]
        # the request's candidates with a domain at every level, each
        # distinct signature once (the hosts of a rack share theirs)
        located = self.signature.located(candidates or hosts)
        self.eligible = []
        for index, members_there in enumerate(self.members):
            eligible = {signature[index] for signature in located}
            eligible.update(members_there)
            eligible.discard(NO_DOMAIN)
            self.eligible.append(frozenset(eligible))

    def crowding(self, host_state):
        """Members (and servers of the request) in ``host_state``'s domains,
        summed over the constraints; None when it lacks a domain.
        """
        return self.crowding_of(self.signature[host_state])

    def crowding_of(self, signature):
        """:meth:`crowding` of the hosts of ``signature``."""
        if NO_DOMAIN in signature:
            return None
        return sum(self.count(index, domain)
                   for index, domain in enumerate(signature))

    def count(self, index, domain):
        return (self.members[index].get(domain, 0)
                + self.placed[index].get(domain, 0))

    def least_filled(self, index):
        """(domain, count) of constraint ``index``'s least filled eligible
        domain, counting this request's servers; (None, 0) when the
        minimum is taken as 0 (fewer than ``min_domains`` eligible).
        """
        counts = collections.Counter(self.members[index])
        counts.update(self.placed[index])
        return spread_constraints.least_filled(
            counts, self.eligible[index],
            self.constraints[index].min_domains)


class Judgement(DomainCounts):
    """What a request's constraints (all hard, or all soft: each kind is
    judged together, as Kubernetes judges its DoNotSchedule and its
    ScheduleAnyway constraints) say of hosts, for the server of the request
    being placed now (what :class:`DomainCounts` says, and the verdicts).
    """

    def __init__(self, request, constraints, hosts, together=False):
        super().__init__(request, constraints, hosts)
        candidates = request.candidates
        # the domains the server may go to (the hosts handed now, with a
        # domain at every level), and those the request's later servers
        # may go to: the same hosts, if every other filter passed them
        asked = set(map(self.signature.__getitem__, hosts))
        if candidates is None or candidates is hosts:
            fillable = set(asked)
        else:
            fillable = set(map(self.signature.__getitem__, itertools.compress(
                hosts, map(request.candidate_set().__contains__, hosts))))
        asked = {sig for sig in asked if NO_DOMAIN not in sig}
        fillable = {sig for sig in fillable if NO_DOMAIN not in sig}
        self.fillable = [frozenset(signature[index] for signature in fillable)
                         for index in range(len(self.constraints))]
        remaining = self.remaining = request.remaining()
        self.allowed = [
            spread_constraints.verdicts(
                constraint, self.members[index], self.eligible[index],
                self.placed[index], {sig[index] for sig in asked},
                remaining, self.fillable[index])
            for index, constraint in enumerate(self.constraints)]
        # signatures (a domain per constraint) allowed by each constraint
        # alone but leaving the request's later servers no way together
        self.stuck_together = set()
        if together and remaining and len(self.constraints) > 1:
            self._search_together(asked, fillable, remaining)
        # {signature: the first constraint refusing it, or None}, worked
        # out the first time a host of that signature is asked about
        self._refusals = PerSignature(self._refusal)

    def _search_together(self, asked, fillable, remaining):
        for signature in set(asked):
            if not all(self.allowed[index][domain]
                       for index, domain in enumerate(signature)):
                continue
            found = spread_constraints.completable(
                self.constraints, self.members, self.eligible, self.placed,
                signature, remaining, fillable)
            if found is False:
                self.stuck_together.add(signature)
            elif found is None:
                LOG.debug("nova-ext: no answer within the search budget "
                          "whether %s leaves the request's %d later servers "
                          "a way; each constraint alone allows it",
                          signature, remaining)

    def has_hosts(self, index, domain):
        """Whether a host the server may go to is in ``domain`` (at
        constraint ``index``'s level).
        """
        return domain in self.fillable[index]

    def refusal(self, host_state):
        """The first constraint refusing ``host_state``, as a
        :class:`Refusal`, or None (worked out once per signature).
        """
        return self._refusals[self.signature[host_state]]

    def refusals(self, host_states):
        """:meth:`refusal` of each of ``host_states``, in order: two
        look-ups per host, in C.
        """
        return list(map(self._refusals.__getitem__,
                        map(self.signature.__getitem__, host_states)))

    def _refusal(self, signature):
        if NO_DOMAIN in signature:
            return Refusal(self.constraints[signature.index(NO_DOMAIN)],
                           NO_DOMAIN, 0)
        for index, domain in enumerate(signature):
            if not self.allowed[index][domain]:
                return Refusal(self.constraints[index], domain,
                               self.count(index, domain))
        if signature in self.stuck_together:
            return Refusal(TOGETHER, signature, 0)
        return None

    def broken(self, host_state):
        """How many of the constraints refuse ``host_state``."""
        return self.broken_of(self.signature[host_state])

    def broken_of(self, signature):
        """:meth:`broken` for the hosts of ``signature``."""
        if NO_DOMAIN in signature:
            return len(self.constraints)
        return sum(not self.allowed[index][domain]
                   for index, domain in enumerate(signature))


class PerSignature(dict):
    """{signature: ``work(signature)``}, worked out on the first ask: what
    the hosts of a domain share, once per request.
    """

    def __init__(self, work):
        super().__init__()
        self.work = work

    def __missing__(self, signature):
        found = self[signature] = self.work(signature)
        return found


def per_domain(per_host, domains, level):
    """{domain at ``level``: count} of ``per_host`` ({host: count})."""
    found = collections.Counter()
    for host, count in per_host.items():
        domain = domains.of(host, level)
        if domain is not NO_DOMAIN:
            found[domain] += count
    return found
