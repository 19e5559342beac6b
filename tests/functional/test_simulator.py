# SPDX-License-Identifier: Apache-2.0
"""The simulator decides as the functional Nova stack does.

The same nova.conf fragment drives an embedded Nova (API, conductor,
scheduler, placement, three fake computes) and ``nova-ext-manage
simulate`` on a model of the same three hosts; the same boots must land the
same way. Host names differ (host1.. vs h-001..) and the first of equally
good hosts is placement's order in one and the model's in the other, so
placements are compared as the pattern "which servers share a host".
"""

import json
import os
import subprocess
import sys

from tests.functional import base

# The simulator runs in its own process, as nova-ext-manage simulate does:
# its HostManager and config overrides must not leak into this process's
# Nova fixtures (they broke the next functional tests in the same worker).
SIMULATE = """
import json, sys
from nova_ext.simulator import engine, model
engine.parse_defaults()
comparison = engine.compare(model.load_cluster(sys.argv[1]),
                            model.load_workload(sys.argv[2]),
                            [('functional', sys.argv[3])])
print(json.dumps(comparison.results[0].placements))
"""

# MediumFakeDriver: 10 vCPU, 8192 MB, 1028 GB, and it reports
# disk_available_least 0; Nova reserves 512 MB.
CLUSTER = """\
rows: 1
host_groups:
  - {name: h, count: 3, vcpus: 10, ram_mb: 8192, reserved_ram_mb: 512,
     disk_gb: 1028, disk_available_least_gb: 0}
"""
BOOTS = 7
WORKLOAD = """\
flavors:
  - {name: m1, vcpus: 2, ram_mb: 2048, disk_gb: 1}
sequence:
  - {flavor: m1, count: %d}
""" % BOOTS


def pattern(hosts):
    first_seen = {}
    return [first_seen.setdefault(h, len(first_seen)) for h in hosts]


class _SameAsNova(object):

    def test_simulator_places_as_nova_does(self):
        flavor = self.create_flavor('m1', vcpu=2, memory_mb=2048, disk=1)
        nova_hosts = [self.host_of(self.boot('s%d' % i, flavor))
                      for i in range(BOOTS)]

        directory = os.path.dirname(self.nova_conf_path)
        for name, text in (('cluster.yaml', CLUSTER),
                           ('workload.yaml', WORKLOAD)):
            with open(os.path.join(directory, name), 'w') as out:
                out.write(text)
        result = subprocess.run(
            [sys.executable, '-c', SIMULATE,
             os.path.join(directory, 'cluster.yaml'),
             os.path.join(directory, 'workload.yaml'), self.nova_conf_path],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(0, result.returncode, result.stderr[-3000:])
        simulated = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertEqual(self.EXPECTED, pattern(nova_hosts))
        self.assertEqual(pattern(nova_hosts), pattern(simulated))


class SpreadTest(_SameAsNova, base.NovaExtTestCase):
    HOSTS = ['host1', 'host2', 'host3']
    NOVA_EXT_FLAGS = {'bin_packing_weight_multiplier': 0.0,
                      'image_locality_weight_multiplier': 0.0}
    EXPECTED = [0, 1, 2, 0, 1, 2, 0]


class BinPackingTest(_SameAsNova, base.NovaExtTestCase):
    HOSTS = ['host1', 'host2', 'host3']
    NOVA_EXT_FLAGS = {'bin_packing_weight_multiplier': 10.0,
                      'image_locality_weight_multiplier': 0.0}
    # three 2 GiB servers fill a host's 7.5 GiB
    EXPECTED = [0, 0, 0, 1, 1, 1, 2]
