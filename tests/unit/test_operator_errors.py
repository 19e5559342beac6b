# SPDX-License-Identifier: Apache-2.0
"""What an operator sees for each bad input of nova-ext-manage and the
sandbox: one line naming the problem, exit code 1, nothing changed, no
secret printed (doc/source/troubleshooting.rst lists every case).

The command-line cases run nova-ext-manage as a process, as an operator
does; the model and scenario checks are called directly.
"""

import io
import os
import shutil
import stat
import subprocess
import sys
import tempfile

import fixtures
import sqlalchemy
import testtools

from nova_ext.cmd import manage
from nova_ext import errors
from nova_ext.sandbox import scenario as sandbox_scenario
from nova_ext.simulator import model

NOVA_CONF = """\
[DEFAULT]
transport_url = rabbit://nova:Rabb1tSecret@127.0.0.1:5672/

[database]
connection = mysql+pymysql://root:DbSecret@127.0.0.1/nova?charset=utf8

[keystone_authtoken]
password = KsSecret
"""
SECRETS = ('Rabb1tSecret', 'DbSecret', 'KsSecret', 'NewSecret')


def nova_ext_manage(*argv, cwd=None):
    return subprocess.run(
        [sys.executable, '-m', 'nova_ext.cmd.manage'] + list(argv),
        capture_output=True, text=True, timeout=300, cwd=cwd)


class OperatorErrorCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def write(self, name, data, mode=0o640):
        path = os.path.join(self.dir, name)
        with open(path, 'wb' if isinstance(data, bytes) else 'w') as f:
            f.write(data)
        os.chmod(path, mode)
        return path

    def assertOneLine(self, code, out, err, message):
        """Refused: exit 1, one line on stderr saying ``message``."""
        self.assertEqual(1, code, out + err)
        self.assertNotIn('Traceback', out + err)
        lines = err.splitlines()
        self.assertEqual(1, len(lines), err)
        self.assertTrue(lines[0].startswith('nova-ext-manage: '), err)
        self.assertIn(message, lines[0])
        for secret in SECRETS:
            self.assertNotIn(secret, out + err)


class TestConfigure(OperatorErrorCase):
    """``configure``: in-process through main(), which is what the
    console script runs.
    """

    def main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        code = manage.main(['configure'] + list(argv), err=err)
        return code, out.getvalue(), err.getvalue()

    def assertRefusedUnchanged(self, path, message, *argv):
        with open(path, 'rb') as f:
            before = f.read()
        code, out, err = self.main('nova', '--config-file', path, *argv)
        self.assertOneLine(code, out, err, message)
        with open(path, 'rb') as f:
            self.assertEqual(before, f.read())
        self.assertEqual(sorted(os.listdir(self.dir)),
                         sorted(set(os.listdir(self.dir))))

    def test_files_that_are_not_ini_text_are_refused(self):
        for name, data, message in (
                ('binary.conf', b'[DEFAULT]\x00\x01\x02', 'binary file'),
                ('latin1.conf', b'[DEFAULT]\nname = caf\xe9\n', 'not UTF-8'),
                ('broken.conf', b'[DEFAULT\nfoo = 1\n',
                 'Invalid section'),
                ('nosection.conf', b'foo = 1\n',
                 'Section must be started before assignment')):
            self.assertRefusedUnchanged(self.write(name, data), message,
                                        '--all')

    def test_missing_file(self):
        code, out, err = self.main('nova', '--config-file',
                                   os.path.join(self.dir, 'absent.conf'),
                                   '--all')
        self.assertOneLine(code, out, err, 'no such file')

    def test_set_is_checked_before_anything_is_written(self):
        path = self.write('nova.conf', NOVA_CONF)
        for assignment, message in (
                ('novaext_multiplier=2', 'expected SECTION.OPTION=VALUE'),
                ('nova ext.x=1', "section name 'nova ext'"),
                ('[nova_ext].x=1', 'section name'),
                ('nova_ext.a b=1', "option name 'a b'"),
                ('DEFAULT.debug=true\n[evil]', 'control character'),
                ('DEFAULT.debug=tr\x00ue', 'control character'),
                ('nova_ext.bin_packing_weight_multipler=2',
                 'nova-ext has no such option'),
                ('nova_ext.bin_packing_weight_multiplier=lots',
                 'could not convert'),
                ('nova_ext.host_class_isolation=maybe',
                 'nova_ext.host_class_isolation=maybe'),
                ('nova_ext.failure_domain_cache_seconds=-5', '-5')):
            self.assertRefusedUnchanged(path, message, '--set', assignment)

    def test_secrets_are_masked_in_the_diff_and_summary(self):
        path = self.write('nova.conf', NOVA_CONF)
        code, out, err = self.main('nova', '--config-file', path, '--quota',
                                   '--dry-run')
        self.assertEqual(0, code, err)
        self.assertIn('root:***@127.0.0.1/nova?charset=utf8&plugin=nova_ext',
                      out)
        code, out, err = self.main(
            'nova', '--config-file', path, '--set',
            'database.connection=mysql+pymysql://nova:NewSecret@db/nova')
        self.assertEqual(0, code, err)
        self.assertIn('nova:***@db/nova', out)
        for secret in SECRETS:
            self.assertNotIn(secret, out + err)
        with open(path) as f:  # the file itself keeps the real value
            self.assertIn('nova:NewSecret@db/nova', f.read())

    def test_write_keeps_mode_symlink_and_leaves_no_temporary_file(self):
        real = self.write('nova.conf.real', NOVA_CONF, mode=0o640)
        link = os.path.join(self.dir, 'nova.conf')
        os.symlink(real, link)
        inode = os.stat(real).st_ino
        code, out, err = self.main('nova', '--config-file', link, '--all')
        self.assertEqual(0, code, err)
        self.assertTrue(os.path.islink(link))
        # A new file renamed over the old one (a reader sees one or the
        # other), not the old one rewritten in place.
        self.assertNotEqual(inode, os.stat(real).st_ino)
        self.assertEqual(0o640, stat.S_IMODE(os.stat(real).st_mode))
        # the lock file stays (empty; nova-ext's next edit reuses it)
        self.assertEqual(['.nova.conf.real.nova-ext-lock', 'nova.conf',
                          'nova.conf.real'], sorted(os.listdir(self.dir)))
        with open(real) as f:
            self.assertIn('quota_driver = per_flavor', f.read())

    def test_form_feed_and_unicode_line_separators_survive(self):
        # str.splitlines() splits at these inside a value; a rewrite would
        # then break one line into two.
        text = NOVA_CONF + '\n[x]\nbanner = a\x0cb\u2028c\x1cd\n'
        path = self.write('nova.conf', text)
        code, out, err = self.main('nova', '--config-file', path,
                                   '--filters')
        self.assertEqual(0, code, err)
        with open(path, encoding='utf-8') as f:
            self.assertIn('banner = a\x0cb\u2028c\x1cd\n', f.read())


