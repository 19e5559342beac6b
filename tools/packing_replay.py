#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A fast stand-in for ``nova-ext-manage simulate`` for the two packing
configurations only, to explore BinPackingWeigher's scoring on many seeds.

    python tools/packing_replay.py --cluster cluster-500.yaml \\
        --seeds 1 2 3 4 5 --shape-weight 0 20

The simulator runs Nova's real scheduler code (about 10 ms a request on 100
hosts, 22-34 ms on 500: 5 to 10 minutes a run there on a quiet machine);
this replays the same arrivals in NumPy in seconds. It re-implements what
decides a placement in the built-in ``nova-packing`` and
``nova-ext-bin-packing`` fragments and nothing else: placement's capacity
check (allocation ratios, maintenance hosts left out), host anti-affinity of
server groups (ServerGroupAntiAffinityFilter, one member per host), then the
best score, ties to the first host, as Nova's stable sort and
``host_subset_size = 1`` do. ``bin-packing`` is BinPackingWeigher's formula
(nova_ext/scheduler/weights/bin_packing.py, all resources weighted 1);
``nova-packing`` is Nova's RAM, CPU and disk weighers at -1, each
normalised over the candidates. Every other weigher of those fragments gives
all hosts the same weight in the simulator. Soft group policies, host
classes with isolation, failure-domain filters and departures are not
modelled: use the simulator for anything else, and check a result there
before quoting it.

Cross-check (2026-11-25): on cluster-100.yaml, seeds 1-5, both
configurations (and bin packing with shape weights 0 and 20) placed exactly
as many instances before the first NoValidHost here as in
``tools/simulator_figures.py``; on cluster-500.yaml the first 3000
placements of seed 5 (shape weight 20) were the simulator's, host by host.
Full runs (2026-11-26): on cluster-500.yaml, seeds 1-5, both configurations
(shape weight 20) placed exactly as many instances here as in
``tools/simulator_figures.py``.
"""

import argparse
import os
import sys

import numpy

from nova_ext.simulator import engine
from nova_ext.simulator import model


def _example(name):
    return name if os.path.exists(name) else os.path.join(model.EXAMPLES,
                                                          name)


def bin_packing(capacity, used, request, stranded_weight=10.0,
                shape_weight=20.0):
    """BinPackingWeigher's weight of each candidate (resource weights 1)."""
    free = numpy.clip((capacity - used - request) / capacity, 0.0, 1.0)
    asked = request > 0
    leftover = free.mean(axis=1)
    stranded = free[:, asked].max(axis=1) - free[:, asked].min(axis=1)
    share = (request / capacity)[:, asked].max(axis=1)
    return -(leftover + stranded_weight * stranded + shape_weight * share)


def nova_packing(capacity, used, request, **ignored):
    """Nova's RAM, CPU and disk weighers at multiplier -1."""
    weight = numpy.zeros(len(capacity))
    for free in (capacity - used).T:
        low, high = free.min(), free.max()
        if high > low:
            weight -= (free - low) / (high - low)
    return weight


def replay(cluster, workload, score, **options):
    """Instances placed before the first NoValidHost, and the arrival that
    met it (None if none did).
    """
    capacity = numpy.array([model.host_capacity(h.group)
                            for h in cluster.hosts], dtype=float)
    usable = numpy.array([not h.maintenance for h in cluster.hosts])
    used = numpy.zeros_like(capacity)
    group_hosts = {}
    for arrival in workload.arrivals:
        request = numpy.array(arrival.flavor.resources(), dtype=float)
        fits = usable & numpy.all(used + request <= capacity, axis=1)
        for index in group_hosts.get(arrival.group, ()):
            fits[index] = False
        candidates = numpy.nonzero(fits)[0]
        if not len(candidates):
            return arrival.index, arrival
        weights = score(capacity[candidates], used[candidates], request,
                        **options)
        chosen = candidates[int(numpy.argmax(weights))]
        used[chosen] += request
        if arrival.group:
            group_hosts.setdefault(arrival.group, set()).add(chosen)
    return len(workload.arrivals), None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--cluster', default='cluster-100.yaml')
    parser.add_argument('--workload', default='workload-mixed.yaml')
    parser.add_argument('--seeds', type=int, nargs='+',
                        default=[1, 2, 3, 4, 5])
    parser.add_argument('--stranded-weight', type=float, nargs='+',
                        default=[10.0])
    parser.add_argument('--shape-weight', type=float, nargs='+',
                        default=[20.0])
    parser.add_argument('--no-nova-packing', action='store_true',
                        help='leave out Nova\'s packing')
    args = parser.parse_args(argv)

    cluster = model.load_cluster(_example(args.cluster))
    usable = [h for h in cluster.hosts if not h.maintenance]
    runs = [] if args.no_nova_packing else [
        ('nova-packing', nova_packing, {})]
    for stranded in args.stranded_weight:
        for shape in args.shape_weight:
            runs.append(('bin-packing stranded %g shape %g' % (
                stranded, shape), bin_packing,
                {'stranded_weight': stranded, 'shape_weight': shape}))
    results = {name: [] for name, _, _ in runs}
    for seed in args.seeds:
        workload = model.load_workload(_example(args.workload), seed=seed)
        bound = engine.volume_bound(workload, cluster.capacity(usable))
        for name, score, options in runs:
            placed, failed = replay(cluster, workload, score, **options)
            percent = 100.0 * placed / bound
            results[name].append(percent)
            print('seed %d %-34s placed %5d bound %5d (%.2f%%) first '
                  'NoValidHost: %s' % (
                      seed, name, placed, bound, percent,
                      failed.flavor.name if failed else '-'), flush=True)
    print()
    for name, percents in results.items():
        print('%-34s %% of bound per seed %s  min %.2f' % (
            name, ' '.join('%.2f' % p for p in percents), min(percents)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
