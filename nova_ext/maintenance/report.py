# SPDX-License-Identifier: Apache-2.0
"""What the audit, the plans and the moves look like to the operator:
tables (prettytable), JSON (``--json``) and, for the audit, Prometheus'
text exposition format (``--format prometheus``, written by
prometheus_client, which Nova's environment has through oslo.metrics), for
node_exporter's textfile collector.
"""

import json

import prettytable
from prometheus_client import core as prometheus_core
from prometheus_client import exposition as prometheus_exposition

from nova_ext import files
from nova_ext.maintenance import plan

METRIC_PREFIX = 'nova_ext_spread_'


def _table(headers, rows, out):
    table = prettytable.PrettyTable(headers)
    table.align = 'l'
    for row in rows:
        table.add_row(row)
    print(table, file=out)


def write_json(document, out):
    json.dump(document, out, indent=2, sort_keys=True, default=str)
    out.write('\n')


# -- the audit ----------------------------------------------------------------

def audit_table(audit, out):
    for group in audit['groups']:
        print('group %s (%s, %s, project %s): %d member%s' % (
            group['name'], group['uuid'], group['policy'],
            group['project_id'], len(group['members']),
            '' if len(group['members']) == 1 else 's'), file=out)
        rows = []
        for entry in group['constraints']:
            why = '\n'.join(cause['text'] for cause in entry['causes'])
            rows.append([entry['constraint'],
                         'hard' if entry['hard'] else 'soft',
                         'holds' if entry['holds'] else 'VIOLATED', why])
        _table(['constraint', 'kind', 'verdict', 'why'], rows, out)
        for level, domains in group['domains'].items():
            print('  members per %s: %s' % (level, '; '.join(
                '%s: %s' % (domain, ', '.join(names))
                for domain, names in sorted(domains.items())) or 'none'),
                file=out)
        for note in group['notes']:
            print('  note: %s' % note, file=out)
        print('', file=out)
    print('%d group%s with spread constraints: %d hard constraint%s '
          'violated, %d soft' % (
              len(audit['groups']), '' if len(audit['groups']) == 1 else 's',
              audit['hard_violations'],
              '' if audit['hard_violations'] == 1 else 's',
              audit['soft_violations']), file=out)


class _AuditCollector(object):
    """The audit as Prometheus gauges (prometheus_client's custom
    collector protocol).
    """

    def __init__(self, audit, timestamp, success):
        self.audit, self.timestamp, self.success = audit, timestamp, success

    def collect(self):
        gauge = prometheus_core.GaugeMetricFamily
        success = gauge(METRIC_PREFIX + 'audit_success',
                        '1 when the last spread audit read the whole cloud')
        success.add_metric([], 1 if self.success else 0)
        yield success
        stamp = gauge(METRIC_PREFIX + 'audit_timestamp_seconds',
                      'When the last spread audit ran (Unix time)')
        stamp.add_metric([], self.timestamp)
        yield stamp
        if not self.success:
            return
        groups = gauge(METRIC_PREFIX + 'groups',
                       'Server groups whose members ask for spread')
        groups.add_metric([], len(self.audit['groups']))
        yield groups
        for kind in ('hard', 'soft'):
            total = gauge(METRIC_PREFIX + '%s_violations' % kind,
                          'Violated %s spread constraints, over every '
                          'group' % kind)
            total.add_metric([], self.audit['%s_violations' % kind])
            yield total
        labels = ['group', 'group_name', 'project', 'constraint', 'level',
                  'hard']
        violated = gauge(METRIC_PREFIX + 'constraint_violated',
                         '1 when the server group\'s spread constraint does '
                         'not hold where its members run now', labels=labels)
        excess = gauge(METRIC_PREFIX + 'constraint_excess',
                       'Members above the spread constraint\'s limit, plus '
                       'members on a host in no domain (0: it holds)',
                       labels=labels)
        members = gauge(METRIC_PREFIX + 'domain_members',
                        'Members of the server group per failure domain',
                        labels=['group', 'group_name', 'project', 'level',
                                'domain'])
        for group in self.audit['groups']:
            ids = [group['uuid'], group['name'], group['project_id']]
            for entry in group['constraints']:
                values = ids + [entry['constraint'], entry['level'],
                                'true' if entry['hard'] else 'false']
                violated.add_metric(values, 0 if entry['holds'] else 1)
                excess.add_metric(values, entry['excess'])
            for level, domains in group['domains'].items():
                for domain, names in domains.items():
                    members.add_metric(ids + [level, domain], len(names))
        yield violated
        yield excess
        yield members


