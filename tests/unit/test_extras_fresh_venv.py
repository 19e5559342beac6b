# SPDX-License-Identifier: Apache-2.0
"""Each extra in a fresh venv holding only it (issue 42: the ``sandbox``
extra lacked oslotest, so ``pip install -e '.[sandbox]'`` gave a sandbox
that could not start).

Opt-in: ``NOVA_EXT_TEST_EXTRAS=1 ./run-tests.sh unit
tests.unit.test_extras_fresh_venv`` (or ``NOVA_EXT_TEST_EXTRAS=sandbox``,
a comma-separated list of extras; ``base`` is the product alone). Each venv
installs Nova and its dependencies (from pip's cache where it holds them,
PyPI otherwise): 10 min 51 s for the three on the 2-core CI machine, too
slow for every run of the unit tier.
"""

import os
import subprocess
import sys
import tempfile

import testtools

import nova_ext

REPO = os.path.dirname(os.path.dirname(os.path.abspath(nova_ext.__file__)))
RELEASE = os.environ.get('NOVA_EXT_NOVA_RELEASE')
CONSTRAINTS = os.path.join(REPO, 'constraints-%s.txt' % RELEASE
                           if RELEASE else 'constraints.txt')

# What each extra promises, run in its venv: a command that must exit 0.
PROMISES = {
    # the product alone: the operator commands start
    '': [['nova-ext-manage', '--help'], ['nova-ext-status', '--help'],
         ['python', '-c', 'import nova_ext.cmd.manage, nova_ext.conf']],
    # the sandbox starts its cloud and runs the built-in scenario
    'sandbox': [['python', '-c', 'from nova_ext.sandbox import scenario'],
                ['nova-ext-sandbox', '--state-dir', '{tmp}/state']],
    # simulate --plot draws with matplotlib
    'simulator': [['python', '-c', 'import matplotlib.pyplot, '
                   'nova_ext.simulator.engine']],
}


class TestEachExtraInAFreshVenv(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if not os.environ.get('NOVA_EXT_TEST_EXTRAS'):
            self.skipTest('opt-in (minutes per extra): '
                          'NOVA_EXT_TEST_EXTRAS=1')

    def _install(self, extra, tmp):
        venv = os.path.join(tmp, 'venv')
        subprocess.run([sys.executable, '-m', 'venv', venv], check=True)
        target = '.[%s]' % extra if extra else '.'
        install = subprocess.run(
            [os.path.join(venv, 'bin', 'pip'), 'install', '-q', '-c',
             CONSTRAINTS, '-e', target], cwd=REPO, capture_output=True,
            text=True, env=dict(os.environ, PBR_VERSION='0.1.0'))
        self.assertEqual(0, install.returncode, install.stderr[-3000:])
        return venv

    def test_each_extra_keeps_its_promises(self):
        chosen = os.environ['NOVA_EXT_TEST_EXTRAS']
        for extra, commands in PROMISES.items():
            if chosen != '1' and (extra or 'base') not in chosen.split(','):
                continue
            with tempfile.TemporaryDirectory() as tmp:
                venv = self._install(extra, tmp)
                for command in commands:
                    argv = [os.path.join(venv, 'bin', command[0])] + [
                        arg.format(tmp=tmp) for arg in command[1:]]
                    result = subprocess.run(argv, capture_output=True,
                                            text=True, cwd=tmp,
                                            timeout=600)
                    self.assertEqual(0, result.returncode, '[%s] %s: %s' % (
                        extra, ' '.join(command),
                        (result.stdout + result.stderr)[-2000:]))
