# SPDX-License-Identifier: Apache-2.0
"""nova-ext scheduler weighers.

Operators list :func:`all_weighers` beside Nova's own in nova.conf::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers,
                     nova_ext.scheduler.weights.all_weighers
"""

import threading

from oslo_config import cfg
from oslo_log import log as logging

from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights

from nova_ext import conf as ext_conf
from nova_ext import loader
from nova_ext.scheduler import aggregate_keys
from nova_ext.scheduler import request_filters

CONF = cfg.CONF
ext_conf.register_opts(CONF)
LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_ext.scheduler.weights'

# Nova's ServerGroupSoftAffinityWeigher and ServerGroupSoftAntiAffinityWeigher
# carry these policies; nova-ext's weighers must not outvote them.
SOFT_GROUP_POLICIES = ('soft-affinity', 'soft-anti-affinity')


def yields_to_group_policy(spec_obj, served=()):
    """True when the request's server group has a soft policy that Nova's
    own group weighers place by, and that is not among ``served`` (the
    policies the calling weigher itself implements). The weigher then gives
    every host the same weight, so packing or image locality never decides
    against the spreading or gathering the user asked for.
    """
    group = spec_obj.instance_group if 'instance_group' in spec_obj else None
    if group is None or 'policy' not in group:
        return False
    return group.policy in SOFT_GROUP_POLICIES and group.policy not in served


def all_weighers():
    """Every weigher class registered in the ``nova_ext.scheduler.weights``
    entry-point namespace, ours and third parties'.
    """
    # nova-scheduler calls this once at start: the moment to activate
    # the request filters nova.conf asks for.
    request_filters.activate()
    return loader.load_plugin_classes(NAMESPACE, weights.BaseHostWeigher)


class PerRequestWeigher(weights.BaseHostWeigher):
    """A weigher that works out what it needs once per request.

    Subclasses implement ``prepare(spec_obj, host_states)``, returning
    whatever per-request state they need, and ``weigh(host_state, state)``,
    which must be O(1). The state lives on the stack, never on ``self``:
    nova-scheduler shares one weigher instance between its worker threads.

    ``multiplier_option`` names the ``[nova_ext]`` option holding the
    multiplier; host aggregates override it with the metadata key
    ``nova_ext:<multiplier_option>``, as upstream weighers do.

    For a server group with a soft policy (soft-affinity,
    soft-anti-affinity) the weigher gives every host the same weight, unless
    the subclass lists the policy in ``group_policies_served``: Nova's group
    weighers place those requests.

    A weigher that fails is logged and gives every host the same weight, so
    the request is scheduled as if the weigher were off.
    """

    multiplier_option = None
    # Soft server-group policies this weigher implements itself; for any
    # other soft policy it stands aside (yields_to_group_policy).
    group_policies_served = ()

    def __init__(self):
        super().__init__()
        self._aggregate_key = aggregate_keys.multiplier_key(
            self.multiplier_option)
        # Nova calls weight_multiplier() once per host right after
        # weigh_objects(), in the same thread: the configured multiplier is
        # read once per request and kept per thread.
        self._request = threading.local()

    def weight_multiplier(self, host_state):
        configured = getattr(self._request, 'multiplier', None)
        if configured is None:
            configured = getattr(CONF.nova_ext, self.multiplier_option)
        key = self._aggregate_key
        for aggregate in host_state.aggregates:
            if key in aggregate.metadata:
                return scheduler_utils.get_weight_multiplier(
                    host_state, key, configured)
        return configured

    def prepare(self, spec_obj, host_states):
        raise NotImplementedError()

    def weigh(self, host_state, state):
        raise NotImplementedError()

    def weigh_objects(self, weighed_obj_list, spec_obj):
        self._request.multiplier = getattr(CONF.nova_ext,
                                           self.multiplier_option)
        host_states = [weighed.obj for weighed in weighed_obj_list]
        if yields_to_group_policy(spec_obj, self.group_policies_served):
            return [0.0] * len(host_states)
        try:
            state = self.prepare(spec_obj, host_states)
            return [self.weigh(host_state, state)
                    for host_state in host_states]
        except Exception:
            LOG.exception("nova-ext: %s failed for instance %s; every host "
                          "gets the same weight from it for this request",
                          type(self).__name__, spec_obj.instance_uuid)
            return [0.0] * len(host_states)

    def _weigh_object(self, host_state, spec_obj):
        return self.weigh(host_state, self.prepare(spec_obj, [host_state]))
