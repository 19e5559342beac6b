# SPDX-License-Identifier: Apache-2.0
"""FailureDomainAntiAffinityFilter: never more than N group members per domain.

Driven by:

* aggregate metadata ``nova_ext:failure_domain:<level>=<domain>`` (which rack,
  row or power feed a host is in);
* a server group (``--hint group=<uuid>``, policy anti-affinity or
  soft-anti-affinity) plus the scheduler hint or flavor extra spec
  ``nova_ext:spread_level=<level>`` and, optionally,
  ``nova_ext:spread_max_per_domain=<N>``;
* ``[nova_ext] failure_domain_levels``, ``default_max_per_domain`` and
  ``hosts_without_failure_domain``.

A host passes when its domain at the requested level holds fewer than N
members of the group. A malformed request fails alone with a NoValidHost
whose reason names the hint or extra spec; the scheduler keeps serving.
"""

import collections

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
            request = failure_domains.spread_request(spec_obj, hosts)
        except failure_domains.InvalidSpreadRequest as error:
            LOG.warning("FailureDomainAntiAffinityFilter: refusing request "
                        "for instance %s: %s", spec_obj.instance_uuid, error)
            raise exception.NoValidHost(reason=str(error))
        if request is None:
            return hosts
        passed = [host_state for host_state in hosts
                  if self._domain_has_room(host_state, request)]
        if hosts and not passed:
            reason = self.why_no_host(hosts, request)
            LOG.info("FailureDomainAntiAffinityFilter: no host left for "
                     "instance %s: %s", spec_obj.instance_uuid, reason)
            failure_domains.live_members.no_host_because(reason)
        return passed

    @staticmethod
    def why_no_host(hosts, request):
        """The NoValidHost reason when the limit rejected every host."""
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
            parts.append('every %s left (%s) already holds %s member%s of '
                         'server group %s (%s) (max %d per %s)' % (
                             request.level, ', '.join(sorted(full)),
                             ' or '.join(str(n) for n in held),
                             '' if held == [1] else 's', group.name,
                             group.uuid, request.max_per_domain,
                             request.level))
        if without_domain:
            parts.append('host%s %s %s in no %s (aggregate metadata %s%s; '
                         '[nova_ext] hosts_without_failure_domain = reject)'
                         % ('' if len(without_domain) == 1 else 's',
                            ', '.join(sorted(without_domain)),
                            'is' if len(without_domain) == 1 else 'are',
                            request.level,
                            failure_domains.AGGREGATE_KEY_PREFIX,
                            request.level))
        return 'FailureDomainAntiAffinityFilter: ' + '; '.join(parts)

    def host_passes(self, host_state, spec_obj):
        return bool(self.filter_all([host_state], spec_obj))

    @staticmethod
    def _domain_has_room(host_state, request):
        domain = request.domain_of(host_state)
        if domain is failure_domains.NO_DOMAIN:
            LOG.info("FailureDomainAntiAffinityFilter: host %(host)s "
                     "rejected: it is in no failure domain at level "
                     "%(level)s (no aggregate metadata %(key)s) and "
                     "[nova_ext] hosts_without_failure_domain = reject",
                     {'host': host_state.host, 'level': request.level,
                      'key': failure_domains.AGGREGATE_KEY_PREFIX
                      + request.level})
            return False
        members = request.members_in(domain)
        if members >= request.max_per_domain:
            LOG.debug("FailureDomainAntiAffinityFilter: host %(host)s "
                      "rejected: %(level)s %(domain)s already holds "
                      "%(members)d member(s) of the group (max %(max)d)",
                      {'host': host_state.host, 'level': request.level,
                       'domain': domain, 'members': members,
                       'max': request.max_per_domain})
            return False
        return True
