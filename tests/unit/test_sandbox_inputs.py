# SPDX-License-Identifier: Apache-2.0
"""nova-ext-sandbox's inputs, refused before anything is written or run
(issue 42): a ``--state-dir`` it did not make is used only if empty, and
``--keep-serving PORT`` is checked before the scenario, not after it. The
console script runs as a real process.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import testtools

from nova_ext.cmd import sandbox

SANDBOX = os.path.join(os.path.dirname(sys.executable), 'nova-ext-sandbox')


class TestSandboxInputs(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def run_sandbox(self, *argv):
        result = subprocess.run([SANDBOX] + list(argv), capture_output=True,
                                text=True, timeout=120)
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertEqual(1, len(result.stderr.splitlines()), result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        return result.stderr

    def test_a_directory_it_did_not_make_is_refused_unless_empty(self):
        state = os.path.join(self.dir, 'state')
        os.mkdir(state)
        for name in ('nova.conf', 'nova.log'):
            with open(os.path.join(state, name), 'w') as handle:
                handle.write('the operator\'s own %s\n' % name)
        error = self.run_sandbox('--state-dir', state)
        self.assertIn('not empty and not made by nova-ext-sandbox', error)
        self.assertEqual(['nova.conf', 'nova.log'], sorted(os.listdir(state)))
        for name in ('nova.conf', 'nova.log'):
            with open(os.path.join(state, name)) as handle:
                self.assertEqual('the operator\'s own %s\n' % name,
                                 handle.read())

    def test_an_empty_or_new_directory_is_claimed_and_reused(self):
        empty = os.path.join(self.dir, 'empty')
        os.mkdir(empty)
        for state in (os.path.join(self.dir, 'new'), empty):
            sandbox.claim_state_dir(state)
            with open(os.path.join(state, 'nova.log'), 'w') as handle:
                handle.write('last run\n')
            sandbox.claim_state_dir(state)  # its own: a second run
            self.assertIn(sandbox.STATE_MARKER, os.listdir(state))

    def test_a_file_is_not_a_state_directory(self):
        path = os.path.join(self.dir, 'nova.conf')
        open(path, 'w').close()
        self.assertIn('a file, not a directory',
                      self.run_sandbox('--state-dir', path))

    def test_a_taken_port_is_refused_before_the_scenario(self):
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(('127.0.0.1', 0))
        listener.listen()
        port = listener.getsockname()[1]
        state = os.path.join(self.dir, 'state')
        error = self.run_sandbox('--state-dir', state, '--keep-serving',
                                 str(port))
        self.assertIn('cannot listen on 127.0.0.1:%d: Address already in '
                      'use' % port, error)
        self.assertFalse(os.path.exists(state), 'the scenario started')

    def test_a_port_out_of_range_is_refused(self):
        for port in ('0', '70000'):
            self.assertIn('a TCP port, 1 to 65535', self.run_sandbox(
                '--state-dir', os.path.join(self.dir, 'state'),
                '--keep-serving', port))
        # not a number nova-ext reads: argparse's usage error (exit 2)
        result = subprocess.run(
            [SANDBOX, '--state-dir', os.path.join(self.dir, 'state'),
             '--keep-serving', '-1'], capture_output=True, text=True,
            timeout=120)
        self.assertEqual(2, result.returncode, result.stderr)
        self.assertIn("argument --keep-serving: '-1' must be a whole number",
                      result.stderr)
        self.assertNotIn('Traceback', result.stderr)
