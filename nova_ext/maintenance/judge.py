# SPDX-License-Identifier: Apache-2.0
"""Whether a server group's spread constraints hold where its members run
now: the standing-state judgement of ``nova-ext-manage spread audit``, of
every step of a repair plan and of a drain.

Pure: it takes plain data (a :class:`Layout` of hosts and where each member
is) and uses the scheduler's own constraint arithmetic
(:func:`nova_ext.scheduler.spread_constraints.holds` and
``least_filled``). The rules, for one constraint at its level, with no
request in flight (doc/source/maintenance.rst):

* a member counts in the domain of the host it runs on (a member on no
  host -- shelved, never scheduled -- counts nowhere);
* ``max=N`` holds when every domain holds at most N members;
* ``skew=S`` holds when every domain holds at most S more members than the
  least filled **eligible** domain: the domains of the usable hosts (an
  enabled, running compute service, not in maintenance) that have a domain
  at every level of the constraints judged with it (hard with hard, soft
  with soft, as the scheduler judges them), plus every domain holding a
  member. While fewer domains than ``min_domains`` are eligible, the least
  filled counts as holding 0;
* a member on a host in no domain at the level breaks the constraint (the
  scheduler would never have put it there).

The **excess** measures how far a constraint is from holding: for ``max``
the members above N, summed over the domains; for ``skew`` the members
above the least filled plus S, summed over the domains; plus one per member
in no domain. It is 0 exactly when the constraint holds, and a plan is
"no worse than the start" when no hard constraint's excess grows.
"""

import collections
import typing as ty

from nova_ext.scheduler import spread_constraints

HOST_LEVEL = spread_constraints.HOST_LEVEL
MAX = spread_constraints.MAX
SKEW = spread_constraints.SKEW


class Layout(object):
    """The hosts as the judgement sees them.

    ``domains``: {host: {level: domain}} (a level missing or None: no
    domain there; the ``host`` level is each host's own name);
    ``usable``: the hosts a server may be moved to (enabled, up, not in
    maintenance, not being drained).
    """

    def __init__(self, domains, usable):
        self.domains = {host: dict(levels) for host, levels
                        in domains.items()}
        self.usable = frozenset(usable)
        self._usable_domains = {}

    def domain(self, host, level):
        if host is None:
            return None
        if level == HOST_LEVEL:
            return host
        return self.domains.get(host, {}).get(level)

    def located(self, host, levels):
        """Whether ``host`` has a domain at each of ``levels``."""
        return all(self.domain(host, level) is not None for level in levels)

    def signature(self, host, levels):
        return tuple(self.domain(host, level) for level in levels)

    def usable_domains(self, level, together):
        """The domains at ``level`` of the usable hosts that have a domain
        at every level of ``together``.
        """
        key = (level, together)
        found = self._usable_domains.get(key)
        if found is None:
            found = self._usable_domains[key] = frozenset(
                self.domain(host, level) for host in self.usable
                if self.located(host, together)) - {None}
        return found

    def without(self, hosts):
        """This layout with ``hosts`` no longer usable (being drained)."""
        return Layout(self.domains, self.usable - set(hosts))


class Verdict(ty.NamedTuple):
    constraint: spread_constraints.Constraint
    holds: bool
    excess: int
    # {domain: [members there]}, at the constraint's level
    members: ty.Dict[ty.Any, ty.List[str]]
    eligible: ty.FrozenSet
    # (least filled eligible domain or None, its count; 0 while fewer than
    # min_domains are eligible)
    least: ty.Tuple[ty.Any, int]
    # {domain: count} of the domains above the limit
    over: ty.Dict[ty.Any, int]
    # members on a host in no domain at the level
    homeless: ty.Tuple[str, ...]
    # skew with min_domains, fewer domains eligible
    too_few: bool

    @property
    def counts(self):
        return {domain: len(members)
                for domain, members in self.members.items()}

    @property
    def limit(self):
        """The most members a domain may hold now."""
        if self.constraint.kind == MAX:
            return self.constraint.value
        return self.least[1] + self.constraint.value


def levels_of(constraints):
    return tuple(dict.fromkeys(c.level for c in constraints))


def judge(constraint, together, layout, placement):
    """The :class:`Verdict` on ``constraint`` for ``placement`` ({member:
    host or None}); ``together``: the levels of the constraints judged with
    it (its own included).
    """
    level = constraint.level
    members = collections.defaultdict(list)
    homeless = []
    for member, host in sorted(placement.items()):
        if host is None:
            continue
        domain = layout.domain(host, level)
        if domain is None:
            homeless.append(member)
        else:
            members[domain].append(member)
    members = dict(members)
    counts = {domain: len(there) for domain, there in members.items()}
    eligible = layout.usable_domains(level, tuple(together)) | counts.keys()
    holds = spread_constraints.holds(constraint, counts, eligible,
                                     counts.keys())
    least = spread_constraints.least_filled(counts, eligible,
                                            constraint.min_domains)
    if constraint.kind == MAX:
        limit = constraint.value
    else:
        limit = least[1] + constraint.value
    over = {domain: count for domain, count in counts.items()
            if count > limit}
    excess = sum(count - limit for count in over.values()) + len(homeless)
    too_few = (constraint.min_domains is not None
               and len(eligible) < constraint.min_domains)
    return Verdict(constraint, holds and not homeless, excess, members,
                   frozenset(eligible), least, over, tuple(homeless),
                   too_few)


def judge_all(constraints, layout, placement):
    """A :class:`Verdict` per constraint, in their order: hard ones judged
    together, soft ones together.
    """
    hard = levels_of(c for c in constraints if c.hard)
    soft = levels_of(c for c in constraints if not c.hard)
    return [judge(c, hard if c.hard else soft, layout, placement)
            for c in constraints]


def excess(constraints, layout, placement):
    """(the excess of each hard constraint, in their order; the soft
    constraints' excess summed).
    """
    hard, soft = [], 0
    for verdict in judge_all(constraints, layout, placement):
        if verdict.constraint.hard:
            hard.append(verdict.excess)
        else:
            soft += verdict.excess
    return tuple(hard), soft


def no_worse(excess, baseline):
    """Whether no hard constraint is further from holding than in
    ``baseline`` (both the hard part of what :func:`excess` gives).
    """
    return all(now <= then for now, then in zip(excess, baseline))
