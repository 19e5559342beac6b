# SPDX-License-Identifier: Apache-2.0
"""A reference model of the failure-domain spread, written apart from
nova_ext.scheduler (it imports nothing from it): what a placement of a
request must satisfy, and whether a request can be satisfied at all.

It states the semantics that doc/source/scheduler.rst documents, in the
plainest code that can state them, for the property tests
(tests/unit/test_spread_properties.py) to hold nova-ext's real filter and
weigher, run through Nova's own scheduler loop, against.

The semantics
=============

A **cluster** is a list of hosts. A host may declare a domain at each
failure-domain level (a rack, a row ...); ``own_domain`` (nova.conf
``[nova_ext] hosts_without_failure_domain = host``) makes a host that
declares none at a level a domain of its own there. The level ``host`` is
every host's own domain.

The **candidates** of a request are the hosts placement returns (room for
the flavor, the service enabled) that every other filter of Nova's passes
(:attr:`Host.passes_other_filters`), less the hosts the request excludes
(a move's source). Which filters run before FailureDomainAntiAffinityFilter
and which after makes no difference.

A request of ``n`` servers (a multi-create when ``n`` > 1; a move is one
server not counted as a member) places them all or none. Members count
where they run, at every level where their host has a domain; the servers
of the request itself are not members yet.

Hard constraints are checked together, over the candidates that have a
domain at the level of every hard constraint (as Kubernetes leaves a node
without one of the topology keys out of every constraint); soft ones
likewise over the soft levels. A constraint's **eligible domains**: the
domains of those candidates at its level, plus every domain holding a
member.

A placement (one host per server) is **legal** when its hosts are
candidates with room for what they get, have a domain at every hard level,
and, for every hard constraint, with the final count ``final[d]`` of each
domain ``d`` (members plus the request's servers there):

* ``max=N``: every domain that gets a server ends with at most N;
* ``skew=S``: every domain that gets a server ends at most S above the
  least final count over the eligible domains (that least taken as 0 while
  fewer than ``min_domains`` domains are eligible).

For one server this is Kubernetes' ``maxSkew`` check (``members + 1 -
minimum <= skew``); for several it holds exactly when the servers could
have been placed one after the other, each passing that check in turn
(:func:`sequence_exists`, tested against :func:`legal`): the order inside
one request does not matter, as no other request sees the group before
the request ends.

A request is **satisfiable** when some legal placement exists.

Soft constraints never refuse: of the legal hosts for a server, the ones
that break the fewest soft constraints rank first (checked for one server,
the first of a request, with no other weigher voting).

Where nova-ext deliberately differs from Kubernetes
===================================================

:data:`DIFFERENCES_FROM_KUBERNETES` lists them, one line each; the table in
doc/source/scheduler.rst is checked against it
(tests/unit/test_spread_properties.py).
"""

import collections
import dataclasses
import typing as ty

HOST_LEVEL = 'host'
MAX = 'max'
SKEW = 'skew'

# (what Kubernetes' PodTopologySpread does, what nova-ext does instead)
DIFFERENCES_FROM_KUBERNETES = (
    ('a domain is eligible when a node in it matches the pod\'s node '
     'affinity, whatever its free resources',
     'a domain is eligible when one of its hosts is a candidate: room for '
     'the flavor (placement), service enabled, every other filter passed'),
    ('pods count only on nodes that match the node affinity and carry '
     'every topology key',
     'every member of the server group counts, wherever it runs, at each '
     'level its host has a domain; a domain holding a member is eligible'),
    ('minDomains only with whenUnsatisfiable: DoNotSchedule',
     'min_domains with hard and soft constraints'),
    ('the pods of one workload are scheduled one at a time',
     'a multi-create is placed as a whole: legal when its servers could '
     'have been placed one after the other'),
    ('no absolute cap per domain',
     'max=N: at most N members per domain'),
)


@dataclasses.dataclass(frozen=True)
class Constraint:
    level: str
    kind: str  # MAX or SKEW
    value: int
    min_domains: ty.Optional[int] = None
    hard: bool = True

    def text(self):
        words = ['%s:%s=%d' % (self.level, self.kind, self.value)]
        if self.min_domains is not None:
            words.append('min_domains=%d' % self.min_domains)
        if not self.hard:
            words.append('soft')
        return ','.join(words)


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    # {level: domain}; a level not in it is not declared for this host
    domains: ty.Mapping[str, str]
    # how many more servers of the request's flavor fit (placement)
    room: int = 1
    enabled: bool = True
    passes_other_filters: bool = True


