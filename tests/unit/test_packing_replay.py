# SPDX-License-Identifier: Apache-2.0
"""tools/packing_replay.py re-implements the two packing configurations in
NumPy to explore BinPackingWeigher's scoring fast: it must keep placing what
the simulator, which runs Nova's real scheduler code, places.
"""

import os

import fixtures

# imported here, before Nova's test fixtures forbid os.uname, which NumPy
# calls on its first import
import numpy  # noqa: F401

from nova import test

from nova_ext.simulator import engine
from nova_ext.simulator import model
from tests import tool_scripts

# Two host shapes, as in the built-in clusters, small enough for seconds:
# the shapes are what BinPackingWeigher's share term decides between.
CLUSTER = """\
name: two-shapes
rows: 1
rack_size: 2
host_groups:
  - name: gp
    count: 10
    vcpus: 32
    cpu_allocation_ratio: 4.0
    ram_gb: 256
    disk_gb: 2000
  - name: mem
    count: 2
    vcpus: 32
    cpu_allocation_ratio: 2.0
    ram_gb: 512
    disk_gb: 2000
"""
CONF_DIR = os.path.join(model.EXAMPLES, 'conf')


class ReplayMatchesTheSimulatorTest(test.NoDBTestCase):

    def test_same_placed_counts_as_the_simulator(self):
        replay = tool_scripts.load('packing_replay')
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'cluster.yaml')
        with open(path, 'w') as out:
            out.write(CLUSTER)
        cluster = model.load_cluster(path)
        for seed in (1, 2):
            workload = model.load_workload(
                os.path.join(model.EXAMPLES, 'workload-mixed.yaml'),
                seed=seed)
            simulated = engine.compare(cluster, workload, [
                (name, os.path.join(CONF_DIR, name + '.conf'))
                for name in ('nova-packing', 'nova-ext-bin-packing')])
            nova, ours = simulated.results
            self.assertEqual(
                nova.placed_before_first_failure,
                replay.replay(cluster, workload, replay.nova_packing)[0],
                'seed %d, nova-packing' % seed)
            self.assertEqual(
                ours.placed_before_first_failure,
                replay.replay(cluster, workload, replay.bin_packing)[0],
                'seed %d, nova-ext-bin-packing' % seed)
