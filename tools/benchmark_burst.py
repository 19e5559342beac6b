#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Bursts of parallel creates on a real multi-process Nova, nova-ext's
scheduler features on against off, in one run on one cloud.

Method
------
The cloud is the system tier's (tests/system/cloud.py): real placement,
nova-api, nova-conductor, ``--schedulers`` nova-scheduler processes with
``--workers`` workers each and ``--computes`` fake-driver nova-computes (in
racks of two: host aggregates with ``nova_ext:failure_domain:rack``), over
this machine's MariaDB and RabbitMQ. nova-ext **on** is its
failure-domain filter and weighers enabled with the spread lock on the
default MariaDB backend; **off** is the same cloud with every
nova-scheduler restarted on Nova's own filters and weighers and without
``?plugin=nova_ext`` (what ``nova-ext-manage configure --undo`` and a
restart leave). Each mode runs every burst shape, in the same order:

* **spread fits**: one soft-anti-affinity group of N creates with
  ``nova_ext:spread_constraints=rack:max=M``, M sized so all N fit;
* **spread refuses K**: the same with M one size smaller, so that exactly
  K = N - racks x M cannot fit: they must end ERROR with the spread
  reason (not a lock timeout); off, nothing limits the group;
* **10 groups**: ten groups of N/10 members at once, each with a rack
  maximum that fits;
* **no group**: N creates in no group.

A burst is N single creates (``POST /servers``) sent at once from N
client threads; it ends when every server is ACTIVE or ERROR. Per server:
the time from its POST to the first poll (every 0.5 s) that saw it
settled; per burst: the wall time from the first POST to the last server
settled; a burst of 4 per scheduler worker, untimed, warms each mode's
new processes first. From the schedulers' debug logs (nova-ext's own
lines): each spread request's wait for its group's turn, and each turn's
requests, hold of the group's lock and count of the members. After each
burst the servers are counted per rack and group against the maximum
(violations) and against the project's instance quota (set to N), then
deleted.

