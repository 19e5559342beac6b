# SPDX-License-Identifier: Apache-2.0
"""``nova-ext-manage spread audit``, ``spread rebalance`` and ``host
drain`` once nova.conf is parsed (the argument parsing is in
:mod:`nova_ext.cmd.manage`).

Exit codes, for cron, monitoring and scripts: 0 every hard constraint
holds (audit, rebalance) / every server left the hosts (drain); 2 a hard
constraint is violated, or servers could not be moved; 1 an error (one
line on stderr); 130 and 143 a run stopped by SIGINT or SIGTERM (run the
same command again to go on).
"""

import signal
import sys
import time

from nova import context as nova_context

from nova_ext import errors
from nova_ext.maintenance import audit
from nova_ext.maintenance import compute_api
from nova_ext.maintenance import execute
from nova_ext.maintenance import plan
from nova_ext.maintenance import report

EXIT_OK = 0
EXIT_VIOLATED = 2
EXIT_SIGNALS = {signal.SIGINT: 130, signal.SIGTERM: 143}
LIVE_STATES = ('ACTIVE', 'PAUSED')
COLD_STATES = ('ACTIVE', 'SHUTOFF')
# a server in one of these task states is being moved
MOVING_TASKS = ('migrating', 'resize_prep', 'resize_migrating',
                'resize_migrated', 'resize_finish')
# how often a move in flight is looked at
POLL_SECONDS = 2.0


class CommandError(errors.OperatorError):
    pass


def movability(member, cold):
    """(method, None) for a server Nova can move now, else (None, why)."""
    if member.task_state:
        return None, 'busy: task state %s' % member.task_state
    if cold:
        if member.status in COLD_STATES:
            return compute_api.COLD, None
        return None, ('status %s: Nova cold-migrates ACTIVE or SHUTOFF '
                      'servers only' % member.status)
    if member.status in LIVE_STATES:
        return compute_api.LIVE, None
    if member.status == 'SHUTOFF':
        return None, ('status SHUTOFF: live migration moves running '
                      'servers; --cold moves it (it stays stopped)')
    return None, ('status %s: Nova live-migrates ACTIVE or PAUSED servers '
                  'only' % member.status)


def _methods_and_pins(members, cold):
    methods, pinned = {}, {}
    for member in members:
        method, why = movability(member, cold)
        if method:
            methods[member.uuid] = method
        else:
            pinned[member.uuid] = why
    return methods, pinned


def _format(args):
    return 'json' if getattr(args, 'json', False) else getattr(
        args, 'format', 'table')


# -- spread audit -------------------------------------------------------------

def audit_command(conf, args, maintenance, out, ctxt=None):
    """``spread audit``; returns the exit code."""
    fmt = _format(args)
    if args.plan and fmt == 'prometheus':
        raise CommandError('--plan: not with --format prometheus (metrics '
                           'only); run it apart')
    if args.output and fmt != 'prometheus':
        raise CommandError('--output: for --format prometheus (the file '
                           "node_exporter's textfile collector reads)")
    ctxt = ctxt or nova_context.get_admin_context()
    try:
        state = audit.collect(conf, maintenance.list(), args.group,
                              args.project, ctxt)
        document = audit.report(state, audit.arrivals(
            ctxt, audit.offending_members(state)))
    except Exception:
        if fmt == 'prometheus' and args.output:
            # the collector then exports "the audit failed", not the last
            # good answer
            report.write_atomically(args.output, report.prometheus_text(
                {}, time.time(), success=False))
        raise
    if args.plan:
        plans, methods, names = rebalance_plans(state, args.cold, 1)
        document['plan'] = report.plan_document(plans, names, methods)
    if fmt == 'prometheus':
        text = report.prometheus_text(document, time.time())
        if args.output:
            report.write_atomically(args.output, text)
        else:
            out.write(text)
    elif fmt == 'json':
        report.write_json(document, out)
    else:
        report.audit_table(document, out)
        if args.plan:
            print('\nrepair plan (spread rebalance --execute runs it):',
                  file=out)
            report.plan_table(document['plan'], out)
    return EXIT_VIOLATED if document['hard_violations'] else EXIT_OK


# -- spread rebalance ---------------------------------------------------------

def rebalance_plans(state, cold, budget):
    """(GroupPlans, methods, names) restoring every violated constraint of
    ``state``'s groups.
    """
    plans, methods, names = [], {}, {}
    for group, verdicts in audit.judged(state):
        if all(verdict.holds for verdict in verdicts):
            continue
        group_methods, pinned = _methods_and_pins(group.members, cold)
        methods.update(group_methods)
        names.update((m.uuid, m.name) for m in group.members)
        plans.append(plan.rebalance(group.case(), state.layout, pinned,
                                    budget))
    return plans, methods, names


