# SPDX-License-Identifier: Apache-2.0
"""Per-flavor quotas through Nova's REST API, with the quota driver
activated from nova.conf (``[nova_ext] quota_driver = per_flavor``) and
limits set with ``nova-ext-manage quota``.

Given/When/Then: the operator sets a limit, a user boots or resizes, and
the test reads what the user sees (HTTP code and message, server status
and fault).
"""

import contextlib
import io
import logging
import threading

import fixtures
import sqlalchemy
from sqlalchemy import event

from nova.compute import utils as compute_utils
from nova import context as nova_context
from nova.db.api import api as api_db
from nova import exception
from nova import objects
from nova import quota as nova_quota
from nova.scheduler import manager as scheduler_manager
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional.api import client

from nova_ext import activation
from nova_ext.cmd import manage
from nova_ext import quota
from nova_ext.quota import db as quota_db
from nova_ext.sandbox import cloud
from tests.functional import base


class QuotaTestCase(base.NovaExtTestCase):
    NOVA_EXT_FLAGS = {'quota_driver': 'per_flavor',
                      'quota_classes': 'gpu,highmem'}

    def setUp(self):
        super().setUp()
        self.project = self.api_fixture.project_id
        self.gpu_small = self.create_flavor(
            'gpu.small', vcpu=2, memory_mb=1024,
            extra_specs={'nova_ext:quota_class': 'gpu'})
        self.gpu_large = self.create_flavor(
            'gpu.large', vcpu=4, memory_mb=2048,
            extra_specs={'nova_ext:quota_class': 'gpu'})
        self.general = self.create_flavor('general', vcpu=1, memory_mb=512)

    def quota(self, *argv, expect_rc=0):
        """Run ``nova-ext-manage quota|db ...`` against this cloud (a
        usage error: rc 2 and argparse's message).
        """
        out = io.StringIO()
        usage = io.StringIO()
        try:
            with contextlib.redirect_stderr(usage):
                args = manage.build_parser().parse_args(list(argv))
        except SystemExit as error:
            self.assertEqual(expect_rc, error.code, usage.getvalue())
            return usage.getvalue()
        try:
            command = manage.CATEGORIES[args.category]
            rc = command.run(args, cloud.CONF, out)
        except manage.CommandError as error:
            rc, out = 1, io.StringIO(str(error))
        self.assertEqual(expect_rc, rc, out.getvalue())
        return out.getvalue()

    def assertForbidden(self, flavor, message, **server_args):
        body = {'server': self._build_server(
            name='over', flavor_id=flavor, networks='none')}
        body['server'].update(server_args)
        error = self.assertRaises(client.OpenStackApiException,
                                  self.api.post_server, body)
        self.assertEqual(403, error.response.status_code)
        self.assertIn(message, error.response.text)


class ClassLimitTest(QuotaTestCase):

    def test_class_limit_counts_every_flavor_of_the_class(self):
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '2')
        self.boot('a', self.gpu_small)
        self.boot('b', self.gpu_large)

        self.assertForbidden(
            self.gpu_small,
            'Quota exceeded for instances of flavor class gpu: Requested 1, '
            'but already used 2 of 2 instances of flavor class gpu')
        # Flavors outside the class are not limited by it.
        self.boot('general', self.general)

    def test_project_limit_wins_over_the_default(self):
        self.quota('quota', 'set', '--project', '*', '--class', 'gpu',
                   '--instances', '0')
        self.assertForbidden(self.gpu_small, 'used 0 of 0 instances')

        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '1')
        self.boot('allowed', self.gpu_small)
        self.assertForbidden(self.gpu_small, 'used 1 of 1 instances')

    def test_cores_limit_reduces_a_multi_create(self):
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--cores', '5')
        # min 1, max 3 of 2 cores each: room for 2, as Nova does for its
        # own quotas.
        body = {'server': self._build_server(
            name='multi', flavor_id=self.gpu_small, networks='none')}
        body['server'].update({'min_count': 1, 'max_count': 3})
        self.api.post_server(body)
        servers = self._wait_for_all_active(3)
        self.assertEqual(2, len(servers))

        self.assertForbidden(
            self.gpu_small,
            'Quota exceeded for cores of flavor class gpu: Requested 2, but '
            'already used 4 of 5 cores of flavor class gpu')

    def test_delete_gives_the_room_back(self):
        self.quota('quota', 'set', '--project', self.project,
                   '--flavor', 'gpu.small', '--instances', '1')
        server = self.boot('first', self.gpu_small)
        self.assertForbidden(self.gpu_small,
                             'instances of flavor %s' % self.gpu_small)
        usage = self.quota('quota', 'usage', '--project', self.project,
                           '--flavor', self.gpu_small)
        self.assertRegex(usage, r'instances\s*\|\s*1\s*\|\s*1\s*\|')

        self._delete_server(server)
        self.boot('second', self.gpu_small)

    def _wait_for_all_active(self, at_most):
        servers = []
        for server in self.api.get_servers():
            servers.append(self._wait_for_state_change(server, 'ACTIVE'))
        self.assertLessEqual(len(servers), at_most)
        return servers


