# SPDX-License-Identifier: Apache-2.0
"""``nova_ext:spread_constraints``: several spread rules in one request.

The value (flavor extra spec or scheduler hint; the flavor's wins) is one
or more constraints separated by ``;``::

    <level>:<rule>[,<option>...]

* ``<level>``: one of ``[nova_ext] failure_domain_levels``, or ``host``
  (each host its own domain);
* ``<rule>``: ``max=N`` (at most N members of the server group per domain)
  or ``skew=N`` (a domain may hold at most N members more than the least
  filled eligible domain), N >= 1;
* options: ``min_domains=N`` (only with ``skew``: while fewer than N
  eligible domains exist, the least filled counts as holding 0), ``soft``
  (FailureDomainSpreadWeigher prefers, FailureDomainAntiAffinityFilter
  ignores) or ``hard`` (the default: the filter enforces).

Examples: ``rack:max=1;row:max=3``, ``rack:skew=1,min_domains=3``,
``rack:max=1;host:skew=1,soft``. A level may carry one ``max`` and one
``skew`` rule, not two of a kind.

This module only parses and does the arithmetic; counting the members is
:mod:`nova_ext.scheduler.failure_domains`'.
"""

import collections
import heapq
import typing as ty

from nova_ext import numbers

KEY = 'nova_ext:spread_constraints'
HOST_LEVEL = 'host'
MAX = 'max'
SKEW = 'skew'

FORM = ("<level>:max=<N>|skew=<N>[,min_domains=<N>][,soft|hard] joined by "
        "';', N a whole number >= 1, min_domains only with skew, e.g. "
        "'rack:max=1;row:skew=1,min_domains=3,soft'")


class Constraint(ty.NamedTuple):
    level: str
    kind: str  # MAX or SKEW
    value: int  # the maximum per domain, or the skew
    min_domains: ty.Optional[int] = None
    hard: bool = True

    def __str__(self):
        text = '%s:%s=%d' % (self.level, self.kind, self.value)
        if self.min_domains is not None:
            text += ',min_domains=%d' % self.min_domains
        if not self.hard:
            text += ',soft'
        return text


def levels_allowed(configured_levels):
    return list(configured_levels) + [HOST_LEVEL]


def parse(value, configured_levels, key=KEY, source=None):
    """The constraints ``value`` asks for, in its order.

    ``configured_levels``: ``[nova_ext] failure_domain_levels``. ValueError
    naming ``key`` (and ``source``, e.g. 'scheduler hint'), the offending
    constraint and the allowed form when ``value`` is malformed.
    """
    where = '%s %s' % (source, key) if source else key
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str) or not value.strip():
        raise ValueError('%s=%r: expected %s' % (where, value, FORM))
    levels = levels_allowed(configured_levels)
    constraints = []
    seen = set()
    for text in value.split(';'):
        constraint = _parse_one(text, levels, where)
        if (constraint.level, constraint.kind) in seen:
            raise ValueError(
                '%s: constraint %r repeats a %s rule for level %s; give one '
                '%s rule per level: %s' % (where, text, constraint.kind,
                                           constraint.level, constraint.kind,
                                           FORM))
        seen.add((constraint.level, constraint.kind))
        constraints.append(constraint)
    return constraints


def _parse_one(text, levels, where):
    def refuse(why):
        return ValueError('%s: constraint %r %s; expected %s'
                          % (where, text, why, FORM))

    level, colon, rest = text.partition(':')
    if not colon or not level:
        raise refuse('has no <level>:')
    if level not in levels:
        raise refuse('names no failure-domain level (known: %s)'
                     % ', '.join(levels))
    parts = rest.split(',')
    rule, equals, number = parts[0].partition('=')
    if rule not in (MAX, SKEW) or not equals:
        raise refuse('has no max=<N> or skew=<N> rule')
    try:
        limit = numbers.parse_whole_number(number, minimum=1)
    except ValueError as error:
        raise refuse('%s=%r: %s' % (rule, number, error))
    min_domains = None
    hard = None
    for option in parts[1:]:
        name, equals, number = option.partition('=')
        if name in ('soft', 'hard') and not equals:
            if hard is not None:
                raise refuse('says hard or soft twice')
            hard = name == 'hard'
        elif name == 'min_domains' and equals:
            if rule != SKEW:
                raise refuse('has min_domains, which only goes with skew')
            if min_domains is not None:
                raise refuse('repeats min_domains')
            try:
                min_domains = numbers.parse_whole_number(number, minimum=1)
            except ValueError as error:
                raise refuse('min_domains=%r: %s' % (number, error))
        else:
            raise refuse('has an unknown option %r' % option)
    return Constraint(level, rule, limit, min_domains,
                      True if hard is None else hard)


