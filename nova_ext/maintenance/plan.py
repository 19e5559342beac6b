# SPDX-License-Identifier: Apache-2.0
"""Repair and drain plans: which servers move, in what order, to which kind
of host; and, for each server that cannot move, why.

Driven by ``nova-ext-manage spread audit --plan``, ``spread rebalance``
(:func:`rebalance`) and ``host drain`` (:func:`drain`). Pure: it works on
plain data (:class:`Case` per server group, a
:class:`~nova_ext.maintenance.judge.Layout`) and judges every step with
:mod:`nova_ext.maintenance.judge`.

A move names no host. Nova's scheduler, with nova-ext's filter, picks the
destination; the plan predicts only the destination's **domain class**
(its domain at each level the group's constraints name), as the weigher
would rank it. Because Nova may pick another class, a move enters the plan
only when **every** class the scheduler would accept for it (a move of one
server, not counted as a member of its group: the filter's own rules,
:func:`nova_ext.scheduler.spread_constraints.verdicts`) leaves every hard
constraint no further from holding than at the start
(:func:`judge.no_worse`). The executor plans the rest of a group again
when Nova picks another class than predicted.

With a budget of N moves of one group in flight at once
(``--max-unavailable-per-group``), moves starting in the plan's order, the
states passed through are a prefix of the plan begun with any N of its
moves still in flight; each such state is judged, and a move after which
some would be worse waits for the group's earlier moves (``barrier``).
Every :data:`MAX_WINDOW` moves of a group a barrier bounds that work.

Fewest moves: :func:`rebalance` is greedy -- each step takes the move that
brings the hard constraints closest to holding (one step of look-ahead when
no single move helps) -- and reports a lower bound: for ``max``, the
members above the limit (a move takes one member out of one domain); for
``skew``, the fewest moves that could level the counts within the skew
(each move takes one member out of a domain and puts one into another);
a member in no domain must move. When the plan's length equals the bound,
it is the fewest possible. Work: per step, one judgement per (member's
class, destination class), with members of one class tried once.
"""

import collections
import itertools
import typing as ty

from nova_ext.maintenance import judge
from nova_ext.scheduler import spread_constraints

MAX_WINDOW = 8
DRAINED = 'its host is being drained'
AFFINITY = 'affinity'
ANTI_AFFINITY = 'anti-affinity'


class Case(ty.NamedTuple):
    """One server group as the planner sees it (``uuid`` None: servers in
    no group, each on its own).
    """
    uuid: ty.Optional[str]
    name: str
    policy: ty.Optional[str]
    constraints: tuple
    # {member uuid: host or None}
    placement: ty.Mapping[str, ty.Optional[str]]
    # Nova's anti-affinity rule (ServerGroupAntiAffinityFilter)
    max_per_host: int = 1

    @property
    def levels(self):
        return judge.levels_of(self.constraints)

    @property
    def hard(self):
        return tuple(c for c in self.constraints if c.hard)


class Move(ty.NamedTuple):
    server: str
    group: ty.Optional[str]
    source: str
    # ((level, domain), ...) the plan expects; () when any host will do
    destination: tuple
    why: str
    # starts once every earlier move of its group has finished
    barrier: bool = False


class Blocked(ty.NamedTuple):
    server: str
    group: ty.Optional[str]
    host: ty.Optional[str]
    reason: str


class GroupPlan(ty.NamedTuple):
    case: Case
    moves: ty.List[Move]
    blocked: ty.List[Blocked]
    # hard excess per hard constraint: at the start, at the end if every
    # move lands where predicted
    baseline: tuple
    final: tuple
    soft_before: int
    soft_after: int
    lower_bound: ty.Optional[int] = None
    notes: tuple = ()


def describe_class(levels, signature):
    if not levels:
        return 'any host'
    return ', '.join('%s %s' % (level, domain)
                     for level, domain in zip(levels, signature))


def excess(case, layout, placement):
    """(hard excess per hard constraint, soft excess summed) of the
    group's constraints (:func:`judge.excess`).
    """
    return judge.excess(case.constraints, layout, placement)


def _moved(placement, member, host):
    after = dict(placement)
    after[member] = host
    return after


