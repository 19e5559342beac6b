#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Per-request cost of the spread lock (a server group's turn and its tooz
lock) on MariaDB, Redis and file locks, against no lock at all.

Method
------
Each request does what ``spread_requests.schedule`` does around the
scheduling of one member of a group with a failure-domain spread: it takes
the group's turn (``group_turns.take``: joined, or opened with the group's
tooz lock through ``Coordination.acquire``, bounded, whole seconds left of
``[nova_ext] spread_lock_timeout``; the count stood in for by nothing),
then the scheduling itself, then ``Turn.done`` (the lock released once
the turn's last request is done). The scheduling is stood in for by a
sleep of ``--hold-ms`` (default 10 ms, about ``select_destinations`` at
100 hosts in doc/source/benchmark.rst): it takes no CPU from the other
threads, as a claim waiting for placement. Backends (``[nova_ext]
coordination_backend_url``), one real ``Coordination`` each, started
before timing and made the process's:

* **upstream**: no lock (Nova as shipped, or ``spread_serialize_groups =
  False``): the sleep alone, the baseline of the ratio;
* **mysql**: MariaDB advisory locks (``GET_LOCK``) through tooz's mysql
  driver, ``mysql://root@127.0.0.1:3306/`` by default -- the backend
  nova-ext derives from a MySQL ``[api_database] connection``; the driver
  opens one connection per lock;
* **redis**: ``redis://127.0.0.1:6379`` by default;
* **file**: ``file://`` in a fresh temporary directory.

A backend that cannot be reached is skipped with one line saying why.

Three loads, each request timed from before the local lock to after the
last release (so waiting for the lock counts):

* **alone**: one thread, N requests of one group;
* **same group**: K threads, N requests each, all of one group: requests
  arriving while a turn waits for the lock join it, and those arriving
  while it runs wait for the next;
* **K groups**: K threads, N requests each, each thread its own group:
  unrelated groups take different locks and should cost what "alone"
  costs (plus the CPU the threads share).

Mean, median and 95th percentile (nearest rank) of all timed requests
after 2 untimed warm-ups per thread; "x upstream" is the mean over
upstream's mean in the same load, "+ms" the difference: what the lock
adds to a request.
"""

import argparse
import math
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
import warnings

from oslo_config import cfg

from nova_ext.scheduler import coordination as spread_coordination
from nova_ext.scheduler import group_turns

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_json  # noqa: E402  (a sibling script, not a package)

CONF = cfg.CONF
WARMUPS = 2
LOADS = ('alone', 'same group', 'K groups')


def reachable(url):
    """None, or why the backend at ``url`` cannot be used."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == 'file':
        return None
    port = parts.port or {'mysql': 3306, 'redis': 6379}[parts.scheme]
    try:
        socket.create_connection((parts.hostname, port), timeout=2).close()
    except OSError as error:
        return 'cannot connect to %s:%s: %s' % (parts.hostname, port, error)
    return None


def one_request(coordination, group, hold):
    """Seconds one request of ``group`` spends, lock included."""
    timeout = CONF.nova_ext.spread_lock_timeout
    started = time.perf_counter()
    if coordination is None:
        time.sleep(hold)
        return time.perf_counter() - started
    turn, _waited = group_turns.take(group, timeout, dict, _raise,
                                     _nothing_to_record)
    try:
        time.sleep(hold)
    finally:
        turn.done(timeout)
    return time.perf_counter() - started


def _raise(error):
    raise error


def _nothing_to_record(claimed, counted):
    pass


def run_load(coordination, load, requests, threads, hold):
    """Milliseconds of every timed request of ``load``."""
    run = uuid.uuid4().hex[:8]
    count = 1 if load == 'alone' else threads
    times, errors = [], []
    start = threading.Barrier(count)

    def worker(n):
        group = 'bench-%s-%d' % (run, 0 if load == 'same group' else n)
        try:
            for _ in range(WARMUPS):
                one_request(coordination, group, hold)
            start.wait()
            mine = [one_request(coordination, group, hold) * 1000.0
                    for _ in range(requests)]
        except Exception as error:
            errors.append(error)
            start.abort()
            return
        times.extend(mine)

    workers = [threading.Thread(target=worker, args=(n,), daemon=True)
               for n in range(count)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    if errors:
        raise errors[0]
    return times


def coordination_for(url):
    """A started Coordination on ``url``; raises CoordinationUnavailable."""
    CONF.set_override('coordination_backend_url', url, group='nova_ext')
    spread_coordination.reset()
    coordination = spread_coordination.process_coordination()
    lock = coordination.acquire('bench-probe-' + uuid.uuid4().hex, 5)
    if lock is None:
        raise spread_coordination.CoordinationUnavailable(
            'a lock nobody holds was not granted within 5 s')
    coordination.release(lock)
    return coordination


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--requests', type=int, default=200,
                        help='timed requests per thread and load')
    parser.add_argument('--threads', type=int, default=8,
                        help='threads of the "same group" and "K groups" '
                        'loads')
    parser.add_argument('--hold-ms', type=float, default=10.0,
                        help='time each request holds the lock (the '
                        'scheduling it stands for)')
    parser.add_argument('--mysql-url', default='mysql://root@127.0.0.1:3306/')
    parser.add_argument('--redis-url', default='redis://127.0.0.1:6379')
    parser.add_argument('--json', metavar='FILE',
                        help="also write the table as JSON to FILE ('-' "
                        "for stdout)")
    args = parser.parse_args(argv)
    warnings.simplefilter('ignore')
    CONF([], project='nova', default_config_files=[],
         default_config_dirs=[])
    hold = args.hold_ms / 1000.0
    lock_dir = tempfile.mkdtemp(prefix='nova-ext-bench-locks-')
    try:
        backends = {'upstream': None, 'mysql': args.mysql_url,
                    'redis': args.redis_url, 'file': 'file://' + lock_dir}
        results = {}
        for name, url in backends.items():
            coordination = None
            if url is not None:
                why = reachable(url)
                try:
                    coordination = None if why else coordination_for(url)
                except spread_coordination.CoordinationUnavailable as error:
                    why = str(error)
                if why:
                    print('%s: skipped (%s): %s' % (
                        name, spread_coordination.redacted(url), why))
                    continue
            try:
                for load in LOADS:
                    results[name, load] = run_load(
                        coordination, load, args.requests, args.threads,
                        hold)
            except spread_coordination.CoordinationUnavailable as error:
                print('%s: skipped, failed during the run: %s' % (
                    name, error))
                for load in LOADS:
                    results.pop((name, load), None)
    finally:
        shutil.rmtree(lock_dir, ignore_errors=True)

    print('spread lock per request, %d requests per thread, K = %d '
          'threads, lock held %.1f ms per request' % (
              args.requests, args.threads, args.hold_ms))
    row = '%-11s %-9s %9s %9s %9s %11s %8s'
    print(row % ('load', 'backend', 'mean ms', 'p50 ms', 'p95 ms',
                 'x upstream', '+ms'))
    rows = []
    for load in LOADS:
        baseline = statistics.mean(results['upstream', load])
        for name in backends:
            if (name, load) not in results:
                continue
            times = sorted(results[name, load])
            mean = statistics.mean(times)
            print(row % (
                load.replace('K groups', '%d groups' % args.threads),
                name, '%.2f' % mean, '%.2f' % statistics.median(times),
                '%.2f' % times[math.ceil(0.95 * len(times)) - 1],
                '%.2fx' % (mean / baseline), '%+.2f' % (mean - baseline)))
            rows.append({
                'load': load.replace('K groups', '%d groups' % args.threads),
                'backend': name, 'mean_ms': mean,
                'p50_ms': statistics.median(times),
                'p95_ms': times[math.ceil(0.95 * len(times)) - 1],
                'x_upstream': mean / baseline,
                'extra_ms': mean - baseline})
    if args.json:
        bench_json.write(args.json, {
            'requests': args.requests, 'threads': args.threads,
            'hold_ms': args.hold_ms, 'results': rows})
    return 0


if __name__ == '__main__':
    sys.exit(main())