def verdicts(constraint, members, eligible, placed, asked, remaining=0,
             fillable=()):
    """{domain: whether one more server of the request there keeps
    ``constraint``} for each domain of ``asked``.

    ``members``: {domain: members of the group there} at the constraint's
    level, the request's own servers not among them; ``placed``: {domain:
    servers of this request placed so far}; ``eligible``: the domains the
    least count is taken over (those of the request's candidates, plus
    those holding members); ``remaining``: servers of the request still to
    place after this one, which may go to the domains of ``fillable``.

    A request's servers are legal together when, for every domain that
    gets one, its final count is at most ``max``, or at most ``skew`` above
    the least final count over the eligible domains (0 while fewer than
    ``min_domains`` are eligible): exactly when they could have been placed
    one after the other, each passing Kubernetes' check ``members + 1 -
    least <= skew`` (doc/source/scheduler.rst). A domain is allowed for the
    server being placed when the servers still to come can complete a legal
    request: they go, one at a time, to the least filled domain of
    ``fillable``, which raises the least count as far as it can go while
    keeping the fullest domain that gets one as low as it can be.
    Without that look-ahead a multi-create with skew would refuse, for its
    second server, the domain its first took, though the fourth needs it.
    """
    if constraint.kind == MAX:
        return {domain: members.get(domain, 0) + placed.get(domain, 0) + 1
                <= constraint.value for domain in asked}
    counts = collections.Counter(members)
    counts.update(placed)
    fillable = frozenset(fillable)
    remaining = max(0, remaining)
    found = {}
    # domains alike in these respects get the same answer: one
    # computation per kind of domain, not per domain (``host`` level)
    by_kind = {}
    for domain in asked:
        kind = (counts[domain], domain in placed, domain in fillable,
                domain in eligible)
        if kind not in by_kind:
            by_kind[kind] = _skew_allows(constraint, counts, eligible,
                                         placed, domain, remaining, fillable)
        found[domain] = by_kind[kind]
    return found


def _skew_allows(constraint, counts, eligible, placed, domain, remaining,
                 fillable):
    final = collections.Counter(counts)
    final[domain] += 1
    receiving = set(placed)
    receiving.add(domain)
    if remaining:
        if not fillable:
            return False
        levels = [(final[other], other) for other in fillable]
        heapq.heapify(levels)
        for _ in range(remaining):
            level, other = heapq.heappop(levels)
            final[other] = level + 1
            receiving.add(other)
            heapq.heappush(levels, (level + 1, other))
    domains = set(eligible) | receiving
    least = min(final[other] for other in domains)
    if (constraint.min_domains is not None
            and len(domains) < constraint.min_domains):
        least = 0
    return all(final[other] - least <= constraint.value
               for other in receiving)


def holds(constraint, final, eligible, added):
    """Whether ``final`` ({domain: members}, a request's servers among them
    in the domains ``added``) keeps ``constraint`` (the rule of
    :func:`verdicts` once every server is placed).
    """
    if constraint.kind == MAX:
        return all(final.get(domain, 0) <= constraint.value
                   for domain in added)
    domains = set(eligible) | set(added)
    least = min((final.get(domain, 0) for domain in domains), default=0)
    if (constraint.min_domains is not None
            and len(domains) < constraint.min_domains):
        least = 0
    return all(final.get(domain, 0) - least <= constraint.value
               for domain in added)


def completable(constraints, members, eligible, placed, signature,
                remaining, fillable, budget=2000):
    """Whether one more server of the request on a host of ``signature``
    (its domain at each constraint's level) leaves a way to place the
    ``remaining`` servers still to come on hosts of the signatures of
    ``fillable`` with every constraint kept: True, False, or None when
    ``budget`` steps of the search did not tell.

    ``members``, ``eligible`` and ``placed``: one each per constraint, as
    for :func:`verdicts`. :func:`verdicts` answers for each constraint on
    its own, exactly; several constraints together can leave no way even
    when each alone does (a rack of the skew's least filled row is full
    at the power level), which only a search of the request's completions
    finds: depth first, least filled first, each step cut when some
    constraint alone already has no way.
    """
    fillable = sorted(set(fillable), key=str)
    steps = [budget]
    dead = set()

    def alone(chosen, left):
        for index, constraint in enumerate(constraints):
            counted = collections.Counter(placed[index])
            for sig in chosen[:-1]:
                counted[sig[index]] += 1
            domain = chosen[-1][index]
            if not verdicts(constraint, members[index], eligible[index],
                            counted, [domain], left,
                            {sig[index] for sig in fillable})[domain]:
                return False
        return True

    def search(chosen, start, left):
        if not alone(chosen, left):
            return False
        if not left:
            return True
        key = tuple(sorted(chosen, key=str))
        if key in dead:
            return False
        for position in range(start, len(fillable)):
            steps[0] -= 1
            if steps[0] < 0:
                raise _OutOfSteps()
            if search(chosen + [fillable[position]], position, left - 1):
                return True
        dead.add(key)
        return False

    try:
        return search([signature], 0, max(0, remaining))
    except _OutOfSteps:
        return None


class _OutOfSteps(Exception):
    pass


def least_filled(members, eligible, min_domains=None):
    """(domain, members) of the least filled eligible domain (ties: the
    first by name), or (None, 0) while fewer than ``min_domains`` domains
    are eligible or none is.
    """
    if not eligible or (min_domains is not None
                        and len(eligible) < min_domains):
        return None, 0
    return min(((members.get(domain, 0), domain) for domain in eligible),
               key=lambda pair: (pair[0], str(pair[1])))[::-1]
