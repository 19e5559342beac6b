# SPDX-License-Identifier: Apache-2.0
"""FailureDomainAntiAffinityFilter: the hard failure-domain spread.

Driven by:

* aggregate metadata ``nova_ext:failure_domain:<level>=<domain>`` (which rack,
  row or power feed a host is in), or compute traits (``[nova_ext]
  failure_domain_sources``);
* a server group (``--hint group=<uuid>``, policy anti-affinity or
  soft-anti-affinity) plus the scheduler hint or flavor extra spec
  ``nova_ext:spread_level=<level>`` and, optionally,
  ``nova_ext:spread_max_per_domain=<N>``, or several constraints with
  ``nova_ext:spread_constraints`` (:mod:`nova_ext.scheduler.
  spread_constraints`, e.g. ``rack:max=1;row:skew=1,min_domains=3``);
* ``[nova_ext] failure_domain_levels``, ``default_max_per_domain`` and
  ``hosts_without_failure_domain``.

A host passes when the request's hard constraints allow one more server in
its domains (:class:`nova_ext.scheduler.failure_domains.Judgement`; the
rules: doc/source/scheduler.rst). For the request's first server, the
request's candidates are fixed: the hosts Nova hands this filter, less
those the filters after it in ``[filter_scheduler] enabled_filters``
refuse, so that where the filter stands in that list changes nothing (last
is cheapest: nothing to run twice). Soft constraints are the weigher's.

A malformed request fails alone with a NoValidHost whose reason names the
hint or extra spec; the scheduler keeps serving. When no host passes, the
reason (fitted to what Nova keeps of it in the server's fault:
:mod:`nova_ext.scheduler.fault_reasons`) names each
constraint, the domains it refused with their counts and, for a skew, the
least filled domain; the scheduler log has it whole.
"""

import collections
import functools
import itertools
import operator

from oslo_log import log as logging

from nova import exception
from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils

from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import fault_reasons
from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import spread_constraints

LOG = logging.getLogger(__name__)

NAME = 'FailureDomainAntiAffinityFilter'


class FailureDomainAntiAffinityFilter(filters.BaseHostFilter):

    # A rebuild stays on its host: spreading does not apply.
    RUN_ON_REBUILD = False

    def filter_all(self, filter_obj_list, spec_obj):
        hosts = list(filter_obj_list)
        if scheduler_utils.request_is_rebuild(spec_obj):
            return hosts
        try:
            request = scheduling_request.of(spec_obj)
            spread = request.spread()
        except (failure_domains.InvalidSpreadRequest,
                scheduling_request.NotActivated) as error:
            if isinstance(error, scheduling_request.NotActivated) and (
                    not _asks_for_spread(spec_obj)):
                return hosts
            LOG.warning("%s: refusing request for instance %s: %s", NAME,
                        spec_obj.instance_uuid, error)
            raise exception.NoValidHost(
                reason=fault_reasons.fitted(str(error)))
        # what a claim in the request's turn is judged again on, and found
        # among (nova_ext.scheduler.spread_requests.claim)
        request.judged_hosts = hosts
        if spread is None or not spread.hard:
            return hosts
        if request.candidates is None:
            request.candidates = self._candidates(request, hosts, spec_obj)
        judgement = failure_domains.Judgement(request, spread.hard, hosts,
                                              together=True)
        refusals = judgement.refusals(hosts)
        # a pass of C over 10,000 hosts, not a Python loop
        allowed = list(map(operator.is_, refusals, itertools.repeat(None)))
        passed = list(itertools.compress(hosts, allowed))
        refused = [] if len(passed) == len(hosts) else [
            (host, refusal) for host, refusal in zip(hosts, refusals)
            if refusal is not None]
        if refused and LOG.isEnabledFor(logging.DEBUG):
            for host_state, refusal in refused:
                LOG.debug("%s: host %s refused: %s", NAME, host_state.host,
                          describe(judgement, refusal))
        # Why no host is left, should none be: asked only then
        # (SchedulingRequest.why_no_host), of this call, the last one for
        # the server that found none
        request.refuse_unless_others_did(
            functools.partial(self._why_no_host, request, judgement,
                              len(request.placed()), passed, refused, spread,
                              spec_obj) if refused else None)
        return passed

    def _why_no_host(self, request, judgement, index, passed, refused,
                     spread, spec_obj):
        """(reason, in full) when the request's ``index``-th server found
        no host because of the hosts this filter refused: none it passed
        is left once the filters after it ran, and some it refused every
        filter after it passes -- the reason it would give were it last;
        None when it refused none of those (the reason is then the other
        filters', Nova's), or when a later server found none (a filter
        before this one left it no host).
        """
        if index != len(request.placed()):
            return None
        if self._after(request, passed, spec_obj, index):
            return None
        theirs = set(self._after(request, [host for host, _ in refused],
                                 spec_obj, index))
        refused = [(host, refusal) for host, refusal in refused
                   if host in theirs]
        if not refused:
            return None
        full, short = why_no_host(judgement, refused, spread.group)
        LOG.info("%s: no host left for instance %s: %s", NAME,
                 spec_obj.instance_uuid, full)
        return short, full

    def _candidates(self, request, hosts, spec_obj):
        """``hosts`` (the request's first server's, after the filters
        before this one) less those the filters after it refuse.
        """
        return self._after(request, hosts, spec_obj, 0)

    def _after(self, request, hosts, spec_obj, index):
        """Those of ``hosts`` every filter after this one in
        ``enabled_filters`` passes for the request's ``index``-th server.
        """
        later = request.enabled_filters
        for position, enabled in enumerate(later):
            if enabled is self:
                later = later[position + 1:]
                break
        else:
            later = []
        for host_filter in later:
            if not hosts:
                break
            if host_filter.run_filter_for_index(index):
                hosts = list(host_filter.filter_all(hosts, spec_obj) or [])
        return hosts

    def host_passes(self, host_state, spec_obj):
        return bool(self.filter_all([host_state], spec_obj))


