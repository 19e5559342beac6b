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
``reschedule-gate.taken``), writes ``reschedule-gate.holder`` ("<pid>
<server uuid>") and waits until the test removes ``reschedule-gate.taken``;
every other call passes at once. Imported into the conductor with
``NOVA_EXT_TEST_IMPORTS=tests.system.reschedule_gate`` in the environment
of :mod:`tests.system.launch`.
"""

import functools
import os

from oslo_config import cfg

from nova.conductor import manager

from tests.system import gate_filter

CONF = cfg.CONF


def gate_path(directory):
    return os.path.join(directory, 'reschedule-gate')


def _held(build_instances):

    @functools.wraps(build_instances)
    def held_build_instances(self, context, instances, *args, **kwargs):
        if kwargs.get('host_lists'):
            gate_filter.hold(gate_path(CONF.oslo_concurrency.lock_path),
                             'reschedule_gate', instances[0].uuid)
        return build_instances(self, context, instances, *args, **kwargs)

    return held_build_instances


manager.ComputeTaskManager.build_instances = _held(
    manager.ComputeTaskManager.build_instances)
