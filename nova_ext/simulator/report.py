# SPDX-License-Identifier: Apache-2.0
"""What ``nova-ext-manage simulate`` shows: a table, JSON, PNG plots."""

import importlib.util
import json
import os
import sys
import time

import prettytable

from nova_ext import explain
from nova_ext.simulator import engine


class Progress:
    """A one-line progress bar on a terminal (nothing elsewhere)."""

    WIDTH = 30

    def __init__(self, name, total, stream=None):
        self.name = name
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.start = time.monotonic()
        self.last = 0.0

    def __call__(self, done):
        if not self.enabled:
            return
        if done is None:
            self.stream.write('\r' + ' ' * 79 + '\r')
            self.stream.flush()
            return
        now = time.monotonic()
        if now - self.last < 0.2:
            return
        self.last = now
        filled = int(self.WIDTH * done / max(1, self.total))
        self.stream.write('\r%-28.28s [%s%s] %d arrivals, %.0f s' % (
            self.name, '#' * filled, '.' * (self.WIDTH - filled), done,
            now - self.start))
        self.stream.flush()


def rows(comparison):
    """The table as (header, rows): one column per configuration."""
    results = comparison.results
    header = ['', ] + [r.config for r in results]

    def line(label, fmt):
        return [label] + [fmt(r) for r in results]

    def pct(value):
        return '-' if value is None else '%.1f%%' % value

    body = [
        line('placed before 1st NoValidHost',
             lambda r: '%d' % r.placed_before_first_failure),
        line('%% of volume bound (%d)' % comparison.volume_bound,
             lambda r: pct(r.percent_of_bound)),
        line('first NoValidHost',
             lambda r: '-' if r.first_failure is None
             else 'arrival %d' % r.first_failure),
    ]
    for resource in engine.RESOURCES:
        body.append(line('stranded %s' % resource,
                         lambda r, k=resource: pct(r.stranded[k])))
    for resource in engine.RESOURCES:
        body.append(line('free %s' % resource,
                         lambda r, k=resource: pct(r.free[k])))
    body += [
        line('image downloads', lambda r: '%d' % r.image_downloads),
        line('failure-domain violations',
             lambda r: '%d / %d' % (r.failure_domain_violations,
                                    r.spread_members)),
    ]
    # one block per spread-constraint set of the workload
    names = [figures.name for figures in (results[0].spread_sets
                                          if results else ())]
    for position, set_name in enumerate(names):

        def of(result, position=position):
            return result.spread_sets[position]

        body += [
            line('%s: hard violations' % set_name,
                 lambda r: '%d / %d' % (of(r).hard_violations,
                                        of(r).members_placed)),
            line('%s: groups fully placed' % set_name,
                 lambda r: '%s of %d' % (pct(of(r).fully_placed_percent),
                                         of(r).groups)),
        ]
        if results[0].spread_sets[position].domain_bound is not None:
            body.append(line(
                '%s: groups > domain bound (%d)' % (
                    set_name, results[0].spread_sets[position].domain_bound),
                lambda r: '%d' % of(r).groups_over_bound))
    body += [
        line('ms per request (mean / p95)',
             lambda r: '%.1f / %.1f' % (r.schedule_ms_mean,
                                        r.schedule_ms_p95)),
    ]
    return header, body


def table(comparison, out=sys.stdout):
    header, body = rows(comparison)
    print('cluster %s (%d hosts), workload %s, seed %d' % (
        comparison.cluster, comparison.hosts, comparison.workload,
        comparison.seed), file=out)
    grid = prettytable.PrettyTable(header)
    grid.align = 'r'
    grid.align[''] = 'l'
    for row in body:
        grid.add_row(row)
    print(grid, file=out)
    for result in comparison.results:
        if result.first_failure_reason:
            print('%s: first NoValidHost: %s' % (
                result.config, result.first_failure_reason), file=out)
    print('volume bound: the longest prefix of the arrivals whose vCPU, RAM '
          'and disk each fit in the total capacity%s; stranded: free '
          'capacity on hosts where no flavor of the workload fits any more '
          '(at the first NoValidHost); violations: server-group members '
          'placed in a failure domain already holding the allowed number '
          '(of members placed with a spread level).' % (
              ' of the hosts not in maintenance'
              if comparison.bound_excludes_maintenance else ''), file=out)
    if comparison.results and comparison.results[0].spread_sets:
        print('per spread-constraint set: hard violations: members placed '
              'against a hard constraint of their group, checked by the '
              'simulator against the model\'s domains (not by the filter) / '
              'members placed; groups fully placed: of the groups whose '
              'members were all replayed; domain bound: the most members '
              'the hard max constraints let one group have on the hosts '
              'not in maintenance, resources aside.', file=out)


