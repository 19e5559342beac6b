# SPDX-License-Identifier: Apache-2.0
"""``configure`` as a file editor: serialised, atomic, keeping the file's
identity, on real processes.

* Two ``nova-ext-manage configure`` processes racing 50 edits each on one
  nova.conf lose none (the lock next to the file is held from the read to
  the rename).
* A process killed (SIGKILL), terminated (SIGTERM) or interrupted (SIGINT)
  at a random moment of its edits leaves the old or the new file, never a
  mix, and no temporary file.
* Owner, mode, a POSIX ACL (set through ``setfacl`` or, where it is
  absent, the ``system.posix_acl_access`` extended attribute) and a user
  extended attribute survive an edit; a hard-linked file is refused.

Cost: about 15 s (eight interpreter start-ups, 100 edits).
"""

import errno
import os
import random
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import textwrap
import time

import testtools

from nova_ext import configure

BASE = """\
[DEFAULT]
debug = true

[placement]
region_name = RegionOne
"""
EDITS_PER_PROCESS = 50

# Each racer waits for the start file, then makes its edits one command
# at a time through nova-ext-manage's main().
RACER = textwrap.dedent("""
    import os, sys, time
    from nova_ext.cmd import manage
    path, name, start = sys.argv[1:4]
    open(start + '.' + name, 'w').close()  # imported: ready
    while not os.path.exists(start):
        time.sleep(0.001)
    for i in range(%d):
        code = manage.main(['configure', 'nova', '--config-file', path,
                            '--set', 'placement.%%s_%%d=%%d' %% (name, i, i)])
        if code:
            sys.exit(code)
""" % EDITS_PER_PROCESS)

# The editor of TestSignals: edits back and forth until a signal ends it,
# with the default dispositions, unblocked (a new process keeps its
# parent's mask and ignored signals: a shell's background job ignores
# SIGINT), after saying it has started.
TOGGLER = textwrap.dedent("""
    import signal, sys
    from nova_ext import configure
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK,
                           {signal.SIGINT, signal.SIGTERM})
    path, ready = sys.argv[1:3]
    configure.configure_file(path, 'nova', ['quota'])
    open(ready, 'w').close()
    undo = True
    while True:
        configure.configure_file(path, 'nova', ['quota'], undo=undo)
        undo = not undo
""")

# posix_acl_xattr format (linux/posix_acl_xattr.h): version 2, then
# (tag, perm, id) entries sorted by tag
ACL_XATTR = 'system.posix_acl_access'
ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER = (
    0x01, 0x02, 0x04, 0x10, 0x20)
ACL_UNDEFINED_ID = 0xFFFFFFFF
ACL_UID = 4242


def acl_xattr(uid):
    """mode 0640 plus ``user:<uid>:r--``."""
    entries = [(ACL_USER_OBJ, 6, ACL_UNDEFINED_ID), (ACL_USER, 4, uid),
               (ACL_GROUP_OBJ, 4, ACL_UNDEFINED_ID),
               (ACL_MASK, 4, ACL_UNDEFINED_ID),
               (ACL_OTHER, 0, ACL_UNDEFINED_ID)]
    return struct.pack('<I', 2) + b''.join(
        struct.pack('<HHI', *entry) for entry in entries)


class FileCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.path = os.path.join(self.dir, 'nova.conf')
        with open(self.path, 'w') as handle:
            handle.write(BASE)

    def read(self):
        with open(self.path) as handle:
            return handle.read()

    def assertOnlyTheFileAndItsLock(self):
        self.assertEqual(['.nova.conf.nova-ext-lock', 'nova.conf'],
                         sorted(os.listdir(self.dir)))


