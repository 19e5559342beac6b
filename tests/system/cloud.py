# SPDX-License-Identifier: Apache-2.0
"""A multi-process Nova on loopback: placement, nova-api, nova-conductor,
one or more nova-scheduler processes and nova-compute processes (fake
driver), over this machine's MariaDB and RabbitMQ, each a separate process
started through :mod:`tests.system.launch`.

There is no keystone: nova-api's paste pipeline skips keystonemiddleware
and takes the identity headers keystone would set (X-User-Id, X-Project-Id,
X-Roles) from the caller; :meth:`LoopbackNova.request` sends them for a
``user:project`` pair (user ``admin`` gets the admin role). Services talk to
placement with a static admin token (placement's ``noauth2``).
"""

import json
import os
import sys
import urllib.error
import urllib.request

import fixtures

from tests.system import processes

IMAGE = '155d900f-4e14-4e4c-a73d-069cbf4541e6'  # Nova's GlanceFixture image1
MICROVERSION = '2.95'


class LoopbackNova(fixtures.Fixture):

    COMPUTES = ('cmp1', 'cmp2')

    def __init__(self, nova_ext_conf='', computes=COMPUTES, schedulers=1,
                 scheduler_workers=1):
        """``schedulers`` nova-scheduler processes, each with
        ``scheduler_workers`` workers ([scheduler] workers), and one
        fake-driver nova-compute per name in ``computes``.
        """
        super().__init__()
        self.nova_ext_conf = nova_ext_conf
        self.COMPUTES = tuple(computes)
        self.schedulers = schedulers
        self.scheduler_workers = scheduler_workers

    def _setUp(self):
        processes.require_services()
        self.dir = self.useFixture(fixtures.TempDir()).path
        try:
            self._start_cloud()
        except Exception as error:
            raise AssertionError('the loopback cloud did not start: %s\n%s'
                                 % (error, self.logs()))

    def _start_cloud(self):
        self.dbs = self.useFixture(processes.Databases(
            'api', 'cell0', 'cell1', 'placement'))
        self.vhost = self.useFixture(processes.Vhost())
        self.placement_port = processes.free_port()
        self.api_port = processes.free_port()
        self.conf = self._write('nova.conf', self._nova_conf(db=True))
        # One placement process serves every test's bursts (50 creates at
        # once): its database pool is sized for them, as a deployment sizes
        # it for its placement workers. With oslo.db's default (5 + 10
        # overflow) a loaded CI machine timed out on the pool and placement
        # answered 500, which made computes reschedule.
        self._write('placement.conf', '\n'.join([
            '[placement_database]',
            'connection = %s' % self.dbs.url('placement', plugin=False),
            'max_pool_size = 20', 'max_overflow = 40',
            '[api]', 'auth_strategy = noauth2', '']))
        self._sync()
        self.placement = self._start('placement-api', 'placement.log', env={
            'OS_PLACEMENT_CONFIG_DIR': self.dir,
            'PORT': str(self.placement_port)})
        processes.http_get('http://127.0.0.1:%d/' % self.placement_port)
        self.conductor = self._start('nova-conductor', 'conductor.log',
                                     '--config-file', self.conf)
        self._start_schedulers()
        for host in self.COMPUTES:
            conf = self._write('%s.conf' % host, self._nova_conf(
                db=False, host=host))
            self._start('nova-compute', '%s.log' % host, '--config-file',
                        conf)
        api_dir = os.path.join(self.dir, 'api')
        os.mkdir(api_dir)
        processes.copy_api_paste(api_dir, trust_identity_headers=True)
        self._write('api/nova.conf', self._nova_conf(db=True) + (
            '[DEFAULT]\nlog_file = %s\n' % os.path.join(self.dir,
                                                        'api.log')))
        self.api = self._start('nova-api', 'api.log', env={
            'OS_NOVA_CONFIG_DIR': api_dir, 'PORT': str(self.api_port)})
        processes.http_get('http://127.0.0.1:%d/' % self.api_port)
        self._discover_computes()

    def _start_schedulers(self, plugin=True):
        # the first one shares the controller's nova.conf (host ctl)
        self.scheduler_processes = [self._start(
            'nova-scheduler', 'scheduler.log', '--config-file',
            self.conf if plugin else self._write('scheduler.conf', (
                self._nova_conf(db=True, plugin=False))))]
        self.scheduler = self.scheduler_processes[0]
        for number in range(2, self.schedulers + 1):
            conf = self._write('scheduler%d.conf' % number, self._nova_conf(
                db=True, host='sch%d' % number, plugin=plugin))
            self.scheduler_processes.append(self._start(
                'nova-scheduler', 'scheduler%d.log' % number,
                '--config-file', conf))

    def restart_schedulers(self, nova_ext_conf, plugin=True):
        """Every nova-scheduler stopped and started again with
        ``nova_ext_conf`` in place of the nova.conf text it had, and
        ``?plugin=nova_ext`` on its database URLs only if ``plugin``: the
        same cloud with nova-ext's scheduler features switched on or off
        (what ``nova-ext-manage configure [--undo]`` and a restart do).
        Returns once each has started its workers.
        """
        for process in self.scheduler_processes:
            process.stop()
            # the new process logs to a fresh file: its start is told by
            # its own lines
            for path in (process.log_path, process.log_path + '.out'):
                if os.path.exists(path):
                    os.replace(path, path + '.before-restart')
        self.nova_ext_conf = nova_ext_conf
        self._start_schedulers(plugin)
        for process in self.scheduler_processes:
            process.wait_for_log('Starting scheduler node',
                                 count=self.scheduler_workers)

    def _nova_conf(self, db, host='ctl', plugin=True):
        state = os.path.join(self.dir, 'state-' + host)
        os.makedirs(state, exist_ok=True)
        return processes.nova_conf(
            self.dbs, self.vhost, host, self.dir, [
                'auth_type = admin_token',
                'endpoint = http://127.0.0.1:%d' % self.placement_port,
                'token = admin',
            ], databases=db, plugin=plugin, extra='\n'.join([
                '[DEFAULT]',
                'compute_driver = fake.FakeDriverWithoutFakeNodes',
                'state_path = %s' % state,
                'vif_plugging_timeout = 0',
                '[scheduler]', 'workers = %d' % self.scheduler_workers,
                self.nova_ext_conf]))

    def _write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def _sync(self):
        processes.create_nova_databases(self.conf, self.dbs.url('cell0'))
        processes.run('placement-manage', '--config-file',
                      os.path.join(self.dir, 'placement.conf'), 'db', 'sync')

    def _start(self, service, log_name, *args, env=None):
        log = os.path.join(self.dir, log_name)
        argv = [sys.executable, '-m', 'tests.system.launch', service]
        argv += list(args)
        if service.startswith('nova-') and service != 'nova-api':
            argv += ['--log-file', log]
        return self.useFixture(processes.Process(
            argv, log, env=dict(os.environ, PYTHONPATH=_repo_root(),
                                **(env or {}))))

    def _discover_computes(self):
        processes.discover_computes(self.conf, lambda: [
            h['hypervisor_hostname'] for h in self.request(
                'GET', '/os-hypervisors')[1].get('hypervisors', [])],
            len(self.COMPUTES))

    def request(self, method, path, body=None, token='admin:admin'):
        """One call to nova-api; returns (HTTP status, decoded body)."""
        user, project = token.split(':')
        request = urllib.request.Request(
            'http://127.0.0.1:%d/v2.1%s' % (self.api_port, path),
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={'X-User-Id': user, 'X-Project-Id': project,
                     'X-Roles': ('admin,member,reader' if user == 'admin'
                                 else 'member,reader'),
                     'Content-Type': 'application/json',
                     'OpenStack-API-Version': 'compute ' + MICROVERSION})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                data = response.read()
                return response.status, json.loads(data) if data else {}
        except urllib.error.HTTPError as error:
            data = error.read()
            try:
                return error.code, json.loads(data)
            except ValueError:
                return error.code, {'raw': data.decode(errors='replace')}

    def logs(self):
        text = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith('.log') or name.endswith('.out'):
                with open(os.path.join(self.dir, name)) as f:
                    text.append('==> %s <==\n%s' % (name, f.read()[-3000:]))
        return '\n'.join(text)


def _repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
