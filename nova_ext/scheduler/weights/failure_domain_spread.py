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
whose domain would break a ``soft`` one (the same rules as the filter's
for hard ones, :class:`nova_ext.scheduler.failure_domains.Judgement`)
ranks below every host that breaks none, fewer broken constraints first,
whatever the other weighers say, Nova's included (when the multiplier is
positive and the weigher runs in NovaExtWeighers' slot:
:func:`nova_ext.scheduler.weights.outranked`); among equals, the fewer
members (and servers of this request) in the host's domains, summed over
the constraints, hard ones included, the better, weighed with the other
weighers: a multi-create fills the least filled domains first. Breaking a
hard constraint is the filter's business.

Hosts in no domain at a level rank last. A malformed hint is logged and
the weigher stands aside for that request (the filter, if enabled, refuses
it).
"""

from oslo_config import cfg
from oslo_log import log as logging

from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import weights

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


class FailureDomainSpreadWeigher(weights.PerRequestWeigher):

    multiplier_option = 'failure_domain_spread_weight_multiplier'
    group_policies_served = failure_domains.SPREADABLE_POLICIES

    def prepare(self, spec_obj, host_states):
        try:
            request = scheduling_request.of(spec_obj)
            spread = request.spread(
                default_level=CONF.nova_ext.default_spread_level)
        except scheduling_request.NotActivated:
            if failure_domains.requested_level(spec_obj):
                scheduling_request.warn_not_activated(type(self).__name__)
            return None
        except failure_domains.InvalidSpreadRequest as error:
            LOG.warning("FailureDomainSpreadWeigher: ignoring spread request "
                        "of instance %s: %s", spec_obj.instance_uuid, error)
            return None
        if spread is None:
            return None
        if request.candidates is None:
            # no nova-ext filter fixed them: the hosts every filter passed
            # for the request's first server
            request.candidates = list(host_states)
        everything = failure_domains.Judgement(request, spread.constraints,
                                               host_states)
        soft = (failure_domains.Judgement(request, spread.soft, host_states)
                if spread.soft else None)
        # a host in no domain counts as fuller than any domain
        without_domain = sum(
            1 + max((everything.count(index, domain)
                     for domain in everything.eligible[index]), default=0)
            for index in range(len(spread.constraints)))
        # a broken constraint outweighs every member count
        violation = 1 + without_domain
        return everything, soft, without_domain, violation

    def weigh_all(self, host_states, state):
        if state is None:
            return [0.0] * len(host_states)
        everything, soft, without_domain, violation = state
        # the hosts of a domain share their penalty: one reckoning per
        # signature, then a look-up per host (in C)
        signatures = list(map(everything.signature.__getitem__,
                              host_states))
        first_host = dict(zip(signatures, host_states))
        penalties = {}
        for signature, host_state in first_host.items():
            crowding = everything.crowding(host_state)
            penalty = without_domain if crowding is None else crowding
            if soft is not None:
                penalty += violation * soft.broken(host_state)
            penalties[signature] = -penalty
        return list(map(penalties.__getitem__, signatures))

    def broken_promises(self, host_states, state):
        """How many soft constraints each host would break: what
        NovaExtWeighers ranks by before every weigher's score, Nova's
        included (:func:`nova_ext.scheduler.weights.outranked`).
        """
        if state is None or state[1] is None:
            return None
        everything, soft = state[0], state[1]
        signatures = list(map(everything.signature.__getitem__,
                              host_states))
        first_host = dict(zip(signatures, host_states))
        broken = {signature: soft.broken(host_state)
                  for signature, host_state in first_host.items()}
        return list(map(broken.__getitem__, signatures))