class ResizeTest(QuotaTestCase):

    def setUp(self):
        super().setUp()
        self.flags(allow_resize_to_same_host=True)

    def test_resize_into_a_full_class_is_refused(self):
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '1')
        self.boot('gpu', self.gpu_small)
        general = self.boot('general', self.general)

        error = self.assertRaises(
            client.OpenStackApiException, self.api.post_server_action,
            general['id'], {'resize': {'flavorRef': self.gpu_large}})
        self.assertEqual(403, error.response.status_code)
        self.assertIn('Quota exceeded for instances of flavor class gpu',
                      error.response.text)

    def test_upsize_within_the_class_counts_only_the_difference(self):
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '1', '--cores', '4')
        server = self.boot('gpu', self.gpu_small)
        # Same class: +2 cores (2 -> 4), instance count unchanged: fits.
        self._resize_server(server, self.gpu_large)
        self._confirm_resize(server)
        usage = self.quota('quota', 'usage', '--project', self.project,
                           '--class', 'gpu')
        self.assertRegex(usage, r'cores\s*\|\s*4\s*\|\s*4\s*\|')


class ConductorRecheckTest(QuotaTestCase):

    def test_limit_lowered_while_scheduling_fails_the_build(self):
        """Given a request that passed nova-api's check, when the limit
        drops before nova-conductor rechecks (what a concurrent create
        does), then the server ends in ERROR with the quota fault.
        """
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '1')
        real = scheduler_manager.SchedulerManager.select_destinations

        def operator_lowers_limit(manager, *args, **kwargs):
            self.quota('quota', 'set', '--project', self.project,
                       '--class', 'gpu', '--instances', '0')
            return real(manager, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.manager.SchedulerManager.select_destinations',
            operator_lowers_limit))
        # In a real cloud nova-api has answered 202 by now; the embedded
        # one runs the conductor inside the API call (CastAsCallFixture),
        # so the conductor's re-raised quota error also reaches the caller.
        self.assertRaises(client.OpenStackApiException, self.boot, 'racing',
                          self.gpu_small)
        [server] = self.api.get_servers(detail=False)
        # Before scheduler_hints appear in the response: Nova 34's own
        # response schema refuses the null hints of a server buried by the
        # conductor.
        self.api.microversion = '2.95'
        server = self.api.get_server(server['id'])
        self.assertEqual('ERROR', server['status'])
        self.assertIn('Quota exceeded for instances of flavor class gpu',
                      server['fault']['message'])


