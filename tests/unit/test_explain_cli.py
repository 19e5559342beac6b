# SPDX-License-Identifier: Apache-2.0
"""nova-ext-manage explain, as an operator runs it, with nothing to reach."""

import os
import socket
import subprocess
import sys
import tempfile

import testtools


def closed_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class ExplainCommandLineTest(testtools.TestCase):

    def test_unreachable_database_is_one_line(self):
        port = closed_port()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'nova.conf')
            with open(path, 'w') as conf:
                for section in ('api_database', 'database'):
                    conf.write('[%s]\nconnection = mysql+pymysql://root@'
                               '127.0.0.1:%d/nova\nmax_retries = 0\n'
                               % (section, port))
            result = subprocess.run(
                [sys.executable, '-W', 'ignore', '-m', 'nova_ext.cmd.manage',
                 '--config-file', path, 'explain', '--flavor', 'm1'],
                capture_output=True, text=True, timeout=120)
        self.assertEqual(1, result.returncode, result.stderr)
        errors = [line for line in result.stderr.splitlines()
                  if line.startswith('nova-ext-manage:')]
        self.assertEqual(1, len(errors), result.stderr)
        self.assertIn('explain: database:', errors[0])
        self.assertIn("Can't connect", errors[0])
        self.assertNotIn('Traceback', result.stderr)

    def test_flavor_and_server_exclude_each_other(self):
        result = subprocess.run(
            [sys.executable, '-W', 'ignore', '-m', 'nova_ext.cmd.manage',
             'explain', '--flavor', 'm1', '--server', 'x'],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(2, result.returncode)
        self.assertIn('not allowed with argument', result.stderr)

    def test_unknown_set_option_is_one_line_before_any_database(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'nova.conf')
            with open(path, 'w') as conf:
                conf.write('[DEFAULT]\n')
            result = subprocess.run(
                [sys.executable, '-W', 'ignore', '-m', 'nova_ext.cmd.manage',
                 '--config-file', path, 'explain', '--flavor', 'm1',
                 '--set', 'filter_scheduler.ram_weight_multiplir=0'],
                capture_output=True, text=True, timeout=120)
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertEqual(
            ['nova-ext-manage: explain: --set filter_scheduler.'
             'ram_weight_multiplir: Nova and nova-ext have no option '
             'ram_weight_multiplir in [filter_scheduler]'],
            result.stderr.splitlines())
