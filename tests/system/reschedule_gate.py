# SPDX-License-Identifier: Apache-2.0
"""A test-only hold on Nova's conductor: one reschedule kept waiting.

When a build fails on a compute, nova-compute clears the server's host,
gives its allocations back to placement and asks the conductor to build it
on the next alternate host (``ComputeTaskManager.build_instances`` with
``host_lists``), where the conductor claims the alternate. Between the two
the server holds nothing anywhere: the window a spread count must not miss
it in.

While the file ``<lock_path>/reschedule-gate`` exists, the first such
reschedule to reach the conductor takes it (renames it to
``reschedule-gate.taken``), writes ``reschedule-gate.holder`` (the
server's uuid) and waits until the test removes ``reschedule-gate.taken``;
every other call passes at once. Imported into the conductor with
``NOVA_EXT_TEST_IMPORTS=tests.system.reschedule_gate`` in the environment
of :mod:`tests.system.launch`.
"""

import functools
import os
import time

from oslo_config import cfg
from oslo_log import log as logging

from nova.conductor import manager

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

# never held longer than this, whatever becomes of the test
LONGEST = 600


def gate_path(directory):
    return os.path.join(directory, 'reschedule-gate')


def _held(build_instances):

    @functools.wraps(build_instances)
    def held_build_instances(self, context, instances, *args, **kwargs):
        gate = gate_path(CONF.oslo_concurrency.lock_path)
        if kwargs.get('host_lists'):
            try:
                os.rename(gate, gate + '.taken')
            except OSError:
                pass
            else:
                with open(gate + '.holder.tmp', 'w') as f:
                    f.write(instances[0].uuid)
                os.rename(gate + '.holder.tmp', gate + '.holder')
                LOG.warning('reschedule_gate: holding the reschedule of %s',
                            instances[0].uuid)
                deadline = time.monotonic() + LONGEST
                while os.path.exists(gate + '.taken') and (
                        time.monotonic() < deadline):
                    time.sleep(0.2)
                LOG.warning('reschedule_gate: released the reschedule of %s',
                            instances[0].uuid)
        return build_instances(self, context, instances, *args, **kwargs)

    return held_build_instances


manager.ComputeTaskManager.build_instances = _held(
    manager.ComputeTaskManager.build_instances)
