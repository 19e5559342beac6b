# SPDX-License-Identifier: Apache-2.0
"""What ``spread audit`` prints: the Prometheus text read back with
prometheus_client's own parser (labels with quotes, backslashes and new
lines in group names included), the file node_exporter reads written
whole, the table's words; and the CLI's one-line errors for bad flags.
"""

import io
import os
import subprocess
import sys
import tempfile

from prometheus_client import parser
import testtools

from nova_ext.maintenance import audit
from nova_ext.maintenance import compute_api
from nova_ext.maintenance import judge
from nova_ext.maintenance import report
from nova_ext.scheduler import spread_constraints

RACKS = {'r1': ['h1', 'h2'], 'r2': ['h3'], 'r3': ['h5']}
NASTY = 'web "blue"\\green\nnext'


def state():
    layout = judge.Layout({h: {'rack': r} for r, hosts in RACKS.items()
                           for h in hosts}, ['h1', 'h2', 'h3', 'h5'])
    members = (audit.Member('u1', 'web-1', 'h1', 'ACTIVE', None, 'p1'),
               audit.Member('u2', 'web-2', 'h2', 'ACTIVE', None, 'p1',
                            'created on a forced host (--availability-zone '
                            'nova:h2)'),
               audit.Member('u3', 'web-3', 'h3', 'ACTIVE', None, 'p1'))
    return audit.CloudState(layout, {}, [audit.GroupState(
        'g-uuid', NASTY, 'p1', 'anti-affinity', 1, members,
        tuple(spread_constraints.parse('rack:max=1;rack:skew=1,soft',
                                       ['rack'])), {})], ('rack',))


class PrometheusTest(testtools.TestCase):

    def families(self, text):
        return {family.name: family
                for family in parser.text_string_to_metric_families(text)}

    def test_parsed_back(self):
        document = audit.report(state(), {'u2': 'came to h2 by migration '
                                                '7 (2026-11-01)'})
        families = self.families(report.prometheus_text(document, 1700.5))
        self.assertEqual(1, families['nova_ext_spread_audit_success']
                         .samples[0].value)
        self.assertEqual(1700.5, families[
            'nova_ext_spread_audit_timestamp_seconds'].samples[0].value)
        self.assertEqual(1, families['nova_ext_spread_hard_violations']
                         .samples[0].value)
        violated = {sample.labels['constraint']: sample
                    for sample in families[
                        'nova_ext_spread_constraint_violated'].samples}
        self.assertEqual({'rack:max=1', 'rack:skew=1,soft'}, set(violated))
        hard = violated['rack:max=1']
        self.assertEqual(1, hard.value)
        # the group's name comes back exactly, quotes, backslash and new
        # line included
        self.assertEqual({'group': 'g-uuid', 'group_name': NASTY,
                          'project': 'p1', 'constraint': 'rack:max=1',
                          'level': 'rack', 'hard': 'true'}, hard.labels)
        self.assertEqual(1, violated['rack:skew=1,soft'].value)
        members = {sample.labels['domain']: sample.value for sample in
                   families['nova_ext_spread_domain_members'].samples}
        self.assertEqual({'r1': 2, 'r2': 1}, members)
        self.assertEqual('gauge', families[
            'nova_ext_spread_constraint_excess'].type)

    def test_a_failed_audit_says_so(self):
        families = self.families(report.prometheus_text({}, 5.0,
                                                        success=False))
        self.assertEqual({'nova_ext_spread_audit_success',
                          'nova_ext_spread_audit_timestamp_seconds'},
                         set(families))
        self.assertEqual(0, families['nova_ext_spread_audit_success']
                         .samples[0].value)

    def test_written_whole(self):
        directory = self.useFixture(
            __import__('fixtures').TempDir()).path
        path = os.path.join(directory, 'nova_ext_spread.prom')
        report.write_atomically(path, 'one 1\n')
        report.write_atomically(path, 'two 2\n')
        with open(path) as stream:
            self.assertEqual('two 2\n', stream.read())
        self.assertEqual(['nova_ext_spread.prom'], os.listdir(directory))
        self.assertEqual(0o644, os.stat(path).st_mode & 0o777)


