# SPDX-License-Identifier: Apache-2.0
"""The quota driver activates in real nova-api and nova-conductor processes.

Given MariaDB databases synced by ``nova-manage`` and ``nova-ext-manage db
sync`` and a nova.conf whose database URLs carry ``?plugin=nova_ext``,
when nova-conductor and nova-api (Nova's WSGI application) start, then each
logs ``nova-ext: quota driver active`` before serving anything, records it,
and ``nova-ext-manage quota check`` finds them consistent; a conductor
started without the plugin is reported by the check and by the next
process that activates.
"""

import os
import subprocess
import sys
import time

import fixtures
import testtools

from tests.system import processes

ACTIVE = 'nova-ext: quota driver active: per_flavor'


# Nothing is scheduled; nova-conductor only needs a placement client.
NO_PLACEMENT = ['auth_type = none',
                'endpoint_override = http://127.0.0.1:9/placement']


class ActivationCloud(testtools.TestCase):
    """MariaDB databases synced for one cell, and the processes' nova.conf."""

    def setUp(self):
        super().setUp()
        processes.require_services()
        self.dbs = self.useFixture(processes.Databases('api', 'cell1'))
        self.vhost = self.useFixture(processes.Vhost())
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.conf = self.write_conf('nova.conf', 'sys-a')
        processes.run('nova-manage', '--config-file', self.conf,
                      'api_db', 'sync')
        processes.run('nova-manage', '--config-file', self.conf,
                      'db', 'sync', '--local_cell')
        processes.run('nova-manage', '--config-file', self.conf,
                      'cell_v2', 'create_cell', '--name', 'cell1')
        processes.run('nova-ext-manage', '--config-file', self.conf,
                      'db', 'sync')

    def write_conf(self, name, host, plugin=True, quota_driver=True,
                   directory=None):
        path = os.path.join(directory or self.dir, name)
        with open(path, 'w') as f:
            f.write(processes.nova_conf(
                self.dbs, self.vhost, host, self.dir, NO_PLACEMENT,
                plugin=plugin,
                extra='[nova_ext]\nquota_driver = per_flavor\n'
                if quota_driver else ''))
        return path

    def start_conductor(self, conf, log_name):
        return self.useFixture(processes.Process(
            [os.path.join(processes.BIN, 'nova-conductor'),
             '--config-file', conf, '--log-file',
             os.path.join(self.dir, log_name)],
            os.path.join(self.dir, log_name)))

    def start_api(self):
        config_dir = os.path.join(self.dir, 'api')
        os.mkdir(config_dir)
        processes.copy_api_paste(config_dir)
        conf = self.write_conf('nova.conf', 'sys-a', directory=config_dir)
        with open(conf, 'a') as f:
            f.write('[DEFAULT]\nlog_file = %s\n'
                    % os.path.join(self.dir, 'api.log'))
        port = processes.free_port()
        env = dict(os.environ, OS_NOVA_CONFIG_DIR=config_dir,
                   WSGI_PORT=str(port))
        api = self.useFixture(processes.Process(
            [sys.executable, '-c', processes.WSGI_SERVER],
            os.path.join(self.dir, 'api.log'), env=env))
        return api, 'http://127.0.0.1:%d/' % port

    def quota_check(self):
        result = subprocess.run(
            [os.path.join(processes.BIN, 'nova-ext-manage'),
             '--config-file', self.conf, 'quota', 'check'],
            capture_output=True, text=True, timeout=120)
        return result.returncode, result.stdout + result.stderr


class QuotaActivationTest(ActivationCloud):

    def test_api_and_conductor_activate_and_agree(self):
        conductor = self.start_conductor(self.conf, 'conductor.log')
        log = conductor.wait_for_log(ACTIVE)
        self.assertIn('in nova-conductor pid %d' % conductor.process.pid,
                      log)

        api, url = self.start_api()
        log = api.wait_for_log(ACTIVE)
        self.assertIn('in nova-osapi_compute', log)
        self.assertEqual(200, processes.http_get(url))  # the API serves

        # Activations are recorded from a background thread.
        for _attempt in range(20):
            rc, report = self.quota_check()
            if rc == 0 or 'nova-ext-manage:' in report:
                break
            time.sleep(1)
        self.assertEqual(0, rc, report)
        self.assertRegex(report, r'nova-conductor\s*\|\s*sys-a\s*\|\s*'
                                 r'per_flavor')
        self.assertRegex(report, r'nova-osapi_compute\s*\|\s*sys-a\s*\|\s*'
                                 r'per_flavor')

        # A second conductor whose nova.conf names no quota driver. (It
        # would load the plugin anyway: the cell mapping's database URL,
        # written by "nova-manage cell_v2 create_cell" from [database],
        # carries ?plugin=nova_ext too.)
        plain = self.write_conf('plain.conf', 'sys-b', plugin=False,
                                quota_driver=False)
        other = self.start_conductor(plain, 'plain.log')
        other.wait_for_log('Starting conductor node')
        self.assertNotIn('quota driver active', other.log())
        rc, report = self.quota_check()
        self.assertEqual(1, rc, report)
        self.assertRegex(report, r'nova-conductor\s*\|\s*sys-b\s*\|\s*-\s*'
                                 r'\|\s*never\s*\|\s*MISMATCH')

        # The next process that activates says so in its log at start.
        restarted = self.start_conductor(
            self.write_conf('c.conf', 'sys-c'),
            'conductor-c.log')
        restarted.wait_for_log(
            'nova-conductor on sys-b has not activated nova-ext')
        # as a warning: a service that has not recorded an activation may
        # be starting right now (services start in any order); quota check
        # above is the one to say MISMATCH
        said = [line for line in restarted.log().splitlines()
                if 'nova-conductor on sys-b has not activated' in line]
        self.assertIn(' WARNING ', said[0])