def _candidate_hosts(case, layout, placement, member):
    """The usable hosts Nova's filters could pass for moving ``member``
    (its own host excluded, as a migration excludes it), before nova-ext's
    constraints: with a domain at every hard level, and Nova's server-group
    policy kept.
    """
    source = placement.get(member)
    hard_levels = judge.levels_of(case.hard)
    others = collections.Counter(host for other, host in placement.items()
                                 if other != member and host is not None)
    hosts = []
    for host in sorted(layout.usable):
        if host == source or not layout.located(host, hard_levels):
            continue
        if case.policy == ANTI_AFFINITY and \
                others[host] >= case.max_per_host:
            continue
        if case.policy == AFFINITY and others and host not in others:
            continue
        hosts.append(host)
    return hosts


def destinations(case, layout, placement, member):
    """{class: hosts of that class} the scheduler would accept for moving
    ``member``: its hard constraints, judged as the filter judges a move
    (the member not counted, the eligible domains those of the candidate
    hosts plus those holding members).
    """
    hosts = _candidate_hosts(case, layout, placement, member)
    levels = case.levels
    by_class = collections.defaultdict(list)
    for host in hosts:
        by_class[layout.signature(host, levels)].append(host)
    if not case.hard or not by_class:
        return dict(by_class)
    allowed = _allowed_domains(case, layout, placement, member, hosts)
    positions = [levels.index(c.level) for c in case.hard]
    return {signature: there for signature, there in by_class.items()
            if all(signature[position] in allowed[index]
                   for index, position in enumerate(positions))}


def _scheduler_counts(case, layout, placement, member, hosts):
    """Per hard constraint: (members per domain without ``member``, the
    eligible domains as the filter takes them for the move).
    """
    others = {m: h for m, h in placement.items() if m != member}
    found = []
    for constraint in case.hard:
        verdict = judge.judge(constraint, (), layout, others)
        eligible = {layout.domain(host, constraint.level) for host in hosts}
        eligible.update(verdict.members)
        eligible.discard(None)
        found.append((verdict.counts, frozenset(eligible)))
    return found


def _allowed_domains(case, layout, placement, member, hosts):
    allowed = []
    for constraint, (counts, eligible) in zip(
            case.hard, _scheduler_counts(case, layout, placement, member,
                                         hosts)):
        asked = {layout.domain(host, constraint.level) for host in hosts}
        verdicts = spread_constraints.verdicts(constraint, counts, eligible,
                                               {}, asked)
        allowed.append({domain for domain, ok in verdicts.items() if ok})
    return allowed


def why_no_destination(case, layout, placement, member):
    """Why the scheduler would refuse every host for moving ``member``, in
    the words ``explain`` uses for the filter's refusals.
    """
    hosts = _candidate_hosts(case, layout, placement, member)
    source = placement.get(member)
    crowded = []
    if case.policy == ANTI_AFFINITY:
        others = collections.Counter(
            host for other, host in placement.items() if other != member)
        crowded = sorted(host for host in layout.usable
                         if host != source and
                         others[host] >= case.max_per_host)
    if not hosts:
        if case.policy == AFFINITY:
            return ('affinity group %s: Nova moves no member away from the '
                    'others' % case.name)
        text = ('no usable host to go to: the others are disabled, down, '
                'in maintenance or being drained')
        if case.hard:
            text += ', or in no %s' % ' / '.join(judge.levels_of(case.hard))
        if crowded:
            text += ('; anti-affinity leaves out %s, which hold%s a member'
                     % (', '.join(crowded), 's' if len(crowded) == 1 else ''))
        return text
    allowed = _allowed_domains(case, layout, placement, member, hosts)
    counted = _scheduler_counts(case, layout, placement, member, hosts)
    parts = []
    for index, constraint in enumerate(case.hard):
        asked = sorted({layout.domain(host, constraint.level)
                        for host in hosts}, key=str)
        refused = [domain for domain in asked
                   if domain not in allowed[index]]
        if not refused:
            continue
        counts, eligible = counted[index]
        shown = ', '.join('%s (%d member%s)' % (
            domain, counts.get(domain, 0),
            '' if counts.get(domain, 0) == 1 else 's')
            for domain in refused[:5])
        if len(refused) > 5:
            shown += ', ...'
        if constraint.kind == judge.MAX:
            tail = 'max %d' % constraint.value
        else:
            least, count = spread_constraints.least_filled(
                counts, eligible, constraint.min_domains)
            if least is None:
                tail = ('fewer than %s %ss eligible: the least counts as 0'
                        % (constraint.min_domains, constraint.level))
            else:
                tail = 'least filled %s %s: %d' % (
                    constraint.level, least, count)
        parts.append('%s refuses %s %s (%s)' % (
            constraint, constraint.level, shown, tail))
    if not parts:
        parts.append('%s together leave no %s to go to' % (
            ' and '.join(str(c) for c in case.hard),
            ' / '.join(judge.levels_of(case.hard))))
    # hosts whose domains the constraints allow, but Nova's anti-affinity
    # does not: worth naming
    if crowded and case.hard:
        allowed = _allowed_domains(case, layout, placement, member,
                                   hosts + crowded)
        crowded = [host for host in crowded if all(
            layout.domain(host, c.level) in allowed[index]
            for index, c in enumerate(case.hard))]
    if crowded:
        parts.append('anti-affinity leaves out %s, which hold%s a member' % (
            ', '.join(crowded), 's' if len(crowded) == 1 else ''))
    return '; '.join(parts)