The result per shape is on/off of the wall time, with the longest wait of
a member for its turn as a share of the burst's wall time and the lock's
hold per member (a turn's hold over its requests). The goals: a burst of
300 creates of one spread group that fits at most 1.15 times the wall time
without nova-ext, no member waiting more than 20 % of it, and a hold per
member that does not grow with the group's size.
"""

import argparse
import collections
import concurrent.futures
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TOP)
sys.path.insert(0, os.path.join(TOP, 'tools'))
import bench_json  # noqa: E402  (a sibling script, not a package)
from tests.system import cloud as system_cloud  # noqa: E402

FILTERS_OFF = ('ComputeFilter,ServerGroupAntiAffinityFilter,'
               'ServerGroupAffinityFilter')
CONF_OFF = '\n'.join([
    '[DEFAULT]', 'debug = True',
    '[filter_scheduler]',
    'enabled_filters = ' + FILTERS_OFF,
    'weight_classes = nova.scheduler.weights.all_weighers'])
CONF_ON = '\n'.join([
    '[DEFAULT]', 'debug = True',
    '[filter_scheduler]',
    'available_filters = nova.scheduler.filters.all_filters',
    'available_filters = nova_ext.scheduler.filters.all_filters',
    'enabled_filters = %s,FailureDomainAntiAffinityFilter' % FILTERS_OFF,
    'weight_classes = nova.scheduler.weights.all_weighers,'
    'nova_ext.scheduler.weights.all_weighers'])
SHAPES = ('spread fits', 'spread refuses K', '10 groups', 'no group')
POLL_SECONDS = 0.5
WAIT_LINE = re.compile(r'server group \S+: waited (\d+) ms for its turn')
# (requests, hold, count[, claims, ledger, release]): a nova-ext from
# before 2026-11-29 (--before) gives the count only
TURN_LINE = re.compile(r'spread lock of server group \S+: a turn of (\d+) '
                       r'requests held it (\d+) ms \(count (\d+) ms'
                       r'(?:, claims (\d+) ms, ledger (\d+) ms, '
                       r'release (\d+) ms)?\)')
# nova-ext before turns (--before): one lock hold per request
HOLD_LINE = re.compile(r'spread lock of server group \S+: waited (\d+) ms, '
                       r'held (\d+) ms')


def percentile(values, share):
    """Nearest-rank percentile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


class Bench(object):

    def __init__(self, nova, racks, flavor):
        self.nova, self.racks, self.flavor = nova, racks, flavor
        self.rack_of = {host: rack for rack, hosts in racks.items()
                        for host in hosts}

    def call(self, method, path, body=None):
        status, answer = self.nova.request(method, path, body)
        if status >= 300:
            raise RuntimeError('%s %s: %d %s' % (method, path, status,
                                                 answer))
        return answer

    def plan(self, shape, size):
        """[(group policy or None, rack maximum or None, members)] and the
        number of servers that must end ERROR (with nova-ext on).
        """
        racks = len(self.racks)
        if shape == 'spread fits':
            return [('soft-anti-affinity', math.ceil(size / racks), size)], 0
        if shape == 'spread refuses K':
            maximum = max(1, (size - max(1, size // 5)) // racks)
            return ([('soft-anti-affinity', maximum, size)],
                    size - maximum * racks)
        if shape == '10 groups':
            members = max(1, size // 10)
            return [('soft-anti-affinity', math.ceil(members / racks),
                     members)] * (size // members), 0
        return [(None, None, size)], 0

    def burst(self, label, shape, size, spread):
        groups, must_fail = self.plan(shape, size)
        self.call('PUT', '/os-quota-sets/admin', {'quota_set': {
            'instances': size}})
        creates = []
        for number, (policy, maximum, members) in enumerate(groups):
            hints = {}
            if policy:
                hints = {'group': self.call('POST', '/os-server-groups', {
                    'server_group': {'name': '%s-g%d' % (label, number),
                                     'policy': policy}})[
                                         'server_group']['id']}
                hints['nova_ext:spread_constraints'] = 'rack:max=%d' % (
                    maximum)
            creates += [(hints, maximum, '%s-%d-%d' % (label, number, m))
                        for m in range(members)]
        sent = {}

        def create(item):
            hints, _maximum, name = item
            sent[name] = time.monotonic()
            status, answer = self.nova.request('POST', '/servers', {
                'server': {'name': name, 'flavorRef': self.flavor,
                           'imageRef': system_cloud.IMAGE,
                           'networks': 'none'},
                'os:scheduler_hints': hints})
            return status, answer

        log_marks = self.log_marks()
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(len(creates)) as pool:
            answers = list(pool.map(create, creates))
        refused = [a for s, a in answers if s != 202]
        settled_at = {}
        servers = {}
        while True:
            listed = [s for s in self.call(
                'GET', '/servers/detail?all_tenants=1')['servers']
                if s['name'].startswith(label + '-')]
            now = time.monotonic()
            for server in listed:
                servers[server['name']] = server
                if (server['status'] in ('ACTIVE', 'ERROR')
                        and server['name'] not in settled_at):
                    settled_at[server['name']] = now
            if len(settled_at) >= len(creates) - len(refused):
                break
            if now - started > 900:
                raise RuntimeError('%s: servers still building after 900 s'
                                   % label)
            time.sleep(POLL_SECONDS)
        wall = max(settled_at.values()) - started
        latencies = [settled_at[n] - sent[n] for n in settled_at]
        active = [s for s in servers.values() if s['status'] == 'ACTIVE']
        errors = collections.Counter(
            _reason(s.get('fault', {}).get('message', ''))
            for s in servers.values() if s['status'] == 'ERROR')
        violations = self.violations(creates, servers, spread)
        waits, turns = self.scheduler_figures(log_marks)
        self.delete(list(servers.values()))
        in_turns = sum(turn.requests for turn in turns)
        # the longest tenth of the holds, and what they went to
        long_holds = sorted(turns, key=lambda turn: turn.hold)[
            len(turns) * 9 // 10:]
        return {
            'shape': shape, 'burst': size, 'nova_ext': spread,
            'wall_s': round(wall, 2),
            'p50_s': round(percentile(latencies, 0.5), 2),
            'p99_s': round(percentile(latencies, 0.99), 2),
            'active': len(active), 'error': sum(errors.values()),
            'refused_by_api': len(refused),
            'must_fail': must_fail if spread else 0,
            'errors': dict(errors),
            'violations': violations,
            'over_quota': max(0, len(active) - size),
            'turns': len(turns),
            'requests_per_turn_max': max(
                (turn.requests for turn in turns), default=None),
            'count_ms_p50': percentile([turn.count for turn in turns], 0.5),
            # a turn's hold, part by part (nova-ext's debug line; a
            # nova-ext from before 2026-11-29 gives the count only)
            'hold_parts_ms_p50': _parts(turns),
            'long_holds': {
                'turns': len(long_holds),
                'hold_ms_min': min((turn.hold for turn in long_holds),
                                   default=None),
                'parts_ms_p50': _parts(long_holds)},
            'lock_wait_ms_p50': percentile(waits, 0.5),
            'lock_wait_ms_p99': percentile(waits, 0.99),
            'lock_wait_ms_max': max(waits, default=None),
            'lock_wait_share_max': (round(max(waits) / 1000.0 / wall, 3)
                                    if waits else None),
            'turn_hold_ms_p50': percentile([turn.hold for turn in turns],
                                           0.5),
            'hold_ms_per_member': (
                round(sum(turn.hold for turn in turns) / in_turns, 1)
                if in_turns else None),
        }

    def violations(self, creates, servers, spread):
        """Racks over a group's maximum (counted with nova-ext on only:
        off, nothing promises the maximum).
        """
        if not spread:
            return 0
        per_group_rack = collections.Counter()
        maximum_of = {}
        for hints, maximum, name in creates:
            server = servers.get(name)
            if not hints or not server or server['status'] != 'ACTIVE':
                continue
            maximum_of[hints['group']] = maximum
            per_group_rack[hints['group'], self.rack_of[
                server['OS-EXT-SRV-ATTR:host']]] += 1
        return sum(1 for (group, _rack), count in per_group_rack.items()
                   if count > maximum_of[group])

    def delete(self, servers):
        for server in servers:
            self.nova.request('DELETE', '/servers/%s' % server['id'])
        deadline = time.monotonic() + 600
        names = {s['name'] for s in servers}
        while any(s['name'] in names for s in self.call(
                'GET', '/servers?all_tenants=1')['servers']):
            if time.monotonic() > deadline:
                raise RuntimeError('servers not deleted after 600 s')
            time.sleep(1)
        for group in self.call('GET', '/os-server-groups?all_projects=1')[
                'server_groups']:
            self.call('DELETE', '/os-server-groups/%s' % group['id'])

    def log_marks(self):
        return {process.log_path: _size(process.log_path)
                for process in self.nova.scheduler_processes}

    def scheduler_figures(self, marks):
        """nova-ext's debug lines in nova-scheduler's logs since ``marks``:
        ([each spread request's wait for its turn, ms], [(requests, lock
        hold ms, count ms) of each turn]). With nova-ext off there are
        none.
        """
        waits, turns = [], []
        for path, offset in marks.items():
            with open(path, errors='replace') as f:
                f.seek(offset)
                for line in f:
                    wait = WAIT_LINE.search(line)
                    if wait:
                        waits.append(int(wait.group(1)))
                    turn = TURN_LINE.search(line)
                    if turn:
                        turns.append(TurnFigures(*(
                            None if value is None else int(value)
                            for value in turn.groups())))
                    hold = HOLD_LINE.search(line)
                    if hold:
                        waits.append(int(hold.group(1)))
                        turns.append(TurnFigures(1, int(hold.group(2)), 0,
                                                 None, None, None))
        return waits, turns


# one turn's figures, from nova-ext's debug line: its requests, its hold
# of the lock, and the parts of the hold (ms); claims, ledger and release
# are None from a nova-ext that does not log them
TurnFigures = collections.namedtuple(
    'TurnFigures', 'requests hold count claims ledger release')


def _described(parts):
    return ', '.join('%s %s' % item for item in parts.items()) or '--'


def _parts(turns):
    """{part: median ms} of the holds of ``turns``: the count, the claims
    in placement (summed over the turn's requests), the ledger's write, the
    lock's release, and the rest (the requests' passes and decisions; less
    than that when claims overlapped); only the count from a nova-ext that
    does not log the others.
    """
    if not turns:
        return {}
    parts = {'count': percentile([turn.count for turn in turns], 0.5)}
    if all(turn.ledger is not None for turn in turns):
        for part in ('claims', 'ledger', 'release'):
            parts[part] = percentile(
                [getattr(turn, part) for turn in turns], 0.5)
        parts['rest'] = percentile(
            [turn.hold - turn.count - turn.claims - turn.ledger
             - turn.release for turn in turns], 0.5)
    return parts


def _size(path):
    return os.path.getsize(path) if os.path.exists(path) else 0


def _reason(message):
    """A fault message without its uuids and numbers: one key per kind."""
    return re.sub(r'[0-9a-f]{8}-[0-9a-f-]{27}', '<uuid>',
                  re.sub(r'\([^)]*\)', '', message))[:160]


def checkout(ref):
    """A temporary directory holding ``nova_ext`` as it was at git ``ref``
    (the schedulers of the "before" mode run it, first on their path).
    """
    target = tempfile.mkdtemp(prefix='nova-ext-before-')
    archive = subprocess.run(['git', '-C', TOP, 'archive', ref, 'nova_ext'],
                             check=True, capture_output=True).stdout
    subprocess.run(['tar', '-x', '-C', target], input=archive, check=True)
    return target


def start_cloud(args):
    hosts = ['cmp%d' % n for n in range(1, args.computes + 1)]
    racks = {'r%d' % (n // 2 + 1): tuple(hosts[n:n + 2])
             for n in range(0, len(hosts), 2)}
    # the schedulers' options come with their first restart
    nova = system_cloud.LoopbackNova(
        '', computes=hosts, schedulers=args.schedulers,
        scheduler_workers=args.workers)
    nova.setUp()
    try:
        bench = Bench(nova, racks, None)
        nova.make_racks(racks)
        bench.call('PUT', '/os-quota-sets/admin', {'quota_set': {
            'cores': -1, 'ram': -1, 'server_groups': -1,
            'server_group_members': -1}})
        bench.flavor = bench.call('POST', '/flavors', {'flavor': {
            'name': 'tiny', 'ram': 128, 'vcpus': 1, 'disk': 1}})[
                'flavor']['id']
    except Exception:
        nova.cleanUp()
        raise
    return nova, bench


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--bursts', type=int, nargs='+', default=[50, 100],
                        metavar='N', help='burst sizes (default 50 100)')
    parser.add_argument('--shapes', nargs='+', default=list(SHAPES),
                        choices=SHAPES, metavar='SHAPE',
                        help='burst shapes (default: all of %s)' % (
                            ', '.join(SHAPES)))
    parser.add_argument('--computes', type=int, default=10)
    parser.add_argument('--schedulers', type=int, default=2)
    parser.add_argument('--workers', type=int, default=2,
                        help='workers per nova-scheduler (default 2)')
    parser.add_argument('--before', metavar='REF',
                        help="also run every burst with the schedulers on "
                             "nova-ext as it was at git REF (a commit of "
                             "this repository), between off and on")
    parser.add_argument('--json', metavar='PATH',
                        help='also write the figures as JSON')
    args = parser.parse_args(argv)

    before = checkout(args.before) if args.before else None
    modes = [('off', None)] + ([('before', before)] if before else []) + [
        ('on', None)]
    nova, bench = start_cloud(args)
    results = []
    try:
        for mode, code in modes:
            spread = mode != 'off'
            nova.restart_schedulers(CONF_ON if spread else CONF_OFF,
                                    plugin=spread, code=code)
            # untimed: every new worker's first requests (its host states,
            # its connections) and the computes' first builds
            bench.burst('warm' + mode, 'spread fits',
                        4 * args.schedulers * args.workers, spread)
            for size in args.bursts:
                for shape in args.shapes:
                    label = 'b%d%s%d' % (size, mode, args.shapes.index(shape))
                    result = bench.burst(label, shape, size, spread)
                    result['mode'] = mode
                    results.append(result)
                    print('%-17s %4d %-6s wall %6.1f s  p50 %5.1f s  '
                          'p99 %5.1f s  ACTIVE %3d  ERROR %3d  '
                          'violations %d' % (
                              shape, size, mode, result['wall_s'],
                              result['p50_s'], result['p99_s'],
                              result['active'], result['error'],
                              result['violations']),
                          file=sys.stderr)
    finally:
        nova.cleanUp()
        if before:
            shutil.rmtree(before, ignore_errors=True)

    rows = []
    failed = []
    for size in args.bursts:
        for shape in args.shapes:
            found = {r['mode']: r for r in results
                     if (r['shape'], r['burst']) == (shape, size)}
            off, on = found['off'], found['on']
            row = dict(shape=shape, burst=size, off=off, on=on,
                       ratio=round(on['wall_s'] / off['wall_s'], 2))
            if 'before' in found:
                row['before'] = found['before']
                row['before_ratio'] = round(
                    found['before']['wall_s'] / off['wall_s'], 2)
            rows.append(row)
            expected_active = size - on['must_fail']
            if (on['violations'] or on['over_quota']
                    or on['active'] != expected_active
                    or any('spread lock' in reason
                           for reason in on['errors'])):
                failed.append('%s %d: %d ACTIVE (expected %d), %d '
                              'violations, %d over quota, errors %s' % (
                                  shape, size, on['active'],
                                  expected_active, on['violations'],
                                  on['over_quota'], on['errors']))
    print('%-17s %5s %-6s %8s %7s %8s %8s %14s %14s %6s %12s' % (
        'shape', 'burst', 'mode', 'wall', '/off', 'p50', 'p99',
        'ACTIVE/ERROR', 'max wait', 'turns', 'hold/member'))
    for row in rows:
        for mode in ('off', 'before', 'on'):
            if mode not in row:
                continue
            figures = row[mode]
            print('%-17s %5d %-6s %7.1fs %7.2f %7.1fs %7.1fs %6d/%-7d '
                  '%14s %6s %12s' % (
                      row['shape'], row['burst'], mode, figures['wall_s'],
                      figures['wall_s'] / row['off']['wall_s'],
                      figures['p50_s'], figures['p99_s'],
                      figures['active'], figures['error'],
                      '--' if figures['lock_wait_ms_max'] is None
                      else '%.1fs (%d%%)' % (
                          figures['lock_wait_ms_max'] / 1000.0,
                          100 * figures['lock_wait_share_max']),
                      figures['turns'] or '--',
                      '--' if figures['hold_ms_per_member'] is None
                      else '%.0fms' % figures['hold_ms_per_member']))
    for row in rows:
        for mode in ('before', 'on'):
            figures = row.get(mode)
            if figures and figures['hold_parts_ms_p50']:
                print('%s %d %s: a hold, median ms by part: %s; its longest '
                      'tenth (%d turns, from %s ms): %s' % (
                          row['shape'], row['burst'], mode,
                          _described(figures['hold_parts_ms_p50']),
                          figures['long_holds']['turns'],
                          figures['long_holds']['hold_ms_min'],
                          _described(figures['long_holds']['parts_ms_p50'])))
    if args.json:
        bench_json.write(args.json, {
            'cloud': {'computes': args.computes,
                      'racks': len(bench.racks),
                      'schedulers': args.schedulers,
                      'workers': args.workers},
            'before': args.before, 'rows': rows})
    for failure in failed:
        print('FAILED: ' + failure, file=sys.stderr)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
