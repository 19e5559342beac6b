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


def skew_minimum(eligible_counts, min_domains=None):
    """The least number of members over the eligible domains (a list of
    counts, one per domain, empty domains as 0), taken as 0 while fewer
    than ``min_domains`` domains are eligible (Kubernetes' minDomains).
    """
    if not eligible_counts:
        return 0
    if min_domains is not None and len(eligible_counts) < min_domains:
        return 0
    return min(eligible_counts)


def skew_allows(members, minimum, skew):
    """Whether one more member in a domain holding ``members`` keeps the
    skew: (members + 1) - minimum <= skew.
    """
    return members + 1 - minimum <= skew


def allows(constraint, members, minimum):
    """Whether ``constraint`` lets one more member into a domain holding
    ``members`` (``minimum``: :func:`skew_minimum`, used by skew only).
    """
    if constraint.kind == MAX:
        return members < constraint.value
    return skew_allows(members, minimum, constraint.value)