class TestUnexpectedErrors(OperatorErrorCase):

    def test_traceback_goes_to_a_masked_details_file(self):
        def broken(args):
            raise RuntimeError('cannot use mysql://nova:DbSecret@db/nova')

        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.cmd.manage._dispatch', broken))
        err = io.StringIO()
        code = manage.main(['quota', 'check'], err=err)
        self.assertOneLine(code, '', err.getvalue(),
                           'unexpected RuntimeError; details in ')
        details = err.getvalue().strip().rpartition(' ')[2]
        self.addCleanup(os.remove, details)
        self.assertEqual(0o600, stat.S_IMODE(os.stat(details).st_mode))
        with open(details) as f:
            text = f.read()
        self.assertIn('Traceback', text)
        self.assertIn('mysql://nova:***@db/nova', text)
        self.assertNotIn('DbSecret', text)

    def test_mask_secrets(self):
        for raw, masked in (
                ('rabbit://u:p%40ss@h:5672/', 'rabbit://u:***@h:5672/'),
                ('password = hunter2', 'password = ***'),
                # the whole value: a password may hold spaces
                ('admin_password=x y', 'admin_password=***'),
                ('"password": "s3"', '"password": ***'),
                ('sqlite:////var/lib/nova.db', 'sqlite:////var/lib/nova.db'),
                ('mysql://root@h/db', 'mysql://root@h/db')):
            self.assertEqual(masked, errors.mask_secrets(raw))


