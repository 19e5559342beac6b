# SPDX-License-Identifier: Apache-2.0
"""A rolling upgrade from Nova 2026.1 to 2026.2 with nova-ext on, on real
processes: the procedure of doc/source/upgrades.rst, step by step.

Given a cloud on Nova 2026.1 (the ``constraints-2026.1.txt`` venv, which
``tools/ensure-venv.sh`` builds or reuses) with nova-ext's filters, the
maintenance pre-filter and the per-flavor quota driver on, nova-ext's
tables as an older nova-ext left them (revision 0001: no spread ledger),
five computes in five racks, one of them in maintenance, a flavor whose
``nova_ext:`` extra specs spread its group one member per rack and put it
in a quota class with limits, and two members of a group: when the control
plane is stopped, Nova 2026.2's schema migrations run, the 2026.2 control
plane starts while the computes still run 2026.1 (the mixed cloud of a
rolling upgrade), new members of the old group are created and one is
moved, and then the computes are upgraded, then after every step:

* nova-ext's limit rows are those of the start, column for column, and the
  quota usage nova-ext-manage reports counts the members that run;
* no two members share a rack and none runs on the host in maintenance;
* ``nova-ext-status upgrade check`` answers what the upgrade page says for
  that stage;
* no service logged an ERROR line naming nova-ext.

And the upgrade broken once: nova-ext's tables as an older nova-ext left
them (revision 0001, before the spread ledger) and its migration
(``nova-ext-manage db sync``) skipped, as an operator who forgets it would.
The check fails naming the command; nova-scheduler does not place a spread
group's member in a rack that already holds one (on MariaDB it refuses the
request, naming the missing table: see the test); the ``db sync`` run late
puts everything right without a restart.
"""

from importlib import metadata
import json
import os
import subprocess
import sys
import time

import testtools

from tests.system import cloud
from tests.system import processes

RACKS = {'r1': ('cmp1',), 'r2': ('cmp2',), 'r3': ('cmp3',),
         'r4': ('cmp4',), 'r5': ('cmp5',)}
RACK_OF = {host: rack for rack, hosts in RACKS.items() for host in hosts}
IN_MAINTENANCE = 'cmp5'
PROJECT = 'demo'
USER_TOKEN = 'demo:%s' % PROJECT
QUOTA_CLASS = 'gold'
OLD_RELEASE = '2026.1'
# nova-ext's tables as a nova-ext before the spread ledger left them
BEFORE_SPREAD_LEDGER = '0001'
CONF = '\n'.join([
    '[filter_scheduler]',
    'available_filters = nova.scheduler.filters.all_filters',
    'available_filters = nova_ext.scheduler.filters.all_filters',
    'enabled_filters = ComputeFilter,ServerGroupAntiAffinityFilter,'
    'ServerGroupAffinityFilter,FailureDomainAntiAffinityFilter',
    '[quota]', 'instances = -1', 'cores = -1', 'ram = -1',
    '[nova_ext]', 'request_filters = maintenance',
    'quota_driver = per_flavor', 'quota_classes = %s' % QUOTA_CLASS,
    # as grenade's projects/60_nova sets it: the new conductor speaks to
    # the old computes in the RPC version they know
    '[upgrade_levels]', 'compute = auto',
])
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def old_release_python():
    """The 2026.1 venv's python, built (or reused) by tools/ensure-venv.sh,
    which serialises builders of one venv.
    """
    env = dict(os.environ, NOVA_EXT_NOVA_RELEASE=OLD_RELEASE)
    env.pop('NOVA_EXT_VENV', None)
    result = subprocess.run([os.path.join(REPO, 'tools', 'ensure-venv.sh')],
                            env=env, capture_output=True, text=True,
                            timeout=1800)
    if result.returncode:
        raise AssertionError('the %s venv could not be built:\n%s' % (
            OLD_RELEASE, result.stderr[-3000:]))
    return os.path.join(result.stdout.strip().splitlines()[-1], 'bin',
                        'python')


