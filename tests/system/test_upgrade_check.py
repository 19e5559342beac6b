# SPDX-License-Identifier: Apache-2.0
"""``nova-ext-status upgrade check`` on real databases and processes.

Given MariaDB databases synced by ``nova-manage`` and ``nova-ext-manage db
sync`` and a conductor that activated the per_flavor quota driver, the check
passes (exit 0); before any service started it warns (exit 1: nothing
proves the driver active); nova-ext's tables behind the head migration, or
a conductor that did not activate the driver, fail it (exit 2) with the fix
named.
"""

import json
import os
import subprocess
import time

from tests.system import processes
from tests.system import test_quota_activation


class UpgradeCheckTest(test_quota_activation.ActivationCloud):

    def upgrade_check(self, conf=None):
        result = subprocess.run(
            [os.path.join(processes.BIN, 'nova-ext-status'),
             '--config-file', conf or self.conf, 'upgrade', 'check',
             '--json'],
            capture_output=True, text=True, timeout=120)
        self.assertNotIn('Traceback', result.stdout + result.stderr)
        report = json.loads(result.stdout)
        return result.returncode, {check['check']: (check['result'],
                                                    check['details'])
                                   for check in report['checks']}

    def wait_until_recorded(self):
        for _attempt in range(30):
            rc, checks = self.upgrade_check()
            if checks['Quota activation'][0] == 0:
                return rc, checks
            time.sleep(1)
        return rc, checks

    def test_a_consistent_deployment_passes_and_each_fault_is_named(self):
        # nova-ext's tables missing (never synced, or dropped)
        with self.dbs.connect() as connection:
            connection.cursor().execute(
                'DROP TABLE %(db)s.nova_ext_flavor_quotas, '
                '%(db)s.nova_ext_activations, %(db)s.nova_ext_spread_claims, '
                '%(db)s.nova_ext_alembic_version'
                % {'db': self.dbs.databases['api']})
        rc, checks = self.upgrade_check()
        self.assertEqual(2, rc, checks)
        code, details = checks['nova-ext database']
        self.assertEqual(2, code)
        self.assertIn('run "nova-ext-manage db sync"', details)

        processes.run('nova-ext-manage', '--config-file', self.conf,
                      'db', 'sync')
        # no nova-api or conductor has started yet: nothing proves the
        # driver active, so no Success
        rc, checks = self.upgrade_check()
        self.assertEqual(1, rc, checks)
        code, details = checks['Quota activation']
        self.assertEqual(1, code, details)
        self.assertIn('no nova-api or nova-conductor has started', details)
        conductor = self.start_conductor(self.conf, 'conductor.log')
        conductor.wait_for_log(test_quota_activation.ACTIVE)
        rc, checks = self.wait_until_recorded()
        self.assertEqual(0, rc, checks)
        self.assertEqual({'Nova release', 'Nova internals',
                          'Libvirt driver shim', 'nova-ext database',
                          'Scheduler hooks', 'Quota activation',
                          'Flavor extra specs',
                          'Aggregate metadata'},
                         set(checks))

        # a conductor without the quota driver
        plain = self.write_conf('plain.conf', 'sys-b', plugin=False,
                                quota_driver=False)
        other = self.start_conductor(plain, 'plain.log')
        other.wait_for_log('Starting conductor node')
        rc, checks = self.upgrade_check()
        self.assertEqual(2, rc, checks)
        code, details = checks['Quota activation']
        self.assertIn('nova-conductor on sys-b has not activated nova-ext',
                      details)
        self.assertEqual(0, checks['nova-ext database'][0])
