# SPDX-License-Identifier: Apache-2.0
"""nova-ext's policy rules are listed where operators look for them."""

import os
import subprocess
import sys

import testtools

from nova_ext import policies


class SampleGeneratorTest(testtools.TestCase):

    def test_oslopolicy_sample_generator_lists_the_rules(self):
        # the entry point an operator's tooling reads, through the command
        # they run, from the installed package's metadata
        generator = os.path.join(os.path.dirname(sys.executable),
                                 'oslopolicy-sample-generator')
        sample = subprocess.run(
            [generator, '--namespace', 'nova_ext'], check=True,
            capture_output=True, text=True).stdout
        for rule in policies.list_rules():
            self.assertIn('#"%s": "%s"' % (rule.name, rule.check_str),
                          sample)
        self.assertIn('POST  /servers', sample)