class QuotaDatabaseUnreachableTest(QuotaTestCase):
    """Given a gpu limit, when nova-ext's quota database cannot be reached
    (``[nova_ext_database] connection`` to a server that refuses), then
    nova-api refuses creates with a 403 saying the quota could not be
    checked and nothing is created; a server whose recheck in
    nova-conductor cannot read it ends in ERROR with the same reason.
    """

    UNREACHABLE = 'mysql+pymysql://nova:secret@127.0.0.1:1/nova_ext'

    def setUp(self):
        super().setUp()
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '1')
        # one quick try: oslo.db's default retries a refused connection for
        # 100 s when it builds the engine
        self.flags(max_retries=1, retry_interval=1,
                   group='nova_ext_database')

    def unreachable(self):
        self.flags(connection=self.UNREACHABLE, group='nova_ext_database')

    def test_create_refused_with_the_reason(self):
        self.unreachable()
        self.assertForbidden(self.gpu_small, 'Quota could not be checked, '
                             'so the request is refused: DBConnectionError')
        self.assertEqual([], self.api.get_servers(detail=False))

    def test_recheck_that_cannot_read_fails_the_build(self):
        real = scheduler_manager.SchedulerManager.select_destinations

        def database_lost(manager, *args, **kwargs):
            self.unreachable()
            return real(manager, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.manager.SchedulerManager.select_destinations',
            database_lost))
        # the embedded cloud runs the conductor inside the API call (see
        # ConductorRecheckTest)
        self.assertRaises(client.OpenStackApiException, self.boot, 'lost',
                          self.gpu_small)
        [server] = self.api.get_servers(detail=False)
        self.api.microversion = '2.95'
        server = self.api.get_server(server['id'])
        self.assertEqual('ERROR', server['status'])
        self.assertIn('Quota could not be checked',
                      server['fault']['message'])


class TwoCellsTest(QuotaTestCase):
    NUMBER_OF_CELLS = 2
    HOSTS = ['host1', 'host2']
    HOST_CELLS = {'host1': 'cell1', 'host2': 'cell2'}

    def test_usage_is_counted_in_every_cell(self):
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '2')
        one = self.boot('one', self.gpu_small, zone='nova:host1')
        two = self.boot('two', self.gpu_large, zone='nova:host2')
        self.assertEqual(['host1', 'host2'],
                         [self.host_of(one), self.host_of(two)])

        self.assertForbidden(self.gpu_small, 'used 2 of 2 instances')
        usage = self.quota('quota', 'usage', '--project', self.project,
                           '--class', 'gpu')
        self.assertRegex(usage, r'instances\s*\|\s*2\s*\|\s*2\s*\|')
        self.assertRegex(usage, r'cores\s*\|\s*6\s*\|\s*-1\s*\|')


class ValidationTest(QuotaTestCase):

    def test_unknown_quota_class_extra_spec_is_a_400_naming_the_key(self):
        error = self.assertRaises(
            client.OpenStackApiException, self.admin_api.post_extra_spec,
            self.general, {'extra_specs': {'nova_ext:quota_class': 'tpu'}})
        self.assertEqual(400, error.response.status_code)
        self.assertIn('nova_ext:quota_class', error.response.text)

    def test_cli_refuses_bad_input_and_stores_nothing(self):
        for argv, message in (
                (['--flavor', 'nope', '--instances', '1'],
                 "no flavor with ID or name 'nope'"),
                (['--class', 'tpu', '--instances', '1'],
                 "unknown flavor class 'tpu'"),
                (['--class', 'gpu', '--instances', '-2'],
                 "argument --instances: '-2' must be a whole number from "
                 "-1 to 2147483647"),
                (['--class', 'gpu'], 'give at least one of')):
            out = self.quota('quota', 'set', '--project', self.project,
                             *argv, expect_rc=2 if '-2' in argv else 1)
            self.assertIn(message, out)
        self.assertNotIn('gpu', self.quota('quota', 'show'))

    def test_check_reports_a_process_without_the_driver(self):
        logs = self.useFixture(fixtures.FakeLogger(level=logging.ERROR))
        activation.record_and_compare({
            'binary': 'nova-osapi_compute', 'host': 'api1',
            'quota_driver': None})
        activation.record_and_compare({
            'binary': 'nova-conductor', 'host': 'cond1',
            'quota_driver': 'per_flavor'})
        self.assertIn('nova-osapi_compute on api1 runs quota driver none',
                      logs.output)
        report = self.quota('quota', 'check', expect_rc=1)
        self.assertRegex(report, r'nova-osapi_compute\s*\|\s*api1\s*\|\s*-')
        self.assertIn('MISMATCH', report)


