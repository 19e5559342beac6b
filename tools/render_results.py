#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Render doc/source/results/*.json into the tables doc/source/benchmark.rst
includes (doc/source/results/*.rst), so the page's figures are what a run
wrote and cannot drift from it.

    python tools/render_results.py           # rewrite the .rst tables
    python tools/render_results.py --check   # exit 1 if one is stale (CI)

Each JSON file is the ``--json`` output of one tools/ script (or several
runs of one command pooled, ``measured.pooled_runs``), with the
``measured`` block of tools/bench_json.py naming the date, the commit, the
command and the machine. Replacing a figure is re-running the command with
``--json doc/source/results/<name>.json`` and then this script.
"""

import argparse
import difflib
import glob
import json
import os
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(TOP, 'doc', 'source', 'results')
# --results: ./run-tests.sh bench renders its tiny runs' files, so the
# tables read what the scripts write
RESULTS_DIR = RESULTS


def load(pattern):
    documents = []
    for path in sorted(glob.glob(os.path.join(RESULTS_DIR, pattern))):
        with open(path) as f:
            documents.append((os.path.basename(path), json.load(f)))
    return documents


def table(header, rows):
    """An RST simple table; header and rows are lists of strings."""
    widths = [max(len(str(cell)) for cell in column)
              for column in zip(header, *rows)]
    rule = '  '.join('=' * width for width in widths)
    line = lambda cells: '  '.join(  # noqa: E731
        str(cell).ljust(width) for cell, width in zip(cells, widths)
    ).rstrip()
    return [rule, line(header), rule] + [line(row) for row in rows] + [rule]


def percent(ratio):
    return '%+.1f %%' % ((ratio - 1) * 100)


def number(value, digits=0):
    if value is None:
        return '--'
    return '{:,.{}f}'.format(value, digits)


def provenance(documents):
    """The lines under a table: which file, command, commit, date and
    machine each figure comes from.
    """
    lines = ['']
    for name, document in documents:
        measured = document['measured']
        machine = measured['machine']
        pooled = measured.get('pooled_runs', 1)
        lines.append(
            '* ``%s``: ``%s``%s at %s, %s; %d cores, Python %s, Nova %s%s.'
            % (name, measured['command'],
               ' (%d runs pooled)' % pooled if pooled > 1 else '',
               measured['commit'] or 'an uncommitted tree',
               measured['date'], machine['cpus'], machine['python'],
               machine['nova'],
               '; ' + machine['note'] if machine.get('note') else ''))
    return lines


def scheduler():
    documents = load('scheduler-*0.json')
    if not documents:
        return None
    rows = []
    for _name, document in documents:
        for result in document['results']:
            median, low, high = result['request_ratio_interval']
            requests = (len(result['request_ratios'])
                        if result.get('request_ratios')
                        else result['rounds'] * result['requests_per_round'])
            rows.append([
                'no group' if document['no_group'] else 'spread (group)',
                number(result['hosts']), number(result['candidates']),
                number(requests), percent(median),
                '%s to %s' % (percent(low), percent(high))
                if low is not None else '--'])
    return table(['request', 'hosts', 'candidates', 'requests',
                  'overhead', '95 % interval'], rows) + provenance(documents)


def curve():
    documents = load('scheduler-curve.json')
    if not documents:
        return None
    rows = []
    for _name, document in documents:
        for point in document['points']:
            rows.append([
                number(point['hosts']), number(point['candidates']),
                '%s / %s' % (number(point['p50_ms']['upstream']),
                             number(point['p99_ms']['upstream'])),
                '%s / %s' % (number(point['p50_ms']['nova-ext']),
                             number(point['p99_ms']['nova-ext'])),
                '%+.1f %%' % point['overhead_percent']])
    return table(['hosts', 'candidates', 'upstream p50 / p99 ms',
                  '+nova-ext p50 / p99 ms', 'overhead'],
                 rows) + provenance(documents)


def placement():
    documents = load('placement.json')
    if not documents:
        return None
    rows = []
    for _name, document in documents:
        for result in document['results']:
            rows.append([
                number(result['providers']), result['query'],
                number(result['candidates']), number(result['p50_ms']),
                number(result['p99_ms']), number(result['cpu_p50_ms']),
                number(result['ratio'], 2)])
    return table(['providers', 'query', 'candidates', 'p50 ms', 'p99 ms',
                  'cpu p50 ms', 'ratio'], rows) + provenance(documents)


def quota():
    documents = load('quota-*.json')
    if not documents:
        return None
    by_share = {}
    for _name, document in documents:
        for result in document['results']:
            by_share.setdefault(
                (document['project_share'], result['instances']),
                []).append(result)
    rows = []
    for (share, instances), results in sorted(by_share.items()):
        ratios = sorted(r['ratio'] for r in results)
        rows.append([
            'a tenth' if share < 1 else 'all' if share == 1
            else '%g' % share, number(instances),
            number(ratios[len(ratios) // 2], 2) if len(ratios) % 2
            else number(sum(ratios[len(ratios) // 2 - 1:
                                   len(ratios) // 2 + 1]) / 2, 2),
            '%s to %s' % (number(ratios[0], 2), number(ratios[-1], 2))
            if len(ratios) > 1 else '--', number(len(ratios)),
            '%d / %d' % (results[0]['nova_sql'],
                         results[0]['per_flavor_sql'])])
    return table(['project holds', 'instances', 'ratio', 'range over runs',
                  'runs', 'statements nova / per_flavor'],
                 rows) + provenance(documents)


def spread_lock():
    documents = load('spread-lock.json')
    if not documents:
        return None
    rows = []
    for _name, document in documents:
        for result in document['results']:
            rows.append([result['load'], result['backend'],
                         number(result['mean_ms'], 1),
                         number(result['p50_ms'], 1),
                         number(result['p95_ms'], 1),
                         '%.2f' % result['x_upstream'],
                         '%+.1f' % result['extra_ms']])
    return table(['load', 'backend', 'mean ms', 'p50 ms', 'p95 ms',
                  'x upstream', '+ms'], rows) + provenance(documents)


def spread_constraints():
    documents = load('spread-constraints.json')
    if not documents:
        return None
    rows = []
    for _name, document in documents:
        for row in document['rows']:
            rows.append([
                number(row['hosts']), row['request'],
                number(row['ms_per_request']['upstream'], 1),
                number(row['ms_per_request']['nova-ext'], 1),
                '--' if row['extra_ms'] is None
                else '%+.1f' % row['extra_ms'],
                '%.3f' % row['ratio'],
                '%d / %d' % (row['hosts_passing']['upstream'],
                             row['hosts_passing']['nova-ext'])])
    return table(['hosts', 'spread request', 'upstream ms',
                  '+nova-ext ms', 'extra ms', 'ratio', 'hosts weighed'],
                 rows) + provenance(documents)


def packing():
    documents = load('packing-*.json')
    if not documents:
        return None
    rows = []
    for _name, document in documents:
        by_config = {}
        for run in document['runs']:
            by_config.setdefault(run['config'], {})[run['seed']] = (
                run['percent_of_bound'])
        for config, seeds in sorted(by_config.items(),
                                    key=lambda item: min(item[1].values())):
            rows.append([document['cluster'], config] + [
                '%.2f' % seeds[seed] for seed in sorted(seeds)] + [
                '%.2f' % min(seeds.values())])
    width = max(len(row) for row in rows) - 3
    return table(['cluster', 'configuration'] + [
        'seed %d' % (n + 1) for n in range(width)] + ['worst'],
        rows) + provenance(documents)


def burst():
    documents = load('burst*.json')
    if not documents:
        return None
    rows = []
    for _name, document in documents:
        for row in document['rows']:
            off = row['off']
            for mode in ('off', 'before', 'on'):
                if mode not in row:
                    continue
                figures = row[mode]
                waited = figures.get('lock_wait_ms_max')
                per_member = figures.get('hold_ms_per_member')
                rows.append([
                    row['shape'], number(row['burst']),
                    'nova-ext at %s' % document['before']
                    if mode == 'before' else mode,
                    number(figures['wall_s'], 1),
                    '%.2f' % (figures['wall_s'] / off['wall_s']),
                    '%s / %s' % (number(figures['p50_s'], 1),
                                 number(figures['p99_s'], 1)),
                    '%d / %d' % (figures['active'], figures['error']),
                    '--' if mode == 'off' else number(figures['violations']),
                    '--' if waited is None else '%s (%d %%)' % (
                        number(waited / 1000.0, 1),
                        round(100 * figures['lock_wait_share_max'])),
                    '--' if not figures.get('turns') else number(
                        figures['turns']),
                    '--' if per_member is None else '%s / %s' % (
                        number(per_member),
                        number(figures.get('turn_hold_ms_p50'))),
                    '--' if per_member is None else _hold_parts(figures)])
    return table(['shape', 'burst', 'schedulers', 'wall s', 'x off',
                  'p50 / p99 s', 'ACTIVE / ERROR', 'violations',
                  'longest wait s (of wall)', 'lock holds',
                  'hold per member / turn p50 ms',
                  'count / claims / ledger p50 ms'],
                 rows) + provenance(documents)


def _hold_parts(figures):
    """A turn's hold by part (medians): the count, then the claims and the
    ledger's write where the run's nova-ext logged them.
    """
    parts = figures.get('hold_parts_ms_p50') or {}
    return ' / '.join(
        '--' if value is None else number(value) for value in (
            figures.get('count_ms_p50'), parts.get('claims'),
            parts.get('ledger')))


TABLES = {
    'scheduler': scheduler,
    'curve': curve,
    'placement': placement,
    'quota': quota,
    'spread-lock': spread_lock,
    'spread-constraints': spread_constraints,
    'packing': packing,
    'burst': burst,
}
HEADER = ('.. Rendered by tools/render_results.py from doc/source/results/'
          '*.json: do not edit.')


def render():
    """{file name: text} of every table that has result files."""
    tables = {}
    for name, build in TABLES.items():
        lines = build()
        if lines is not None:
            tables['%s.rst' % name] = '\n'.join([HEADER, ''] + lines + [''])
    return tables


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--check', action='store_true',
                        help='exit 1, showing the difference, when a '
                        'rendered table differs from its JSON')
    parser.add_argument('--results', default=RESULTS, metavar='DIR',
                        help='the JSON files and their tables (default: '
                        'doc/source/results)')
    args = parser.parse_args(argv)
    global RESULTS_DIR
    RESULTS_DIR = args.results
    stale = 0
    for name, text in render().items():
        path = os.path.join(RESULTS_DIR, name)
        current = open(path).read() if os.path.exists(path) else ''
        if current == text:
            continue
        if args.check:
            stale += 1
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(True), text.splitlines(True),
                path, 'rendered from the JSON'))
        else:
            with open(path, 'w') as f:
                f.write(text)
            print('wrote %s' % os.path.relpath(path, TOP))
    if stale:
        print('%d table(s) differ from doc/source/results/*.json: run '
              'python tools/render_results.py' % stale, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
