# SPDX-License-Identifier: Apache-2.0
"""The system tier's harness runs the code it is asked to run: a service
started with another checkout's ``nova_ext`` (the burst benchmark's
``--before REF``) imports that one, not this repository's.
"""

import os
import shutil
import sys
import tempfile

import testtools

from tests.system import cloud

WHERE = "import nova_ext; print(nova_ext.__file__)"


class ServiceCodeTest(testtools.TestCase):
    """Given a checkout holding a ``nova_ext`` of its own, when a process
    is started as the cloud starts its services (``python -c``/``-m``,
    from the cloud's directory, with the checkout first on its path), then
    it imports the checkout's ``nova_ext``; started from this repository
    (the working directory of whoever runs the benchmark), it would not.
    """

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        self.checkout = os.path.join(self.dir, 'checkout')
        os.makedirs(os.path.join(self.checkout, 'nova_ext'))
        open(os.path.join(self.checkout, 'nova_ext', '__init__.py'),
             'w').close()

    def imported(self, cwd):
        log = os.path.join(self.dir, 'where%d.log' % len(os.listdir(
            self.dir)))
        process = self.useFixture(cloud.service_process(
            [sys.executable, '-c', WHERE], log, cwd, code=self.checkout))
        process.process.wait(timeout=60)
        with open(log + '.out') as output:
            return os.path.dirname(output.read().strip())

    def test_a_service_imports_the_checkout_it_is_given(self):
        run_dir = os.path.join(self.dir, 'cloud')
        os.mkdir(run_dir)
        self.assertEqual(os.path.join(self.checkout, 'nova_ext'),
                         self.imported(run_dir))

    def test_from_this_repository_it_would_import_this_one(self):
        # the class of the bug: the working directory comes first
        self.assertEqual(os.path.join(cloud._repo_root(), 'nova_ext'),
                         self.imported(cloud._repo_root()))
