# SPDX-License-Identifier: Apache-2.0
"""FailureDomainAntiAffinityFilter: never more than N group members per domain.

Driven by:

* aggregate metadata ``nova_ext:failure_domain:<level>=<domain>`` (which rack,
  row or power feed a host is in);
* a server group (``--hint group=<uuid>``, policy anti-affinity or
  soft-anti-affinity) plus the scheduler hint or flavor extra spec
  ``nova_ext:spread_level=<level>`` and, optionally,
  ``nova_ext:spread_max_per_domain=<N>``, or several constraints with
  ``nova_ext:spread_constraints`` (:mod:`nova_ext.scheduler.
  spread_constraints`, e.g. ``rack:max=1;row:skew=1,min_domains=3``);
* ``[nova_ext] failure_domain_levels``, ``default_max_per_domain`` and
  ``hosts_without_failure_domain``.

A host passes when, for every hard constraint, its domain at the
constraint's level holds fewer than N members of the group (``max``), or
one more member there keeps it within ``skew`` of the least filled
eligible domain: those of the hosts this filter is given, plus those
already holding members (``skew``). Soft constraints are the weigher's.
A malformed request fails alone with a NoValidHost whose reason names the
hint or extra spec; the scheduler keeps serving.
"""

import collections
import functools
import itertools

from oslo_log import log as logging

from nova import exception
from nova.scheduler import filters
from nova.scheduler import utils as scheduler_utils

from nova_ext.scheduler import failure_domains

LOG = logging.getLogger(__name__)