class TableTest(testtools.TestCase):

    def test_the_causes_in_words(self):
        out = io.StringIO()
        report.audit_table(audit.report(state()), out)
        text = out.getvalue()
        self.assertIn('VIOLATED', text)
        self.assertIn('rack r1 holds 2 members (max 1): web-1 on h1, web-2 '
                      'on h2', text)
        self.assertIn('web-2 was created on a forced host '
                      '(--availability-zone nova:h2)', text)
        self.assertIn('rack r1 holds 2 members, the least filled eligible '
                      'rack r3 holds 0: 2 above it (skew 1)', text)
        self.assertIn('members per rack: r1: web-1, web-2; r2: web-3', text)
        self.assertIn('1 group with spread constraints: 1 hard constraint '
                      'violated, 1 soft', text)


def nova_ext_manage(*argv, env=None):
    return subprocess.run(
        [sys.executable, '-m', 'nova_ext.cmd.manage'] + list(argv),
        capture_output=True, text=True, timeout=300, env=env)


class CommandLineErrorTest(testtools.TestCase):
    """One line, exit code 1, before anything is read or moved."""

    def setUp(self):
        super().setUp()
        fd, self.conf = tempfile.mkstemp(suffix='.conf')
        os.write(fd, b'[database]\nconnection = mysql+pymysql://root:'
                     b'S3cretPw@127.0.0.1:1/nova\n')
        os.close(fd)
        self.addCleanup(os.unlink, self.conf)

    def assertOneLine(self, result, expected):
        self.assertEqual(1, result.returncode, result)
        self.assertEqual('nova-ext-manage: %s\n' % expected, result.stderr)
        self.assertNotIn('S3cretPw', result.stdout + result.stderr)

    def test_bad_flags(self):
        for argv, expected in (
                (['host', 'drain', 'h1', '--max-unavailable-per-group',
                  '0'], '--max-unavailable-per-group 0: at least 1'),
                (['host', 'drain', 'h1', '--parallel', '0'],
                 '--parallel 0: at least 1'),
                (['host', 'drain', 'h1', '--timeout', '0'],
                 '--timeout 0.0: seconds, more than 0'),
                (['spread', 'audit', '--plan', '--format', 'prometheus'],
                 '--plan: not with --format prometheus (metrics only); run '
                 'it apart'),
                (['spread', 'audit', '--output', 'x.prom'],
                 "--output: for --format prometheus (the file "
                 "node_exporter's textfile collector reads)")):
            self.assertOneLine(nova_ext_manage(
                '--config-file', self.conf, *argv), expected)

    def test_unreachable_database_prometheus_file_says_failed(self):
        directory = self.useFixture(__import__('fixtures').TempDir()).path
        path = os.path.join(directory, 'spread.prom')
        result = nova_ext_manage('--config-file', self.conf, 'spread',
                                 'audit', '--format', 'prometheus',
                                 '--output', path)
        self.assertEqual(1, result.returncode)
        self.assertNotIn('S3cretPw', result.stderr)
        with open(path) as stream:
            families = {f.name: f for f in
                        parser.text_string_to_metric_families(stream.read())}
        self.assertEqual(0, families['nova_ext_spread_audit_success']
                         .samples[0].value)

    def test_no_credentials_for_novas_api(self):
        env = {key: value for key, value in os.environ.items()
               if not key.startswith('OS_')}
        env['OS_CLIENT_CONFIG_FILE'] = os.devnull
        for key in ('HOME', 'XDG_CONFIG_HOME'):
            env[key] = tempfile.gettempdir()
        result = subprocess.run(
            [sys.executable, '-c', 'from nova_ext.maintenance import '
             'compute_api\ncompute_api.connect()'], capture_output=True,
            text=True, env=env, timeout=120)
        self.assertIn(compute_api.NO_CREDENTIALS, result.stderr)
        result = subprocess.run(
            [sys.executable, '-c', 'from nova_ext.maintenance import '
             'compute_api\ncompute_api.connect("nope")'],
            capture_output=True, text=True, env=env, timeout=120)
        self.assertIn("Nova's API: Cloud nope was not found.",
                      result.stderr)