def _crowding(case, layout, placement, member, signature):
    levels = case.levels
    others = {m: h for m, h in placement.items() if m != member}
    total = 0
    for constraint in case.constraints:
        domain = signature[levels.index(constraint.level)]
        total += sum(1 for host in others.values()
                     if layout.domain(host, constraint.level) == domain)
    return total


def _predict(case, layout, placement, member, classes):
    """The class the weigher would rank first: fewest soft constraints
    broken, then the fewest members in its domains.
    """
    def rank(signature):
        after = _moved(placement, member, classes[signature][0])
        return (excess(case, layout, after)[1],
                _crowding(case, layout, placement, member, signature),
                str(signature))
    return min(classes, key=rank)


def _unsafe(case, layout, placement, member, classes, baseline):
    """The first class (in name order) the scheduler may pick that would
    leave a hard constraint further from holding than ``baseline``, with
    the constraint; None when every class is safe.
    """
    for signature in sorted(classes, key=str):
        after = _moved(placement, member, classes[signature][0])
        hard, _soft = excess(case, layout, after)
        if not judge.no_worse(hard, baseline):
            for constraint, now, then in zip(case.hard, hard, baseline):
                if now > then:
                    return signature, constraint
    return None


def _unsafe_reason(case, signature, constraint):
    return ('Nova may move it to %s, which would leave %s further from '
            'holding than at the start; it waits for a move that makes '
            'that safe' % (describe_class(case.levels, signature),
                           constraint))


class _Step(ty.NamedTuple):
    member: str
    signature: tuple
    host: str  # a host of the class, standing for it in the judgement


def _try(case, layout, placement, member, baseline):
    """(_Step, None) when ``member`` can move safely now, else (None,
    reason).
    """
    classes = destinations(case, layout, placement, member)
    if not classes:
        return None, why_no_destination(case, layout, placement, member)
    unsafe = _unsafe(case, layout, placement, member, classes, baseline)
    if unsafe is not None:
        return None, _unsafe_reason(case, *unsafe)
    signature = _predict(case, layout, placement, member, classes)
    return _Step(member, signature, classes[signature][0]), None


def _with_barriers(case, layout, start, steps, budget, baseline):
    """Whether each of ``steps`` must wait for every earlier move of its
    group (a barrier): when, with at most ``budget`` of the group's moves
    in flight at once, started in order, some set of them still in flight
    while the others finished would be worse than ``baseline``.

    Checked per segment (the moves from a barrier to the next), every set
    of at most ``budget`` moves still in flight; a segment holds at most
    :data:`MAX_WINDOW` moves, so the work per move is bounded.
    """
    budget = max(1, budget)
    done = [dict(start)]
    for step in steps:
        done.append(_moved(done[-1], step.member, step.host))
    barriers = []
    segment = 0
    for index in range(len(steps)):
        barrier = index > 0 and budget > 1 and (
            index - segment >= MAX_WINDOW or not _segment_safe(
                case, layout, done[segment], steps[segment:index + 1],
                budget, baseline))
        if barrier:
            segment = index
        barriers.append(barrier)
    return barriers


def _segment_safe(case, layout, base, started, budget, baseline):
    """Whether every state with ``started`` begun after ``base``, at most
    ``budget`` of them still in flight, keeps within ``baseline``.
    """
    for size in range(1, min(budget, len(started)) + 1):
        for moving in itertools.combinations(range(len(started)), size):
            state = base
            for position, step in enumerate(started):
                if position not in moving:
                    state = _moved(state, step.member, step.host)
            if not judge.no_worse(excess(case, layout, state)[0], baseline):
                return False
    return True


