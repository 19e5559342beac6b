# SPDX-License-Identifier: Apache-2.0
"""Errors that named the wrong cause, or none (issue 42), each from the
console script as a real process: one line naming the real cause, exit 1,
no traceback, nothing left behind.
"""

import os
import resource
import shutil
import subprocess
import sys
import tempfile

import testtools

MANAGE = os.path.join(os.path.dirname(sys.executable), 'nova-ext-manage')


def no_file_may_grow():
    # as `ulimit -f 0`: a write fails with EFBIG (Python ignores SIGXFSZ)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


class TestCauses(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.conf = os.path.join(self.dir, 'nova.conf')
        with open(self.conf, 'w') as handle:
            handle.write('[placement]\nauth_type = admin_token\n'
                         'endpoint = http://127.0.0.1:9/\n'
                         'token = abcdefgh\n')

    def manage(self, *argv, **kwargs):
        result = subprocess.run([MANAGE] + list(argv), capture_output=True,
                                text=True, timeout=300, **kwargs)
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        self.assertNotIn('unexpected', result.stderr)
        [line] = result.stderr.splitlines()
        return line

    def test_each_input_is_refused_for_its_own_reason(self):
        config = ['--config-file', self.conf]
        for argv, cause in (
                (['host', 'maintenance', 'on', 'cmp1 '],
                 "host 'cmp1 ': leading or trailing whitespace"),
                (['host', 'maintenance', 'off', ' cmp1'],
                 'leading or trailing whitespace'),
                (['host', 'maintenance', 'list', 'extra-arg'],
                 "host maintenance list takes no HOST (got 'extra-arg')"),
                (['explain', '--flavor', 'm1', '--image', '../../etc/passwd'],
                 "--image '../../etc/passwd': not an image ID"),
                (['explain', '--flavor', 'm1', '--project', 'p1#x'],
                 "--project 'p1#x': not a keystone project ID"),
                (['explain', '--flavor', 'm1', '--project', '*'],
                 "--project '*': name one project ID"),
                (['explain', '--flavor', 'm1'],
                 '[placement] auth_type = admin_token: explain needs '
                 'credentials keystone issues a token')):
            self.assertIn(cause, self.manage(*(config + argv)), argv)

    def simulate_json(self, path, **kwargs):
        return self.manage('simulate', '--conf', 'nova-defaults',
                           '--arrivals', '2', '--json', path, **kwargs)

    def test_a_file_too_large_is_said_and_leaves_nothing(self):
        out = os.path.join(self.dir, 'out')
        os.mkdir(out)
        path = os.path.join(out, 'result.json')
        self.assertEqual('nova-ext-manage: cannot write %s: File too large'
                         % path, self.simulate_json(
                             path, preexec_fn=no_file_may_grow))
        self.assertEqual([], os.listdir(out))

    def test_an_immutable_directory_is_said(self):
        out = os.path.join(self.dir, 'out')
        os.mkdir(out)
        if subprocess.run(['chattr', '+i', out]).returncode:
            self.skipTest('no chattr +i here')
        self.addCleanup(subprocess.run, ['chattr', '-i', out])
        self.assertIn('Operation not permitted', self.simulate_json(
            os.path.join(out, 'result.json')))

    def mount_tmpfs(self, options):
        """A small file system of its own (root only), unmounted after."""
        mount = os.path.join(self.dir, 'fs')
        os.mkdir(mount)
        if subprocess.run(['mount', '-t', 'tmpfs', '-o', options, 'tmpfs',
                           mount], capture_output=True).returncode:
            self.skipTest('cannot mount a tmpfs here (not root?)')
        self.addCleanup(subprocess.run, ['umount', mount])
        return mount

    def test_a_full_disk_is_said_and_leaves_nothing(self):
        mount = self.mount_tmpfs('size=4k')
        with open(os.path.join(mount, 'filler'), 'wb') as filler:
            filler.write(b'x' * 4096)
        path = os.path.join(mount, 'result.json')
        self.assertEqual('nova-ext-manage: cannot write %s: No space left '
                         'on device' % path, self.simulate_json(path))
        self.assertEqual(['filler'], os.listdir(mount))

    def test_a_read_only_file_system_is_said(self):
        mount = self.mount_tmpfs('size=64k,ro')
        self.assertIn('Read-only file system', self.simulate_json(
            os.path.join(mount, 'result.json')))
