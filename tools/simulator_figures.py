#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The figures of doc/source/simulator.rst: the built-in mixed workload on a
modeled cluster, several seeds, several nova.conf fragments.

    python tools/simulator_figures.py --cluster cluster-100.yaml \\
        --seeds 1 2 3 4 5 --json results.json

Each (seed, configuration) run is independent and single-threaded, so runs
go to ``--jobs`` worker processes (default: one per core). Prints one line
per run as it finishes, then the averages per configuration (instances
placed before the first NoValidHost, % of the volume bound, image
downloads, failure-domain violations, ms per request) and the wall time.
"""

import argparse
from concurrent import futures
import logging
import os
import statistics
import sys
import time

from nova_ext.simulator import engine
from nova_ext.simulator import model

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_json  # noqa: E402  (a sibling script, not a package)

CONFIGS = ['nova-defaults', 'nova-packing', 'nova-ext-bin-packing',
           'nova-ext-image-locality', 'nova-ext-failure-domain',
           'nova-ext-failure-domain-weigher']


def _example(name):
    return name if os.path.exists(name) else os.path.join(model.EXAMPLES,
                                                          name)


def _conf(name):
    return (name if name.endswith('.conf')
            else os.path.join(model.EXAMPLES, 'conf', name + '.conf'))


def run_one(cluster_name, workload_name, seed, name):
    """One simulation in a worker process; returns its result dict."""
    logging.basicConfig(level=logging.WARNING)
    engine.parse_defaults()
    cluster = model.load_cluster(_example(cluster_name))
    workload = model.load_workload(_example(workload_name), seed=seed)
    comparison = engine.compare(cluster, workload, [(name, _conf(name))])
    result = comparison.results[0]
    return dict(result.as_dict(), seed=seed,
                volume_bound=comparison.volume_bound)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--cluster', default='cluster-100.yaml',
                        help='a cluster file (default: the built-in '
                             '%(default)s)')
    parser.add_argument('--workload', default='workload-mixed.yaml')
    parser.add_argument('--configs', nargs='+', default=CONFIGS,
                        help='built-in fragment names or .conf paths')
    parser.add_argument('--seeds', type=int, nargs='+',
                        default=[1, 2, 3, 4, 5])
    parser.add_argument('--jobs', type=int, default=os.cpu_count() or 1,
                        help='worker processes (default: %(default)s, one '
                             'per core)')
    parser.add_argument('--json', help='write every result to this file')
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error('--jobs must be at least 1')

    started = time.monotonic()
    runs = []
    with futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
        pending = [pool.submit(run_one, args.cluster, args.workload, seed,
                               name)
                   for seed in args.seeds for name in args.configs]
        for done in futures.as_completed(pending):
            run = done.result()
            runs.append(run)
            print('seed %d %-26s placed %5d bound %5d (%.2f%%) downloads '
                  '%5d violations %3d  %.1f ms/req' % (
                      run['seed'], run['config'],
                      run['placed_before_first_failure'],
                      run['volume_bound'], run['percent_of_bound'],
                      run['image_downloads'],
                      run['failure_domain_violations'],
                      run['schedule_ms_mean']), flush=True)
    runs.sort(key=lambda r: (r['seed'], args.configs.index(r['config'])))
    if args.json:
        bench_json.write(args.json, {'cluster': args.cluster,
                                     'workload': args.workload,
                                     'runs': runs})
    print('\nmean over seeds %s:' % ' '.join(map(str, args.seeds)))
    for name in args.configs:
        mine = [r for r in runs if r['config'] == name]
        print('%-26s placed %8.1f  %% of bound %6.2f (min %6.2f)  '
              'downloads %8.1f  violations %5.1f  ms/req %5.1f' % (
                  name,
                  statistics.fmean(r['placed_before_first_failure']
                                   for r in mine),
                  statistics.fmean(r['percent_of_bound'] for r in mine),
                  min(r['percent_of_bound'] for r in mine),
                  statistics.fmean(r['image_downloads'] for r in mine),
                  statistics.fmean(r['failure_domain_violations']
                                   for r in mine),
                  statistics.fmean(r['schedule_ms_mean'] for r in mine)))
    print('\nwall time %.1f s with %d worker process(es)' % (
        time.monotonic() - started, args.jobs))
    return 0


if __name__ == '__main__':
    sys.exit(main())
