# SPDX-License-Identifier: Apache-2.0
"""The sandbox command, run as a user runs it (README command 1)."""

import os
import subprocess
import sys

import fixtures
import testtools


class SandboxCommandTest(testtools.TestCase):

    def test_default_scenario_meets_every_expectation(self):
        state = self.useFixture(fixtures.TempDir()).path
        run = subprocess.run(
            [sys.executable, '-m', 'nova_ext.cmd.sandbox',
             '--state-dir', state],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(0, run.returncode, run.stderr[-3000:])
        out = run.stdout
        self.assertIn('sandbox: every step had the expected outcome', out)
        self.assertIn("rejected: HTTP 400 Validation failed for extra spec "
                      "'nova_ext:spread_level'", out)
        rows = {line.split()[0]: line.split() for line in out.splitlines()
                if line.startswith('web-')}
        racks = {rows['web-%d' % i][4] for i in (1, 2, 3)}
        self.assertEqual({'r1', 'r2', 'r3'}, racks)
        self.assertIn('No valid host', ' '.join(rows['web-4']))
        with open(os.path.join(state, 'nova.conf')) as f:
            self.assertIn('nova_ext.scheduler.filters.all_filters', f.read())
        # What the person reads is the sandbox's: Nova's own log lines
        # (import notices, thread pools shutting down after the scenario)
        # are in nova.log, not before the table.
        self.assertEqual('', run.stderr)
        self.assertTrue(out.startswith('nova-ext sandbox: '), out[:300])
        self.assertNotIn(' INFO ', out)
        with open(os.path.join(state, 'nova.log')) as f:
            self.assertIn('Starting compute node', f.read())