@dataclasses.dataclass(frozen=True)
class Cluster:
    hosts: ty.Tuple[Host, ...]
    own_domain: bool = False

    def host(self, name):
        return next(host for host in self.hosts if host.name == name)

    def domain(self, host_name, level):
        """The host's domain at ``level``, or None."""
        if level == HOST_LEVEL:
            return 'host:' + host_name
        host = self.host(host_name)
        if level in host.domains:
            return host.domains[level]
        return 'host:' + host_name if self.own_domain else None


@dataclasses.dataclass(frozen=True)
class Request:
    constraints: ty.Tuple[Constraint, ...]
    # {member uuid: host name or None (not on a host, e.g. shelved)}
    members: ty.Mapping[str, ty.Optional[str]]
    servers: int = 1
    # hosts the request may not use (a move's source)
    excluded: ty.FrozenSet[str] = frozenset()

    def hard(self):
        return [c for c in self.constraints if c.hard]

    def soft(self):
        return [c for c in self.constraints if not c.hard]


def candidates(cluster, request):
    return [host for host in cluster.hosts
            if host.room > 0 and host.enabled and host.passes_other_filters
            and host.name not in request.excluded]


def counts(cluster, request, level):
    """{domain: members there} at ``level``."""
    found = collections.Counter()
    for host in request.members.values():
        if host is None:
            continue
        domain = cluster.domain(host, level)
        if domain is not None:
            found[domain] += 1
    return found


def has_every_level(cluster, host_name, constraints):
    return all(cluster.domain(host_name, c.level) is not None
               for c in constraints)


def eligible_domains(cluster, request, constraint, together):
    """The domains ``constraint``'s minimum is taken over; ``together``:
    the constraints it is checked with (the hard ones, or the soft ones).
    """
    domains = {cluster.domain(host.name, constraint.level)
               for host in candidates(cluster, request)
               if has_every_level(cluster, host.name, together)}
    domains.update(counts(cluster, request, constraint.level))
    domains.discard(None)
    return domains


def constraint_holds(cluster, request, constraint, together, placed):
    """Whether the servers placed on the hosts ``placed`` (host names, one
    per server) keep ``constraint``.
    """
    level = constraint.level
    final = counts(cluster, request, level)
    added = collections.Counter()
    for host in placed:
        domain = cluster.domain(host, level)
        if domain is None:
            return False
        final[domain] += 1
        added[domain] += 1
    if constraint.kind == MAX:
        return all(final[d] <= constraint.value for d in added)
    eligible = eligible_domains(cluster, request, constraint, together)
    eligible.update(added)
    least = min(final[d] for d in eligible)
    if (constraint.min_domains is not None
            and len(eligible) < constraint.min_domains):
        least = 0
    return all(final[d] - least <= constraint.value for d in added)


def legal(cluster, request, placed):
    """Whether ``placed`` (a host name per server) is a legal placement."""
    if len(placed) != request.servers:
        return False
    room = {host.name: host.room for host in candidates(cluster, request)}
    for host, wanted in collections.Counter(placed).items():
        if room.get(host, 0) < wanted:
            return False
    hard = request.hard()
    if not all(has_every_level(cluster, host, hard) for host in placed):
        return False
    return all(constraint_holds(cluster, request, c, hard, placed)
               for c in hard)


def broken_soft(cluster, request, placed):
    """How many soft constraints ``placed`` breaks."""
    soft = request.soft()
    if not all(has_every_level(cluster, host, soft) for host in placed):
        return len(soft)
    return sum(not constraint_holds(cluster, request, c, soft, placed)
               for c in soft)


def placements(cluster, request):
    """Every placement of the request's servers on candidates with room,
    as sorted tuples of host names (the order inside a request does not
    matter).
    """
    hosts = candidates(cluster, request)

    def extend(start, left):
        if left == 0:
            yield ()
            return
        for index in range(start, len(hosts)):
            for rest in extend(index, left - 1):
                yield (hosts[index].name,) + rest

    for placed in extend(0, request.servers):
        if legal_room(hosts, placed):
            yield placed


def legal_room(hosts, placed):
    room = {host.name: host.room for host in hosts}
    return all(room[host] >= wanted
               for host, wanted in collections.Counter(placed).items())


def satisfiable(cluster, request):
    return any(legal(cluster, request, placed)
               for placed in placements(cluster, request))


def legal_hosts(cluster, request):
    """The candidates one server of ``request`` may go to (its first
    server, the others then placed somewhere legal).
    """
    found = set()
    for placed in placements(cluster, request):
        if legal(cluster, request, placed):
            found.update(placed)
    return found