class UpgradeTestCase(testtools.TestCase):

    COMPUTES = sorted(RACK_OF)
    NOVA_EXT_REVISION = 'head'

    def setUp(self):
        super().setUp()
        if not metadata.version('nova').startswith('34.'):
            self.skipTest('the upgrade goes from 2026.1 to this venv\'s Nova, '
                          'which must be 2026.2 (34.x); found %s'
                          % metadata.version('nova'))
        self.started = time.monotonic()
        self.old_python = old_release_python()
        self.new_python = sys.executable
        self.cloud = self.useFixture(cloud.LoopbackNova(
            CONF, computes=self.COMPUTES, python=self.old_python,
            nova_ext_revision=self.NOVA_EXT_REVISION,
            wait_for_quota_driver=True))
        self.addOnException(lambda exc_info: self.addDetail(
            'service logs', testtools.content.text_content(
                self.cloud.logs())))
        self.answers = {}
        self.addCleanup(self.report)

    def report(self):
        self.addDetail('upgrade check answers', testtools.content.text_content(
            json.dumps({stage: [rc, {name: code for name, (code, _) in
                                     checks.items()}]
                        for stage, (rc, checks) in self.answers.items()},
                       indent=1)))
        self.addDetail('seconds', testtools.content.text_content(
            '%.0f' % (time.monotonic() - self.started)))

    # -- the operator's commands ---------------------------------------------

    def manage(self, command, *args, python=None):
        """A console script of ``python``'s venv (default: the one the
        control plane runs from) with the cloud's nova.conf.
        """
        return processes.run(command, '--config-file', self.cloud.conf,
                             *args, bin_dir=self.cloud.bin_dir(python))

    def upgrade_check(self, stage, python):
        """``nova-ext-status upgrade check --json`` of ``python``'s venv:
        (exit code, {check: (code, details)}), kept for the report.
        """
        result = subprocess.run(
            [os.path.join(self.cloud.bin_dir(python), 'nova-ext-status'),
             '--config-file', self.cloud.conf, 'upgrade', 'check', '--json'],
            capture_output=True, text=True, timeout=120)
        self.assertNotIn('Traceback', result.stdout + result.stderr)
        checks = {check['check']: (check['result'], check['details'])
                  for check in json.loads(result.stdout)['checks']}
        self.answers[stage] = (result.returncode, checks)
        return result.returncode, checks

    def call(self, method, path, body=None, token='admin:admin'):
        status, answer = self.cloud.request(method, path, body, token=token)
        self.assertLess(status, 300, (method, path, answer))
        return answer

    # -- the resources -------------------------------------------------------

    def create_resources(self):
        self.cloud.make_racks({rack: hosts for rack, hosts in RACKS.items()
                               if hosts[0] in self.COMPUTES})
        flavor = self.call('POST', '/flavors', {'flavor': {
            'name': 'gold.tiny', 'ram': 128, 'vcpus': 1, 'disk': 1}})
        self.flavor = flavor['flavor']['id']
        self.call('POST', '/flavors/%s/os-extra_specs' % self.flavor,
                  {'extra_specs': {
                      'nova_ext:spread_level': 'rack',
                      'nova_ext:spread_max_per_domain': '1',
                      'nova_ext:quota_class': QUOTA_CLASS}})
        self.manage('nova-ext-manage', 'quota', 'set', '--project', PROJECT,
                    '--class', QUOTA_CLASS, '--instances', '10', '--cores',
                    '10', '--ram', '2048')
        self.manage('nova-ext-manage', 'quota', 'set', '--project', '*',
                    '--class', QUOTA_CLASS, '--instances', '2')
        self.manage('nova-ext-manage', 'host', 'maintenance', 'on',
                    IN_MAINTENANCE)
        self.group = self.call('POST', '/os-server-groups', {
            'server_group': {'name': 'web', 'policy': 'anti-affinity'}},
            token=USER_TOKEN)['server_group']['id']
        self.members = {}

    def create_member(self, name):
        """A member of the group, as the project's user; the server once
        it is ACTIVE or ERROR. ACTIVE ones join :attr:`members`.
        """
        server = self.call('POST', '/servers', {
            'server': {'name': name, 'flavorRef': self.flavor,
                       'imageRef': cloud.IMAGE, 'networks': 'none'},
            'os:scheduler_hints': {'group': self.group}},
            token=USER_TOKEN)['server']
        server = self.wait(server['id'], ('ACTIVE', 'ERROR'))
        if server['status'] == 'ACTIVE':
            self.members[name] = server['id']
        return server

    def wait(self, server, states, timeout=120):
        deadline = time.monotonic() + timeout
        while True:
            found = self.call('GET', '/servers/%s' % server)['server']
            if found['status'] in states and not found.get(
                    'OS-EXT-STS:task_state'):
                return found
            self.assertLess(time.monotonic(), deadline, found)
            time.sleep(0.5)

    def delete(self, server):
        self.call('DELETE', '/servers/%s' % server)
        deadline = time.monotonic() + 120
        while self.cloud.request('GET', '/servers/%s' % server)[0] != 404:
            self.assertLess(time.monotonic(), deadline, server)
            time.sleep(0.5)

    def host_of(self, name):
        return self.call('GET', '/servers/%s' % self.members[name])[
            'server']['OS-EXT-SRV-ATTR:host']

    # -- what must hold after every step ------------------------------------

    def quota_rows(self):
        with processes.Databases.connect() as connection:
            cursor = connection.cursor()
            cursor.execute('SELECT * FROM %s.nova_ext_flavor_quotas ORDER BY '
                           'id' % self.cloud.dbs.databases['api'])
            return cursor.fetchall()

    def assert_kept(self, step, api=True, logs=True):
        self.assertEqual(self.rows, self.quota_rows(),
                         'nova-ext quota rows changed at: %s' % step)
        if logs:
            self.assert_no_nova_ext_error(step)
        if not api:
            return
        hosts = {name: self.host_of(name) for name in self.members}
        racks = [RACK_OF[host] for host in hosts.values()]
        self.assertEqual(len(racks), len(set(racks)),
                         'two members in one rack at %s: %s' % (step, hosts))
        self.assertNotIn(IN_MAINTENANCE, hosts.values(), step)
        usage = self.manage('nova-ext-manage', 'quota', 'usage', '--project',
                            PROJECT, '--class', QUOTA_CLASS)
        # prettytable: | resource | in use | limit |
        cells = [[cell.strip() for cell in line.strip('|').split('|')]
                 for line in usage.splitlines() if line.startswith('|')]
        in_use = {row[0]: row[1] for row in cells[1:]}
        # the members that run (a server refused in ERROR holds no room)
        count = len(self.members)
        self.assertEqual({'instances': str(count), 'cores': str(count),
                          'ram': str(128 * count)}, in_use,
                         '%s: %s' % (step, usage))
        self.assertEqual(
            IN_MAINTENANCE + '\n',
            self.manage('nova-ext-manage', 'host', 'maintenance', 'list'),
            step)

    def assert_no_nova_ext_error(self, step):
        """No service logged an ERROR line from nova-ext's code (a
        ``nova_ext.*`` logger), since :attr:`log_marks` ({log: size}) when
        set. (nova-conductor logs every refused request as an ERROR with
        its traceback, through nova-ext's frames when nova-ext refused it:
        a refusal the test asks for is not nova-ext's error.)
        """
        errors = []
        marks = getattr(self, 'log_marks', {})
        for name in sorted(os.listdir(self.cloud.dir)):
            if not name.endswith(('.log', '.out')):
                continue
            with open(os.path.join(self.cloud.dir, name)) as f:
                f.seek(marks.get(name, 0))
                errors += ['%s: %s' % (name, line.rstrip()) for line in f
                           if ' ERROR nova_ext' in line]
        self.assertEqual([], errors, step)

    def mark_logs(self):
        self.log_marks = {
            name: os.path.getsize(os.path.join(self.cloud.dir, name))
            for name in os.listdir(self.cloud.dir)}

    def upgrade_nova_schema(self):
        """Nova 2026.2's migrations and placement's, with the control plane
        stopped (nova-ext's are the caller's).
        """
        new = self.new_python
        self.manage('nova-manage', 'api_db', 'sync', python=new)
        self.manage('nova-manage', 'db', 'sync', python=new)
        self.cloud.python = new
        self.cloud.sync_placement()
        self.manage('nova-manage', 'db', 'online_data_migrations',
                    python=new)