class TestDatabaseCommands(OperatorErrorCase):
    """``db sync`` and ``quota``: a process each, on sqlite files."""

    def conf(self, connection, extra=''):
        return self.write('nova.conf', '[api_database]\nconnection = %s\n'
                          '%s' % (connection, extra))

    def run_manage(self, conf, *argv):
        result = nova_ext_manage('--config-file', conf, *argv, cwd=self.dir)
        return result.returncode, result.stdout, result.stderr

    def test_before_db_sync(self):
        conf = self.conf('sqlite:///%s/api.db' % self.dir)
        self.assertOneLine(*self.run_manage(conf, 'quota', 'show'),
                           'table nova_ext_flavor_quotas is missing from the '
                           'database: run nova-ext-manage db sync')

    def test_bad_values_are_refused_before_the_database(self):
        # The database is unreachable: each refusal comes first.
        conf = self.conf('mysql+pymysql://nova:DbSecret@127.0.0.1:1/nova')
        for argv, message in (
                (['--project', '', '--class', 'c', '--cores', '1'],
                 "--project '': give a project ID"),
                (['--project', ' p', '--class', 'c', '--cores', '1'],
                 'no surrounding spaces'),
                (['--project', 'p' * 65, '--class', 'c', '--cores', '1'],
                 '65 characters; a keystone project ID has at most 64'),
                # issue 34: keystone was asked about another URL
                (['--project', 'p#x', '--class', 'c', '--cores', '1'],
                 "--project 'p#x': not a keystone project ID"),
                (['--project', 'p/../q', '--class', 'c', '--cores', '1'],
                 "--project 'p/../q': not a keystone project ID"),
                (['--project', 'p', '--class', 'nope', '--ram', '1'],
                 "unknown flavor class 'nope'")):
            self.assertOneLine(*self.run_manage(conf, 'quota', 'set', *argv),
                               message)
        # a limit out of range, or not in plain decimal digits, is
        # argparse's usage error (exit 2), read by nova_ext.numbers
        for option, value in (('--cores', '2147483648'), ('--ram', '-2'),
                              ('--instances', '\u0663'),
                              ('--instances', '1_000')):
            code, out, err = self.run_manage(
                conf, 'quota', 'set', '--project', 'p', '--class', 'c',
                option, value)
            self.assertEqual(2, code, err)
            self.assertIn('error: argument %s: %r must be a whole number '
                          'from -1 to 2147483647' % (option, value), err)

    def test_unreachable_database(self):
        conf = self.conf('mysql+pymysql://nova:DbSecret@127.0.0.1:1/nova',
                         '\n[nova_ext_database]\nmax_retries = 0\n')
        code, out, err = self.run_manage(conf, 'quota', 'show')
        err = '\n'.join(line for line in err.splitlines()
                        if not line.startswith('SQL connection failed'))
        self.assertOneLine(code, out, err, 'database unreachable')

    def test_no_database_configured(self):
        conf = self.write('nova.conf', '[DEFAULT]\n')
        for argv in (['quota', 'show'], ['explain', '--flavor', 'm1']):
            self.assertOneLine(*self.run_manage(conf, *argv),
                               'no database in nova.conf')

    def test_check_before_any_service_started(self):
        conf = self.conf('sqlite:///%s/api.db' % self.dir)
        code, out, err = self.run_manage(conf, 'db', 'sync')
        self.assertEqual(0, code, err)
        # Nova's own tables are not there either: says whose they are.
        self.assertOneLine(*self.run_manage(conf, 'quota', 'check'),
                           "Nova's table")
        # With Nova's API tables but no cell and no service yet: said so,
        # exit 1, not an empty table that reads as "all agree".
        from nova.db.api import models as api_models
        engine = sqlalchemy.create_engine('sqlite:///%s/api.db' % self.dir)
        api_models.BASE.metadata.create_all(engine)
        engine.dispose()
        code, out, err = self.run_manage(conf, 'quota', 'check')
        self.assertEqual(1, code, out + err)
        self.assertIn('no nova-api or nova-conductor has started with '
                      'nova-ext installed yet: nothing to compare', out)
        self.assertNotIn('Traceback', out + err)


class TestPlacementCommands(OperatorErrorCase):

    def test_no_credentials(self):
        conf = self.write('nova.conf', '[placement]\n')
        result = nova_ext_manage('--config-file', conf, 'host',
                                 'maintenance', 'on', 'host1')
        self.assertOneLine(result.returncode, result.stdout, result.stderr,
                           'no credentials in nova.conf [placement]')

    def test_keystone_unreachable(self):
        conf = self.write('nova.conf', '[placement]\nauth_type = password\n'
                          'auth_url = http://127.0.0.1:1/identity\n'
                          'username = placement\npassword = KsSecret\n'
                          'project_name = service\n'
                          'user_domain_name = Default\n'
                          'project_domain_name = Default\n')
        result = nova_ext_manage('--config-file', conf, 'host',
                                 'maintenance', 'list')
        self.assertOneLine(result.returncode, result.stdout, result.stderr,
                           'placement or keystone unreachable')