def explanations(comparison, out=sys.stdout):
    """explain's table for the arrival ``--explain`` names, once per
    configuration.
    """
    for result in comparison.results:
        print('\narrival %d with %s:' % (comparison.explain_arrival,
                                         result.config), file=out)
        if result.explain is None:
            print('not replayed: this configuration stopped at its first '
                  'NoValidHost before it', file=out)
        else:
            explain.write_table(result.explain, out)


def write_json(comparison, out, with_placements=False):
    # default=str: as explain's --json, for values JSON has no type for
    json.dump(comparison.as_dict(with_placements), out, indent=2,
              sort_keys=True, default=str)
    out.write('\n')


PLOT_NEEDS = ('--plot needs matplotlib, in the simulator extra: '
              'pip install "nova-ext[simulator]"')


def can_plot():
    """matplotlib is an extra: Nova's environment need not carry it."""
    return importlib.util.find_spec('matplotlib') is not None


def plot(comparison, directory):
    """Write utilisation.png and stranded.png into ``directory``; return
    their paths.
    """
    # here: matplotlib is the [simulator] extra, only --plot needs it
    import matplotlib
    matplotlib.use('Agg')
    # here: matplotlib is the [simulator] extra, only --plot needs it
    from matplotlib import pyplot

    os.makedirs(directory, exist_ok=True)
    paths = []

    figure, axes = pyplot.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    for result in comparison.results:
        points = result.utilisation
        for r, (axis, resource) in enumerate(zip(axes, engine.RESOURCES)):
            # Every configuration sees the same arrivals, so the curves lie
            # on one another until each stops; where each stops is the
            # point of the figure.
            line, = axis.plot([p[0] for p in points],
                              [p[r + 1] for p in points],
                              label=result.config)
            if result.first_failure is not None:
                axis.axvline(result.first_failure, color=line.get_color(),
                             linestyle='--', linewidth=1,
                             label='%s: 1st NoValidHost (%d)' % (
                                 result.config, result.first_failure))
    for axis, resource in zip(axes, engine.RESOURCES):
        axis.axvline(comparison.volume_bound, color='grey', linestyle=':',
                     label='volume bound')
        axis.set_title('%s allocated' % resource)
        axis.set_xlabel('arrivals')
        axis.grid(alpha=0.3)
    axes[0].set_ylabel('% of capacity')
    axes[0].legend(fontsize='small')
    figure.suptitle('Utilisation over arrivals (%d hosts)'
                    % comparison.hosts)
    figure.tight_layout()
    path = os.path.join(directory, 'utilisation.png')
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    paths.append(path)

    figure, axis = pyplot.subplots(figsize=(9, 4.5))
    count = len(comparison.results)
    width = 0.8 / max(1, count)
    for i, result in enumerate(comparison.results):
        xs = [r + i * width for r in range(len(engine.RESOURCES))]
        bars = axis.bar(xs, [result.stranded[k] for k in engine.RESOURCES],
                        width, label='%s (%d placed)' % (
                            result.config,
                            result.placed_before_first_failure))
        axis.bar_label(bars, fmt='%.1f', fontsize='x-small')
    axis.set_xticks([r + width * (count - 1) / 2
                     for r in range(len(engine.RESOURCES))])
    axis.set_xticklabels(engine.RESOURCES)
    axis.set_ylabel('% of capacity stranded at 1st NoValidHost')
    axis.set_title('Stranded capacity (%d hosts)' % comparison.hosts)
    axis.legend(fontsize='small')
    axis.grid(axis='y', alpha=0.3)
    figure.tight_layout()
    path = os.path.join(directory, 'stranded.png')
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    paths.append(path)
    return paths