class FailureDomainAntiAffinityFilter(filters.BaseHostFilter):

    # A rebuild stays on its host: spreading does not apply.
    RUN_ON_REBUILD = False

    def filter_all(self, filter_obj_list, spec_obj):
        hosts = list(filter_obj_list)
        if scheduler_utils.request_is_rebuild(spec_obj):
            return hosts
        try:
            requests = failure_domains.spread_requests(spec_obj, hosts)
        except failure_domains.InvalidSpreadRequest as error:
            LOG.warning("FailureDomainAntiAffinityFilter: refusing request "
                        "for instance %s: %s", spec_obj.instance_uuid, error)
            raise exception.NoValidHost(reason=str(error))
        hard = [(request, request.minimum(hosts))
                for request in requests if request.hard]
        if not hard:
            return hosts
        # per constraint: whether a domain has room (the same for every
        # host of the domain, decided once)
        checks = [(request, failure_domains.Memo(
            functools.partial(self._has_room, request, minimum)))
            for request, minimum in hard]
        # constraint by constraint, each over the hosts the earlier ones
        # kept: a refused host is refused by the first constraint it breaks
        passed = hosts
        refused = collections.defaultdict(list)
        for index, (request, has_room) in enumerate(checks):
            verdicts = list(map(has_room.__getitem__,
                                request.domains_of(passed)))
            kept = list(itertools.compress(passed, verdicts))
            if len(kept) < len(passed):
                failure_domains.narrow(spec_obj, requests, passed, verdicts)
                request, minimum = hard[index]
                for host_state, verdict in zip(passed, verdicts):
                    if not verdict:
                        # says why, in the log
                        self._domain_has_room(host_state, request, minimum)
                        refused[index].append(host_state)
            passed = kept
        if hosts and not passed:
            reason = self.why_no_host(refused, hard)
            LOG.info("FailureDomainAntiAffinityFilter: no host left for "
                     "instance %s: %s", spec_obj.instance_uuid, reason)
            failure_domains.live_members.no_host_because(reason)
        return passed

    @classmethod
    def why_no_host(cls, refused, hard):
        """The NoValidHost reason when the constraints rejected every host
        (``refused``: {index in ``hard``: hosts it rejected first}).
        """
        parts = []
        for index, (request, minimum) in enumerate(hard):
            if refused.get(index):
                parts.extend(cls._why_refused(refused[index], request,
                                              minimum))
        return 'FailureDomainAntiAffinityFilter: ' + '; '.join(parts)

    @staticmethod
    def _why_refused(hosts, request, minimum):
        full = collections.Counter()
        without_domain = []
        for host_state in hosts:
            domain = request.domain_of(host_state)
            if domain is failure_domains.NO_DOMAIN:
                without_domain.append(host_state.host)
            else:
                full[domain] = request.members_in(domain)
        group = request.group
        parts = []
        if full:
            held = sorted(set(full.values()))
            counts = '%s member%s of server group %s (%s)' % (
                ' or '.join(str(n) for n in held),
                '' if held == [1] else 's', group.name, group.uuid)
            if request.kind == 'max':
                parts.append('every %s left (%s) already holds %s (max %d '
                             'per %s)' % (request.level,
                                          ', '.join(sorted(full)), counts,
                                          request.max_per_domain,
                                          request.level))
            else:
                # the fault message keeps 255 characters: the numbers
                # first, the group last
                parts.append(
                    '%s: every %s left (%s) already holds %s member%s, at '
                    'least %d (the skew) above the least filled eligible %s '
                    '(%d%s), '
                    'server group %s (%s)' % (
                        request.constraint, request.level,
                        ', '.join(sorted(full)),
                        ' or '.join(str(n) for n in held),
                        '' if held == [1] else 's', request.skew,
                        request.level,
                        minimum, '' if request.min_domains is None else
                        ': fewer than %d %ss eligible' % (
                            request.min_domains, request.level),
                        group.name, group.uuid))
        if without_domain:
            parts.append('host%s %s %s in no %s (aggregate metadata %s%s; '
                         '[nova_ext] hosts_without_failure_domain = reject)'
                         % ('' if len(without_domain) == 1 else 's',
                            ', '.join(sorted(without_domain)),
                            'is' if len(without_domain) == 1 else 'are',
                            request.level,
                            failure_domains.AGGREGATE_KEY_PREFIX,
                            request.level))
        return parts

    def host_passes(self, host_state, spec_obj):
        return bool(self.filter_all([host_state], spec_obj))

    @staticmethod
    def rejection(host_state, request, minimum):
        """Why ``request`` (one constraint) refuses ``host_state``, or None
        (``minimum``: ``request.minimum`` over the same candidates).
        """
        domain = request.domain_of(host_state)
        if domain is failure_domains.NO_DOMAIN:
            return 'in no failure domain at level %s' % request.level
        if request.allows(domain, minimum):
            return None
        members = request.members_in(domain)
        if request.kind == 'max':
            return '%s %s already holds %d member(s) of the group (max %d)' % (
                request.level, domain, members, request.max_per_domain)
        return ('%s %s already holds %d member(s) of the group; the least '
                'filled eligible %s holds %d (%s)' % (
                    request.level, domain, members, request.level, minimum,
                    request.constraint))

    @staticmethod
    def _has_room(request, minimum, domain):
        return domain is not failure_domains.NO_DOMAIN and request.allows(
            domain, minimum)

    @classmethod
    def _domain_has_room(cls, host_state, request, minimum):
        reason = cls.rejection(host_state, request, minimum)
        if reason is None:
            return True
        if reason.startswith('in no failure domain'):
            LOG.info("FailureDomainAntiAffinityFilter: host %(host)s "
                     "rejected: it is in no failure domain at level "
                     "%(level)s (no aggregate metadata %(key)s) and "
                     "[nova_ext] hosts_without_failure_domain = reject",
                     {'host': host_state.host, 'level': request.level,
                      'key': failure_domains.AGGREGATE_KEY_PREFIX
                      + request.level})
        else:
            LOG.debug("FailureDomainAntiAffinityFilter: host %(host)s "
                      "rejected: %(reason)s",
                      {'host': host_state.host, 'reason': reason})
        return False