class RollingUpgradeTest(UpgradeTestCase):

    def test_control_plane_then_computes_keeps_rows_and_spread(self):
        self.create_resources()
        for name in ('web-1', 'web-2'):
            self.assertEqual('ACTIVE', self.create_member(name)['status'])
        self.rows = self.quota_rows()
        self.assertEqual(4, len(self.rows))  # 3 for demo, 1 default
        self.assert_kept('2026.1 cloud')
        rc, checks = self.upgrade_check('2026.1 cloud', self.old_python)
        self.assertEqual(0, rc, checks)
        # the new nova-ext's check on the old cloud, before anything
        # changed: Nova 33 is supported, the tables are at head
        rc, checks = self.upgrade_check('before', self.new_python)
        self.assertEqual(0, rc, checks)

        # the control plane stops; the computes and their servers go on
        self.cloud.stop_control_plane()
        self.assert_kept('control plane stopped', api=False)
        new = self.new_python
        self.upgrade_nova_schema()
        self.manage('nova-ext-manage', 'db', 'sync', python=new)
        self.assert_kept('Nova 2026.2 and nova-ext schema', api=False)

        # the mixed cloud: 2026.2 control plane, 2026.1 computes
        self.cloud.start_control_plane(new, '.2026.2')
        self.assert_kept('mixed cloud')
        rc, checks = self.upgrade_check('mixed', new)
        self.assertEqual(0, rc, checks)
        self.assertEqual('ACTIVE', self.create_member('web-3')['status'])
        self.assert_kept('mixed cloud, a new member')

        # a member moved by the 2026.2 conductor between 2026.1 computes:
        # only the fourth rack is free
        before = self.host_of('web-1')
        self.call('POST', '/servers/%s/action' % self.members['web-1'],
                  {'migrate': None})
        self.wait(self.members['web-1'], ('VERIFY_RESIZE', 'ERROR'))
        self.call('POST', '/servers/%s/action' % self.members['web-1'],
                  {'confirmResize': None})
        self.assertEqual('ACTIVE', self.wait(
            self.members['web-1'], ('ACTIVE', 'ERROR'))['status'])
        self.assertNotEqual(before, self.host_of('web-1'))
        self.assert_kept('mixed cloud, a member moved')
        # the freed rack takes a new member; then every rack is full
        self.assertEqual('ACTIVE', self.create_member('web-4')['status'])
        self.assertEqual(RACK_OF[before], RACK_OF[self.host_of('web-4')])
        refused = self.create_member('web-5')
        self.assertEqual('ERROR', refused['status'])
        self.assertIn('No valid host', refused['fault']['message'])
        self.delete(refused['id'])
        self.assert_kept('mixed cloud, new members')

        # the computes, one release later
        self.cloud.restart_computes(new, '.2026.2')
        for process in self.cloud.compute_processes.values():
            self.assertIn('Starting compute node (version 34.',
                          process.log())
        self.assert_kept('computes upgraded')
        rc, checks = self.upgrade_check('after', new)
        self.assertEqual(0, rc, checks)
        # a member deleted and created again lands in the rack it freed
        freed = RACK_OF[self.host_of('web-2')]
        self.delete(self.members.pop('web-2'))
        self.assertEqual('ACTIVE', self.create_member('web-6')['status'])
        self.assertEqual(freed, RACK_OF[self.host_of('web-6')])
        self.assert_kept('2026.2 cloud')