class TestRacingProcesses(FileCase):

    def test_two_processes_racing_lose_no_edit(self):
        start = os.path.join(self.dir, 'start')
        racers = [subprocess.Popen(
            [sys.executable, '-c', RACER, self.path, name, start],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name in ('a', 'b')]
        deadline = time.monotonic() + 120
        while not all(os.path.exists(start + '.' + name)
                      for name in ('a', 'b')):
            self.assertLess(time.monotonic(), deadline, 'racers not ready')
            time.sleep(0.05)
        # both have imported Nova: the start file lets them race
        open(start, 'w').close()
        for racer in racers:
            out, err = racer.communicate(timeout=300)
            self.assertEqual(0, racer.returncode, err)
        view = configure.oslo_view(self.path)
        for name in ('a', 'b'):
            for i in range(EDITS_PER_PROCESS):
                self.assertEqual(
                    [str(i)], view['placement'].get('%s_%d' % (name, i)),
                    '%s_%d lost' % (name, i))
        self.assertEqual(['RegionOne'], view['placement']['region_name'])
        for name in ('start', 'start.a', 'start.b'):
            os.unlink(os.path.join(self.dir, name))
        self.assertOnlyTheFileAndItsLock()


class TestSignals(FileCase):
    """Given a process editing the file back and forth, when a signal ends
    it at a random moment, then the file is the old or the new one and
    nothing is left beside it.

    The editor is a fresh interpreter, as an operator's command is: a child
    forked from the test runner would inherit its threads' locks (one held
    at the fork is held for ever in the child), its signal mask and its
    handlers, and a signal could then fail to end it for reasons that are
    the runner's, not nova-ext's.
    """

    def _reap(self, editor, sig):
        try:
            editor.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with open('/proc/%d/status' % editor.pid) as status:
                state = [line.strip() for line in status
                         if line.startswith(('State', 'Sig', 'Shd'))]
            editor.kill()
            editor.wait()
            self.fail('the editor outlived its %s: %s' % (
                signal.Signals(sig).name, '; '.join(state)))

    def test_a_signal_leaves_the_old_or_the_new_file(self):
        # beside the edited file's directory, which must hold nothing else
        aside = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, aside)
        configure.configure_file(self.path, 'nova', ['quota'])
        applied = self.read()
        configure.configure_file(self.path, 'nova', ['quota'], undo=True)
        self.assertEqual(BASE, self.read())
        rng = random.Random(34)
        for number, sig in enumerate(
                (signal.SIGKILL, signal.SIGTERM, signal.SIGINT) * 2):
            ready = os.path.join(aside, 'ready%d' % number)
            editor = subprocess.Popen(
                [sys.executable, '-c', TOGGLER, self.path, ready],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 120
            while not os.path.exists(ready):
                self.assertIsNone(editor.poll(), 'the editor died')
                self.assertLess(time.monotonic(), deadline,
                                'the editor did not start')
                time.sleep(0.01)
            time.sleep(rng.uniform(0.05, 0.4))
            editor.send_signal(sig)
            self._reap(editor, sig)
            # an uncaught KeyboardInterrupt ends Python by SIGINT too
            self.assertEqual(-sig, editor.returncode, sig)
            self.assertIn(self.read(), (BASE, applied), sig)
            leftovers = set(os.listdir(self.dir)) - {
                'nova.conf', '.nova.conf.nova-ext-lock'}
            if sig == signal.SIGKILL:
                # killed between naming the new file and the rename (a
                # few microseconds): the next edit removes it
                configure.configure_file(self.path, 'nova', [],
                                         assignments=['DEFAULT.debug=true'])
            else:
                self.assertEqual(set(), leftovers, sig)
            self.assertOnlyTheFileAndItsLock()


class TestIdentity(FileCase):

    def test_owner_mode_acl_and_xattrs_survive(self):
        os.chmod(self.path, 0o640)
        if os.getuid() == 0:
            os.chown(self.path, 1234, 5678)
        try:
            if shutil.which('setfacl'):
                subprocess.run(['setfacl', '-m', 'u:%d:r' % ACL_UID,
                                self.path], check=True)
            else:
                os.setxattr(self.path, ACL_XATTR, acl_xattr(ACL_UID))
            os.setxattr(self.path, 'user.nova_ext_test', b'kept')
        except OSError as error:
            if error.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
                self.skipTest('no ACLs or user xattrs on %s' % self.dir)
            raise
        before = os.stat(self.path)
        acl = os.getxattr(self.path, ACL_XATTR)
        configure.configure_file(self.path, 'nova', ['quota', 'filters'])
        after = os.stat(self.path)
        self.assertIn('quota_driver = per_flavor', self.read())
        self.assertNotEqual(before.st_ino, after.st_ino)  # replaced whole
        self.assertEqual((before.st_uid, before.st_gid,
                          stat.S_IMODE(before.st_mode)),
                         (after.st_uid, after.st_gid,
                          stat.S_IMODE(after.st_mode)))
        self.assertEqual(acl, os.getxattr(self.path, ACL_XATTR))
        self.assertEqual(b'kept',
                         os.getxattr(self.path, 'user.nova_ext_test'))
        self.assertOnlyTheFileAndItsLock()

    def test_hard_linked_file_is_refused(self):
        other = os.path.join(self.dir, 'nova-api.conf')
        os.link(self.path, other)
        error = self.assertRaises(configure.ConfigureError,
                                  configure.configure_file, self.path,
                                  'nova', ['quota'])
        self.assertIn('has 2 hard links', str(error))
        self.assertEqual(BASE, self.read())
        self.assertEqual(['nova-api.conf', 'nova.conf'],
                         sorted(os.listdir(self.dir)))
