# SPDX-License-Identifier: Apache-2.0
"""Every hostile input tried against the operator tools for issue 34, kept
so that no change can bring one back. Each row: what was typed (or what
the file held) and what the operator sees now. doc/source/
troubleshooting.rst lists the same rows for the operator.

The issue's own examples are marked ``issue``; the others were tried
beyond them. The property tests (test_configure_properties) and the file
tests (test_configure_files) cover the editor's reading and writing.
"""

import io
import os
import shutil
import subprocess
import sys
import tempfile

import fixtures
import testtools

from nova_ext.cmd import manage
from nova_ext.cmd import sandbox
from nova_ext import configure
from nova_ext import errors
from nova_ext.quota import commands
from nova_ext.sandbox import scenario as sandbox_scenario

NOVA_CONF = """\
[DEFAULT]
transport_url = rabbit://nova:Rabb1t@Secret@127.0.0.1:5672/

[api_database]
connection = mysql+pymysql://nova:Db%40Secret@127.0.0.1/nova_api

[filter_scheduler]
enabled_filters = ComputeFilter

[nova_ext]
failure_domain_levels = rack,row
"""
TEMPEST_CONF = """\
[identity]
uri = http://127.0.0.1/identity

[compute-feature-enabled]
scheduler_enabled_filters = ComputeFilter
"""

# (origin, argv after 'configure', file content, expected stderr line)
CONFIGURE_REFUSALS = [
    ('issue', ['nova', '--quota', '--undo', '--role', 'schedular'],
     NOVA_CONF, '--role schedular: expected one of api, cell-conductor'),
    ('issue', ['nova', '--set', 'nova_ext.quota_driver=per_flavr'],
     NOVA_CONF, '[nova_ext] quota_driver = per_flavr: no such quota '
                'driver (installed: per_flavor)'),
    ('issue', ['nova', '--set', 'nova_ext.default_spread_level=rak'],
     NOVA_CONF, '[nova_ext] default_spread_level = rak: not a '
                'failure-domain level ([nova_ext] failure_domain_levels: '
                'rack, row)'),
    ('issue', ['nova', '--failure-domain', 'rack:r1,rack:r2'], NOVA_CONF,
     "level rack given twice (r1 and r2)"),
    ('issue', ['tempest', '--filters'], NOVA_CONF,
     '[api_database] is a nova section: this looks like a nova.conf, not a '
     'tempest.conf'),
    ('own', ['nova', '--filters'], TEMPEST_CONF,
     '[identity] is a tempest section: this looks like a tempest.conf, not '
     'a nova.conf'),
    ('own', ['nova', '--failure-domain', 'datacenter:dc1'], NOVA_CONF,
     "level 'datacenter' is not in [nova_ext] failure_domain_levels "
     "(rack, row)"),
    ('own', ['nova', '--failure-domain', 'rack:r1', '--set',
             'nova_ext.failure_domain_levels=pod'], NOVA_CONF,
     '[nova_ext] failure_domain names level rack, which is not in '
     '[nova_ext] failure_domain_levels (pod)'),
    ('own', ['nova', '--set', 'DEFAULT.my-ip=1'], NOVA_CONF,
     "option name 'my-ip': letters, digits and _ only"),
    ('own', ['nova', '--quota'], '\ufeff[DEFAULT]\n',
     "nova.conf:1: No ':' or '=' found in assignment; not editing it"),
    ('own', ['nova', '--quota'],
     '[api_database]\nconnection = mysql://u:p@ss@h:x/db\n',
     'nova.conf:2: [api_database] connection is not a URL SQLAlchemy '
     '(oslo.db) can read'),
    ('own', ['nova', '--quota'],
     '[api_database]\nconnection = mysql://u:p@h/db\n  ?charset=utf8\n',
     'nova.conf:2: [api_database] connection continues over several '
     'lines'),
    ('own', ['nova', '--filters'],
     '[filter_scheduler]\nenabled_filters = A,\n  B\n  C\n',
     'nova.conf:2: [filter_scheduler] enabled_filters continues on the '
     'next line without a comma'),
    ('own', ['nova', '--quota'], '[DEFAULT]\npassword KsSecret\n',
     "nova.conf:2: No ':' or '=' found in assignment; not editing it"),
]

# (origin, text a command printed, with what the process read before)
SECRETS = ['Rabb1t@Secret', 'Db@Secret', 'my secret pw', 'a,b,Secret',
           'FixedKeySecret', 'Hash#Secret%', 'MemcacheSecret', 'AppCred',
           'Redis:Secret', 'Second@Secret']
