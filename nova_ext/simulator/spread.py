# SPDX-License-Identifier: Apache-2.0
"""Figures per spread-constraint set, checked apart from the scheduler.

The simulator runs nova-ext's own filter, so asking the filter whether it
kept its promise would prove nothing. :class:`Checker` follows the replay's
placements and, for every server-group member placed, checks each *hard*
constraint of its group against the model's own domains (the cluster's
aggregates, not :mod:`nova_ext.scheduler.failure_domains`' reading of them)
and the members of the group live at that moment:

* ``max=N``: the domain held N members already;
* ``skew=N``: the domain held more than ``minimum + N - 1`` members, the
  minimum taken over the domains of placement's candidates for the request
  and those holding members (what Kubernetes calls eligible domains; 0
  while fewer than ``min_domains`` of them), as the constraint defines it.

A group's constraint set is its ``server_groups`` entry's ``name``, or its
constraints as written. :func:`domain_bound` is an upper bound of the
members a set's hard ``max`` constraints let a group have on the cluster.
"""

import collections
import dataclasses
import math
import typing as ty

from nova_ext.scheduler import spread_constraints


@dataclasses.dataclass
class SetFigures:
    """One constraint set's figures for one configuration."""
    name: str
    constraints: str
    groups: int = 0            # groups whose every member was replayed
    fully_placed: int = 0      # of those, every member placed
    members_placed: int = 0
    hard_violations: int = 0   # members placed against a hard constraint
    # the most members the hard max constraints allow one group (None: no
    # hard max constraint) and how many groups are larger
    domain_bound: ty.Optional[int] = None
    groups_over_bound: int = 0

    @property
    def fully_placed_percent(self):
        return 100.0 * self.fully_placed / self.groups if self.groups else None


def group_constraints(group, default_max):
    """The constraints ``group`` (a model GroupSpec) asks for, parsed with
    any level allowed (the check needs them whatever the configuration
    lets the scheduler read).
    """
    if group.spread_constraints:
        levels = [text.partition(':')[0]
                  for text in group.spread_constraints.split(';')]
        return spread_constraints.parse(group.spread_constraints, levels)
    if group.spread_level and group.policy in (
            'anti-affinity', 'soft-anti-affinity'):
        return [spread_constraints.Constraint(
            group.spread_level, spread_constraints.MAX,
            group.max_per_domain or default_max)]
    return []


