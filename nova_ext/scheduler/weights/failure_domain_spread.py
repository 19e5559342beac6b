# SPDX-License-Identifier: Apache-2.0
"""FailureDomainSpreadWeigher: prefer domains holding the fewest group members.

The soft twin of FailureDomainAntiAffinityFilter, driven by the same
aggregate metadata (``nova_ext:failure_domain:<level>=<domain>``), server
group and ``nova_ext:spread_level`` hint or extra spec. ``[nova_ext]
default_spread_level`` makes it spread every anti-affinity or
soft-anti-affinity group that names no level. Multiplier: ``[nova_ext]
failure_domain_spread_weight_multiplier``, overridden per aggregate by
``nova_ext:failure_domain_spread_weight_multiplier``.

With ``nova_ext:spread_constraints`` it weighs every constraint: a host
whose domain would break a ``soft`` one (beyond ``max``, or beyond ``skew``
of the least filled eligible domain: those of the hosts weighed plus those
holding members) ranks below every host that breaks none, fewer broken
constraints first; among equals, the fewer members in the host's domains
(summed over the constraints, hard ones included) the better. Breaking a
hard constraint is the filter's business.

Hosts in no domain at the level rank last. A malformed hint is logged and
the weigher stands aside for that request (the filter, if enabled, refuses
it).
"""

import functools
import operator

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
            requests = failure_domains.spread_requests(
                spec_obj, host_states,
                default_level=CONF.nova_ext.default_spread_level)
        except failure_domains.InvalidSpreadRequest as error:
            LOG.warning("FailureDomainSpreadWeigher: ignoring spread request "
                        "of instance %s: %s", spec_obj.instance_uuid, error)
            return None
        if not requests:
            return None
        weighed = []
        for request in requests:
            busiest = max(request.members_per_domain.values(), default=0)
            weighed.append((request, request.minimum(host_states),
                            busiest + 1))
        # a broken constraint outweighs every member count
        violation = 1 + sum(without for _r, _m, without in weighed)
        # per constraint: what a domain costs its hosts (the same for
        # every host of the domain, worked out once)
        return [(request, failure_domains.Memo(
            functools.partial(self._penalty, request, minimum,
                              without_domain, violation)))
                for request, minimum, without_domain in weighed]

    @staticmethod
    def _penalty(request, minimum, without_domain, violation, domain):
        if domain is failure_domains.NO_DOMAIN:
            return without_domain
        penalty = request.members_in(domain)
        if not request.hard and not request.allows(domain, minimum):
            penalty += violation
        return penalty

    def weigh_all(self, host_states, state):
        if state is None:
            return [0.0] * len(host_states)
        weights = [0] * len(host_states)
        for request, penalty in state:
            # the filter placed these hosts a moment ago, for the same
            # request: domains_of remembers
            weights = list(map(operator.sub, weights, map(
                penalty.__getitem__, request.domains_of(host_states))))
        return weights