class SuperconductorQuotaCheckTest(testtools.TestCase):
    """Two cells' worth of conductors, as DevStack and Nova's docs lay them
    out: a superconductor (API database, cell0) that activates the driver
    and a cell conductor (cell1's database only, no nova-ext) that needs
    none. ``quota check`` is OK; a second top-level conductor without the
    driver is named.
    """

    def setUp(self):
        super().setUp()
        processes.require_services()
        self.dbs = self.useFixture(processes.Databases('api', 'cell0',
                                                       'cell1'))
        self.vhost = self.useFixture(processes.Vhost())
        self.cell_vhost = self.useFixture(processes.Vhost())
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.conf = self.write('nova.conf', processes.nova_conf(
            self.dbs, self.vhost, 'super', self.dir, NO_PLACEMENT,
            cell_database='cell0',
            extra='[nova_ext]\nquota_driver = per_flavor\n'))
        self.cell_conf = self.write('nova_cell1.conf', processes.nova_conf(
            self.dbs, self.cell_vhost, 'cell1-conductor', self.dir,
            NO_PLACEMENT, databases=False,
            extra='[database]\nconnection = %s\n' % self.dbs.url(
                'cell1', plugin=False)))
        processes.create_nova_databases(
            self.conf, self.dbs.url('cell0', False), cells=[
                ('cell1', self.dbs.url('cell1', False),
                 self.cell_vhost.transport_url, self.cell_conf)])

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def start_conductor(self, conf, name):
        log = os.path.join(self.dir, name + '.log')
        return self.useFixture(processes.Process(
            [os.path.join(processes.BIN, 'nova-conductor'),
             '--config-file', conf, '--log-file', log], log))

    def quota_check(self):
        result = subprocess.run(
            [os.path.join(processes.BIN, 'nova-ext-manage'),
             '--config-file', self.conf, 'quota', 'check'],
            capture_output=True, text=True, timeout=120)
        return result.returncode, result.stdout + result.stderr

    def test_cell_conductor_needs_nothing_superconductor_must_agree(self):
        self.start_conductor(self.conf, 'super').wait_for_log(ACTIVE)
        cell = self.start_conductor(self.cell_conf, 'cell1-conductor')
        cell.wait_for_log('Starting conductor node')
        self.assertNotIn('quota driver', cell.log())
        # the superconductor records from a background thread
        for _attempt in range(20):
            rc, report = self.quota_check()
            if rc == 0 or 'nova-ext-manage:' in report:
                break
            time.sleep(1)
        self.assertEqual(0, rc, report)
        self.assertRegex(report, r'nova-conductor\s*\|\s*super\s*\|\s*'
                                 r'per_flavor\s*\|[^|]+\|\s*ok')
        self.assertRegex(report, r'nova-conductor\s*\|\s*cell1-conductor\s*'
                                 r'\|\s*-\s*\|\s*not needed \(cell '
                                 r'conductor\)\s*\|\s*ok')

        # a second top-level conductor (cell0, API database) without the
        # driver: the check names it
        plain = self.write('plain.conf', processes.nova_conf(
            self.dbs, self.vhost, 'super-b', self.dir, NO_PLACEMENT,
            plugin=False, cell_database='cell0'))
        self.start_conductor(plain, 'super-b').wait_for_log(
            'Starting conductor node')
        for _attempt in range(20):
            rc, report = self.quota_check()
            if 'super-b' in report:
                break
            time.sleep(1)
        self.assertEqual(1, rc, report)
        self.assertRegex(report, r'nova-conductor\s*\|\s*super-b\s*\|\s*-\s*'
                                 r'\|\s*never\s*\|\s*MISMATCH')
        self.assertRegex(report, r'cell1-conductor.*\|\s*ok')