class TestSimulatorModels(OperatorErrorCase):
    HEAD = 'name: x\nrows: 1\nrack_size: 2\nhost_groups:\n'
    GROUP = '  - {name: a, count: 2, vcpus: 4, ram_gb: 4, disk_gb: 10%s}\n'

    def refused(self, text, message):
        path = self.write('cluster.yaml', text)
        error = self.assertRaises(model.ModelError, model.load_cluster, path)
        self.assertIn(message, str(error))
        self.assertTrue(str(error).startswith(path + ':'), str(error))

    def test_cluster_values(self):
        for extra, message in (
                (', cpu_allocation_ratio: .nan',
                 ':5: host_groups[0].cpu_allocation_ratio: must be a number'),
                (', cpu_allocation_ratio: .inf',
                 ':5: host_groups[0].cpu_allocation_ratio: must be a number'),
                (', reserved_ram_mb: -1',
                 'host_groups[0].reserved_ram_mb: must be at least 0'),
                (', rack_size: "2"', 'rack_size: must be a whole number'),
                (', maintenance: true', 'maintenance: must be a whole'),
                (', 7: x', ':5: 7: field names are strings'),
                (', typo: 1', 'host_groups[0].typo: unknown field')):
            self.refused(self.HEAD + self.GROUP % extra, message)

    def test_sizes_are_bounded_before_allocating(self):
        self.refused(self.HEAD + '  - {name: a, count: 100000000000, '
                     'vcpus: 4, ram_gb: 4, disk_gb: 10}\n',
                     'count: must be a number from 1 to 1000000000')
        # Aliases multiply hosts cheaply: the total is bounded.
        self.refused(self.HEAD + '  - &g {name: a, count: 10000, vcpus: 4, '
                     'ram_gb: 4, disk_gb: 10}\n  - {<<: *g, name: b}\n'
                     '  - {<<: *g, name: c}\n',
                     'host_groups: 30000 hosts; the simulator models at '
                     'most 20000')

    def test_workload_arrivals_bounded(self):
        path = self.write('workload.yaml', 'name: w\narrivals: 1000000000\n'
                          'flavors:\n  - {name: f, vcpus: 1, ram_mb: 1}\n')
        error = self.assertRaises(model.ModelError, model.load_workload,
                                  path)
        self.assertIn('arrivals: at most 1000000', str(error))

    def test_the_command_prints_the_model_error_alone(self):
        path = self.write('cluster.yaml', self.HEAD + self.GROUP % (
            ', disk_allocation_ratio: .nan'))
        result = nova_ext_manage('simulate', '--cluster', path)
        self.assertOneLine(result.returncode, result.stdout, result.stderr,
                           '%s:5: host_groups[0].disk_allocation_ratio: must '
                           'be a number' % path)


