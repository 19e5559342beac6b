# SPDX-License-Identifier: Apache-2.0
"""A test-only scheduler filter, and weigher, that hold one scheduling
request still.

Filters and weighers run inside Nova's ``SchedulerManager._schedule``,
which nova-ext runs in a server group's turn, holding the group's spread
lock: a request held here holds its group's lock, for as long as a test
needs to do something to its holder. Held in the weigher, the request is
also in the middle of its decision (nova-ext's filter has read the group's
members): the other requests of its turn wait to decide until it claims.

While the file ``<lock_path>/spread-gate`` exists, the first request to
reach the filter (or the weigher) takes it (renames it to
``spread-gate.taken``), writes ``spread-gate.holder`` ("<pid> <instance
uuid>") and waits until the test removes ``spread-gate.taken``; every
other request passes at once. Every host passes, and weighs 0. Enabled by
nova.conf::

    [filter_scheduler]
    available_filters = tests.system.gate_filter.GateFilter
    enabled_filters = GateFilter,...
    weight_classes = ...,tests.system.gate_filter.GateWeigher
"""

import os
import time

from nova.scheduler import filters
from nova.scheduler import weights
from oslo_config import cfg
from oslo_log import log as logging

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

# never held longer than this, whatever becomes of the test
LONGEST = 600


def gate_path(directory):
    return os.path.join(directory, 'spread-gate')


def hold(gate, who, uuid):
    """Hold the caller while the file ``gate`` exists, if it is the first
    to reach it (``uuid``: the server it works for); see the module's
    docstring.
    """
    try:
        os.rename(gate, gate + '.taken')
    except OSError:
        return
    with open(gate + '.holder.tmp', 'w') as f:
        f.write('%d %s' % (os.getpid(), uuid))
    os.rename(gate + '.holder.tmp', gate + '.holder')
    LOG.warning('%s: holding %s (process %d)', who, uuid, os.getpid())
    deadline = time.monotonic() + LONGEST
    while os.path.exists(gate + '.taken') and (
            time.monotonic() < deadline):
        time.sleep(0.2)
    LOG.warning('%s: released %s', who, uuid)


def _hold_request(who, spec_obj):
    hold(gate_path(CONF.oslo_concurrency.lock_path), who,
         spec_obj.instance_uuid)


class GateFilter(filters.BaseHostFilter):

    def filter_all(self, filter_obj_list, spec_obj):
        _hold_request('GateFilter', spec_obj)
        return filter_obj_list

    def host_passes(self, host_state, spec_obj):
        return True


class GateWeigher(weights.BaseHostWeigher):

    def weigh_objects(self, weighed_obj_list, spec_obj):
        _hold_request('GateWeigher', spec_obj)
        return [0.0] * len(weighed_obj_list)

    def _weigh_object(self, host_state, spec_obj):
        return 0.0