class SkippedNovaExtMigrationTest(UpgradeTestCase):
    """nova-ext's tables at 0001 (no spread ledger) on the old side, and
    ``nova-ext-manage db sync`` forgotten in the upgrade.
    """

    COMPUTES = ['cmp1', 'cmp2', 'cmp5']
    NOVA_EXT_REVISION = BEFORE_SPREAD_LEDGER

    def test_the_check_names_the_step_and_the_spread_holds(self):
        self.create_resources()
        self.rows = self.quota_rows()
        self.cloud.stop_control_plane()
        new = self.new_python
        self.upgrade_nova_schema()
        self.cloud.start_control_plane(new, '.2026.2')
        self.assert_kept('mixed cloud, nova-ext db sync skipped')
        rc, checks = self.upgrade_check('no nova-ext db sync', new)
        self.assertEqual(2, rc, checks)
        code, details = checks['nova-ext database']
        self.assertEqual(2, code, details)
        self.assertIn('run "nova-ext-manage db sync"', details)

        # a spread request without the ledger: the members are counted
        # from placement instead (the scheduler warns, naming the table),
        # placed, never two in a rack
        first = self.create_member('web-1')
        second = self.create_member('web-2')
        said = self.cloud.scheduler.log()
        self.addDetail('without the ledger', testtools.content.text_content(
            'web-1 %s, web-2 %s; nova-scheduler: %s' % (
                first['status'], second['status'], [
                    line for line in said.splitlines()
                    if 'nova_ext_spread_claims' in line][:2])))
        self.assertIn('nova_ext_spread_claims', said)
        self.assertEqual(['ACTIVE', 'ACTIVE'],
                         [first['status'], second['status']])
        self.assert_kept('spread requests without the ledger')

        # the step run late: no restart needed, and no ERROR from then on
        self.mark_logs()
        self.manage('nova-ext-manage', 'db', 'sync', python=new)
        rc, checks = self.upgrade_check('db sync run late', new)
        self.assertEqual(0, checks['nova-ext database'][0], checks)
        for name, server in (('web-1', first), ('web-2', second)):
            if server['status'] == 'ERROR':
                self.delete(server['id'])
                self.assertEqual('ACTIVE',
                                 self.create_member(name + '.again')[
                                     'status'])
        self.assertEqual(2, len(self.members))
        self.assert_kept('db sync run late')