class TestSandboxScenarios(OperatorErrorCase):
    GOOD = {'racks': {'r1': 2},
            'steps': [{'flavor': {'name': 'f'}},
                      {'group': {'name': 'g'}},
                      {'boot': {'name': 's', 'flavor': 'f', 'group': 'g'},
                       'expect': 'ACTIVE'}]}

    def refused(self, change, message):
        import copy
        scenario = copy.deepcopy(self.GOOD)
        change(scenario)
        error = self.assertRaises(sandbox_scenario.ScenarioError,
                                  sandbox_scenario.validate, scenario, 'x')
        self.assertIn(message, str(error))

    def test_good_scenario_and_the_built_in_one_pass(self):
        sandbox_scenario.validate(self.GOOD, 'x')
        sandbox_scenario.load()

    def test_mistakes_are_named(self):
        for change, message in (
                (lambda s: s['steps'].append({'bot': {'name': 'x'}}),
                 'steps[3]: one of say, flavor, group, boot per step, got '
                 'bot'),
                (lambda s: s['steps'][2].update(expekt='ERROR'),
                 'steps[2]: unknown key expekt in a boot step'),
                (lambda s: s['steps'][2].update(expect='DONE'),
                 'steps[2].expect: one of ACTIVE, ERROR'),
                (lambda s: s['steps'][0]['flavor'].update(vcpus=2),
                 'steps[0].flavor: unknown key vcpus'),
                (lambda s: s['steps'][2]['boot'].update(flavor='big'),
                 "steps[2].boot.flavor: no flavor 'big'"),
                (lambda s: s['steps'][2]['boot'].update(group='h'),
                 "steps[2].boot.group: no group 'h'"),
                (lambda s: s.update(rack={'r1': 1}), 'rack: unknown key'),
                (lambda s: s.update(racks={'r1': 0}), 'racks.r1'),
                (lambda s: s.update(racks={'r1': 10 ** 6}), 'racks.r1'),
                (lambda s: s.update(nova_conf={
                    'default_spread_level': 'x\n[y]'}),
                 'nova_conf.default_spread_level: must be one line')):
            self.refused(change, message)

    def test_sandbox_command_says_it_in_one_line(self):
        path = self.write('scenario.yaml', 'racks: {r1: 2}\nsteps:\n'
                          '  - flavor: {name: f}\n'
                          '  - bot: {name: s, flavor: f}\n')
        result = subprocess.run(
            [sys.executable, '-m', 'nova_ext.cmd.sandbox', '--scenario',
             path, '--state-dir', os.path.join(self.dir, 'state')],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(1, result.returncode)
        self.assertEqual('', result.stdout)
        self.assertEqual(['sandbox: %s: steps[1]: one of say, flavor, '
                          'group, boot per step, got bot' % path],
                         result.stderr.splitlines())


def nova_ext_status(*argv):
    return subprocess.run(
        [sys.executable, '-m', 'nova_ext.cmd.status'] + list(argv),
        capture_output=True, text=True, timeout=120)


class TestUpgradeCheckCommand(OperatorErrorCase):
    """``nova-ext-status upgrade check`` as a process: what cannot be
    checked is one line and exit 255 (oslo.upgradecheck's "the check could
    not run"); an unreachable database is an answer in seconds (one retry,
    bounded here by the subprocess timeout, not timed), its password never
    shown, the checks after the first not retrying it.
    """

    def test_config_files_it_cannot_read_are_one_line(self):
        for name, data, message in (
                (None, None, 'absent.conf: no such file'),
                ('binary.conf', b'[DEFAULT]\x00', 'binary file'),
                ('latin1.conf', b'[DEFAULT]\nx = caf\xe9\n', 'not UTF-8'),
                ('broken.conf', b'[DEFAULT]\npassword KsSecret\n',
                 "broken.conf:2: No ':' or '=' found in assignment")):
            path = (self.write(name, data) if name else
                    os.path.join(self.dir, 'absent.conf'))
            result = nova_ext_status('--config-file', path, 'upgrade',
                                     'check')
            self.assertEqual(255, result.returncode, result.stderr)
            lines = result.stderr.strip().splitlines()
            self.assertEqual(1, len(lines), result.stderr)
            self.assertTrue(lines[0].startswith('nova-ext-status: '))
            self.assertIn(message, lines[0])
            self.assertNotIn('KsSecret', result.stderr)

    def test_unreachable_database_and_unknown_quota_driver(self):
        # the leak: an unquoted '@' in the password makes pymysql
        # name the rest of it as the host
        path = self.write('nova.conf', (
            '[api_database]\nconnection = mysql+pymysql://root:Db@Secret@'
            '127.0.0.1:1/nova_api\n[database]\nconnection = '
            'mysql+pymysql://root:Db@Secret@127.0.0.1:1/nova\n'
            '[nova_ext]\nquota_driver = per_flavr\n'))
        result = nova_ext_status('--config-file', path, 'upgrade', 'check',
                                 '--json')
        self.assertEqual(2, result.returncode, result.stderr)
        import json
        checks = {check['check']: check for check in json.loads(
            result.stdout)['checks']}
        self.assertEqual(2, checks['nova-ext database']['result'])
        self.assertIn("***@127.0.0.1", checks['nova-ext database']['details'])
        quota = checks['Quota activation']
        self.assertEqual(2, quota['result'])
        self.assertIn('quota_driver = per_flavr: no such quota driver '
                      '(installed: per_flavor)', quota['details'])
        for name in ('Flavor extra specs', 'Aggregate metadata'):
            self.assertIn('not checked: the database is unreachable',
                          checks[name]['details'])
        self.assertNotIn('Secret', result.stdout + result.stderr)

    def test_scheduler_plugins_without_the_engine_plugin_fail(self):
        # nova.conf loads nova-ext's filters, but nova-scheduler would not
        # activate the hooks they read
        filters = ('[filter_scheduler]\navailable_filters = '
                   'nova_ext.scheduler.filters.all_filters\n')
        import json
        for connection, code in (('sqlite://', 2),
                                 ('sqlite://?plugin=nova_ext', 0)):
            path = self.write('nova.conf', filters + (
                '[api_database]\nconnection = %s\n' % connection))
            result = nova_ext_status('--config-file', path, 'upgrade',
                                     'check', '--json')
            checks = {check['check']: check for check in json.loads(
                result.stdout)['checks']}
            activation = checks['Scheduler hooks']
            self.assertEqual(code, activation['result'], activation)
        path = self.write('nova.conf', filters + (
            '[api_database]\nconnection = sqlite://\n'))
        result = nova_ext_status('--config-file', path, 'upgrade', 'check')
        self.assertIn('has no ?plugin=nova_ext', result.stdout)
