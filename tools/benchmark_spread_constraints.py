#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What ``nova_ext:spread_constraints`` costs per request, against upstream
Nova in the same run.

Same method, fleet, request and configurations as
``tools/benchmark_scheduler.py`` (its functions are imported, not copied:
read its docstring for what is measured and what is not), with two changes:

* the fleet's racks of 20 are also grouped in rows (10 consecutive racks a
  row) and power feeds (rows dealt to two feeds in turn), each an
  ``objects.Aggregate`` shared by its hosts, so constraints can name three
  levels of ``[nova_ext] failure_domain_levels`` (rack, row, power);
* the request's scheduler hint is, in turn, none (the server group only:
  what nova-ext's filter and weighers cost without a spread request),
  ``nova_ext:spread_level=rack`` (the one-level keys) and
  ``nova_ext:spread_constraints`` with 1, 2 and 3 constraints.

For each (size, hint) the upstream configuration (Nova's default filters
and weighers, which ignore the hint) and +nova-ext run alternately on the
same request specs; ``extra ms`` is the median over rounds of the
difference of their mean times, ``ratio`` the median of the per-round
ratios. The Kubernetes reference is the ~2.2 ms per pod the Kubernetes
scheduler's PodTopologySpread plugin adds for a hard (DoNotSchedule)
constraint (doc/source/benchmark.rst says where the figure comes from).
Only filtering and weighing are measured: the placement-side exclusion of
full domains (the ``failure_domain`` request pre-filter) and the spread
lock are not.

    python tools/benchmark_spread_constraints.py --hosts 1000 10000
    python tools/benchmark_spread_constraints.py --hosts 40 --requests 2 \\
        --rounds 1                                   # smoke, seconds