def rebalance_command(conf, args, maintenance, connect, out, ctxt=None):
    """``spread rebalance [--execute]``; ``connect()``: a
    :class:`compute_api.ComputeAPI`.
    """
    _check_budgets(args)
    ctxt = ctxt or nova_context.get_admin_context()
    state = audit.collect(conf, maintenance.list(), args.group, args.project,
                          ctxt)
    plans, methods, names = rebalance_plans(
        state, args.cold, args.max_unavailable_per_group)
    document = report.plan_document(plans, names, methods)
    repairable = all(not any(group_plan.final) for group_plan in plans)
    progress = out
    if args.json:
        progress = sys.stderr
    else:
        report.plan_table(document, out)
    if not args.execute or not document['moves']:
        if args.json:
            report.write_json({'plan': document}, out)
        return EXIT_OK if repairable else EXIT_VIOLATED
    pinned_all = {}
    for group in state.groups:
        pinned_all.update(_methods_and_pins(group.members, args.cold)[1])

    def replan(case, baseline, remaining, tried):
        pinned = dict(pinned_all)
        pinned.update((server, 'already moved or tried in this run')
                      for server in tried)
        return plan.rebalance(case, state.layout, pinned,
                              args.max_unavailable_per_group, baseline)

    executor = execute.Executor(
        connect(), plans, state.layout, methods, names,
        args.max_unavailable_per_group, args.parallel, args.timeout,
        progress, replan, POLL_SECONDS)
    results = executor.run()
    after = audit.report(audit.collect(conf, maintenance.list(), args.group,
                                       args.project, ctxt))
    return _finish(args, out, document, results, executor, [
        'after: %d hard constraint%s violated, %d soft' % (
            after['hard_violations'],
            '' if after['hard_violations'] == 1 else 's',
            after['soft_violations'])],
        EXIT_OK if not after['hard_violations'] else EXIT_VIOLATED,
        {'after': after})


def _check_budgets(args):
    for flag, value in (('--max-unavailable-per-group',
                         args.max_unavailable_per_group),
                        ('--parallel', args.parallel)):
        if value < 1:
            raise CommandError('%s %d: at least 1' % (flag, value))
    if args.timeout <= 0:
        raise CommandError('--timeout %s: seconds, more than 0'
                           % args.timeout)


def _finish(args, out, document, results, executor, lines, code, extra):
    """Print the results and return the exit code."""
    if args.json:
        body = {'plan': document, 'results': [r._asdict() for r in results]}
        body.update(extra)
        report.write_json(body, out)
    else:
        if results:
            report.results_table(results, out)
        for line in lines:
            print(line, file=out)
    if executor.safety:
        print('nova-ext-manage: stopped: %s' % executor.safety,
              file=sys.stderr)
        return EXIT_VIOLATED
    if executor.interrupted:
        print('nova-ext-manage: interrupted by %s; the moves in flight %s; '
              'run the same command again to go on' % (
                  signal.Signals(executor.interrupted).name,
                  'are reported above' if any(
                      r.outcome == execute.INTERRUPTED for r in results)
                  else 'finished'), file=sys.stderr)
        return EXIT_SIGNALS.get(executor.interrupted, 130)
    return code


# -- host drain ---------------------------------------------------------------

def resolve_hosts(state, hosts, domains):
    """The compute hosts named (``hosts``) or in the domains named
    (``domains``: ``LEVEL=NAME`` each); CommandError naming what is
    unknown.
    """
    known = sorted(state.hosts)
    chosen = []
    for host in hosts or ():
        if host not in state.hosts:
            raise CommandError('no compute host %s (nova-compute services: '
                               '%s)' % (host, _some(known)))
        chosen.append(host)
    for text in domains or ():
        level, equals, name = text.partition('=')
        if not equals or not level or not name:
            raise CommandError('--domain %r: expected LEVEL=NAME, e.g. '
                               'rack=r3' % text)
        if level not in state.levels:
            raise CommandError('--domain %s: %s is not a failure-domain '
                               'level (known: %s)' % (
                                   text, level, ', '.join(state.levels)))
        there = [host for host in known
                 if state.layout.domain(host, level) == name]
        if not there:
            names = sorted({str(state.layout.domain(host, level))
                            for host in known} - {'None'})
            raise CommandError('--domain %s: no compute host is in %s %s '
                               '(%ss: %s)' % (text, level, name, level,
                                              _some(names) or 'none'))
        chosen.extend(there)
    if not chosen:
        raise CommandError('host drain: name hosts, or --domain LEVEL=NAME')
    return list(dict.fromkeys(chosen))


def _some(names, most=8):
    shown = ', '.join(names[:most])
    return shown + (', ...' if len(names) > most else '')


