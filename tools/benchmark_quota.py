#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Quota check latency and SQL statements: Nova's DbQuotaDriver alone vs.
the per_flavor driver, with 1k, 10k and 100k instances in MariaDB.

Method
------
Creates two MariaDB databases (Nova API and one cell; 127.0.0.1:3306, root,
dropped at the end), builds Nova's schema with Nova's own migrations and
nova-ext's with ``nova-ext-manage db sync``'s code, maps the cell, and
creates two flavors: ``gpu.small`` (``nova_ext:quota_class=gpu``) and
``m1.small``. Then, for each size N, it inserts N instances of one project
(10 % gpu.small; with ``--project-share S`` only the share S of them, the
rest spread over 100 other projects) into the cell database and times
Nova's own instance quota check,
``nova.compute.utils.check_num_instances_quota(ctxt, flavor, 1, 1)``
(what nova-api runs for every create, and nova-conductor rechecks), for a
gpu.small request:

* **nova**: Nova's code as shipped ([quota] driver = DbQuotaDriver);
* **per_flavor**: the same call with ``[nova_ext] quota_driver =
  per_flavor`` active and a class limit on gpu (high enough to pass), with
  nothing cached (``quota_limits_cache_seconds`` and
  ``quota_flavor_cache_seconds`` both 0): every check reads the limits and
  the class's flavors.

The two alternate call by call (the driver is activated and deactivated in
between), each going first every other round, so load from other processes
on the machine and pages left in MariaDB's buffer pool by the previous call
help or hurt both alike.
SQL statements are counted with a SQLAlchemy ``before_cursor_execute``
listener on every engine; "RT" are the round trips to the database, the
statements and what SQLAlchemy sends besides: the ping at each connection
checkout (oslo.db's engines set ``pool_pre_ping``), each COMMIT or
ROLLBACK of a connection's transaction and the pool's ROLLBACK when a
connection returns with its transaction not already ended (pool and
connection events; the login of a new connection is not counted).
"default caches" counts statements for gpu.small with the options at
their defaults (flavors of a class remembered 30 s, limits not cached),
"unlimited flavor" for ``m1.small``, which no per-flavor limit covers,
"cached limits" for gpu.small with ``[nova_ext]
quota_limits_cache_seconds = 60``. Median of R calls after 3 warm-ups.
"nova key" and "per_flavor key" are the index MariaDB's ``EXPLAIN`` picks
for each check's statement reading ``instances`` (ALL: a full scan).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_json  # noqa: E402  (a sibling script, not a package)

SIZES = (1000, 10000, 100000)
PROJECT = 'bench-project'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', nargs='+', default=[list(SIZES)],
                        type=lambda s: [int(x) for x in s.split(',')],
                        help='instance counts: 1000 10000 100000 or '
                        '1000,10000,100000')
    parser.add_argument('--repeat', type=int, default=30)
    parser.add_argument('--project-share', type=float, default=1.0,
                        help='share of the N instances in the project '
                        'checked (default 1: all); the others belong to '
                        '100 other projects')
    parser.add_argument('--json', metavar='FILE',
                        help="also write the table as JSON to FILE ('-' "
                        "for stdout)")
    args = parser.parse_args(argv)
    args.sizes = [size for sizes in args.sizes for size in sizes]
    warnings.simplefilter('ignore')

    import pymysql
    run = uuid.uuid4().hex[:8]
    names = {'api': 'nxt_bench_%s_api' % run,
             'cell1': 'nxt_bench_%s_cell1' % run}
    admin = pymysql.connect(host='127.0.0.1', user='root', autocommit=True)
    for name in names.values():
        admin.cursor().execute('CREATE DATABASE %s' % name)
    try:
        return measure(args, names)
    finally:
        for name in names.values():
            admin.cursor().execute('DROP DATABASE IF EXISTS %s' % name)


