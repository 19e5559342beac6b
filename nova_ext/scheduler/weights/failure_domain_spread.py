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
        # counts only: breaking a hard constraint is the filter's business
        everything = failure_domains.DomainCounts(request, spread.constraints,
                                                  host_states)
        soft = (failure_domains.Judgement(request, spread.soft, host_states)
                if spread.soft else None)
        # where the soft constraints are among all: a host's signature at
        # their levels is its signature at every level, taken there
        soft_positions = [index for index, constraint in enumerate(
            spread.constraints) if not constraint.hard]
        # a host in no domain counts as fuller than any domain
        without_domain = sum(
            1 + max((everything.count(index, domain)
                     for domain in everything.eligible[index]), default=0)
            for index in range(len(spread.constraints)))
        # a broken constraint outweighs every member count
        violation = 1 + without_domain
        return everything, soft, soft_positions, without_domain, violation

    def weigh_all(self, host_states, state):
        if state is None:
            return [0.0] * len(host_states)
        everything, soft, soft_positions, without_domain, violation = state

        def penalty(signature):
            crowding = everything.crowding_of(signature)
            found = without_domain if crowding is None else crowding
            if soft is not None:
                found += violation * soft.broken_of(
                    _at(signature, soft_positions))
            return -found

        # the hosts of a domain share their penalty: one reckoning per
        # signature, then two look-ups per host (in C)
        return _per_host(everything, failure_domains.PerSignature(penalty),
                         host_states)

    def broken_promises(self, host_states, state):
        """How many soft constraints each host would break: what
        NovaExtWeighers ranks by before every weigher's score, Nova's
        included (:func:`nova_ext.scheduler.weights.outranked`).
        """
        if state is None or state[1] is None:
            return None
        everything, soft, soft_positions = state[:3]
        return _per_host(everything, failure_domains.PerSignature(
            lambda signature: soft.broken_of(
                _at(signature, soft_positions))), host_states)


def _at(signature, positions):
    """``signature`` (a domain per constraint) at ``positions`` only."""
    return tuple(signature[position] for position in positions)


def _per_host(counts, per_signature, host_states):
    """``per_signature``'s answer for each of ``host_states``, in order."""
    return list(map(per_signature.__getitem__,
                    map(counts.signature.__getitem__, host_states)))