"""

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchmark_scheduler as bench  # noqa: E402  (a sibling script)

from nova_ext.scheduler import failure_domains  # noqa: E402
from nova_ext.simulator import fleet  # noqa: E402

RACKS_PER_ROW = 10
POWER_FEEDS = 2
ROW_KEY = failure_domains.AGGREGATE_KEY_PREFIX + 'row'
POWER_KEY = failure_domains.AGGREGATE_KEY_PREFIX + 'power'
KUBERNETES_MS = 2.2

# (label, scheduler hints beyond the group); every constraint is hard but
# the skew ones' min_domains, so the filter does the work
HINTS = (
    ('no spread (group only)', {}),
    ('spread_level=rack', {failure_domains.SPREAD_LEVEL: 'rack'}),
    ('1: rack:max=1',
     {failure_domains.SPREAD_CONSTRAINTS: 'rack:max=1'}),
    ('2: +row:skew=1,min_domains=3',
     {failure_domains.SPREAD_CONSTRAINTS:
      'rack:max=1;row:skew=1,min_domains=3'}),
    ('3: +power:max=3',
     {failure_domains.SPREAD_CONSTRAINTS:
      'rack:max=1;row:skew=1,min_domains=3;power:max=3'}),
)
HEADER = ('%7s | %-30s | %9s | %9s | %8s | %6s | %7s'
          % ('hosts', 'spread request', 'upstream', '+nova-ext', 'extra ms',
             'ratio', 'k8s ms'))


def add_rows_and_feeds(host_states, aggregates):
    """Rows of RACKS_PER_ROW consecutive racks, rows dealt to POWER_FEEDS
    feeds; each host's HostState gets the shared aggregate objects, as
    HostManager shares them. Returns every aggregate.
    """
    by_name = {hs.host: hs for hs in host_states}
    added = []
    rows, feeds = {}, {}
    for rack_number, rack in enumerate(aggregates):
        row = rack_number // RACKS_PER_ROW
        rows.setdefault(row, []).extend(rack.hosts)
        feeds.setdefault(row % POWER_FEEDS, []).extend(rack.hosts)
    next_id = len(aggregates) + 1
    for key, prefix, members in ((ROW_KEY, 'row', rows),
                                 (POWER_KEY, 'power', feeds)):
        for number, hosts in sorted(members.items()):
            name = '%s%02d' % (prefix, number)
            aggregate = fleet.aggregate(next_id, name, hosts, {key: name})
            next_id += 1
            added.append(aggregate)
            for host in hosts:
                by_name[host].aggregates.append(aggregate)
    return list(aggregates) + added


def run_size(num_hosts, args, configs, filter_handler, weight_handler):
    rng = random.Random(args.seed + num_hosts)
    images = [bench._uuid(rng) for _ in range(bench.NUM_IMAGES)]
    host_states, racks = bench.build_fleet(num_hosts, rng, images)
    aggregates = add_rows_and_feeds(host_states, racks)
    group = bench.Group(host_states, rng, args.members_on_hosts)
    bench.set_request_view(configs, aggregates, group)
    bench.DATABASE.load(host_states, aggregates)
    heartbeat = fleet.Heartbeat(host_states)
    candidates = host_states[:args.max_placement_results or None]
    requests = args.requests or bench.DEFAULT_REQUESTS.get(
        len(candidates), max(5, min(30, 30000 // len(candidates))))

    def spec_with(hints):
        spec = bench.make_request_spec(rng, images, group)
        spec.scheduler_hints = dict(
            {'group': [group.uuid]},
            **{key: [value] for key, value in hints.items()})
        return spec

    rows = []
    heartbeat(force=True)
    for label, hints in HINTS:
        passed = {}
        for name in bench.CONFIG_NAMES:  # warm-up, untimed
            _, _, passed[name], _ = bench.schedule(
                configs[name], filter_handler, weight_handler, candidates,
                spec_with(hints))
        per_round = {name: [] for name in bench.CONFIG_NAMES}
        extra, ratios = [], []
        for _ in range(args.rounds):
            gc.collect()
            totals = dict.fromkeys(bench.CONFIG_NAMES, 0.0)
            for i in range(requests):
                heartbeat()
                spec = spec_with(hints)
                order = (bench.CONFIG_NAMES if i % 2 == 0
                         else bench.CONFIG_NAMES[::-1])
                for name in order:
                    elapsed, _, _, _ = bench.schedule(
                        configs[name], filter_handler, weight_handler,
                        candidates, spec)
                    totals[name] += elapsed
            means = {name: totals[name] / requests * 1000.0
                     for name in bench.CONFIG_NAMES}
            for name in bench.CONFIG_NAMES:
                per_round[name].append(means[name])
            extra.append(means['nova-ext'] - means['upstream'])
            ratios.append(means['nova-ext'] / means['upstream'])
        rows.append({
            'hosts': num_hosts, 'candidates': len(candidates),
            'request': label, 'hints': hints,
            'ms_per_request': {name: statistics.median(per_round[name])
                               for name in bench.CONFIG_NAMES},
            'extra_ms': statistics.median(extra),
            'ratio': statistics.median(ratios),
            'hosts_passing': passed,
            'requests_per_round': requests, 'rounds': args.rounds,
        })
    if bench.PROBLEMS.count:
        raise SystemExit('%d warning(s) or error(s) were logged while '
                         'scheduling (see above), so these numbers would '
                         'not measure what they claim to'
                         % bench.PROBLEMS.count)
    return rows


def format_table(rows):
    lines = [HEADER, '-' * len(HEADER)]
    for r in rows:
        lines.append('%7d | %-30s | %9.2f | %9.2f | %+8.2f | %6.3f | %7.1f'
                     % (r['hosts'], r['request'],
                        r['ms_per_request']['upstream'],
                        r['ms_per_request']['nova-ext'], r['extra_ms'],
                        r['ratio'], KUBERNETES_MS))
    lines.append('')
    for r in rows:
        lines.append('%d hosts (%d candidates), %s: hosts passing the '
                     'filters upstream %d, +nova-ext %d; %d requests x %d '
                     'rounds' % (r['hosts'], r['candidates'], r['request'],
                                 r['hosts_passing']['upstream'],
                                 r['hosts_passing']['nova-ext'],
                                 r['requests_per_round'], r['rounds']))
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Per-request cost of nova_ext:spread_constraints '
                    '(1, 2, 3 constraints) against upstream Nova.')
    parser.add_argument('--hosts', type=int, nargs='+', default=[1000, 10000],
                        metavar='N', help='fleet sizes (default: '
                        '%(default)s)')
    parser.add_argument('--rounds', type=int, default=3,
                        help='rounds per size and request; the median is '
                             'reported (default: %(default)s)')
    parser.add_argument('--requests', type=int, default=None, metavar='N',
                        help='requests per round (default: 30 at 1,000 '
                             'hosts, 5 at 10,000)')
    parser.add_argument('--members-on-hosts', action='store_true',
                        help="members in their hosts' instance lists (see "
                             "tools/benchmark_scheduler.py)")
    parser.add_argument('--max-placement-results', type=int, default=None,
                        metavar='N', help='hand the filters the first N '
                        'hosts only (default: every host)')
    parser.add_argument('--seed', type=int, default=42)
    parser.add_argument('--json', metavar='FILE',
                        help="also write the rows as JSON ('-': stdout)")
    args = parser.parse_args(argv)
    bench.check_sizes(parser, args)
    return args


def main(argv=None):
    args = parse_args(argv)
    bench.setup_nova()
    configs, filter_handler, weight_handler = bench.load_configs()
    print('nova-ext spread-constraints benchmark: python %s on %s, %s' % (
        platform.python_version(), platform.machine(),
        platform.platform(terse=True)))
    print('fleet: racks of %d, rows of %d racks, %d power feeds; candidates: '
          '%s' % (bench.RACK_SIZE, RACKS_PER_ROW, POWER_FEEDS,
                  'the first %d' % args.max_placement_results
                  if args.max_placement_results else 'every host'))
    for line in bench.describe(configs):
        print(line)
    print('')
    started = time.monotonic()
    rows = []
    # each size's rows as soon as it is done: 10,000 hosts take minutes
    print(HEADER)
    print('-' * len(HEADER))
    for num_hosts in args.hosts:
        done = run_size(num_hosts, args, configs, filter_handler,
                        weight_handler)
        rows += done
        for line in format_table(done)[2:len(done) + 2]:
            print(line, flush=True)
    print('')
    for line in format_table(rows)[len(rows) + 3:]:
        print(line)
    print('wall time %.0f s' % (time.monotonic() - started))
    if args.json:
        document = {'python': platform.python_version(),
                    'seed': args.seed, 'rows': rows}
        bench.write_json(args.json, document)
    return 0


if __name__ == '__main__':
    sys.exit(main())