def measure(args, names):
    url = 'mysql+pymysql://root@127.0.0.1/%s'
    conf_path = os.path.join(tempfile.mkdtemp(), 'nova.conf')
    with open(conf_path, 'w') as f:
        f.write('[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1/'
                '\n[api_database]\nconnection = %s\n[database]\n'
                'connection = %s\n[nova_ext]\nquota_classes = gpu\n'
                % (url % names['api'], url % names['cell1']))

    from sqlalchemy.engine import Engine
    from sqlalchemy import event
    from sqlalchemy.pool import Pool

    from nova.compute import utils as compute_utils
    import nova.conf
    from nova import config
    from nova import context as nova_context
    from nova.db.main import models
    from nova.db import migration
    from nova import objects

    from nova_ext import activation
    from nova_ext import cache
    from nova_ext import conf as ext_conf
    from nova_ext import quota
    from nova_ext.quota import db as quota_db

    conf = nova.conf.CONF
    ext_conf.register_opts(conf)
    # RabbitMQ is only used for the notifications flavor creation sends.
    config.parse_args(['benchmark', '--config-file', conf_path])
    objects.register_all()
    print('schemas: nova api, nova cell, nova-ext ...', file=sys.stderr)
    migration.db_sync(database='api')
    migration.db_sync(database='main')
    quota_db.sync(conf)

    ctxt = nova_context.get_admin_context()
    objects.CellMapping(ctxt, uuid=uuid.uuid4().hex, name='cell1',
                        transport_url='none:///',
                        database_connection=url % names['cell1']).create()
    gpu = objects.Flavor(ctxt, name='gpu.small', flavorid='gpu.small',
                         vcpus=2, memory_mb=2048, root_gb=10,
                         extra_specs={'nova_ext:quota_class': 'gpu'})
    gpu.create()
    general = objects.Flavor(ctxt, name='m1.small', flavorid='m1.small',
                             vcpus=1, memory_mb=1024, root_gb=10)
    general.create()
    gpu = objects.Flavor.get_by_flavor_id(ctxt, 'gpu.small')
    general = objects.Flavor.get_by_flavor_id(ctxt, 'm1.small')
    quota_db.set_limits(conf, PROJECT, 'class', 'gpu',
                        {'instances': 10 ** 7})
    conf.set_override('instances', -1, group='quota')
    conf.set_override('cores', -1, group='quota')
    conf.set_override('ram', -1, group='quota')

    statements = []
    # The last statement that read instances, and its parameters: EXPLAIN
    # tells which index MariaDB picked for it.
    counts = {}

    def seen(conn, cursor, statement, parameters, *args):
        statements.append(1)
        if 'FROM instances' in statement:
            counts['last'] = (statement, parameters)

    event.listen(Engine, 'before_cursor_execute', seen)
    # Round trips that are not statements (see the docstring).
    trips = []

    def round_trip(*args):
        trips.append(1)

    def pool_reset(dbapi_connection, record, reset_state):
        if not reset_state.transaction_was_reset:
            trips.append(1)

    event.listen(Engine, 'commit', round_trip)
    event.listen(Engine, 'rollback', round_trip)
    event.listen(Pool, 'checkout', round_trip)
    event.listen(Pool, 'reset', pool_reset)
    user_ctxt = nova_context.RequestContext('bench-user', PROJECT)

    def check(flavor):
        del statements[:]
        del trips[:]
        counts.pop('last', None)
        start = time.perf_counter()
        # Looked up at each call: activation replaces it.
        compute_utils.check_num_instances_quota(user_ctxt, flavor, 1, 1)
        return ((time.perf_counter() - start) * 1000.0, len(statements),
                len(statements) + len(trips))

    def interleaved(flavor):
        """Median ms, statements and round trips of Nova's check and of
        per_flavor's, alternating call by call.
        """
        runs = {'nova': ([], [], []), 'per_flavor': ([], [], [])}
        plans.clear()
        for i in range(args.repeat + 3):
            # Either may find the pages the other just read in the buffer
            # pool: each goes first every other round.
            order = ('nova', 'per_flavor')
            for name in order if i % 2 else reversed(order):
                if name == 'nova':
                    quota.deactivate()
                else:
                    quota.activate(conf)
                measured = check(flavor)
                plans[name] = counts.get('last')
                if i >= 3:
                    for values, value in zip(runs[name], measured):
                        values.append(value)
        quota.deactivate()
        return {name: tuple(statistics.median(values) for values in run)
                for name, run in runs.items()}

    def explained_key(name):
        """The index EXPLAIN picks for the count of ``name``'s last check."""
        if plans.get(name) is None:
            return '-'
        statement, parameters = plans[name]
        connection = engine.raw_connection()
        try:
            cursor = connection.cursor()
            cursor.execute('EXPLAIN ' + statement, parameters)
            columns = [column[0] for column in cursor.description]
            key = dict(zip(columns, cursor.fetchone()))['key']
        finally:
            connection.close()
        # instances_project_id_idx -> project_id
        return (key or 'ALL').replace('instances_', '').replace('_idx', '')

    def per_flavor_statements(flavor, **flags):
        for name, value in flags.items():
            conf.set_override(name, value, group='nova_ext')
        cache.forget_all()
        quota.activate(conf)
        counts = [check(flavor)[1] for _ in range(3)]
        quota.deactivate()
        for name in flags:
            conf.clear_override(name, group='nova_ext')
        return counts[-1]

    from nova.db.main import api as main_db
    engine = main_db.get_engine()
    inserted = 0
    every = max(1, round(1 / args.project_share))
    plans = {}
    row = ('%9s %9s %14s %6s %9s %15s %7s %14s %19s %20s %17s %18s %18s '
           '%5s')
    print(row % ('instances', 'nova ms', 'per_flavor ms', 'ratio',
                 'nova SQL', 'per_flavor SQL', 'nova RT', 'per_flavor RT',
                 'default caches SQL',
                 'unlimited flavor SQL', 'cached limits SQL', 'nova key',
                 'per_flavor key', 'load'))
    results = []
    conf.set_override('quota_driver', 'per_flavor', group='nova_ext')
    # Once, as nova-api does at start (it records the activation).
    activation.activate_process(conf, binary='benchmark')
    quota.deactivate()
    for size in args.sizes:
        with engine.begin() as connection:
            batch = []
            for i in range(inserted, size):
                ours, rank = i % every == 0, i // every
                flavor = gpu if rank % 10 == 0 else general
                batch.append({
                    'uuid': str(uuid.uuid4()),
                    'project_id': PROJECT if ours else 'other-%d' % (
                        rank % 100),
                    'user_id': 'bench-user', 'vcpus': flavor.vcpus,
                    'memory_mb': flavor.memory_mb,
                    'instance_type_id': flavor.id, 'deleted': 0,
                    'vm_state': 'active', 'hidden': False})
                if len(batch) == 5000:
                    connection.execute(models.Instance.__table__.insert(),
                                       batch)
                    batch = []
            if batch:
                connection.execute(models.Instance.__table__.insert(), batch)
        inserted = size

        conf.set_override('quota_limits_cache_seconds', 0, group='nova_ext')
        conf.set_override('quota_flavor_cache_seconds', 0, group='nova_ext')
        cache.forget_all()
        measured = interleaved(gpu)
        conf.clear_override('quota_limits_cache_seconds', group='nova_ext')
        conf.clear_override('quota_flavor_cache_seconds', group='nova_ext')
        keys = (explained_key('nova'), explained_key('per_flavor'))
        nova_ms, nova_sql, nova_rt = measured['nova']
        ext_ms, ext_sql, ext_rt = measured['per_flavor']
        default_sql = per_flavor_statements(gpu)
        unlimited_sql = per_flavor_statements(general)
        cached_sql = per_flavor_statements(
            gpu, quota_limits_cache_seconds=60)
        print(row % (size, '%.2f' % nova_ms, '%.2f' % ext_ms,
                     '%.2f' % (ext_ms / nova_ms), nova_sql, ext_sql,
                     nova_rt, ext_rt, default_sql, unlimited_sql,
                     cached_sql, *keys,
                     # 1-minute load average: the machine may be shared.
                     '%.1f' % os.getloadavg()[0]),
              flush=True)
        results.append({
            'instances': size, 'nova_ms': nova_ms, 'per_flavor_ms': ext_ms,
            'ratio': ext_ms / nova_ms, 'nova_sql': nova_sql,
            'per_flavor_sql': ext_sql, 'nova_round_trips': nova_rt,
            'per_flavor_round_trips': ext_rt,
            'default_caches_sql': default_sql,
            'unlimited_flavor_sql': unlimited_sql,
            'cached_limits_sql': cached_sql, 'nova_key': keys[0],
            'per_flavor_key': keys[1]})
    if args.json:
        bench_json.write(args.json, {'project_share': args.project_share,
                                     'repeat': args.repeat,
                                     'results': results})
    return 0


if __name__ == '__main__':
    sys.exit(main())
