#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""GET /allocation_candidates against a real placement, as nova-scheduler
sends it: Nova's default query and nova-ext's, at 1,000 and 5,000 compute
node providers.

    python tools/benchmark_placement.py --providers 1000 5000 --rounds 20

Method
------
Placement: the installed ``placement`` package's WSGI app
(``placement.deploy.loadapp``, every middleware of a deployment, auth
``noauth2``) called in this process through webob, with its database in a
scratch MariaDB database this script creates and drops. In-process rather
than behind an HTTP server so that what is timed is placement's own work
(its SQL, building the candidates, the JSON body) and not a server's
workers or a socket; nova-scheduler additionally pays keystoneauth and the
HTTP round trip, not measured here.

The schema comes from placement's own migrations (``sync_on_startup``),
the standard traits and resource classes from its own start-up sync. The
providers are then written by direct SQL into that schema (multi-row
INSERTs), because creating 5,000 providers, their traits and ~60,000
consumers through the REST API would take minutes. Each provider is
shaped like a nova-compute's compute node provider:

* VCPU 64 (allocation ratio 4.0, Nova's initial_cpu_allocation_ratio),
  MEMORY_MB 262,144 (512 reserved, ratio 1.0), DISK_GB 2,000 (ratio 1.0);
* ``--traits`` standard traits (COMPUTE_* and HW_CPU_X86_*, as the libvirt
  driver reports them), COMPUTE_STATUS_DISABLED on 1 host in 100 and
  CUSTOM_NOVA_EXT_MAINTENANCE (nova-ext's maintenance trait) on 1 in 50;
* one aggregate per rack of ``--rack-size`` (20) hosts;
* 0 to 25 instances (consumers of type INSTANCE) of 4 VCPU, 8 GiB, 80 GB,
  so hosts are partly used and 1 in 26 has no disk left for the request.

Queries, each as Nova builds it (``ResourceRequest.to_querystring``:
sorted and URL-encoded) at the microversion its report client sends
(``SAME_SUBTREE_VERSION``, 1.36), for a flavor of 2 VCPU, 4 GiB, 40 GB:

* **nova**: ``resources`` + ``root_required=!COMPUTE_STATUS_DISABLED``
  (Nova's compute_status_filter) + ``limit=1000`` (``[scheduler]
  max_placement_results``' default);
* **nova, limit=hosts**: the same with the limit at the host count, what
  operators set when the default cap hides capacity;
* **nova-ext**: nova plus the maintenance pre-filter's forbidden trait and
  a ``member_of=!in:`` of ``--full-racks`` (10) racks' aggregates, as the
  failure_domain pre-filter adds for a hard spread group's full racks;
* **nova-ext, group**: the same without ``limit``: Nova drops the limit for
  any request with a server group hint (``resources_from_request_spec``),
  and the failure_domain pre-filter only acts on server group requests,
  so this is the query such a request really sends.

These query strings were checked against Nova 34's own: a RequestSpec of
that flavor with those pre-filter results, through
``nova.scheduler.utils.resources_from_request_spec(...).to_querystring()``,
gives the same bytes (with a ``group`` hint, without ``limit``).

Every round runs the four queries in turn (noise hits them alike), after
one untimed warm-up round; p50 and p99 (nearest rank) of the rounds, wall
time. Also printed: *cpu p50*, this process's CPU time for the request
(placement's Python; MariaDB's work is in its own process and not in it),
which a loaded machine inflates far less than wall time; candidates
returned, the body's size, and what decoding it costs
(``json.loads``, which nova's report client does before the scheduler's
filters start: not in ``tools/scheduler_curve.py``'s figures).

Needs MariaDB (``--db-host``, ``--db-port``, user ``--db-user`` allowed to
create databases); exits 2 with one line when it is not reachable, 1 with
one line on any other error.
"""

import argparse
import datetime
import json
import math
import os
import sys
import time
import urllib.parse
import uuid

import os_traits
from oslo_config import cfg
import pymysql
import webob

from placement import conf as placement_conf
from placement import deploy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_json  # noqa: E402  (a sibling script, not a package)

MICROVERSION = '1.36'  # nova.scheduler.client.report.SAME_SUBTREE_VERSION
NOVA_MAX_PLACEMENT_RESULTS = 1000
DISABLED_TRAIT = 'COMPUTE_STATUS_DISABLED'
MAINTENANCE_TRAIT = 'CUSTOM_NOVA_EXT_MAINTENANCE'
FLAVOR = {'VCPU': 2, 'MEMORY_MB': 4096, 'DISK_GB': 40}
INSTANCE = {'VCPU': 4, 'MEMORY_MB': 8192, 'DISK_GB': 80}
# (total, reserved, allocation ratio) per resource class
INVENTORY = {'VCPU': (64, 0, 4.0), 'MEMORY_MB': (262144, 512, 1.0),
             'DISK_GB': (2000, 0, 1.0)}
QUERIES = ('nova', 'nova, limit=hosts', 'nova-ext', 'nova-ext, group')
# Tables this script fills, emptied before each size.
DATA_TABLES = ('allocations', 'consumers', 'users', 'projects',
               'resource_provider_traits', 'resource_provider_aggregates',
               'placement_aggregates', 'inventories', 'resource_providers')


class Failure(Exception):
    """An error worth one line; ``code`` is the exit status."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


def connect(args, database=None):
    try:
        return pymysql.connect(host=args.db_host, port=args.db_port,
                               user=args.db_user, password=args.db_password,
                               database=database, autocommit=True,
                               connect_timeout=5)
    except pymysql.err.OperationalError as error:
        raise Failure('MariaDB is not reachable at %s:%d as %s (%s); start '
                      'it or pass --db-host/--db-port/--db-user' % (
                          args.db_host, args.db_port, args.db_user,
                          error.args[-1]), code=2)


def placement_app(args, database):
    """placement's WSGI app over ``database``; its start-up runs the
    migrations and syncs the standard traits and resource classes.
    """
    conf = cfg.ConfigOpts()
    placement_conf.register_opts(conf)
    conf.set_override('connection', 'mysql+pymysql://%s:%s@%s:%d/%s' % (
        args.db_user, args.db_password, args.db_host, args.db_port,
        database), group='placement_database')
    conf.set_override('sync_on_startup', True, group='placement_database')
    conf.set_override('auth_strategy', 'noauth2', group='api')
    # parsed after the overrides: the connection is a required option
    conf([], project='placement', default_config_files=[])
    return deploy.loadapp(conf)


def host_traits(count):
    """``count`` standard traits a libvirt compute could report, the same
    on every host: COMPUTE_* capabilities then HW_CPU_X86_* CPU flags.
    """
    names = sorted(t for t in os_traits.get_traits()
                   if t.startswith('COMPUTE_') and t != DISABLED_TRAIT)
    names += sorted(t for t in os_traits.get_traits('HW_CPU_X86_'))
    return names[:count]


def ids_by_name(cursor, table, names):
    cursor.execute('SELECT name, id FROM %s' % table)
    found = dict(cursor.fetchall())
    missing = set(names) - set(found)
    if missing:
        raise Failure('placement did not create %s %s' % (
            table, ', '.join(sorted(missing))))
    return {name: found[name] for name in names}


def insert(cursor, table, columns, rows):
    # pymysql turns an executemany of an INSERT ... VALUES into multi-row
    # INSERTs of up to 1 MB each: ~60 ms per 10,000 rows here.
    cursor.executemany('INSERT INTO %s (%s) VALUES (%s)' % (
        table, ', '.join(columns), ', '.join(['%s'] * len(columns))), rows)


def load(db, hosts, args):
    """Replace the providers with ``hosts`` compute nodes; return
    {'racks': [aggregate uuid per rack], 'hosts': hosts, 'rows': n}.
    """
    now = datetime.datetime.utcnow()
    traits = host_traits(args.traits)
    with db.cursor() as cursor:
        # a provider is its own root (a foreign key InnoDB checks row by
        # row even within one statement): emptied without the checks
        cursor.execute('SET foreign_key_checks = 0')
        for table in DATA_TABLES:
            cursor.execute('TRUNCATE TABLE %s' % table)
        cursor.execute('SET foreign_key_checks = 1')
        rcs = ids_by_name(cursor, 'resource_classes', list(INVENTORY))
        cursor.execute('INSERT IGNORE INTO traits (name, created_at) '
                       'VALUES (%s, %s)', (MAINTENANCE_TRAIT, now))
        trait_ids = ids_by_name(cursor, 'traits', traits + [
            DISABLED_TRAIT, MAINTENANCE_TRAIT])
        cursor.execute("INSERT IGNORE INTO consumer_types (name, created_at) "
                       "VALUES ('INSTANCE', %s)", (now,))
        cursor.execute("SELECT id FROM consumer_types WHERE name = "
                       "'INSTANCE'")
        instance_type = cursor.fetchone()[0]
        insert(cursor, 'projects', ('id', 'external_id', 'created_at'),
               [(1, 'project', now)])
        insert(cursor, 'users', ('id', 'external_id', 'created_at'),
               [(1, 'user', now)])

        providers, inventories, provider_traits = [], [], []
        for index in range(hosts):
            rp = index + 1
            providers.append((rp, str(uuid.uuid4()), 'cmp%05d' % index, 1,
                              rp, now))
            for rc, (total, reserved, ratio) in INVENTORY.items():
                inventories.append((rp, rcs[rc], total, reserved, 1, total,
                                    1, ratio, now))
            names = list(traits)
            if index % 100 == 99:
                names.append(DISABLED_TRAIT)
            if index % 50 == 24:
                names.append(MAINTENANCE_TRAIT)
            provider_traits += [(rp, trait_ids[n], now) for n in names]
        insert(cursor, 'resource_providers', (
            'id', 'uuid', 'name', 'generation', 'root_provider_id',
            'created_at'), providers)
        insert(cursor, 'inventories', (
            'resource_provider_id', 'resource_class_id', 'total', 'reserved',
            'min_unit', 'max_unit', 'step_size', 'allocation_ratio',
            'created_at'), inventories)
        insert(cursor, 'resource_provider_traits', (
            'resource_provider_id', 'trait_id', 'created_at'),
            provider_traits)

        racks = [str(uuid.uuid4())
                 for _ in range(math.ceil(hosts / args.rack_size))]
        insert(cursor, 'placement_aggregates', ('id', 'uuid', 'created_at'),
               [(n + 1, u, now) for n, u in enumerate(racks)])
        insert(cursor, 'resource_provider_aggregates', (
            'resource_provider_id', 'aggregate_id', 'created_at'),
            [(index + 1, index // args.rack_size + 1, now)
             for index in range(hosts)])

        consumers, allocations = [], []
        for index in range(hosts):
            for _ in range(index % 26):
                consumer = str(uuid.uuid4())
                consumers.append((consumer, 1, 1, 1, instance_type, now))
                allocations += [(index + 1, consumer, rcs[rc], used, now)
                                for rc, used in INSTANCE.items()]
        insert(cursor, 'consumers', (
            'uuid', 'project_id', 'user_id', 'generation',
            'consumer_type_id', 'created_at'), consumers)
        insert(cursor, 'allocations', (
            'resource_provider_id', 'consumer_id', 'resource_class_id',
            'used', 'created_at'), allocations)
    rows = (len(providers) + len(inventories) + len(provider_traits) +
            len(racks) + hosts + len(consumers) + len(allocations))
    return {'racks': racks, 'hosts': hosts, 'rows': rows,
            'consumers': len(consumers)}


def querystring(limit, root_forbidden, forbidden_aggregates=()):
    """The query Nova's ResourceRequest.to_querystring builds for one
    unnumbered request group with these pre-filter results.
    """
    params = [('resources', ','.join(
        '%s:%d' % (rc, amount) for rc, amount in sorted(FLAVOR.items()))),
        ('root_required', ','.join('!' + t for t in sorted(root_forbidden)))]
    if limit is not None:
        params.append(('limit', limit))
    if forbidden_aggregates:
        params.append(('member_of',
                       '!in:' + ','.join(sorted(forbidden_aggregates))))
    return urllib.parse.urlencode(sorted(params))


def queries(loaded, full_racks):
    hosts, racks = loaded['hosts'], loaded['racks']
    # full racks spread over the cloud rather than its first racks, so
    # that no limit is met sooner just because the excluded hosts came
    # first in placement's order; at most half the racks, so that a small
    # cloud still has candidates
    count = min(full_racks, len(racks) // 2)
    full = racks[::max(1, len(racks) // max(1, count))][:count]
    nova = {DISABLED_TRAIT}
    ext = nova | {MAINTENANCE_TRAIT}
    return {
        'nova': querystring(NOVA_MAX_PLACEMENT_RESULTS, nova),
        'nova, limit=hosts': querystring(hosts, nova),
        'nova-ext': querystring(NOVA_MAX_PLACEMENT_RESULTS, ext, full),
        'nova-ext, group': querystring(None, ext, full),
    }, len(full)


def get(app, query):
    request = webob.Request.blank(
        '/allocation_candidates?' + query, headers={
            'X-Auth-Token': 'admin', 'Accept': 'application/json',
            'OpenStack-API-Version': 'placement ' + MICROVERSION})
    start, cpu_start = time.perf_counter(), time.process_time()
    response = request.get_response(app)
    body = response.body
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    if response.status_int != 200:
        raise Failure('placement answered %s to GET /allocation_candidates?'
                      '%s: %s' % (response.status, query,
                                  body[:300].decode(errors='replace')))
    start = time.perf_counter()
    decoded = json.loads(body)
    decode = time.perf_counter() - start
    return (elapsed, cpu, decode, len(decoded['allocation_requests']),
            len(body))


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def measure(app, loaded, args):
    texts, full = queries(loaded, args.full_racks)
    times = {name: [] for name in QUERIES}
    cpus = {name: [] for name in QUERIES}
    decodes = {name: [] for name in QUERIES}
    sizes = {}
    for round_number in range(args.rounds + 1):
        for name in QUERIES:
            elapsed, cpu, decode, candidates, size = get(app, texts[name])
            sizes[name] = (candidates, size)
            if round_number:  # round 0 warms placement's caches up
                times[name].append(elapsed * 1000)
                cpus[name].append(cpu * 1000)
                decodes[name].append(decode * 1000)
    return [{'providers': loaded['hosts'], 'query': name,
             'candidates': sizes[name][0], 'body_kb': sizes[name][1] / 1024,
             'p50_ms': percentile(times[name], 0.5),
             'p99_ms': percentile(times[name], 0.99),
             'cpu_p50_ms': percentile(cpus[name], 0.5),
             'decode_p50_ms': percentile(decodes[name], 0.5),
             'full_racks': full, 'querystring': texts[name]}
            for name in QUERIES]


ROW = '%9s | %-17s | %10s | %8s | %9s | %9s | %10s | %9s | %8s'


def report(results):
    p50 = {(r['providers'], r['query']): r['p50_ms'] for r in results}
    for r in results:
        if r['query'] == 'nova-ext':
            ratio = r['p50_ms'] / p50[(r['providers'], 'nova')]
        elif r['query'] == 'nova-ext, group':
            ratio = r['p50_ms'] / p50[(r['providers'], 'nova, limit=hosts')]
        else:
            ratio = None
        r['ratio'] = ratio
        print(ROW % (r['providers'], r['query'], r['candidates'],
                     '%.0f' % r['body_kb'], '%.1f' % r['p50_ms'],
                     '%.1f' % r['p99_ms'], '%.1f' % r['cpu_p50_ms'],
                     '%.1f' % r['decode_p50_ms'],
                     '%.2f' % ratio if ratio else ''), flush=True)


def run(args):
    started = time.monotonic()
    admin = connect(args)
    database = 'nova_ext_bench_placement_%d' % os.getpid()
    with admin.cursor() as cursor:
        cursor.execute('CREATE DATABASE %s CHARACTER SET utf8mb4' % database)
    try:
        app = placement_app(args, database)
        db = connect(args, database)
        print('schema (placement migrations and sync): %.1f s' % (
            time.monotonic() - started))
        results = []
        for hosts in args.providers:
            start = time.monotonic()
            loaded = load(db, hosts, args)
            print('%d providers, %d consumers, %d rows loaded in %.1f s' % (
                hosts, loaded['consumers'], loaded['rows'],
                time.monotonic() - start), flush=True)
            start = time.monotonic()
            results += measure(app, loaded, args)
            print('%d providers measured in %.1f s' % (
                hosts, time.monotonic() - start), flush=True)
        print('ratio: nova-ext / nova; nova-ext, group / nova, limit=hosts. '
              'microversion %s, %d rounds, %d full racks of %d hosts '
              'excluded' % (MICROVERSION, args.rounds,
                            results[-1]['full_racks'], args.rack_size))
        print(ROW % ('providers', 'query', 'candidates', 'body KB',
                     'p50 ms', 'p99 ms', 'cpu p50 ms', 'decode ms',
                     'ratio'))
        report(results)
        load_average = open('/proc/loadavg').read().split()[:3]
        print('wall time %.0f s, load average %s' % (
            time.monotonic() - started, ' '.join(load_average)))
        if args.json:
            bench_json.write(args.json, {'load_average': load_average,
                                         'rounds': args.rounds,
                                         'results': results})
    finally:
        with admin.cursor() as cursor:
            cursor.execute('DROP DATABASE IF EXISTS %s' % database)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--providers', type=int, nargs='+',
                        default=[1000, 5000])
    parser.add_argument('--rounds', type=int, default=20)
    parser.add_argument('--traits', type=int, default=60,
                        help='standard traits per host (%(default)s)')
    parser.add_argument('--rack-size', type=int, default=20)
    parser.add_argument('--full-racks', type=int, default=10,
                        help="racks in nova-ext's member_of=!in: "
                             "(%(default)s)")
    parser.add_argument('--db-host', default='127.0.0.1')
    parser.add_argument('--db-port', type=int, default=3306)
    parser.add_argument('--db-user', default='root')
    parser.add_argument('--db-password', default='')
    parser.add_argument('--json', help='write the results there')
    args = parser.parse_args(argv)
    if args.rounds < 1 or min(args.providers) < 1:
        parser.error('--rounds and --providers must be at least 1')
    try:
        return run(args)
    except Failure as error:
        print('benchmark_placement: %s' % error, file=sys.stderr)
        return error.code
    except Exception as error:
        print('benchmark_placement: %s: %s' % (type(error).__name__, error),
              file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
