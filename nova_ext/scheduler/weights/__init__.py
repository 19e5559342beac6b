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
from nova_ext.scheduler import request_filters

CONF = cfg.CONF
ext_conf.register_opts(CONF)
LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_ext.scheduler.weights'


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

    A weigher that fails is logged and gives every host the same weight, so
    the request is scheduled as if the weigher were off.
    """

    multiplier_option = None

    def __init__(self):
        super().__init__()
        self._aggregate_key = 'nova_ext:' + self.multiplier_option
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
