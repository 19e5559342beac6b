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
import subprocess
import sys
import time
import urllib.error
import urllib.request

import fixtures

from tests.system import processes

IMAGE = '155d900f-4e14-4e4c-a73d-069cbf4541e6'  # Nova's GlanceFixture image1
MICROVERSION = '2.95'


# nova_ext.quota.db.sync to a given revision, with nova.conf as the
# services read it: python -c SYNC_TO_REVISION NOVA_CONF REVISION
SYNC_TO_REVISION = """
import sys
from oslo_config import cfg
import nova.conf  # noqa: F401  ([api_database] registered on cfg.CONF)
from nova_ext import conf
from nova_ext.quota import db
conf.register_opts(cfg.CONF)
cfg.CONF(['--config-file', sys.argv[1]], project='nova')
print(db.sync(cfg.CONF, sys.argv[2]))
"""


class LoopbackNova(fixtures.Fixture):

    COMPUTES = ('cmp1', 'cmp2')

    def __init__(self, nova_ext_conf='', computes=COMPUTES, schedulers=1,
                 scheduler_workers=1, compute_conf=None, python=None,
                 nova_ext_revision='head', wait_for_quota_driver=False):
        """``schedulers`` nova-scheduler processes, each with
        ``scheduler_workers`` workers ([scheduler] workers), and one
        fake-driver nova-compute per name in ``computes``;
        ``compute_conf``: {compute name: more nova.conf text for it};
        ``python``: the interpreter of the venv every service and
        ``*-manage`` command runs from (default: this one's; another
        release's venv for an upgrade); ``nova_ext_revision``: the
        revision nova-ext's tables are synced to before the services
        start (an earlier one: the tables an older nova-ext left);
        ``wait_for_quota_driver``: nova-api starts only once the conductor
        logged its quota driver active (nova-api's own start-up check
        otherwise finds the conductor registered but not yet recorded, and
        logs an ERROR).
        """
        super().__init__()
        self.python = python or sys.executable
        self.nova_ext_revision = nova_ext_revision
        self.wait_for_quota_driver = wait_for_quota_driver
        self.compute_conf = compute_conf or {}
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
        self._start_control_plane()
        self._start_computes()
        self._start_api()
        self._discover_computes()

    def _start_control_plane(self, stage=''):
        """placement, nova-conductor and the nova-scheduler processes, with
        :attr:`python`; ``stage``: a suffix of their log files' names.
        """
        self.placement = self._start(
            'placement-api', 'placement%s.log' % stage, env={
                'OS_PLACEMENT_CONFIG_DIR': self.dir,
                'PORT': str(self.placement_port)})
        processes.http_get('http://127.0.0.1:%d/' % self.placement_port)
        self.conductor = self._start('nova-conductor',
                                     'conductor%s.log' % stage,
                                     '--config-file', self.conf)
        if self.wait_for_quota_driver:
            self.conductor.wait_for_log('nova-ext: quota driver active')
        self.scheduler = self._start('nova-scheduler',
                                     'scheduler%s.log' % stage,
                                     '--config-file', self.conf)
        self.scheduler_processes = [self.scheduler]
        for number in range(2, self.schedulers + 1):
            conf = self._write('scheduler%d.conf' % number, self._nova_conf(
                db=True, host='sch%d' % number))
            self.scheduler_processes.append(self._start(
                'nova-scheduler', 'scheduler%d%s.log' % (number, stage),
                '--config-file', conf))

    def _start_computes(self, stage='', python=None):
        self.compute_processes = {}
        for host in self.COMPUTES:
            conf = self._write('%s.conf' % host, self._nova_conf(
                db=False, host=host) + self.compute_conf.get(host, ''))
            self.compute_processes[host] = self._start(
                'nova-compute', '%s%s.log' % (host, stage), '--config-file',
                conf, python=python)

    def _start_api(self, stage=''):
        api_dir = os.path.join(self.dir, 'api')
        os.makedirs(api_dir, exist_ok=True)
        processes.copy_api_paste(api_dir, trust_identity_headers=True,
                                 prefix=self._prefix())
        self._write('api/nova.conf', self._nova_conf(db=True) + (
            '[DEFAULT]\nlog_file = %s\n' % os.path.join(
                self.dir, 'api%s.log' % stage)))
        self.api = self._start('nova-api', 'api%s.log' % stage, env={
            'OS_NOVA_CONFIG_DIR': api_dir, 'PORT': str(self.api_port)})
        processes.http_get('http://127.0.0.1:%d/' % self.api_port)

    def _prefix(self, python=None):
        """The venv of ``python`` (default :attr:`python`)."""
        return os.path.dirname(os.path.dirname(python or self.python))

    def bin_dir(self, python=None):
        """Where the console scripts of ``python``'s venv are."""
        return os.path.dirname(python or self.python)

    # -- a rolling upgrade (tests/system/test_rolling_upgrade.py) ------------

    def stop_control_plane(self):
        """nova-api, the schedulers, the conductor and placement stopped;
        the computes go on running.
        """
        for process in [self.api] + self.scheduler_processes + [
                self.conductor, self.placement]:
            process.stop()

    def start_control_plane(self, python, stage):
        """The control plane again, from ``python``'s venv (which
        :attr:`python` becomes); ``stage`` names its log files.
        """
        self.python = python
        self._start_control_plane(stage)
        self._start_api(stage)
        self.wait_for_schedulers()

    def restart_computes(self, python, stage):
        """Every nova-compute stopped and started from ``python``'s venv;
        returns once each logged its start (``Starting compute node
        (version ...)``).
        """
        for process in self.compute_processes.values():
            process.stop()
        self._start_computes(stage, python=python)
        for process in self.compute_processes.values():
            process.wait_for_log('Starting compute node', timeout=120)

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
        processes.create_nova_databases(self.conf, self.dbs.url('cell0'),
                                        bin_dir=self.bin_dir(),
                                        nova_ext=False)
        self.sync_nova_ext(self.nova_ext_revision)
        self.sync_placement()

    def sync_nova_ext(self, revision='head'):
        """``nova-ext-manage db sync``; to an earlier ``revision`` through
        the same function (the command itself goes to head only).
        """
        if revision == 'head':
            return processes.run('nova-ext-manage', '--config-file',
                                 self.conf, 'db', 'sync',
                                 bin_dir=self.bin_dir())
        return processes.run(
            os.path.basename(self.python), '-c', SYNC_TO_REVISION, self.conf,
            revision, bin_dir=self.bin_dir(),
            env=dict(os.environ, PYTHONPATH=_repo_root()))

    def sync_placement(self):
        processes.run('placement-manage', '--config-file',
                      os.path.join(self.dir, 'placement.conf'), 'db', 'sync',
                      bin_dir=self.bin_dir())

    def _start(self, service, log_name, *args, env=None, code=None,
               python=None):
        """``service`` started; ``code``: a checkout whose ``nova_ext``
        the service runs instead of this one's; ``python``: the
        interpreter (default :attr:`python`).
        """
        log = os.path.join(self.dir, log_name)
        argv = [python or self.python, '-m', 'tests.system.launch', service]
        argv += list(args)
        if service.startswith('nova-') and service != 'nova-api':
            argv += ['--log-file', log]
        return self.useFixture(service_process(argv, log, self.dir,
                                               code=code, env=env))

    def _discover_computes(self):
        processes.discover_computes(self.conf, lambda: [
            h['hypervisor_hostname'] for h in self.request(
                'GET', '/os-hypervisors')[1].get('hypervisors', [])],
            len(self.COMPUTES), bin_dir=self.bin_dir())

    def settle(self, token, timeout=420):
        """The servers ``token``'s project sees, once every one of them is
        ACTIVE or ERROR; AssertionError after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.request('GET', '/servers/detail',
                                        token=token)
            if status != 200:
                raise AssertionError('GET /servers/detail: %s %s'
                                     % (status, body))
            servers = body['servers']
            if all(s['status'] in ('ACTIVE', 'ERROR') for s in servers):
                return servers
            if time.monotonic() > deadline:
                raise AssertionError('servers still building after %ds: %s'
                                     % (timeout, sorted(
                                         s['status'].strip()
                                         for s in servers)))
            time.sleep(2)

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

    def make_racks(self, racks, level='rack'):
        """One host aggregate per rack of ``racks`` ({rack: hosts}), with
        ``nova_ext:failure_domain:rack`` set, through the REST API
        (``level``: another level, e.g. ``row``). Returns {rack:
        aggregate id}.
        """
        def call(path, body):
            status, answer = self.request('POST', path, body)
            if status >= 300:
                raise AssertionError(
                    'POST %s: %d %s' % (path, status, answer))
            return answer

        made = {}
        for rack, hosts in racks.items():
            aggregate = made[rack] = call('/os-aggregates', {'aggregate': {
                'name': 'agg-' + rack}})['aggregate']['id']
            call('/os-aggregates/%s/action' % aggregate, {
                'set_metadata': {'metadata': {
                    'nova_ext:failure_domain:%s' % level: rack}}})
            for host in hosts:
                call('/os-aggregates/%s/action' % aggregate,
                     {'add_host': {'host': host}})
        return made

    def clouds_yaml(self):
        """A clouds.yaml naming this cloud ``loopback`` for openstacksdk
        (the admin token, tests/system/token_identity.py); its path.
        """
        return self._write('clouds.yaml', '\n'.join([
            'clouds:', '  loopback:', '    auth_type: admin_token',
            '    auth:', '      endpoint: http://127.0.0.1:%d/v2.1'
            % self.api_port, '      token: admin', '']))

    def logs(self):
        text = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith('.log') or name.endswith('.out'):
                with open(os.path.join(self.dir, name)) as f:
                    text.append('==> %s <==\n%s' % (name, f.read()[-3000:]))
        return '\n'.join(text)

    def restart_schedulers(self, extra_conf='', plugin=True, code=None):
        """Stop every nova-scheduler process of the cloud and start as many
        again, each with ``extra_conf`` appended to its nova.conf and
        ``?plugin=nova_ext`` on its database URLs only if ``plugin`` (the
        same cloud with nova-ext's scheduler hooks on or off, as
        ``nova-ext-manage configure [--undo]`` and a restart leave it),
        running the ``nova_ext`` of the checkout ``code`` if given; the
        rest of the cloud keeps running. Returns once every worker consumes
        from the scheduler queue.
        """
        for process in self.scheduler_processes:
            process.stop()
        self.restarts = getattr(self, 'restarts', 0) + 1
        self.scheduler_processes = []
        for number in range(1, self.schedulers + 1):
            name = 'scheduler%d.r%d' % (number, self.restarts)
            conf = self._write(name + '.conf', self._nova_conf(
                db=True, host='sch%d' % number, plugin=plugin) +
                extra_conf + '\n')
            self.scheduler_processes.append(self._start(
                'nova-scheduler', name + '.log', '--config-file', conf,
                code=code))
        self.wait_for_schedulers()

    def wait_for_schedulers(self, timeout=180):
        """Until every running nova-scheduler process consumes from the
        ``scheduler`` queue (a request sent before would go to the first
        one up only).
        """
        deadline = time.monotonic() + timeout
        wanted = self.scheduler_workers * len(
            [p for p in self.scheduler_processes
             if p.process.poll() is None])
        while True:
            listed = subprocess.run(
                ('rabbitmqctl', '-q', 'list_queues', '-p', self.vhost.name,
                 'name', 'consumers'), capture_output=True, text=True,
                timeout=60).stdout.split('\n')
            consumers = [int(line.split()[1]) for line in listed
                         if line.split()[:1] == ['scheduler']]
            if consumers and consumers[0] >= wanted:
                return
            if time.monotonic() > deadline:
                raise AssertionError('%s of %d schedulers consume from the '
                                     'scheduler queue after %ds:\n%s' % (
                                         consumers, wanted, timeout,
                                         self.logs()))
            time.sleep(1)

    def scheduler_pids(self):
        """The process ids of the nova-scheduler processes still running."""
        return [p.process.pid for p in self.scheduler_processes
                if p.process.poll() is None]


def service_process(argv, log, run_dir, code=None, env=None):
    """A :class:`processes.Process` running ``argv`` from ``run_dir`` with
    ``code`` (a checkout holding a ``nova_ext``), if given, then this
    repository on its path, and ``env``. ``run_dir`` must hold no
    ``nova_ext``: ``python -m`` (and ``-c``) put the working directory
    first on the path, where this repository's would shadow the checkout's.
    """
    path = _repo_root() if code is None else os.pathsep.join([
        code, _repo_root()])
    return processes.Process(
        argv, log, env=dict(os.environ, PYTHONPATH=path, **(env or {})),
        cwd=run_dir)


def _repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