class ConcurrentCreatesTest(QuotaTestCase):
    """Given room for exactly K instances of a class, when 50 creates race
    (single and multi-create, from parallel clients), then at most K end
    ACTIVE, every other request got a 403 or its server ended in ERROR
    with the quota fault, nothing stays in BUILD, and ``quota usage``
    agrees with the ACTIVE servers.

    Nova's in-process services on file-backed sqlite (WAL); the same burst
    against real processes on MariaDB is tests.system.test_quota_race.
    """

    K = 5

    def test_at_most_k_survive_a_burst(self):
        import concurrent.futures

        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', str(self.K))
        # Only the class limit is under test (the 45 servers that lose stay
        # in ERROR and would hit Nova's default instances quota).
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        # Small enough that 60 racing claims fit the 4 fake hosts: a server
        # must only ever lose to the quota, never to a full cloud.
        tiny = self.create_flavor(
            'gpu.tiny', vcpu=1, memory_mb=128,
            extra_specs={'nova_ext:quota_class': 'gpu'})

        def create(i):
            body = {'server': self._build_server(
                name='burst-%d' % i, flavor_id=tiny,
                networks='none')}
            if i % 10 == 0:  # every tenth asks for 2-3 at once
                body['server'].update({'min_count': 2, 'max_count': 3})
            try:
                self.api.post_server(body)
                return 202
            except client.OpenStackApiException as error:
                return error.response.status_code

        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            codes = list(pool.map(create, range(50)))

        self.api.microversion = '2.95'
        servers = [self.api.get_server(s['id'])
                   for s in self.api.get_servers(detail=False)]
        for server in servers:
            if server['status'] == 'BUILD':
                server.update(self._wait_for_state_change(server, 'ACTIVE'))
        states = [s['status'] for s in servers]
        active = states.count('ACTIVE')
        self.assertLessEqual(active, self.K)
        self.assertGreater(active, 0)
        self.assertNotIn('BUILD', states)
        self.assertEqual({'ACTIVE', 'ERROR'} | set(states),
                         {'ACTIVE', 'ERROR'})
        for server in servers:
            if server['status'] == 'ERROR':
                self.assertIn('Quota exceeded for instances of flavor class '
                              'gpu', server['fault']['message'])
        self.assertEqual(set(), set(codes) - {202, 403})
        usage = self.quota('quota', 'usage', '--project', self.project,
                           '--class', 'gpu')
        # Servers that lost the race never reached a host: not counted.
        self.assertRegex(usage, r'instances\s*\|\s*%d\s*\|' % active)