def _moves(case, steps, barriers, sources, why):
    return [Move(step.member, case.uuid, sources[step.member],
                 tuple(zip(case.levels, step.signature)), why(step),
                 barrier)
            for step, barrier in zip(steps, barriers)]


def drain(case, layout, leaving, pinned=None, budget=1, baseline=None):
    """Move every member of ``case`` in ``leaving`` (on the hosts being
    drained: not usable in ``layout``) off its host.

    ``pinned``: {member: why it may not move}; ``baseline``: the hard
    excess no state may pass (default: the current one, in ``layout``).
    """
    pinned = pinned or {}
    placement = dict(case.placement)
    before_hard, before_soft = excess(case, layout, placement)
    baseline = before_hard if baseline is None else tuple(baseline)
    blocked = []
    pending = []
    for member in sorted(leaving):
        if member in pinned:
            blocked.append(Blocked(member, case.uuid, placement[member],
                                   pinned[member]))
        else:
            pending.append(member)
    steps, reasons = [], {}
    progressed = True
    while pending and progressed:
        progressed = False
        for member in list(pending):
            step, reasons[member] = _try(case, layout, placement, member,
                                         baseline)
            if step is None:
                continue
            placement = _moved(placement, member, step.host)
            steps.append(step)
            pending.remove(member)
            progressed = True
    blocked += [Blocked(member, case.uuid, case.placement[member],
                        reasons[member]) for member in pending]
    barriers = _with_barriers(case, layout, case.placement, steps, budget,
                              baseline)
    final_hard, final_soft = excess(case, layout, placement)
    return GroupPlan(case, _moves(case, steps, barriers, case.placement,
                                  lambda step: DRAINED),
                     blocked, baseline, final_hard, before_soft, final_soft)


def _offenders(verdicts, hard):
    """Members breaking the constraints of one kind (hard or soft): in no
    domain, or in a domain above the limit.
    """
    found = set()
    for verdict in verdicts:
        if verdict.constraint.hard != hard or verdict.holds:
            continue
        found.update(verdict.homeless)
        for domain in verdict.over:
            found.update(verdict.members[domain])
    return found


def _why_moved(verdicts, member):
    for verdict in verdicts:
        if verdict.holds:
            continue
        if member in verdict.homeless:
            return '%s: its host is in no %s' % (verdict.constraint,
                                                 verdict.constraint.level)
        for domain, count in verdict.over.items():
            if member in verdict.members[domain]:
                return '%s: %s %s holds %d (at most %d)' % (
                    verdict.constraint, verdict.constraint.level, domain,
                    count, verdict.limit)
    return 'makes room for the next move'


def lower_bound(case, layout, placement):
    """The fewest moves any plan restoring every hard constraint needs."""
    bound = 0
    for verdict in judge.judge_all(case.constraints, layout, placement):
        constraint = verdict.constraint
        if not constraint.hard or verdict.holds:
            continue
        homeless = len(verdict.homeless)
        counts = verdict.counts
        if constraint.kind == judge.MAX:
            needed = homeless + sum(count - constraint.value
                                    for count in counts.values()
                                    if count > constraint.value)
        else:
            needed = max(homeless, _levelling_bound(constraint, verdict))
        bound = max(bound, needed)
    return bound


def _levelling_bound(constraint, verdict):
    """min over the final least L of max(members to take out of domains
    above L + skew, members to put into eligible domains below L).
    """
    counts = verdict.counts
    domains = verdict.eligible
    values = [counts.get(domain, 0) for domain in domains] or [0]
    if verdict.too_few:
        candidates = [0]
    else:
        candidates = range(0, max(values) + 1)
    best = None
    for least in candidates:
        out = sum(max(0, value - least - constraint.value)
                  for value in values)
        into = sum(max(0, least - value) for value in values)
        needed = max(out, into)
        best = needed if best is None else min(best, needed)
    return best or 0