def drain_plans(state, servers, hosts, cold, budget):
    """(GroupPlans, methods, names) moving ``servers`` (on ``hosts``) off,
    in a layout where ``hosts`` take nothing.
    """
    layout = state.layout.without(hosts)
    methods, pinned = _methods_and_pins(servers, cold)
    names = {server.uuid: server.name for server in servers}
    grouped = {}
    plans = []
    for group in state.groups:
        leaving = {m.uuid for m in group.members if m.host in hosts}
        if not leaving:
            continue
        grouped.update(dict.fromkeys(leaving))
        names.update((m.uuid, m.name) for m in group.members)
        plans.append(plan.drain(group.case(), layout, leaving, {
            uuid: why for uuid, why in pinned.items() if uuid in leaving},
            budget))
    for server in servers:
        if server.uuid in grouped:
            continue
        case = plan.Case(None, server.name, None, (),
                         {server.uuid: server.host})
        moves, blocked = [], []
        if server.uuid in pinned:
            blocked.append(plan.Blocked(server.uuid, None, server.host,
                                        pinned[server.uuid]))
        else:
            move, refused = plan.plan_groupless(server.uuid, server.host,
                                                layout)
            moves, blocked = ([move], []) if move else ([], [refused])
        plans.append(plan.GroupPlan(case, moves, blocked, (), (), 0, 0))
    return plans, methods, names, layout


def _mark(maintenance, nodes, hosts, dry_run, out):
    for host in hosts:
        for node in nodes.get(host) or [host]:
            if dry_run:
                print('%s: would be put in maintenance (--dry-run)' % node,
                      file=out)
                continue
            changed = maintenance.on(node)
            print('%s: maintenance on%s' % (node, '' if changed
                                            else ' (already)'), file=out)


def _settle(ctxt, api, state, hosts, progress, args):
    """Follow to their end the moves off ``hosts`` an earlier run left
    under way (migrations in flight, cold migrations waiting to be
    confirmed). Returns the executor (None when there were none).
    """
    moving = [server for server in audit.servers_on(ctxt, hosts)
              if server.task_state in MOVING_TASKS]
    waiting = audit.finished_migrations_from(ctxt, hosts)
    if not moving and not waiting:
        return None
    names = {server.uuid: server.name for server in moving}
    names.update((uuid, name) for uuid, (name, _id, _host)
                 in waiting.items())
    executor = execute.Executor(api, [], state.layout, {}, names,
                                parallel=len(moving) + len(waiting),
                                timeout=args.timeout, out=progress,
                                poll_seconds=POLL_SECONDS)
    for server in moving:
        executor.adopt(server.uuid, compute_api.LIVE
                       if server.task_state == 'migrating'
                       else compute_api.COLD, server.host)
    for server, (_name, migration, source) in sorted(waiting.items()):
        executor.adopt(server, compute_api.COLD, source, migration)
    executor.run()
    return executor


def drain_command(conf, args, maintenance, connect, out, ctxt=None):
    """``host drain``; returns the exit code."""
    _check_budgets(args)
    ctxt = ctxt or nova_context.get_admin_context()
    # the hosts and their domains first: no group is read for that
    state = audit.collect(conf, maintenance.list(), ctxt=ctxt,
                          on_hosts=set())
    hosts = resolve_hosts(state, args.hosts, args.domain)
    progress = sys.stderr if args.json else out
    _mark(maintenance, audit.nodes_of(ctxt, hosts), hosts, args.dry_run,
          progress)
    api = None
    settled = []
    if not args.dry_run:
        api = connect()
        executor = _settle(ctxt, api, state, hosts, progress, args)
        if executor is not None:
            settled = executor.results
            if executor.interrupted:
                return _finish(args, out, {}, settled, executor, [], 0, {})
    state = audit.collect(conf, maintenance.list(), ctxt=ctxt,
                          every_group=True, on_hosts=set(hosts))
    servers = audit.servers_on(ctxt, hosts)
    plans, methods, names, layout = drain_plans(
        state, servers, set(hosts), args.cold, args.max_unavailable_per_group)
    document = report.plan_document(plans, names, methods)
    if not args.json:
        print('%d server%s on %s' % (len(servers), '' if len(servers) == 1
                                     else 's', ', '.join(hosts)), file=out)
        report.plan_table(document, out)
    if args.dry_run:
        if args.json:
            report.write_json({'plan': document}, out)
        return EXIT_VIOLATED if document['blocked'] else EXIT_OK
    pinned_all = _methods_and_pins(servers, args.cold)[1]

    def replan(case, baseline, remaining, tried):
        return plan.drain(case, layout, remaining - tried, {
            server: why for server, why in pinned_all.items()
            if server in remaining}, args.max_unavailable_per_group,
            baseline)

    executor = execute.Executor(
        api, plans, layout, methods, names, args.max_unavailable_per_group,
        args.parallel, args.timeout, progress, replan, POLL_SECONDS)
    results = settled + executor.run() + [
        execute.Result(item.server, names.get(item.server, item.server),
                       group_plan.case.name if group_plan.case.uuid
                       else None, item.host, None, None, None,
                       execute.CANNOT_MOVE, item.reason)
        for group_plan in plans for item in group_plan.blocked]
    left = audit.servers_on(ctxt, hosts)
    lines = (['still on %s: %s' % (', '.join(hosts), ', '.join(
        server.name for server in left))] if left
        else ['%s: no server left' % ', '.join(hosts)])
    return _finish(args, out, document, results, executor, lines,
                   EXIT_VIOLATED if left else EXIT_OK,
                   {'left': [server.name for server in left]})