MASKING = [
    ('issue', 'transport_url = rabbit://nova:Rabb1t@Secret@127.0.0.1:5672/'),
    ('issue', 'password = "my secret pw"'),
    ('issue', 'admin_password = a,b,Secret'),
    ('issue', '[key_manager] fixed_key = FixedKeySecret'),
    ('issue', '--set key_manager.fixed_key=FixedKeySecret'),
    ('issue', "Can't connect to MySQL server on 'Secret@127.0.0.1'"),
    ('own', '+connection = mysql+pymysql://nova:Hash#Secret%@db/nova'),
    ('own', '"admin_password": "my secret pw", "user": "nova"'),
    ('own', 'memcache_secret_key: MemcacheSecret'),
    ('own', 'application_credential_secret = AppCred'),
    ('own', 'rabbit://a:Rabb1t@Secret@h1:5672,b:Second@Secret@h2:5672/v'),
    ('own', 'coordination_backend_url = redis://:Redis:Secret@r:6379'),
]

# --project values keystone would read as another URL or never issue
BAD_PROJECTS = [('issue', 'p#x'), ('issue', 'p/../q'), ('own', 'p%2Fq'),
                ('own', 'p?x=1'), ('own', '\uff50'), ('own', 'a b'),
                ('own', '..'), ('own', 'p' * 65), ('own', 'p\u200b')]

# sandbox nova_conf entries written into nova.conf
BAD_SANDBOX_CONF = [
    ('issue', {'x\n[DEFAULT]\ndebug': 'true'}, 'not a [nova_ext] option'),
    ('issue', {'default_spread_level': 'rack\r[x]'}, 'must be one line'),
    ('own', {'no_such_option': 1}, 'nova-ext has no such option'),
    ('own', {'failure_domain_cache_seconds': 'soon'},
     'failure_domain_cache_seconds'),
    ('own', {'request_filters': ['maintenance']}, 'must be one line'),
]


class HostileCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def write(self, text, name='nova.conf'):
        path = os.path.join(self.dir, name)
        with open(path, 'w', encoding='utf-8', newline='') as handle:
            handle.write(text)
        return path

    def manage(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        code = manage.main(list(argv), err=err)
        return code, out.getvalue(), err.getvalue()


class TestConfigure(HostileCase):

    def test_refusals_are_one_line_and_change_nothing(self):
        for origin, argv, text, message in CONFIGURE_REFUSALS:
            path = self.write(text)
            code, out, err = self.manage('configure', argv[0],
                                         '--config-file', path, *argv[1:])
            self.assertEqual(1, code, (argv, out, err))
            self.assertEqual(1, len(err.splitlines()), err)
            self.assertIn(message, err, argv)
            for secret in ('Rabb1t', 'Db@Secret', 'Db%40Secret', 'KsSecret'):
                self.assertNotIn(secret, out + err)
            with open(path, encoding='utf-8', newline='') as handle:
                self.assertEqual(text, handle.read(), argv)

    def test_colliding_domain_names_are_explained(self):
        # issue: r-1 and r_1 are one trait; said, not refused
        path = self.write(NOVA_CONF)
        code, out, err = self.manage('configure', 'nova', '--config-file',
                                     path, '--failure-domain', 'rack:r-1')
        self.assertEqual(0, code, err)
        self.assertIn('--failure-domain rack:r-1: placement and the '
                      'scheduler know this domain by its trait suffix R_1',
                      err)
        self.assertIn('r-1, r_1', err)

    def test_scheduler_role_keeps_the_engine_plugin(self):
        path = self.write(NOVA_CONF)
        code, out, err = self.manage('configure', 'nova', '--config-file',
                                     path, '--all', '--role', 'scheduler')
        self.assertEqual(0, code, err)
        view = configure.oslo_view(path)
        self.assertTrue(view['api_database']['connection'][-1].endswith(
            '?plugin=nova_ext'))
        self.assertNotIn('quota_driver', view['nova_ext'])
        # undo of one scheduler feature keeps it for the others
        self.manage('configure', 'nova', '--config-file', path,
                    '--weighers', '--undo')
        view = configure.oslo_view(path)
        self.assertIn('plugin=nova_ext', view['api_database']['connection'][
            -1])
        self.manage('configure', 'nova', '--config-file', path,
                    '--filters', '--request-filters', '--undo')
        view = configure.oslo_view(path)
        self.assertNotIn('plugin', view['api_database']['connection'][-1])

    def test_not_regular_files_are_refused_without_blocking(self):
        fifo = os.path.join(self.dir, 'fifo.conf')
        os.mkfifo(fifo)
        for path in (fifo, self.dir):
            code, out, err = self.manage('configure', 'nova',
                                         '--config-file', path, '--quota')
            self.assertEqual(1, code)
            self.assertIn('not a regular file', err)

    def test_crlf_and_quotes_are_kept(self):
        path = self.write('[DEFAULT]\r\ndebug = true\r\n')
        code, out, err = self.manage(
            'configure', 'nova', '--config-file', path, '--set',
            'placement.region_name="quoted"')
        self.assertEqual(0, code, err)
        with open(path, 'rb') as handle:
            data = handle.read()
        self.assertNotIn(b'\n', data.replace(b'\r\n', b''))
        self.assertEqual(['"quoted"'], configure.oslo_view(path)[
            'placement']['region_name'])

    def test_closed_pipe_is_quiet(self):
        # issue: "| head -1" ended in "unexpected BrokenPipeError"
        path = self.write(NOVA_CONF)
        process = subprocess.Popen(
            [sys.executable, '-m', 'nova_ext.cmd.manage', 'configure',
             'nova', '--config-file', path, '--all', '--dry-run'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # the reader goes before the first line is written (the output is
        # smaller than a pipe's buffer: after it, nothing would fail)
        process.stdout.close()
        err = process.stderr.read().decode()
        process.wait(timeout=120)
        self.assertEqual('', err)
        self.assertEqual(141, process.returncode)


class TestMasking(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # what earlier tests in this process read is known too; each
        # row here must hold with what this test reads alone
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.errors._KNOWN_SECRETS', {}))

    def test_every_output_path_masks_what_oslo_config_knows(self):
        errors.learn_secrets_from_view(configure.oslo_view(
            'x', '[DEFAULT]\ntransport_url = rabbit://nova:Rabb1t@Secret@'
                 '127.0.0.1:5672/\n[api_database]\nconnection = '
                 'mysql+pymysql://nova:Db@Secret@127.0.0.1/nova_api\n'))
        for origin, text in MASKING:
            shown = errors.mask_secrets(text)
            for secret in SECRETS:
                for part in secret.split('@'):
                    self.assertNotIn(part, shown, (origin, text, shown))

    def test_issue_passwords_are_secret_by_oslo_config(self):
        names = errors.secret_option_names()
        for name in ('fixed_key', 'transport_url', 'connection',
                     'memcache_secret_key', 'password',
                     'application_credential_secret'):
            self.assertIn(name, names)


class TestQuotaProjects(testtools.TestCase):

    def test_ids_keystone_would_not_issue_are_refused(self):
        for origin, project in BAD_PROJECTS:
            error = self.assertRaises(commands.CommandError,
                                      commands.check_project_id, project)
            self.assertEqual(1, len(str(error).splitlines()))
        for good in ('*', '0123456789abcdef0123456789abcdef', 'demo-1'):
            commands.check_project_id(good)


class TestSandbox(HostileCase):

    def test_nova_conf_entries_are_one_known_option_each(self):
        for origin, nova_conf, message in BAD_SANDBOX_CONF:
            scenario = {'racks': {'r1': 1}, 'nova_conf': nova_conf,
                        'steps': []}
            error = self.assertRaises(
                sandbox_scenario.ScenarioError, sandbox_scenario.validate,
                scenario, 's.yaml')
            self.assertIn(message, str(error), nova_conf)
            self.assertEqual(1, len(str(error).splitlines()))

    def test_hosts_and_state_dir(self):
        for hosts in (0, -1, 2, 201, 10 ** 6):  # issue: 0 became 9
            error = self.assertRaises(
                sandbox.SandboxError, sandbox._spread_hosts,
                {'r1': 3, 'r2': 3, 'r3': 3}, hosts, 200)
            self.assertIn('from the number of racks (3) to 200', str(error))
        state = self.write('', name='state')
        err = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        self.assertEqual(1, sandbox.main(['--state-dir', state]))
        self.assertEqual('sandbox: --state-dir %s: a file, not a directory\n'
                         % state, err.getvalue())


class TestEnsureVenv(HostileCase):

    def test_only_its_own_directory_is_deleted(self):
        script = os.path.join(os.path.dirname(__file__), '..', '..',
                              'tools', 'ensure-venv.sh')
        mine = os.path.join(self.dir, 'mine')
        os.mkdir(mine)
        self.write('precious', name='mine/notes.txt')
        plain_file = self.write('precious', name='a-file')
        for venv in (mine, plain_file):
            result = subprocess.run(
                ['bash', script], capture_output=True, text=True,
                env=dict(os.environ, NOVA_EXT_VENV=venv), timeout=60)
            self.assertEqual(1, result.returncode, result.stderr)
            self.assertIn('is not a venv tools/ensure-venv.sh created',
                          result.stderr)
        with open(os.path.join(mine, 'notes.txt')) as handle:
            self.assertEqual('precious', handle.read())
        with open(plain_file) as handle:
            self.assertEqual('precious', handle.read())
