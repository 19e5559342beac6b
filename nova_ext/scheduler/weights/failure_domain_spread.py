# SPDX-License-Identifier: Apache-2.0
"""FailureDomainSpreadWeigher: prefer domains holding the fewest group members.

The soft twin of FailureDomainAntiAffinityFilter, driven by the same
aggregate metadata (``nova_ext:failure_domain:<level>=<domain>``), server
group and ``nova_ext:spread_level`` hint or extra spec. ``[nova_ext]
default_spread_level`` makes it spread every anti-affinity or
soft-anti-affinity group that names no level. Multiplier: ``[nova_ext]
failure_domain_spread_weight_multiplier``, overridden per aggregate by
``nova_ext:failure_domain_spread_weight_multiplier``.

Hosts in no domain at the level rank last. A malformed hint is logged and
the weigher stands aside for that request (the filter, if enabled, refuses
it).
"""

from oslo_config import cfg
from oslo_log import log as logging

from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import weights

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


class FailureDomainSpreadWeigher(weights.PerRequestWeigher):

    multiplier_option = 'failure_domain_spread_weight_multiplier'
    group_policies_served = failure_domains.SPREADABLE_POLICIES

    def prepare(self, spec_obj, host_states):
        try:
            request = failure_domains.spread_request(
                spec_obj, host_states,
                default_level=CONF.nova_ext.default_spread_level)
        except failure_domains.InvalidSpreadRequest as error:
            LOG.warning("FailureDomainSpreadWeigher: ignoring spread request "
                        "of instance %s: %s", spec_obj.instance_uuid, error)
            return None
        if request is None:
            return None
        busiest = max(request.members_per_domain.values(), default=0)
        return request, -(busiest + 1)

    def weigh(self, host_state, state):
        if state is None:
            return 0.0
        request, weight_without_domain = state
        domain = request.domain_of(host_state)
        if domain is failure_domains.NO_DOMAIN:
            return weight_without_domain
        return -request.members_in(domain)