def sequence_exists(cluster, request, placed):
    """Whether the servers of ``placed`` can be put on their hosts one after
    the other, each passing Kubernetes' one-pod check (members + 1 - least
    <= skew; members + 1 <= max) over the state the earlier ones left.
    Equivalent to :func:`legal` (a property test says so): the definition
    the batch rule is measured against.
    """
    hard = request.hard()
    if not all(has_every_level(cluster, host, hard) for host in placed):
        return False

    def fits_one(done, host):
        for constraint in hard:
            level = constraint.level
            final = counts(cluster, request, level)
            for earlier in done:
                final[cluster.domain(earlier, level)] += 1
            domain = cluster.domain(host, level)
            if constraint.kind == MAX:
                if final[domain] + 1 > constraint.value:
                    return False
                continue
            eligible = eligible_domains(cluster, request, constraint, hard)
            eligible.add(domain)
            eligible.update(cluster.domain(h, level) for h in placed)
            least = min(final[d] for d in eligible)
            if (constraint.min_domains is not None
                    and len(eligible) < constraint.min_domains):
                least = 0
            if final[domain] + 1 - least > constraint.value:
                return False
        return True

    def search(done, left):
        if not left:
            return True
        for index, host in enumerate(left):
            if index and host == left[index - 1]:
                continue
            if fits_one(done, host) and search(
                    done + [host], left[:index] + left[index + 1:]):
                return True
        return False

    return search([], sorted(placed))


# -- the standing state: a group judged where its members run ----------------
#
# What ``nova-ext-manage spread audit`` says of a group, with no request in
# flight, stated here apart from nova_ext.maintenance:
#
# * a member counts in its host's domain at the constraint's level; a
#   member on no host (shelved, never scheduled) counts nowhere;
# * the **usable** hosts are those a server may be moved to: ``enabled``
#   (an enabled, running compute service, not in maintenance). Room and
#   Nova's other filters do not matter to a standing state;
# * a constraint's eligible domains: those of the usable hosts that have
#   a domain at every level of the constraints judged with it (the hard
#   ones together, the soft ones together), plus every domain holding a
#   member;
# * ``max=N`` is broken by every member above N in a domain, ``skew=S`` by
#   every member more than S above the least filled eligible domain (that
#   least taken as 0 while fewer than ``min_domains`` domains are
#   eligible), and either by every member on a host in no domain at the
#   level. The number of such members is the constraint's **excess**; it
#   holds when that is 0.
#
# A move plan is no worse than its start when no hard constraint's excess
# is ever above what it was at the start.

def usable_hosts(cluster):
    return [host for host in cluster.hosts if host.enabled]


def standing_state(cluster, members, constraints):
    """[(constraint, holds, excess)] of ``constraints`` for a group whose
    members run where ``members`` ({member: host name or None}) says.
    """
    found = []
    for constraint in constraints:
        together = [c for c in constraints if c.hard == constraint.hard]
        level = constraint.level
        per_domain = collections.Counter()
        homeless = 0
        for host in members.values():
            if host is None:
                continue
            domain = cluster.domain(host, level)
            if domain is None:
                homeless += 1
            else:
                per_domain[domain] += 1
        eligible = set(per_domain)
        for host in usable_hosts(cluster):
            if has_every_level(cluster, host.name, together):
                eligible.add(cluster.domain(host.name, level))
        if constraint.kind == MAX:
            ceiling = constraint.value
        else:
            least = min((per_domain[d] for d in eligible), default=0)
            if (constraint.min_domains is not None
                    and len(eligible) < constraint.min_domains):
                least = 0
            ceiling = least + constraint.value
        excess = homeless + sum(max(0, count - ceiling)
                                for count in per_domain.values())
        found.append((constraint, excess == 0, excess))
    return found


def hard_excess(cluster, members, constraints):
    return [excess for constraint, _holds, excess
            in standing_state(cluster, members, constraints)
            if constraint.hard]


def move_destinations(cluster, constraints, members, mover):
    """The hosts Nova's scheduler, with nova-ext's filter, may move
    ``mover`` to: a request of one server, the mover not counted as a
    member, its own host excluded (:func:`legal`).
    """
    others = {m: h for m, h in members.items() if m != mover}
    request = Request(tuple(constraints), others, servers=1,
                      excluded=frozenset([members[mover]]))
    return [host.name for host in candidates(cluster, request)
            if legal(cluster, request, [host.name])]
