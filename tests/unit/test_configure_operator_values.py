# SPDX-License-Identifier: Apache-2.0
"""``nova-ext-manage configure``, run as an operator runs it (the console
script, a real process), on what an operator's file holds (issue 42):

- ``--undo`` takes out only values configure writes; any other value is
  the operator's, stays, and a note names it;
- a ``--set`` value holding ``$`` reads back, through oslo.config, as given;
- with several ``--config-file``s every one is read, verified, locked and
  checked writable before any is written.
"""

import os
import shutil
import subprocess
import sys
import tempfile

from oslo_config import cfg
import testtools

MANAGE = os.path.join(os.path.dirname(sys.executable), 'nova-ext-manage')
MYSQL = 'mysql+pymysql://nova:SuperLeak123@db.example/nova'


class ConfigureProcessCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    @staticmethod
    def read(path):
        with open(path) as handle:
            return handle.read()

    def manage(self, *argv):
        result = subprocess.run([MANAGE, 'configure'] + list(argv),
                                capture_output=True, text=True, timeout=120)
        self.assertNotIn('Traceback', result.stderr)
        return result


class TestUndoTakesOutOnlyOurs(ConfigureProcessCase):

    # (file, arguments, the line that must stay, what the note names)
    CASES = [
        ('[nova_ext]\nrequest_filters = maintenance\n',
         ['--all'], 'request_filters = maintenance',
         '[nova_ext] request_filters = maintenance'),
        ('[nova_ext]\nquota_driver = my_driver\n',
         ['--quota'], 'quota_driver = my_driver',
         '[nova_ext] quota_driver = my_driver'),
        ('[nova_ext]\nguest_mutators = oem_strings\n',
         ['--libvirt-driver'], 'guest_mutators = oem_strings',
         '[nova_ext] guest_mutators = oem_strings'),
        ('[database]\nconnection = %s\n' % MYSQL,
         ['--set', 'database.connection=sqlite://'],
         'connection = %s' % MYSQL, '[database] connection = '),
        ('[placement]\nregion_name = RegionTwo\n',
         ['--set', 'placement.region_name=RegionOne'],
         'region_name = RegionTwo', '[placement] region_name = RegionTwo'),
    ]

    def test_operator_values_stay_and_are_named(self):
        for text, argv, kept, named in self.CASES:
            path = self.write('nova.conf', text)
            result = self.manage('nova', '--config-file', path, '--undo',
                                 *argv)
            self.assertEqual(0, result.returncode, result.stderr)
            self.assertIn(kept, self.read(path), argv)
            self.assertIn(named, result.stderr, argv)
            self.assertIn('left', result.stderr)
            self.assertNotIn('SuperLeak123', result.stderr + result.stdout)

    def test_what_configure_wrote_goes(self):
        path = self.write('nova.conf', '[DEFAULT]\ndebug = true\n')
        argv = ['--all', '--set', 'placement.region_name=RegionOne',
                '--set', 'placement.password=Pa$word9']
        self.assertEqual(0, self.manage('nova', '--config-file', path,
                                        *argv).returncode)
        result = self.manage('nova', '--config-file', path, '--undo', *argv)
        self.assertEqual(0, result.returncode, result.stderr)
        # compute_driver: --undo names Nova's libvirt driver (it cannot
        # know what was there before)
        self.assertEqual('[DEFAULT]\ndebug = true\n'
                         'compute_driver = libvirt.LibvirtDriver\n',
                         self.read(path))
        self.assertNotIn('left', result.stderr)


class TestDollarReadsBackAsGiven(ConfigureProcessCase):

    VALUES = ['Pa$word9', '/var/lib/$nosuchvar', '${state_path}/x', '$',
              '$$', 'a$$$b']

    def test_each_value_reads_back_through_oslo_config(self):
        path = self.write('nova.conf', '[DEFAULT]\nstate_path = /s\n')
        argv = []
        for index, value in enumerate(self.VALUES):
            argv += ['--set', 'placement.value%d=%s' % (index, value)]
        result = self.manage('nova', '--config-file', path, *argv)
        self.assertEqual(0, result.returncode, result.stderr)
        conf = cfg.ConfigOpts()
        conf.register_opts([cfg.StrOpt('value%d' % index)
                            for index in range(len(self.VALUES))],
                           group='placement')
        conf.register_opt(cfg.StrOpt('state_path'))
        conf([], default_config_files=[path], default_config_dirs=[])
        for index, value in enumerate(self.VALUES):
            self.assertEqual(value, conf.placement['value%d' % index])


class TestSeveralFilesCheckedFirst(ConfigureProcessCase):

    def _second_file_fails(self, make_second):
        first = self.write('a/nova.conf', '[DEFAULT]\ndebug = true\n')
        second = make_second()
        result = self.manage('nova', '--config-file', first,
                             '--config-file', second, '--quota')
        self.assertEqual(1, result.returncode)
        self.assertEqual(1, len(result.stderr.splitlines()), result.stderr)
        self.assertIn(second, result.stderr)
        self.assertEqual('[DEFAULT]\ndebug = true\n', self.read(first))
        self.assertEqual('', result.stdout)

    def test_unparsable_second_file(self):
        self._second_file_fails(
            lambda: self.write('b/nova.conf', '[DEFAULT]\n  orphan\n'))

    def test_second_file_whose_lock_cannot_be_taken(self):
        def make():
            path = self.write('b/nova.conf', '[DEFAULT]\n')
            os.mkdir(os.path.join(self.dir, 'b', '.nova.conf.nova-ext-lock'))
            return path
        self._second_file_fails(make)

    def test_second_file_in_a_directory_nothing_can_be_written_to(self):
        def make():
            path = self.write('b/nova.conf', '[DEFAULT]\n')
            # the lock file first: it is made before the new content
            open(os.path.join(self.dir, 'b', '.nova.conf.nova-ext-lock'),
                 'w').close()
            directory = os.path.join(self.dir, 'b')
            if subprocess.run(['chattr', '+i', directory]).returncode:
                self.skipTest('no chattr +i here')
            self.addCleanup(subprocess.run, ['chattr', '-i', directory])
            return path
        self._second_file_fails(make)


class TestFullDisk(ConfigureProcessCase):

    def test_a_full_disk_is_said_and_the_file_is_unchanged(self):
        mount = os.path.join(self.dir, 'fs')
        os.mkdir(mount)
        if subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=4k', 'tmpfs',
                           mount], capture_output=True).returncode:
            self.skipTest('cannot mount a tmpfs here (not root?)')
        self.addCleanup(subprocess.run, ['umount', mount])
        text = '[DEFAULT]\n' + '# the operator\'s notes\n' * 150
        path = os.path.join(mount, 'nova.conf')
        with open(path, 'w') as handle:
            handle.write(text)
        result = self.manage('nova', '--config-file', path, '--all')
        self.assertEqual(1, result.returncode)
        self.assertEqual(
            'nova-ext-manage: %s: cannot write the new file: No space left '
            'on device; the old one is unchanged' % path,
            result.stderr.strip())
        self.assertEqual(text, self.read(path))
        self.assertEqual(['.nova.conf.nova-ext-lock', 'nova.conf'],
                         sorted(os.listdir(mount)))