def rebalance(case, layout, pinned=None, budget=1, baseline=None,
              soft=True):
    """Moves restoring ``case``'s hard constraints (then its soft ones,
    where no hard one suffers), fewest first found; members that must move
    but cannot are blocked with the reason.
    """
    pinned = pinned or {}
    placement = dict(case.placement)
    before_hard, before_soft = excess(case, layout, placement)
    baseline = before_hard if baseline is None else tuple(baseline)
    bound = lower_bound(case, layout, placement)
    steps, whys, reasons, moved = [], {}, {}, set()
    phases = [True] + ([False] if soft and len(case.hard) < len(
        case.constraints) else [])
    for hard_phase in phases:
        while True:
            verdicts = judge.judge_all(case.constraints, layout, placement)
            offenders = _offenders(verdicts, hard_phase) - moved
            if not offenders:
                break
            hard_now, _soft_now = excess(case, layout, placement)
            # a soft repair never takes back hard progress
            limit = baseline if hard_phase else hard_now
            chosen = _best(case, layout, placement, offenders, moved,
                           pinned, limit, hard_phase, reasons)
            if chosen is None and hard_phase:
                chosen = _look_ahead(case, layout, placement, offenders,
                                     moved, pinned, limit, reasons)
            if not chosen:
                break
            for step in chosen:
                whys[step.member] = _why_moved(
                    judge.judge_all(case.constraints, layout, placement),
                    step.member)
                placement = _moved(placement, step.member, step.host)
                steps.append(step)
                moved.add(step.member)
    final_verdicts = judge.judge_all(case.constraints, layout, placement)
    blocked = []
    for member in sorted(_offenders(final_verdicts, True) - moved):
        blocked.append(Blocked(member, case.uuid, placement[member],
                               pinned.get(member) or reasons.get(member) or
                               'no move restores the constraint'))
    barriers = _with_barriers(case, layout, case.placement, steps, budget,
                              baseline)
    final_hard, final_soft = excess(case, layout, placement)
    return GroupPlan(case, _moves(case, steps, barriers, case.placement,
                                  lambda step: whys[step.member]),
                     blocked, baseline, final_hard, before_soft, final_soft,
                     bound)


def _gain(case, layout, before, after, hard_phase):
    hard_before, soft_before = excess(case, layout, before)
    hard_after, soft_after = excess(case, layout, after)
    if hard_phase:
        return sum(hard_before) - sum(hard_after), soft_after
    return soft_before - soft_after, 0


def _representatives(layout, levels, placement, members, pinned, reasons):
    """One movable member per class among ``members`` (members of one
    class are alike to the judgement).
    """
    found = {}
    for member in sorted(members):
        if member in pinned:
            reasons[member] = pinned[member]
            continue
        found.setdefault(layout.signature(placement[member], levels)
                         if placement[member] else None, member)
    return list(found.values())


def _best(case, layout, placement, offenders, moved, pinned, limit,
          hard_phase, reasons):
    best, best_key = None, None
    for member in _representatives(layout, case.levels, placement,
                                   offenders, pinned, reasons):
        step, reasons[member] = _try(case, layout, placement, member,
                                     limit)
        if step is None:
            continue
        after = _moved(placement, member, step.host)
        gain, tie = _gain(case, layout, placement, after, hard_phase)
        if gain <= 0:
            reasons[member] = ('no destination Nova would accept brings '
                               'the constraints closer to holding')
            continue
        key = (-gain, tie, member)
        if best_key is None or key < best_key:
            best, best_key = step, key
    return [best] if best else None


def _look_ahead(case, layout, placement, offenders, moved, pinned, limit,
                reasons):
    """Two moves when no single one helps: any movable member first (one
    per class), then an offender.
    """
    best, best_key = None, None
    hard_now = sum(excess(case, layout, placement)[0])
    firsts = _representatives(layout, case.levels, placement,
                              set(placement) - moved, pinned, {})
    for first in firsts:
        if placement[first] is None:
            continue
        step, _why = _try(case, layout, placement, first, limit)
        if step is None:
            continue
        middle = _moved(placement, first, step.host)
        for member in _representatives(layout, case.levels, middle,
                                       offenders - {first}, pinned, {}):
            second, _why = _try(case, layout, middle, member, limit)
            if second is None:
                continue
            after = _moved(middle, member, second.host)
            hard_after, soft_after = excess(case, layout, after)
            gain = hard_now - sum(hard_after)
            if gain <= 0:
                continue
            key = (-gain, soft_after, first, member)
            if best_key is None or key < best_key:
                best, best_key = [step, second], key
    return best


def plan_groupless(server, host, layout):
    """A server in no group leaves its host for any usable host."""
    if not any(other != host for other in layout.usable):
        return None, Blocked(server, None, host, 'no usable host to go to: '
                             'the others are disabled, down, in '
                             'maintenance or being drained')
    return Move(server, None, host, (), DRAINED), None