def prometheus_text(audit, timestamp, success=True):
    """The audit in Prometheus' text exposition format (version 0.0.4)."""
    registry = prometheus_core.CollectorRegistry(auto_describe=False)
    registry.register(_AuditCollector(audit, timestamp, success))
    return prometheus_exposition.generate_latest(registry).decode('utf-8')


def write_atomically(path, text):
    """``text`` into ``path`` through a temporary file in its directory
    and a rename: node_exporter's textfile collector never reads half a
    file.
    """
    files.write_atomically(path, text)


# -- plans --------------------------------------------------------------------

def plan_document(plans, names, methods):
    """The plans (GroupPlans) as a dict: ``moves``, ``blocked``, and per
    group the hard excess before and after and the lower bound.
    """
    moves, blocked, groups = [], [], []
    for group_plan in plans:
        case = group_plan.case
        for move in group_plan.moves:
            moves.append({
                'server': move.server, 'name': names.get(move.server),
                'group': case.name if case.uuid else None,
                'from': move.source,
                'to': plan.describe_class(case.levels, [
                    domain for _level, domain in move.destination]),
                'method': methods.get(move.server), 'why': move.why,
                'waits_for_group': move.barrier})
        for item in group_plan.blocked:
            blocked.append({'server': item.server,
                            'name': names.get(item.server),
                            'group': case.name if case.uuid else None,
                            'host': item.host, 'reason': item.reason})
        if case.uuid:
            groups.append({
                'group': case.name, 'uuid': case.uuid,
                'hard_constraints': [str(c) for c in case.hard],
                'hard_excess_before': list(group_plan.baseline),
                'hard_excess_after': list(group_plan.final),
                'soft_excess_before': group_plan.soft_before,
                'soft_excess_after': group_plan.soft_after,
                'moves': len(group_plan.moves),
                'lower_bound': group_plan.lower_bound,
                'notes': list(group_plan.notes)})
    return {'moves': moves, 'blocked': blocked, 'groups': groups}


def plan_table(document, out):
    if document['moves']:
        _table(['server', 'group', 'from', 'to (Nova picks the host)',
                'method', 'why'],
               [[m['name'] or m['server'], m['group'] or '-', m['from'],
                 m['to'] + (' (after the group\'s earlier moves)'
                            if m['waits_for_group'] else ''),
                 m['method'] or '-', m['why']]
                for m in document['moves']], out)
    else:
        print('no moves', file=out)
    if document['blocked']:
        print('cannot move:', file=out)
        _table(['server', 'group', 'host', 'reason'],
               [[b['name'] or b['server'], b['group'] or '-',
                 b['host'] or '-', b['reason']]
                for b in document['blocked']], out)
    for group in document['groups']:
        if group['lower_bound'] is None or not group['moves']:
            continue
        print('group %s: %d move%s (lower bound %d%s)' % (
            group['group'], group['moves'],
            '' if group['moves'] == 1 else 's', group['lower_bound'],
            ': the fewest possible' if group['moves'] == group['lower_bound']
            else ''), file=out)


def results_table(results, out):
    _table(['server', 'group', 'from', 'to', 'method', 'migration',
            'result'],
           [[r.name, r.group or '-', r.source, r.destination or '-',
             r.method or '-', r.migration or '-',
             r.outcome + (': ' + r.detail if r.detail else '')]
            for r in results], out)
