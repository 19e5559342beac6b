# SPDX-License-Identifier: Apache-2.0
"""A test-only scheduler filter that holds one scheduling request still.

Filters run inside Nova's ``SchedulerManager._schedule``, which nova-ext
runs under a server group's spread lock: a request held here holds its
group's lock, for as long as a test needs to do something to its holder.

While the file ``<lock_path>/spread-gate`` exists, the first request to
reach this filter takes it (renames it to ``spread-gate.taken``), writes
``spread-gate.holder`` ("<pid> <instance uuid>") and waits until the test
removes ``spread-gate.taken``; every other request passes at once. Every
host passes. Enabled by nova.conf::

    [filter_scheduler]
    available_filters = tests.system.gate_filter.GateFilter
    enabled_filters = GateFilter,...
"""

import os
import time

from nova.scheduler import filters
from oslo_config import cfg
from oslo_log import log as logging

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

# never held longer than this, whatever becomes of the test
LONGEST = 600


def gate_path(directory):
    return os.path.join(directory, 'spread-gate')


class GateFilter(filters.BaseHostFilter):

    def filter_all(self, filter_obj_list, spec_obj):
        gate = gate_path(CONF.oslo_concurrency.lock_path)
        try:
            os.rename(gate, gate + '.taken')
        except OSError:
            return filter_obj_list
        holder = '%d %s' % (os.getpid(), spec_obj.instance_uuid)
        with open(gate + '.holder.tmp', 'w') as f:
            f.write(holder)
        os.rename(gate + '.holder.tmp', gate + '.holder')
        LOG.warning('GateFilter: holding request of %s (process %d)',
                    spec_obj.instance_uuid, os.getpid())
        deadline = time.monotonic() + LONGEST
        while os.path.exists(gate + '.taken') and (
                time.monotonic() < deadline):
            time.sleep(0.2)
        LOG.warning('GateFilter: released request of %s',
                    spec_obj.instance_uuid)
        return filter_obj_list

    def host_passes(self, host_state, spec_obj):
        return True