def _asks_for_spread(spec_obj):
    try:
        return bool(failure_domains.spread_asked(spec_obj))
    except failure_domains.InvalidSpreadRequest:
        return True


def describe(judgement, refusal):
    """One host's refusal, for a person: the constraint, the host's domain
    and its count, and for a skew the least filled domain.
    """
    constraint = refusal.constraint
    if constraint is failure_domains.TOGETHER:
        return _together(judgement)
    level = constraint.level
    if refusal.domain is failure_domains.NO_DOMAIN:
        return '%s: in no %s' % (constraint, level)
    text = '%s: %s %s already holds %d member%s of the group' % (
        constraint, level, _name(refusal.domain), refusal.members,
        '' if refusal.members == 1 else 's')
    if constraint.kind == spread_constraints.MAX:
        return text + ' (max %d)' % constraint.value
    least, count = judgement.least_filled(
        judgement.constraints.index(constraint))
    if least is None:
        return text + ' (%s)' % _no_least(constraint)
    return text + ' (least filled %s %s: %d)' % (level, _name(least), count)


def _together(judgement):
    return ('%s together leave the %d servers of this request still to '
            'place no way' % (' and '.join(
                str(c) for c in judgement.constraints),
                judgement.remaining))


def _no_least(constraint):
    if constraint.min_domains is None:
        return 'no %s is eligible' % constraint.level
    return ('fewer than %d %ss eligible: the least counts as 0'
            % (constraint.min_domains, constraint.level))


def _name(domain):
    return str(domain)


def why_no_host(judgement, refused, group):
    """(the whole reason, the reason as the server's fault keeps it whole:
    :mod:`nova_ext.scheduler.fault_reasons`) when the
    constraints refused every host: per constraint, in the order asked,
    the domains it refused with their counts (fullest first) and, for a
    skew, the least filled eligible domain; the hosts in no domain; the
    group last.
    """
    by_constraint = collections.OrderedDict(
        (index, ([], [])) for index in range(len(judgement.constraints)))
    together = False
    for host_state, refusal in refused:
        if refusal.constraint is failure_domains.TOGETHER:
            together = True
            continue
        index = judgement.constraints.index(refusal.constraint)
        domains, hosts = by_constraint[index]
        if refusal.domain is failure_domains.NO_DOMAIN:
            hosts.append(host_state.host)
        elif (refusal.domain, refusal.members) not in domains:
            domains.append((refusal.domain, refusal.members))
    parts = []
    for index, (domains, hosts) in by_constraint.items():
        if domains or hosts:
            parts.append((judgement, index, domains, sorted(set(hosts))))
    if together:
        parts.append((judgement, None, [], []))
    named = ' (server group %s %s)' % (group.name, group.uuid)
    full = _reason(parts, None) + named
    if fault_reasons.fits(full):
        return full, full
    # shorter and shorter: the group by its uuid alone (a name may take
    # 255 characters), then fewer domains and hosts listed
    for most in (3, 1):
        for tail in (named, ' (server group %s)' % group.uuid):
            short = _reason(parts, most) + tail
            if fault_reasons.fits(short):
                return full, short
    return full, fault_reasons.fitted(_reason(parts, 1))


def _listed(items, most):
    if most is None or len(items) <= most:
        return ', '.join(items)
    return '%s and %d more' % (', '.join(items[:most]), len(items) - most)


def _reason(parts, most):
    texts = []
    for judgement, index, domains, hosts in parts:
        if index is None:
            texts.append(_together(judgement))
            continue
        constraint = judgement.constraints[index]
        level = constraint.level
        pieces = []
        if domains:
            fullest = sorted(domains, key=lambda d: (-d[1], str(d[0])))
            listed = _listed(['%s (%d)' % (_name(d), n) for d, n in fullest],
                             most)
            if constraint.kind == spread_constraints.MAX:
                pieces.append('every %s left is full (max %d per %s): %s'
                              % (level, constraint.value, level, listed))
            else:
                least, count = judgement.least_filled(index)
                if least is None and constraint.min_domains is None:
                    floor = 'no %s is eligible' % level
                elif least is None:
                    floor = ('fewer than %d %ss are eligible, so the least '
                             'filled counts as 0' % (constraint.min_domains,
                                                     level))
                else:
                    floor = 'the least filled eligible %s is %s with %d%s' % (
                        level, _name(least), count,
                        '' if judgement.has_hosts(index, least)
                        else ' (no host left there)')
                if judgement.remaining:
                    pieces.append(
                        '%s; no %s left keeps the %d servers of this request '
                        'still to place within %d of it: %s' % (
                            floor, level, judgement.remaining + 1,
                            constraint.value, listed))
                else:
                    pieces.append('%s; every %s left is more than %d above '
                                  'it: %s' % (floor, level, constraint.value,
                                              listed))
        if hosts:
            pieces.append('host%s %s in no %s' % (
                '' if len(hosts) == 1 else 's', _listed(hosts, most), level))
        texts.append('%s: %s' % (constraint, '; '.join(pieces)))
    return '%s: %s' % (NAME, '; '.join(texts))