class Checker:
    """Follows one replay; ``hosts``: the model's hosts in fleet order."""

    def __init__(self, cluster, workload, default_max):
        self.hosts = [h.name for h in cluster.hosts]
        self.domain_of = {}   # level -> [domain of host i or None]
        self.constraints = {}  # group name -> [Constraint]
        self.set_of = {}       # group name -> set name
        self.sets = {}         # set name -> SetFigures
        self.members = collections.defaultdict(
            collections.Counter)  # (group, level) -> {domain: live members}
        for name, group in workload.groups.items():
            constraints = group_constraints(group, default_max)
            set_name = group.constraint_set_name()
            if not constraints or set_name is None:
                continue
            self.constraints[name] = constraints
            self.set_of[name] = set_name
            if set_name not in self.sets:
                bounded = list(constraints)
                if group.policy == 'anti-affinity':
                    # Nova's own rule: one member per host
                    bounded.append(spread_constraints.Constraint(
                        spread_constraints.HOST_LEVEL,
                        spread_constraints.MAX, 1))
                self.sets[set_name] = SetFigures(
                    set_name, ';'.join(map(str, constraints)),
                    domain_bound=domain_bound(cluster, bounded))
            for constraint in constraints:
                self._index(cluster, constraint.level)
        self.arrivals_of = collections.defaultdict(list)
        for arrival in workload.arrivals:
            if arrival.group in self.constraints:
                self.arrivals_of[arrival.group].append(arrival.index)

    def _index(self, cluster, level):
        if level in self.domain_of:
            return
        if level == spread_constraints.HOST_LEVEL:
            self.domain_of[level] = list(self.hosts)
            return
        found = cluster.domains(level)
        # a host in two domains of one level is in none, as in nova-ext
        self.domain_of[level] = [
            next(iter(found[host])) if len(found.get(host, ())) == 1
            else None for host in self.hosts]

    def placed(self, group, host, candidates):
        """Member of ``group`` placed on host index ``host``; placement
        offered host indexes ``candidates``. Returns the hard constraints
        it broke.
        """
        broken = []
        for constraint in self.constraints.get(group, ()):
            domains = self.domain_of[constraint.level]
            domain = domains[host]
            counts = self.members[group, constraint.level]
            if constraint.hard and domain is not None:
                # the scheduler's own rule (spread_constraints.verdicts),
                # for one server
                eligible = {domains[i] for i in candidates} | {
                    d for d, n in counts.items() if n}
                eligible.discard(None)
                allowed = spread_constraints.verdicts(
                    constraint, counts, eligible, {}, [domain])[domain]
                if not allowed:
                    broken.append(constraint)
            if domain is not None:
                counts[domain] += 1
        if group in self.set_of:
            figures = self.sets[self.set_of[group]]
            figures.members_placed += 1
            figures.hard_violations += bool(broken)
        return broken

    def departed(self, group, host):
        for constraint in self.constraints.get(group, ()):
            domain = self.domain_of[constraint.level][host]
            if domain is not None:
                self.members[group, constraint.level][domain] -= 1

    def finish(self, placements):
        """The figures per set, ``placements`` the replay's (host index or
        None per arrival replayed).
        """
        for group, indexes in self.arrivals_of.items():
            if indexes[-1] >= len(placements):
                continue  # the run stopped before its last member
            figures = self.sets[self.set_of[group]]
            figures.groups += 1
            figures.fully_placed += all(placements[i] is not None
                                        for i in indexes)
            if (figures.domain_bound is not None
                    and len(indexes) > figures.domain_bound):
                figures.groups_over_bound += 1
        return [self.sets[name] for name in sorted(self.sets)]


def domain_bound(cluster, constraints):
    """The most members one group can have on ``cluster`` (its hosts not in
    maintenance) under the hard ``max`` constraints, resources aside; None
    without a hard max constraint.

    The generated levels nest (each domain inside one domain of the next
    level), so with ``host`` below them they form a tree, and the most
    members a tree of per-domain caps holds is exact bottom up: a domain
    holds the least of its cap and what its children hold. A constraint at
    a level the cluster declares by extra aggregates (which need not nest)
    caps the total at max x domains: then the bound may not be reached.
    Skew never caps the total (any count is reachable level), so a set
    without a hard max has no bound.
    """
    caps = {c.level: c.value for c in constraints
            if c.hard and c.kind == spread_constraints.MAX}
    if not caps:
        return None
    hosts = [h for h in cluster.hosts if not h.maintenance]
    host_cap = caps.get(spread_constraints.HOST_LEVEL, math.inf)
    # (level position, domain) -> members it holds; start from the hosts
    holds = collections.Counter()
    generated = [level.level for level in cluster.domain_levels]
    if not generated:
        total = host_cap * len(hosts)
    else:
        inner = generated[0]
        for host in hosts:
            holds[host.domains[inner]] += host_cap
        holds = {d: min(n, caps.get(inner, math.inf))
                 for d, n in holds.items()}
        for position in range(1, len(generated)):
            level = generated[position]
            parent_of = {h.domains[generated[position - 1]]: h.domains[level]
                         for h in hosts}
            outer = collections.Counter()
            for child, n in holds.items():
                outer[parent_of[child]] += n
            holds = {d: min(n, caps.get(level, math.inf))
                     for d, n in outer.items()}
        total = sum(holds.values())
    for level, cap in caps.items():
        if level not in generated and level != spread_constraints.HOST_LEVEL:
            domains = {d for ds in cluster.domains(level).values()
                       for d in ds}
            total = min(total, cap * len(domains))
    return None if math.isinf(total) else int(total)
