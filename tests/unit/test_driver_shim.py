# SPDX-License-Identifier: Apache-2.0
"""``nova-ext-manage driver install|remove|check`` against a scratch
``nova/virt`` directory (the real one is exercised by
tests/functional/test_libvirt_driver.py).
"""

import os
import resource
import shutil
import subprocess
import sys
import tempfile

import testtools

from nova_ext.virt.libvirt import shim


class TestShim(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.virt_dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.virt_dir)
        self.path = os.path.join(self.virt_dir, 'nova_ext_libvirt.py')

    def test_install_is_idempotent_and_remove_undoes_it(self):
        self.assertIn('installed:', shim.install(self.virt_dir))
        with open(self.path) as f:
            self.assertIn('from nova_ext.virt.libvirt.driver import '
                          'LibvirtDriver', f.read())
        self.assertIn('already installed', shim.install(self.virt_dir))
        os.mkdir(os.path.join(self.virt_dir, '__pycache__'))
        compiled = os.path.join(self.virt_dir, '__pycache__',
                                'nova_ext_libvirt.cpython-311.pyc')
        open(compiled, 'w').close()
        self.assertIn('removed:', shim.remove(self.virt_dir))
        self.assertFalse(os.path.exists(self.path))
        self.assertFalse(os.path.exists(compiled))
        self.assertIn('not installed', shim.remove(self.virt_dir))
        self.assertEqual([], [n for n in os.listdir(self.virt_dir)
                              if n != '__pycache__'])

    def test_only_a_file_that_is_exactly_ours_is_touched(self):
        # Our marker line with other text (an edited copy), one byte more,
        # a symlink to our text: each is somebody else's file.
        ours_elsewhere = os.path.join(self.virt_dir, 'elsewhere.py')
        with open(ours_elsewhere, 'w') as f:
            f.write(shim.CONTENT)
        for make in (
                lambda: self._write(shim.MARKER + '\nfrom x import y\n'),
                lambda: self._write(shim.CONTENT + '\n'),
                lambda: self._write('# somebody else\n'),
                lambda: os.symlink(ours_elsewhere, self.path)):
            make()
            before = os.readlink(self.path) if os.path.islink(
                self.path) else open(self.path).read()
            for action in (shim.install, shim.remove):
                error = self.assertRaises(shim.ShimError, action,
                                          self.virt_dir)
                self.assertIn('not the file nova-ext writes', str(error))
            self.assertEqual(before, os.readlink(self.path) if os.path.islink(
                self.path) else open(self.path).read())
            os.remove(self.path)

    def _write(self, text):
        with open(self.path, 'w') as f:
            f.write(text)

    def test_check_without_shim_says_what_to_run(self):
        ok, lines = shim.check(self.virt_dir)
        self.assertFalse(ok)
        self.assertIn('(absent)', lines[0])
        self.assertEqual('run: nova-ext-manage driver install', lines[-1])

    def test_unwritable_nova_is_refused_clearly(self):
        # as an operator without the rights to Nova's installation
        os.chmod(self.virt_dir, 0o755)
        command = [sys.executable, '-c',
                   'import sys; from nova_ext.virt.libvirt import shim\n'
                   'try:\n'
                   '    shim.install(sys.argv[1])\n'
                   'except shim.ShimError as e:\n'
                   '    sys.exit(str(e))\n',
                   self.virt_dir]
        if os.geteuid() == 0:
            command = ['setpriv', '--reuid=65534', '--regid=65534',
                       '--clear-groups'] + command
        else:
            os.chmod(self.virt_dir, 0o555)
            self.addCleanup(os.chmod, self.virt_dir, 0o755)
        result = subprocess.run(command, capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.dirname(
                                    os.path.dirname(__file__))))
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertIn("cannot write to Nova's package directory",
                      result.stderr)
        self.assertIn('Permission denied', result.stderr)
        self.assertFalse(os.path.exists(self.path))

    def test_a_failed_write_leaves_nothing_in_nova_s_package(self):
        # issue 42: under ulimit -f 0 the temporary file stayed behind,
        # empty, in nova/virt, and the error was a traceback
        def no_file_may_grow():
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        result = subprocess.run(
            [sys.executable, '-c',
             'import sys; from nova_ext.virt.libvirt import shim\n'
             'try:\n'
             '    shim.install(sys.argv[1])\n'
             'except shim.ShimError as e:\n'
             '    sys.exit(str(e))\n', self.virt_dir],
            capture_output=True, text=True, preexec_fn=no_file_may_grow)
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertEqual('cannot write %s: File too large' % self.path,
                         result.stderr.strip())
        self.assertEqual([], os.listdir(self.virt_dir))

    def test_source_checkout_of_nova_is_found_where_it_is(self):
        # DevStack's Nova: a source tree on the path (pip install -e)
        checkout = os.path.join(self.virt_dir, 'nova-src')
        package = os.path.join(checkout, 'nova', 'virt')
        os.makedirs(package)
        for directory in (os.path.dirname(package), package):
            open(os.path.join(directory, '__init__.py'), 'w').close()
        result = subprocess.run(
            [sys.executable, '-c', 'from nova_ext.virt.libvirt import shim;'
             'print(shim.install())'],
            capture_output=True, text=True,
            env=dict(os.environ, PYTHONPATH=checkout))
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn(os.path.join(package, 'nova_ext_libvirt.py'),
                      result.stdout)
        self.assertTrue(os.path.isfile(
            os.path.join(package, 'nova_ext_libvirt.py')))

    def test_nova_virt_dir_is_where_python_finds_nova(self):
        import nova.virt
        self.assertEqual(os.path.dirname(nova.virt.__file__),
                         shim.nova_virt_dir())
