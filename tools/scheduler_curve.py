#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Nova's scheduling curve: ms per request against cloud size, upstream and
with nova-ext, next to Kubernetes' published reference.

    python tools/scheduler_curve.py --hosts 1000 5000 10000 \\
        --png doc/source/_static/scheduler-curve.png --json curve.json

For each size it runs ``tools/benchmark_scheduler.py`` (its docstring gives
the method: Nova's own filter and weight handlers over synthetic HostStates,
the two configurations alternated request by request) twice: with every
host a candidate (``[scheduler] max_placement_results`` at the host count)
and with Nova's default cap of 1,000 candidates. It prints one line per
(size, cap) with p50 and p99 ms per request of each configuration and the
overhead, and plots p50 with p99 as error bars.

The Kubernetes reference is scheduler_perf's published thresholds at 5,000
nodes: at least 680 pods/s with the default plugins and 460 pods/s with
hard topology spread, i.e. about 1.5 and 2.2 ms per pod. They are drawn as
two points at 5,000; a reference, not a measurement on this machine.

Needs matplotlib for ``--png`` (``pip install nova-ext[simulator]``).
"""

import argparse
import contextlib
import io
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_json  # noqa: E402  (sibling scripts, not a package)
import benchmark_scheduler  # noqa: E402

NOVA_DEFAULT_CAP = 1000
K8S_NODES = 5000
K8S_MS_PER_POD = {'Kubernetes, default plugins (>= 680 pods/s)': 1000 / 680,
                  'Kubernetes, hard topology spread (>= 460 pods/s)':
                      1000 / 460}


def measure(hosts, cap, rounds, requests):
    argv = ['--hosts', str(hosts), '--rounds', str(rounds), '--json', '-']
    if requests:
        argv += ['--requests', str(requests)]
    if cap:
        argv += ['--max-placement-results', str(cap)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        benchmark_scheduler.main(argv)
    text = out.getvalue()
    return json.loads(text[text.index('\n{') + 1:])['results'][0]


def plot(points, path, cap=NOVA_DEFAULT_CAP):
    # matplotlib is the [simulator] extra's, needed only for the picture
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for capped, style in ((False, '-'), (True, '--')):
        for name, label in (('upstream', 'Nova defaults'),
                            ('nova-ext', 'Nova defaults + nova-ext')):
            series = sorted((p['hosts'], p['p50_ms'][name], p['p99_ms'][name])
                            for p in points if p['capped'] == capped)
            if not series:
                continue
            hosts = [s[0] for s in series]
            p50 = [s[1] for s in series]
            p99 = [s[2] - s[1] for s in series]
            axes.errorbar(hosts, p50, yerr=[[0] * len(p50), p99],
                          linestyle=style, marker='o', capsize=3,
                          label='%s, %s' % (label, (
                              'max_placement_results=%d' % cap
                              if capped else 'every host a candidate')))
    for (label, ms), marker in zip(K8S_MS_PER_POD.items(), ('s', 'D')):
        axes.plot([K8S_NODES], [ms], marker=marker, linestyle='none',
                  color='black', label=label)
    axes.set_xlabel('hosts (nodes)')
    axes.set_ylabel('ms per request, p50 (bar: p99)')
    axes.set_yscale('log')
    axes.set_title('Filter and weigher pass per scheduling request')
    axes.legend(fontsize=7)
    axes.grid(True, which='both', alpha=0.3)
    figure.tight_layout()
    tmp = path + '.tmp'
    figure.savefig(tmp, format='png', dpi=100)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--hosts', type=int, nargs='+',
                        default=[1000, 5000, 10000])
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--requests', type=int, default=None,
                        help="per round (default: benchmark_scheduler's)")
    parser.add_argument('--cap', type=int, default=NOVA_DEFAULT_CAP,
                        help="the capped runs' max_placement_results "
                             "(default: Nova's, %(default)s)")
    parser.add_argument('--png', help='write the plot there')
    parser.add_argument('--json', help='write the points there')
    args = parser.parse_args(argv)

    start = time.monotonic()
    points = []
    print('%7s | %10s | %-9s | %9s | %9s | %10s' % (
        'hosts', 'candidates', 'config', 'p50 ms', 'p99 ms', 'overhead %'))
    for hosts in args.hosts:
        caps = [None] + ([args.cap] if hosts > args.cap else [])
        for cap in caps:
            result = measure(hosts, cap, args.rounds, args.requests)
            result['capped'] = cap is not None
            points.append(result)
            for name in ('upstream', 'nova-ext'):
                print('%7d | %10d | %-9s | %9.2f | %9.2f | %10s' % (
                    hosts, result['candidates'], name,
                    result['p50_ms'][name], result['p99_ms'][name],
                    '%+.1f' % result['overhead_percent']
                    if name == 'nova-ext' else ''), flush=True)
    print('wall time %.0f s' % (time.monotonic() - start))
    if args.json:
        bench_json.write(args.json, {'cap': args.cap, 'points': points})
    if args.png:
        plot(points, args.png, args.cap)
        print('plot: %s' % args.png)
    return 0


if __name__ == '__main__':
    sys.exit(main())
