#!/usr/bin/env python3
"""The figures of doc/source/simulator.rst: the built-in mixed workload on a
modeled cluster, several seeds, several nova.conf fragments.

    python tools/simulator_figures.py --cluster cluster-100.yaml \\
        --seeds 1 2 3 4 5 --json results.json

Prints one line per run as it finishes, then the averages per configuration
(instances placed before the first NoValidHost, % of the volume bound,
image downloads, failure-domain violations, ms per request).
"""

import argparse
import json
import logging
import os
import statistics
import sys

from nova_ext.simulator import engine
from nova_ext.simulator import model

CONFIGS = ['nova-defaults', 'nova-packing', 'nova-ext-bin-packing',
           'nova-ext-image-locality', 'nova-ext-failure-domain',
           'nova-ext-failure-domain-weigher']


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
    parser.add_argument('--json', help='write every result to this file')
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    def example(name):
        return name if os.path.exists(name) else os.path.join(
            model.EXAMPLES, name)

    def conf(name):
        return (name if name.endswith('.conf')
                else os.path.join(model.EXAMPLES, 'conf', name + '.conf'))

    engine.parse_defaults()
    cluster = model.load_cluster(example(args.cluster))
    runs = []
    for seed in args.seeds:
        workload = model.load_workload(example(args.workload), seed=seed)
        for name in args.configs:
            comparison = engine.compare(cluster, workload,
                                        [(name, conf(name))])
            result = comparison.results[0]
            runs.append(dict(result.as_dict(), seed=seed,
                             volume_bound=comparison.volume_bound))
            print('seed %d %-26s placed %5d bound %5d (%.2f%%) downloads '
                  '%5d violations %3d  %.1f ms/req' % (
                      seed, name, result.placed_before_first_failure,
                      comparison.volume_bound, result.percent_of_bound,
                      result.image_downloads,
                      result.failure_domain_violations,
                      result.schedule_ms_mean), flush=True)
            if args.json:
                with open(args.json, 'w') as out:
                    json.dump(runs, out, indent=1)
    print('\nmean over seeds %s:' % ' '.join(map(str, args.seeds)))
    for name in args.configs:
        mine = [r for r in runs if r['config'] == name]
        print('%-26s placed %8.1f  %% of bound %6.2f  downloads %8.1f  '
              'violations %5.1f  ms/req %5.1f' % (
                  name,
                  statistics.fmean(r['placed_before_first_failure']
                                   for r in mine),
                  statistics.fmean(r['percent_of_bound'] for r in mine),
                  statistics.fmean(r['image_downloads'] for r in mine),
                  statistics.fmean(r['failure_domain_violations']
                                   for r in mine),
                  statistics.fmean(r['schedule_ms_mean'] for r in mine)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