class CostTest(QuotaTestCase):
    """Given nova-ext's tables in Nova's API database (the default) and
    nothing cached, when nova-api checks a create, then the per_flavor
    driver runs at most one SQL statement more than Nova's own check, and
    reads the cells' instances no more often than Nova does; and the counts
    Nova gets from it are Nova's own.
    """

    NOVA_EXT_FLAGS = dict(QuotaTestCase.NOVA_EXT_FLAGS,
                          quota_limits_cache_seconds=0,
                          quota_flavor_cache_seconds=0)

    def _open_databases_like_a_nova_process(self):
        # Our tables go into Nova's API database, as in production unless
        # [nova_ext_database] names another one. Nova's test fixture keeps
        # that database in memory, reachable through Nova's engine only:
        # nova-ext's engine is that one here (in production it is a pool of
        # its own on the same database).
        self.flags(connection='sqlite://', group='api_database')
        self.flags(connection='sqlite://', group='nova_ext_database')
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.quota.db.context_manager',
            lambda conf: api_db.context_manager))
        super()._open_databases_like_a_nova_process()
        self.assertTrue(quota_db.shares_api_database(cloud.CONF))

    def setUp(self):
        super().setUp()
        self.admin = nova_context.get_admin_context()
        self.flavor = objects.Flavor.get_by_flavor_id(
            self.admin, self.gpu_small)

    def statements(self, check, refused=False):
        """The SQL statements ``check(context)`` runs for its request, the
        second time (the first loads what Nova keeps for the process, such
        as the cell mappings).
        """
        try:
            check(nova_context.RequestContext('fake', self.project))
        except exception.TooManyInstances:
            pass
        ctxt = nova_context.RequestContext('fake', self.project)
        run = []
        thread = threading.get_ident()

        def count(conn, cursor, statement, *args):
            # Only this thread's: Nova's services report their state and
            # run periodic tasks in threads of their own.
            if threading.get_ident() == thread and statement != 'BEGIN':
                # (sqlite's transactions are statements too: oslo.db's
                # workaround for pysqlite; MariaDB's are not)
                run.append(statement)

        event.listen(sqlalchemy.engine.Engine, 'before_cursor_execute',
                     count)
        try:
            # The cells are queried in this thread too, not in workers.
            with nova_fixtures.SpawnIsSynchronousFixture():
                if refused:
                    self.assertRaises(exception.TooManyInstances, check,
                                      ctxt)
                else:
                    check(ctxt)
        finally:
            event.remove(sqlalchemy.engine.Engine, 'before_cursor_execute',
                         count)
        return run

    def check_create(self, flavor=None, refused=False):
        flavor = flavor or self.flavor
        return self.statements(
            lambda ctxt: compute_utils.check_num_instances_quota(
                ctxt, flavor, 1, 1), refused=refused)

    def novas_check_create(self, flavor=None):
        quota.deactivate()
        try:
            return self.check_create(flavor)
        finally:
            self.assertEqual('per_flavor', quota.activate(cloud.CONF))

    @staticmethod
    def reading_instances(statements):
        return [s for s in statements if 'FROM instances' in s]

    def test_a_limited_create_costs_one_statement_more_than_novas(self):
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '5')
        self.boot('gpu', self.gpu_small)
        self.boot('general', self.general)

        nova = self.novas_check_create()
        per_flavor = self.check_create()
        self.assertLessEqual(len(per_flavor), len(nova) + 1,
                             '\n'.join(per_flavor))
        # One read per cell (cell0 and cell1), Nova's and ours the same.
        self.assertEqual(2, len(self.reading_instances(nova)))
        self.assertEqual(2, len(self.reading_instances(per_flavor)))
        # Nova's own statement (its WHERE, its LIMIT), only more sums
        # selected: the database plans it as Nova's (with GROUP BY or
        # without the LIMIT, MariaDB scans instances where Nova's reads
        # the project index).

        def where(statements):
            return [statement.split('FROM instances', 1)[1]
                    for statement in self.reading_instances(statements)]

        self.assertEqual(where(nova), where(per_flavor))
        self.assertIn('CASE WHEN', self.reading_instances(per_flavor)[0])

        # A refusal costs the same.
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '1')
        refused = self.check_create(refused=True)
        self.assertLessEqual(len(refused), len(nova) + 1,
                             '\n'.join(refused))

    def test_a_check_builds_no_statement(self):
        # The limits read and the count are built once and run with their
        # values bound: a check neither builds them nor computes their
        # compiled-cache key again (that was most of what a limited create
        # cost over Nova's check in Python).
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '5')
        self.boot('gpu', self.gpu_small)
        executed = []

        def seen(conn, clauseelement, *args):
            executed.append(clauseelement)

        event.listen(sqlalchemy.engine.Engine, 'before_execute', seen)
        self.addCleanup(event.remove, sqlalchemy.engine.Engine,
                        'before_execute', seen)

        def ours():
            return [statement for statement in executed
                    if isinstance(statement, sqlalchemy.sql.Select)
                    and ('nova_ext_flavor_quotas' in str(statement)
                         or 'CASE WHEN' in str(statement))]

        self.check_create()  # (two checks: see statements())
        self.check_create()
        # The limits and the count (one per cell, cell0 and cell1) of four
        # checks, all kept alive by executed: two statement objects.
        self.assertEqual(12, len(ours()), ours())
        self.assertEqual(2, len({id(statement) for statement in ours()}))

    def test_no_limit_or_cached_limits_cost_at_most_one_more(self):
        self.quota('quota', 'set', '--project', self.project,
                   '--class', 'gpu', '--instances', '5')
        general = objects.Flavor.get_by_flavor_id(self.admin, self.general)
        self.assertLessEqual(len(self.check_create(general)),
                             len(self.novas_check_create(general)) + 1)

        # Limits cached, flavors of a class too (its default): nothing more
        # than Nova's own statements.
        self.flags(quota_limits_cache_seconds=60,
                   quota_flavor_cache_seconds=30, group='nova_ext')
        self.assertEqual(len(self.novas_check_create()),
                         len(self.check_create()))

    def test_nova_gets_its_own_counts(self):
        other_user, other_project = 'other-user', 'other-project'
        gpu_large = objects.Flavor.get_by_flavor_id(
            self.admin, self.gpu_large)
        general = objects.Flavor.get_by_flavor_id(self.admin, self.general)
        [cell] = [cell for cell in objects.CellMappingList.get_all(
            self.admin) if not cell.is_cell0()]
        rows = [
            # (flavor, user, project, vm_state, host, hidden, deleted)
            (self.flavor, 'fake', self.project, 'active', 'host1', False,
             False),
            (general, other_user, self.project, 'active', 'host2', None,
             False),
            (self.flavor, 'fake', self.project, 'error', None, False,
             False),
            (self.flavor, other_user, self.project, 'error', 'host1',
             False, False),
            (gpu_large, 'fake', self.project, 'soft-delete', 'host1',
             False, False),
            (gpu_large, 'fake', self.project, 'active', 'host1', True,
             False),
            (gpu_large, 'fake', self.project, 'active', 'host1', False,
             True),
            (gpu_large, 'fake', other_project, 'active', 'host1', False,
             False),
            (gpu_large, 'fake', self.project, None, None, False, False),
        ]
        with nova_context.target_cell(self.admin, cell) as cctxt:
            for flavor, user, project, state, host, hidden, deleted in rows:
                instance = objects.Instance(
                    cctxt, project_id=project, user_id=user,
                    instance_type_id=flavor.id, vcpus=flavor.vcpus,
                    memory_mb=flavor.memory_mb, vm_state=state, host=host,
                    hidden=hidden)
                instance.create()
                if deleted:
                    instance.destroy()

        ctxt = nova_context.RequestContext('fake', self.project)
        groups = [(self.flavor.id,), (gpu_large.id,),
                  (gpu_large.id, self.flavor.id), (self.flavor.id,), ()]
        for user in (None, 'fake', other_user):
            quota.deactivate()
            novas = nova_quota._instances_cores_ram_count_legacy(
                ctxt, self.project, user_id=user)
            quota.activate(cloud.CONF)
            ours = nova_quota._instances_cores_ram_count_legacy(
                ctxt, self.project, user_id=user)
            self.assertEqual(novas, ours)
            # The same with the sums of limited flavors in the statement.
            totals, usages = quota_db.count_instances(
                ctxt, self.project, user_id=user, groups=groups)
            self.assertEqual(novas, totals)
        self.assertEqual({'instances': 5, 'cores': 1 + 3 * 2 + 4,
                          'ram': 512 + 3 * 1024 + 2048},
                         novas['project'])
        # (the last user counted)
        self.assertEqual({'instances': 2, 'cores': 1 + 2,
                          'ram': 512 + 1024}, novas['user'])
        # Per flavor, an instance in ERROR that never reached a host is
        # not counted; one without vm_state is.
        small = {'instances': 2, 'cores': 4, 'ram': 2048}
        large = {'instances': 1, 'cores': 4, 'ram': 2048}
        both = {'instances': 3, 'cores': 8, 'ram': 4096}
        none = {'instances': 0, 'cores': 0, 'ram': 0}
        self.assertEqual([small, large, both, small, none], usages)
        # Only the resources asked for (those a limit caps).
        self.assertEqual(
            [{'instances': 2}, {'instances': 3}],
            quota_db.count_instances(
                ctxt, self.project, groups=groups[:1] + groups[2:3],
                resources=('instances',))[1])
