# SPDX-License-Identifier: Apache-2.0
"""A real multi-process cloud on 127.0.0.1 for the ``loopback`` tier.

What runs, each a separate process from this venv, against this machine's
MariaDB (databases ``nxt_<run>_*``) and RabbitMQ (a vhost of its own), all
dropped again at the end:

* keystone, glance (file store in the run directory), placement and
  nova-api (``osapi_compute``) as WSGI applications under gunicorn, with
  keystonemiddleware authenticating every request;
* nova-conductor, nova-scheduler (2 workers) and four nova-compute
  processes, two per cell (``fake.FakeDriverWithoutFakeNodes``, one
  ``state_path`` each, no database options) started from their console
  scripts;
* a network stand-in (:mod:`tests.loopback.network_standin`) in place of
  neutron-server: Nova needs a ``network`` endpoint even for ``--nic none``
  servers, and the stand-in answers only those calls with "no ports, no
  security groups, unlimited quota". Nothing nova-ext tests uses it.

The base ``nova.conf`` (databases, transport, keystone_authtoken, service
credentials) is written here; nova-ext's features are switched on by
``nova-ext-manage configure nova`` (the same command the DevStack plugin
runs), its tables created by ``nova-ext-manage db sync``.

A fourth compute, ``cmp-qemu``, runs nova-ext's libvirt driver on a
libvirtd and QEMU (TCG) of its own: :mod:`tests.loopback.hypervisor`
(started where the computes start, registered once the cloud is up); the
image every server boots is :mod:`tests.loopback.guest_image`'s.

Failure domains: two racks as host aggregates, ``nova_ext:failure_domain:
rack=r1`` (cmp1, cmp3) and ``r2`` (cmp2, cmp4), across the cells, created by
:meth:`LoopbackCloud.operator_steps` with the openstack CLI.

Use as a fixture (``useFixture(LoopbackCloud())``) or by hand::

    tools/loopback-cloud.sh        # up until Ctrl-C, prints OS_* exports

Logs of every service stay in the run directory (``.loopback-runs/<run>``
in the repository unless ``NOVA_EXT_LOOPBACK_DIR`` says otherwise);
:meth:`LoopbackCloud.logs` gives their tails.
"""

import concurrent.futures
import contextlib
import grp
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import fixtures

from tests.loopback import guest_image
from tests.loopback import hypervisor
from tests.system import processes

BIN = processes.BIN
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
REGION = 'RegionOne'
PASSWORD = 'loopback'
# Two cells, each with its own database, RabbitMQ vhost and conductor
# (nova_<cell>.conf); nova-api, the superconductor and the scheduler use
# the API database, cell0 and a top-level vhost (nova.conf), as DevStack's
# CELLSV2_SETUP=superconductor does.
# Two computes per cell: Nova moves servers within their cell only and
# the fake driver cannot cold-migrate to the same host, so a cell with one
# compute makes upstream tempest's cold migration fail whenever the
# scheduler picks that cell
CELLS = (('cell1', ('cmp1', 'cmp2')), ('cell2', ('cmp3', 'cmp4')))
COMPUTES = tuple(host for _, hosts in CELLS for host in hosts)
CELL_OF = {host: cell for cell, hosts in CELLS for host in hosts}
# a nova-ext module's log line at WARNING or above (oslo.log's format)
NOVA_EXT_PROBLEM = re.compile(
    r'^\S+ \S+ \d+ (WARNING|ERROR|CRITICAL) nova_ext[.\s]')
# racks span the cells: a failure domain is where the hardware is, a cell
# is how Nova's databases and queues are split
RACKS = (('r1', ('cmp1', 'cmp3')), ('r2', ('cmp2', 'cmp4')))
CONDUCTORS = {'ctl': None}  # the superconductor; cell conductors below
CONDUCTORS.update({'%s-conductor' % cell: cell for cell, _ in CELLS})
SERVICE_USERS = ('nova', 'placement', 'glance')
# nova-ext features the cloud runs: everything but the libvirt driver (the
# computes are fake) -- passed to nova-ext-manage configure nova/tempest
FEATURES = ('--filters', '--weighers', '--request-filters', '--quota')
# as the DevStack plugin does: BinPackingWeigher outvotes Nova's spreading
# weighers, which is what tempest's bin_packing_weigher flag promises
NOVA_ONLY = ('--set', 'nova_ext.bin_packing_weight_multiplier=10.0')
KEEP_RUNS = 3
UPSTREAM_INCLUDE = os.path.join(REPO, 'tests', 'loopback',
                                'tempest-upstream-include.txt')
UPSTREAM_EXCLUDE = os.path.join(REPO, 'tests', 'loopback',
                                'tempest-upstream-exclude.txt')


class LoopbackCloud(fixtures.Fixture):

    def __init__(self, run_dir=None):
        super().__init__()
        self.run_dir = run_dir
        self.timings = []
        self.peak_pss_mib = 0.0
        self._services = {}
        self._sessions = set()
        self._terminated = set()

    # -- bring-up ---------------------------------------------------------

    def _setUp(self):
        processes.require_services()
        self.dir = self.run_dir or _new_run_dir()
        os.makedirs(os.path.join(self.dir, 'logs'), exist_ok=True)
        self._started = time.monotonic()
        # registered first, so it runs last: the stop is in the figures
        self.addCleanup(self._write_report)
        self._sampler_stop = threading.Event()
        sampler = threading.Thread(target=self._sample_memory, daemon=True)
        sampler.start()
        self.addCleanup(sampler.join)
        self.addCleanup(self._sampler_stop.set)
        try:
            self._bring_up()
        except Exception as error:
            raise AssertionError('the loopback cloud did not come up: %s\n'
                                 'service logs in %s; their tails:\n%s'
                                 % (error, self.dir, self.logs()))

    def _bring_up(self):
        self.dbs = self.useFixture(processes.Databases(
            'keystone', 'glance', 'placement', 'api', 'cell0',
            *(cell for cell, _ in CELLS)))
        # the top-level vhost (nova-api, superconductor, scheduler) and one
        # per cell (its conductor and computes)
        self.vhost = self.useFixture(processes.Vhost())
        self.cell_vhosts = {cell: self.useFixture(processes.Vhost())
                            for cell, _ in CELLS}
        self.ports = {name: processes.free_port() for name in (
            'keystone', 'glance', 'placement', 'nova', 'network')}
        self.urls = {
            'identity': 'http://127.0.0.1:%d/v3' % self.ports['keystone'],
            'image': 'http://127.0.0.1:%d' % self.ports['glance'],
            'placement': 'http://127.0.0.1:%d' % self.ports['placement'],
            'compute': 'http://127.0.0.1:%d/v2.1' % self.ports['nova'],
            'network': 'http://127.0.0.1:%d' % self.ports['network'],
        }
        with self.phase('configuration files'):
            self._write_configs()
            processes.run('nova-ext-manage', 'configure', 'nova',
                          '--config-file', self.nova_conf, *FEATURES,
                          *NOVA_ONLY)
            # what the DevStack plugin runs on nova_cellN.conf: a cell
            # conductor runs none of nova-ext's code, so nothing changes
            for conf in self.cell_confs.values():
                processes.run('nova-ext-manage', 'configure', 'nova',
                              '--config-file', conf, '--role',
                              'cell-conductor', *FEATURES)
        with self.phase('database syncs, keystone bootstrap'):
            # independent of each other: in parallel on both cores
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                jobs = [pool.submit(self._timed, name, job, *args)
                        for name, job, args in (
                            ('keystone', self._keystone, ()),
                            ('nova', self._nova_sync, ()),
                            ('glance', processes.run, (
                                'glance-manage', '--config-file',
                                self.glance_conf, 'db_sync')),
                            ('placement', processes.run, (
                                'placement-manage', '--config-file',
                                self.placement_conf, 'db', 'sync')))]
                for job in jobs:
                    job.result()
        with self.phase('keystone: users, services, endpoints'):
            self._register()
        with self.phase('services up'):
            self._start_services()
        with self.phase('image upload, compute discovery'):
            self.image = self._upload_image()
            self._discover_computes()
        # nova-ext's libvirt driver on QEMU (tests/loopback/hypervisor.py)
        with self.phase('QEMU compute: up, mapped, disabled'):
            self.qemu_compute.register()

    @contextlib.contextmanager
    def phase(self, name):
        started = time.monotonic()
        yield
        self.timings.append((name, time.monotonic() - started))

    def _timed(self, name, function, *args):
        started = time.monotonic()
        function(*args)
        self.timings.append(('  ' + name, time.monotonic() - started))

    def _write(self, name, text):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def _authtoken(self, user):
        return _ini({'keystone_authtoken': self._credentials(user, {
            'www_authenticate_uri': self.urls['identity'],
            # keystonemiddleware validates every token it has not cached
            'service_token_roles_required': 'true'})})

    def _credentials(self, user, extra=None):
        values = {
            'auth_type': 'password', 'auth_url': self.urls['identity'],
            'username': user, 'password': PASSWORD,
            'project_name': 'service', 'user_domain_name': 'Default',
            'project_domain_name': 'Default', 'region_name': REGION}
        values.update(extra or {})
        return values

    def _write_configs(self):
        self.keystone_conf = self._write('keystone/keystone.conf', _ini({
            'DEFAULT': {'log_file': self._log('keystone')},
            'database': {'connection': self.dbs.url('keystone', False)},
            'fernet_tokens': {'key_repository': os.path.join(
                self.dir, 'keystone', 'fernet-keys')},
            'credential': {'key_repository': os.path.join(
                self.dir, 'keystone', 'credential-keys')},
        }))
        self.placement_conf = self._write('placement/placement.conf', _ini({
            'DEFAULT': {'log_file': self._log('placement')},
            'placement_database': {
                'connection': self.dbs.url('placement', False)},
            'api': {'auth_strategy': 'keystone'},
        }) + self._authtoken('placement'))
        glance_dir = os.path.join(self.dir, 'glance')
        os.makedirs(glance_dir, exist_ok=True)
        paste = os.path.join(glance_dir, 'glance-api-paste.ini')
        shutil.copy(os.path.join(sys.prefix, 'etc', 'glance',
                                 'glance-api-paste.ini'), paste)
        self.glance_conf = self._write('glance/glance-api.conf', _ini({
            'DEFAULT': {
                'log_file': self._log('glance'),
                'enabled_backends': 'fs:file',
                'image_cache_dir': os.path.join(glance_dir, 'cache'),
                'worker_self_reference_url': self.urls['image'],
            },
            'database': {'connection': self.dbs.url('glance', False)},
            'glance_store': {'default_backend': 'fs'},
            'fs': {'filesystem_store_datadir': os.path.join(
                glance_dir, 'images')},
            'os_glance_staging_store': {'filesystem_store_datadir':
                                        os.path.join(glance_dir, 'staging')},
            'os_glance_tasks_store': {'filesystem_store_datadir':
                                      os.path.join(glance_dir, 'tasks')},
            'paste_deploy': {'flavor': 'keystone', 'config_file': paste},
            'oslo_concurrency': {'lock_path': glance_dir},
        }) + self._authtoken('glance'))
        nova_dir = os.path.join(self.dir, 'nova')
        os.makedirs(nova_dir, exist_ok=True)
        processes.copy_api_paste(nova_dir)
        self.nova_conf = self._write('nova/nova.conf', self._nova_conf(
            'ctl', databases=True) + self._authtoken('nova'))
        self.cell_confs = {cell: self._write(
            'nova/nova_%s.conf' % cell, self._nova_conf(
                '%s-conductor' % cell, databases=False, cell=cell))
            for cell, _ in CELLS}
        # nova-api reads nova.conf and this from its config dir: its own
        # log file, the other controller services log where --log-file says
        self._write('nova/nova-api.conf', _ini({
            'DEFAULT': {'log_file': self._log('nova-api')}}))
        self.compute_confs = {
            host: self._write('nova/%s.conf' % host, self._nova_conf(
                host, databases=False, cell=CELL_OF[host]))
            for host in COMPUTES}

    def _nova_conf(self, host, databases, cell=None):
        """nova.conf of the API-level services (``cell`` None), of a
        cell conductor (``cell``, ``databases`` False, host ``*-conductor``)
        or of a compute (``cell``, ``databases`` False).
        """
        state = os.path.join(self.dir, 'state', host)
        os.makedirs(state, exist_ok=True)
        placement = ['%s = %s' % item
                     for item in self._credentials('nova').items()]
        sections = {
            'DEFAULT': {'my_ip': '127.0.0.1', 'state_path': state},
            'neutron': self._credentials('nova'),
            'glance': {'region_name': REGION},
            'scheduler': {'workers': '2'},
            # computes report instance changes over their cell's vhost,
            # where no scheduler listens: the scheduler reads the cells'
            # databases instead (Nova's advice for more than one cell)
            'filter_scheduler': {'track_instance_changes': 'false'},
        }
        conductor = cell is not None and host in CONDUCTORS
        if not cell:
            # nova-api decides; as DevStack sets it
            sections['DEFAULT']['allow_resize_to_same_host'] = 'true'
        if conductor:
            # only the cell's database: no upcalls to the API database
            sections['database'] = {'connection': self.dbs.url(cell, False)}
        elif cell:
            # the late server group check reads the API database through
            # the cell conductor, which has none (isolated cells)
            sections['workarounds'] = {
                'disable_group_policy_check_upcall': 'true'}
        if cell and not conductor:
            sections['DEFAULT'].update({
                'compute_driver': 'fake.FakeDriverWithoutFakeNodes',
                # no ports are plugged: nothing to wait for
                'vif_plugging_timeout': '0',
                'vif_plugging_is_fatal': 'false'})
        # nova-ext's features and the engine plugin on the database URLs
        # are nova-ext-manage configure's job, as in DevStack
        return processes.nova_conf(
            self.dbs, self.cell_vhosts[cell] if cell else self.vhost, host,
            state, placement, databases=databases, plugin=False,
            extra=_ini(sections), cell_database='cell0')

    def _log(self, name):
        return os.path.join(self.dir, 'logs', name + '.log')

    def _keystone(self):
        conf = ('--config-file', self.keystone_conf)
        owner = ('--keystone-user', pwd.getpwuid(os.getuid()).pw_name,
                 '--keystone-group', grp.getgrgid(os.getgid()).gr_name)
        processes.run('keystone-manage', *conf, 'db_sync')
        processes.run('keystone-manage', *conf, 'fernet_setup', *owner)
        processes.run('keystone-manage', *conf, 'credential_setup', *owner)
        processes.run('keystone-manage', *conf, 'bootstrap',
                      '--bootstrap-password', PASSWORD,
                      '--bootstrap-admin-url', self.urls['identity'],
                      '--bootstrap-public-url', self.urls['identity'],
                      '--bootstrap-internal-url', self.urls['identity'],
                      '--bootstrap-region-id', REGION)
        self._gunicorn('keystone', 'keystone.wsgi.api:application', {
            'OS_KEYSTONE_CONFIG_DIR': os.path.dirname(self.keystone_conf)})
        self._wait_http('keystone', self.urls['identity'])

    def _nova_sync(self):
        processes.create_nova_databases(
            self.nova_conf, self.dbs.url('cell0', False), cells=[
                (cell, self.dbs.url(cell, False),
                 self.cell_vhosts[cell].transport_url,
                 self.cell_confs[cell]) for cell, _ in CELLS])

    def session(self, user='admin', project='admin'):
        from keystoneauth1.identity import v3
        from keystoneauth1 import session
        return session.Session(auth=v3.Password(
            auth_url=self.urls['identity'], username=user,
            password=PASSWORD, project_name=project,
            user_domain_name='Default', project_domain_name='Default'))

    def _register(self):
        """Service project, users, roles, services and endpoints in this
        one process: ~30 openstack CLI calls would cost ~2 minutes.
        """
        keystone = self.session()
        base = self.urls['identity']

        def call(method, path, body=None, expect=(200, 201, 204)):
            response = keystone.request(base + path, method, json=body,
                                        raise_exc=False)
            if response.status_code not in expect:
                raise AssertionError('keystone %s %s: %d %s' % (
                    method, path, response.status_code, response.text))
            return response.json() if response.text else {}

        def role(name):
            found = call('GET', '/roles?name=' + name)['roles']
            if found:
                return found[0]['id']
            return call('POST', '/roles', {'role': {'name': name}})[
                'role']['id']

        service_project = call('POST', '/projects', {'project': {
            'name': 'service', 'domain_id': 'default'}})['project']['id']
        roles = [role('admin'), role('service')]
        for name in SERVICE_USERS:
            user = call('POST', '/users', {'user': {
                'name': name, 'password': PASSWORD, 'domain_id': 'default',
                'default_project_id': service_project}})['user']['id']
            for role_id in roles:
                call('PUT', '/projects/%s/users/%s/roles/%s' % (
                    service_project, user, role_id))
        for service_type, name in (('compute', 'nova'), ('image', 'glance'),
                                   ('placement', 'placement'),
                                   ('network', 'network-standin')):
            service = call('POST', '/services', {'service': {
                'type': service_type, 'name': name}})['service']['id']
            for interface in ('public', 'internal'):
                call('POST', '/endpoints', {'endpoint': {
                    'service_id': service, 'interface': interface,
                    'region_id': REGION, 'url': self.urls[service_type]}})

    def _start_services(self):
        self._gunicorn('placement', 'placement.wsgi.api:application', {
            'OS_PLACEMENT_CONFIG_DIR': os.path.dirname(self.placement_conf)})
        self._gunicorn('glance', 'glance.wsgi.api:application', {
            'OS_GLANCE_CONFIG_DIR': os.path.dirname(self.glance_conf)})
        self._gunicorn('nova-api', 'nova.wsgi.osapi_compute:application', {
            'OS_NOVA_CONFIG_DIR': os.path.dirname(self.nova_conf),
            'OS_NOVA_CONFIG_FILES': 'api-paste.ini;nova.conf;nova-api.conf'})
        self._spawn('network', [sys.executable, '-m',
                                'tests.loopback.network_standin',
                                str(self.ports['network']),
                                self._log('network')])
        for service in ('nova-conductor', 'nova-scheduler'):
            self._spawn(service, [os.path.join(BIN, service),
                                  '--config-file', self.nova_conf,
                                  '--log-file', self._log(service)])
        for cell, conf in self.cell_confs.items():
            name = '%s-conductor' % cell
            self._spawn(name, [os.path.join(BIN, 'nova-conductor'),
                               '--config-file', conf,
                               '--log-file', self._log(name)])
        self._start_computes()
        # nova-ext's libvirt driver on QEMU (tests/loopback/hypervisor.py)
        self.qemu_compute = self.useFixture(hypervisor.QemuCompute(self))
        for name in ('placement', 'glance', 'network'):
            self._wait_http(name, self.urls[name if name != 'glance'
                                            else 'image'])
        self._wait_http('nova-api', 'http://127.0.0.1:%d/'
                        % self.ports['nova'])
        self._wait_services()

    def _start_computes(self):
        """Every nova-compute, each with the nova.conf of its host."""
        for host, conf in self.compute_confs.items():
            self._spawn(host, [os.path.join(BIN, 'nova-compute'),
                               '--config-file', conf,
                               '--log-file', self._log(host)])

    def _gunicorn(self, name, app, env):
        self._spawn(name, [
            sys.executable, '-m', 'tests.loopback.serve', name,
            str(self.ports[name.replace('nova-api', 'nova')]), app], env=env)

    def _spawn(self, name, argv, env=None):
        environment = dict(os.environ, PYTHONPATH=REPO, **(env or {}))
        process = processes.Process(argv, self._log(name),
                                    env=environment)
        self._services[name] = self.useFixture(process)
        self._sessions.add(process.process.pid)
        # cleanups run last-in first-out: this one, registered after every
        # start, signals all services at once, so their graceful shutdowns
        # overlap instead of queueing behind each other
        self.addCleanup(self._terminate_all)
        return process

    def _terminate_all(self):
        for service in self._services.values():
            if service.process.poll() is None and \
                    service.process.pid not in self._terminated:
                self._terminated.add(service.process.pid)
                try:
                    os.killpg(service.process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def _wait_http(self, name, url, timeout=120):
        """Any HTTP answer means the server is serving."""
        deadline = time.monotonic() + timeout
        process = self._services[name].process
        while True:
            try:
                urllib.request.urlopen(url, timeout=10).close()
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                if process.poll() is not None:
                    raise AssertionError('%s exited with %d' % (
                        name, process.returncode))
                if time.monotonic() > deadline:
                    raise AssertionError('%s not serving %s after %ds' % (
                        name, url, timeout))
                time.sleep(0.3)

    def compute_api(self, method, path, body=None, session=None):
        session = session or self.session()
        response = session.request(
            self.urls['compute'] + path, method, json=body,
            raise_exc=False, headers={
                'OpenStack-API-Version': 'compute 2.53'})
        return response.status_code, (response.json() if response.text
                                      else {})

    def _wait_services(self, timeout=180):
        """Every nova service record reports up (RPC and DB reached)."""
        expected = expected_services()
        session = self.session()
        deadline = time.monotonic() + timeout
        while True:
            for name, service in self._services.items():
                if service.process.poll() is not None:
                    raise AssertionError('%s exited with %d' % (
                        name, service.process.returncode))
            status, body = self.compute_api('GET', '/os-services',
                                            session=session)
            up = {(s['binary'], s['host']) for s in body.get('services', [])
                  if s['state'] == 'up'}
            if status == 200 and expected <= up:
                self.services_up = sorted(up)
                return
            if time.monotonic() > deadline:
                raise AssertionError('services not up after %ds: %s up, '
                                     'expected %s' % (timeout, sorted(up),
                                                      sorted(expected)))
            time.sleep(1)

    def _discover_computes(self):
        session = self.session()

        def hypervisors():
            body = self.compute_api('GET', '/os-hypervisors',
                                    session=session)[1]
            return sorted(h['hypervisor_hostname']
                          for h in body.get('hypervisors', []))
        self.hypervisors = processes.discover_computes(
            self.nova_conf, hypervisors, len(COMPUTES))

    def _upload_image(self):
        """The 1 MiB boot-sector disk of :mod:`.guest_image` (the fake
        computes never read it, the QEMU compute boots it).
        """
        session = self.session()
        url = self.urls['image'] + '/v2/images'
        image = session.post(url, json={
            'name': 'loopback-tiny', 'disk_format': 'raw',
            'container_format': 'bare', 'visibility': 'public'}).json()
        session.put('%s/%s/file' % (url, image['id']),
                    data=guest_image.boot_disk(),
                    headers={'Content-Type': 'application/octet-stream'})
        status = session.get('%s/%s' % (url, image['id'])).json()['status']
        if status != 'active':
            raise AssertionError('image %s is %s after upload' % (
                image['id'], status))
        return image['id']

    # -- the operator's view ----------------------------------------------

    def environ(self):
        """OS_* variables for the admin, as an operator would export."""
        return {'OS_AUTH_URL': self.urls['identity'],
                'OS_IDENTITY_API_VERSION': '3',
                'OS_USERNAME': 'admin', 'OS_PASSWORD': PASSWORD,
                'OS_PROJECT_NAME': 'admin',
                'OS_USER_DOMAIN_NAME': 'Default',
                'OS_PROJECT_DOMAIN_NAME': 'Default',
                'OS_REGION_NAME': REGION, 'OS_INTERFACE': 'public'}

    def openstack(self, *args, fails=False):
        """One ``openstack`` CLI call; its JSON output when ``-f json``.

        ``fails``: the call must fail; returns its output.
        """
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('OS_')}
        env.update(self.environ())
        result = self._command([os.path.join(BIN, 'openstack')] + list(
            args), env=env, fails=fails)
        if fails:
            return result
        if '-f' in args and args[args.index('-f') + 1] == 'json':
            return json.loads(result)
        return result

    def _command(self, argv, env=None, cwd=None, timeout=600,
                 fails=False):
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=env, cwd=cwd or self.dir, start_new_session=True)
        self._sessions.add(process.pid)
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            output, _ = process.communicate()
            raise AssertionError('%s timed out after %ds:\n%s' % (
                ' '.join(argv[:3]), timeout, output[-4000:]))
        finally:
            self._sessions.discard(process.pid)
        if fails and not process.returncode:
            raise AssertionError('%s succeeded, expected to fail:\n%s' % (
                ' '.join(os.path.basename(a) for a in argv[:4]),
                output[-6000:]))
        if process.returncode and not fails:
            raise AssertionError('%s exited %d:\n%s' % (
                ' '.join(os.path.basename(a) for a in argv[:4]),
                process.returncode, output[-6000:]))
        return output

    def operator_steps(self):
        """Racks across the cells, flavors, a group spread across racks
        and cells, a per-flavor limit counted across cells, as an operator
        types them; returns what the test asserts on.
        """
        found = {}
        with self.phase('operator steps (openstack CLI)'):
            for rack, hosts in RACKS:
                self.openstack('aggregate', 'create', '--property',
                               'nova_ext:failure_domain:rack=' + rack,
                               'rack-' + rack)
                for host in hosts:
                    self.openstack('aggregate', 'add', 'host',
                                   'rack-' + rack, host)
            self.flavor = self.openstack(
                'flavor', 'create', '--ram', '64', '--vcpus', '1', '--disk',
                '1', '-f', 'json', 'loopback.tiny')['id']
            # tempest's flavor_ref_alt (upstream resize tests), over the
            # API: nothing the operator session shows
            self.alt_flavor = self.compute_api('POST', '/flavors', {
                'flavor': {'name': 'loopback.alt', 'ram': 128, 'vcpus': 1,
                           'disk': 1}})[1]['flavor']['id']
            self.limited_flavor = self.openstack(
                'flavor', 'create', '--ram', '64', '--vcpus', '1', '--disk',
                '1', '-f', 'json', 'loopback.limited')['id']
            group = self.openstack('server', 'group', 'create', '--policy',
                                   'anti-affinity', '-f', 'json',
                                   'loopback-spread')['id']
            # two members spread by rack, a third by anti-affinity alone:
            # it can only go to the host left, so the group covers both
            # cells (the conductor gathers the members' hosts from all)
            for name, hints in (
                    ('spread-1', ('--hint', 'nova_ext:spread_level=rack')),
                    ('spread-2', ('--hint', 'nova_ext:spread_level=rack')),
                    ('spread-3', ())):
                server = self.openstack(
                    'server', 'create', '--flavor', 'loopback.tiny',
                    '--image', self.image, '--nic', 'none',
                    '--hint', 'group=' + group, *hints,
                    '--wait', '-f', 'json', name)
                found[name] = {'status': server['status'],
                               'host': server['OS-EXT-SRV-ATTR:host']}
            found['racks'] = {
                a['Name']: a for a in self.openstack(
                    'aggregate', 'list', '--long', '-f', 'json')}
            self.openstack('server', 'delete', '--wait', 'spread-1',
                           'spread-2', 'spread-3')
            found['multi-create skew'] = self._multi_create_with_skew()
            found.update(self._quota_across_cells())
            found['image locality'] = self.explain(
                '--flavor', 'loopback.tiny', '--image', self.image)
            self.openstack('server', 'delete', '--wait', 'quota-cell1',
                           'quota-cell2')
            found.update(self._maintenance_and_class_across_cells())
            found['left'] = self.openstack('server', 'list', '-f', 'json')
            # every nova-api and the superconductor activated the quota
            # driver; the cell conductors need not
            found['quota check'] = processes.run(
                'nova-ext-manage', '--config-file', self.nova_conf, 'quota',
                'check')
            # the per-flavor limit the tempest plugin's quota test expects
            processes.run('nova-ext-manage', '--config-file',
                          self.nova_conf, 'quota', 'set', '--project', '*',
                          '--flavor', self.limited_flavor, '--instances',
                          '1')
        return found

    def _multi_create_with_skew(self):
        """Four servers in one request over the two racks of two hosts,
        ``rack:skew=1``: each server's status and host; then deleted.
        """
        group = self.openstack('server', 'group', 'create', '--policy',
                               'anti-affinity', '-f', 'json',
                               'loopback-skew')['id']
        self.openstack('server', 'create', '--flavor', 'loopback.tiny',
                       '--image', self.image, '--nic', 'none', '--min', '4',
                       '--max', '4', '--hint', 'group=' + group, '--hint',
                       'nova_ext:spread_constraints=rack:skew=1', 'skew')
        deadline = time.monotonic() + 180
        while True:
            listed = self.openstack('server', 'list', '--name', '^skew-',
                                    '-f', 'json')
            if time.monotonic() > deadline or (
                    len(listed) == 4 and all(
                        s['Status'] != 'BUILD' for s in listed)):
                break
            time.sleep(2)
        servers = {}
        for listed in listed:
            server = self.openstack('server', 'show', '-f', 'json',
                                    listed['ID'])
            servers[server['name']] = {
                'status': server['status'],
                'host': server.get('OS-EXT-SRV-ATTR:host'),
                'fault': (server.get('fault') or {}).get('message', '')}
        if servers:
            self.openstack('server', 'delete', '--wait', *servers)
        return servers

    def explain(self, *args):
        """``nova-ext-manage explain ... --json``, parsed."""
        return json.loads(processes.run(
            'nova-ext-manage', '--config-file', self.nova_conf, 'explain',
            '--json', *args))

    def _maintenance_and_class_across_cells(self):
        """One host of each cell in maintenance (cmp2, cmp4): an
        anti-affinity group's members take the other host of each cell and
        a third finds none. Then a host class on cmp2 and cmp4: its
        flavor's servers land there, one per cell.
        """
        found = {}
        maintenance = ('cmp2', 'cmp4')
        for host in maintenance:
            processes.run('nova-ext-manage', '--config-file', self.nova_conf,
                          'host', 'maintenance', 'on', host)
        found['in maintenance'] = processes.run(
            'nova-ext-manage', '--config-file', self.nova_conf, 'host',
            'maintenance', 'list').split()
        found['maintenance'] = self._group_of_three('loopback-maintenance',
                                                    'loopback.tiny')
        for host in maintenance:
            processes.run('nova-ext-manage', '--config-file', self.nova_conf,
                          'host', 'maintenance', 'off', host)

        self.openstack('aggregate', 'create', '--property',
                       'nova_ext:host_class=loopback', 'class-loopback')
        for host in ('cmp2', 'cmp4'):
            self.openstack('aggregate', 'add', 'host', 'class-loopback',
                           host)
        self.openstack('flavor', 'create', '--ram', '64', '--vcpus', '1',
                       '--disk', '1', '--property',
                       'nova_ext:host_class=loopback', 'loopback.classed')
        found['host class'] = self._group_of_three('loopback-class',
                                                   'loopback.classed')
        return found

    def _group_of_three(self, group_name, flavor):
        """Three members of a new anti-affinity group, one after another;
        then deleted. Returns each one's status, host and fault.
        """
        group = self.openstack('server', 'group', 'create', '--policy',
                               'anti-affinity', '-f', 'json',
                               group_name)['id']
        members = {}
        for index in (1, 2, 3):
            name = '%s-%d' % (group_name, index)
            self.openstack('server', 'create', '--flavor', flavor,
                           '--image', self.image, '--nic', 'none', '--hint',
                           'group=' + group, '--wait', name,
                           fails=index == 3)
            server = self.openstack('server', 'show', '-f', 'json', name)
            members[name] = {
                'status': server['status'],
                'host': server.get('OS-EXT-SRV-ATTR:host'),
                'fault': (server.get('fault') or {}).get('message', '')}
        self.openstack('server', 'delete', '--wait', *members)
        return members

    def _quota_across_cells(self):
        """A per-flavor limit of 2 instances, one server in each cell
        (the admin may name the host), the third refused with 403.
        """
        found = {'cells flavor': self.openstack(
            'flavor', 'create', '--ram', '64', '--vcpus', '1', '--disk', '1',
            '-f', 'json', 'loopback.cells')['id']}
        processes.run('nova-ext-manage', '--config-file', self.nova_conf,
                      'quota', 'set', '--project', '*', '--flavor',
                      'loopback.cells', '--instances', '2')
        for name, host in (('quota-cell1', 'cmp1'), ('quota-cell2', 'cmp3')):
            server = self.openstack(
                'server', 'create', '--flavor', 'loopback.cells', '--image',
                self.image, '--nic', 'none', '--availability-zone',
                'nova:' + host, '--wait', '-f', 'json', name)
            found[name] = {'status': server['status'],
                           'host': server['OS-EXT-SRV-ATTR:host']}
        found['quota usage'] = processes.run(
            'nova-ext-manage', '--config-file', self.nova_conf, 'quota',
            'usage', '--project', self.session().get_project_id(),
            '--flavor', 'loopback.cells')
        found['quota refused'] = self.openstack(
            'server', 'create', '--flavor', 'loopback.cells', '--image',
            self.image, '--nic', 'none', 'quota-over', fails=True)
        return found

    # -- tempest ----------------------------------------------------------

    def run_tempest(self, regex=r'^nova_ext\.'):
        """nova-ext's tempest plugin against this cloud; returns
        (summary dict, output).
        """
        with self.phase('tempest'):
            workspace = os.path.join(self.dir, 'tempest')
            self._command([os.path.join(BIN, 'tempest'), 'init',
                           '--workspace-path',
                           os.path.join(self.dir, 'tempest-workspaces.yaml'),
                           workspace])
            conf = os.path.join(workspace, 'etc', 'tempest.conf')
            with open(conf, 'w') as f:
                f.write(self._tempest_conf())
            processes.run('nova-ext-manage', 'configure', 'tempest',
                          '--config-file', conf, *FEATURES)
            # serially: the tests move hosts in and out of maintenance and
            # host classes, which would steer a parallel test's boots
            return self._tempest_run(workspace, regex)

    def run_upstream_tempest(self):
        """The curated subset of upstream ``tempest.api.compute``
        (tests/loopback/tempest-upstream-*.txt), after :meth:`run_tempest`
        set the workspace up; returns (summary dict, output).
        """
        with self.phase('tempest (upstream subset)'):
            # nothing of nova-ext's host state changes here: 2 in parallel
            return self._tempest_run(
                os.path.join(self.dir, 'tempest'), None, concurrency=2,
                log='tempest-upstream-run.out', selection=(
                    '--include-list', UPSTREAM_INCLUDE,
                    '--exclude-list', UPSTREAM_EXCLUDE))

    def _tempest_run(self, workspace, regex, concurrency=1,
                     log='tempest-run.out', selection=()):
        process = subprocess.run(
            [os.path.join(BIN, 'tempest'), 'run', *(
                ('--regex', regex) if regex else ()), *selection,
             '--concurrency', str(concurrency)], cwd=workspace,
            capture_output=True, text=True, timeout=1500)
        output = process.stdout + process.stderr
        with open(os.path.join(self.dir, 'logs', log), 'w') as f:
            f.write(output)
        return _tempest_summary(output), output

    def _tempest_conf(self):
        return _ini({
            'DEFAULT': {'log_file': os.path.join(self.dir, 'logs',
                                                 'tempest.log')},
            'auth': {'use_dynamic_credentials': 'true',
                     'admin_username': 'admin', 'admin_password': PASSWORD,
                     'admin_project_name': 'admin',
                     'admin_domain_name': 'Default'},
            'identity': {'uri_v3': self.urls['identity'],
                         'auth_version': 'v3', 'region': REGION},
            'identity-feature-enabled': {'api_v2': 'false'},
            # the fake driver resizes (to the same host too) and migrates
            # (to the other compute of the server's cell)
            'compute-feature-enabled': {'resize': 'true',
                                        'cold_migration': 'true'},
            'compute': {'image_ref': self.image,
                        'image_ref_alt': self.image,
                        'flavor_ref': self.flavor,
                        # a resize must change the flavor
                        'flavor_ref_alt': self.alt_flavor,
                        'min_compute_nodes': str(len(COMPUTES)),
                        'min_microversion': '2.1',
                        'max_microversion': 'latest',
                        'build_timeout': '120'},
            'service_available': {'nova': 'true', 'glance': 'true',
                                  'neutron': 'false', 'cinder': 'false',
                                  'swift': 'false'},
            'validation': {'run_validation': 'false'},
            'nova_ext': {'spread_level': 'rack',
                         'quota_limited_flavor': self.limited_flavor,
                         'quota_limited_instances': '1'},
        }) + self.qemu_compute.tempest_conf()

    # -- what is left behind ------------------------------------------------

    def logs(self, tail=3000):
        text = []
        logs = os.path.join(self.dir, 'logs')
        for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
            with open(os.path.join(logs, name), errors='replace') as f:
                text.append('==> %s <==\n%s' % (name, f.read()[-tail:]))
        return '\n'.join(text)

    def nova_ext_problems(self):
        """Every line a nova-ext module logged at WARNING or above, in every
        service's log so far (oslo.log's format: date, time, pid, level,
        logger).
        """
        found = []
        logs = os.path.join(self.dir, 'logs')
        for name in sorted(os.listdir(logs)):
            if not name.endswith('.log'):
                continue
            with open(os.path.join(logs, name), errors='replace') as f:
                found += ['%s: %s' % (name, line.rstrip()) for line in f
                          if NOVA_EXT_PROBLEM.match(line)]
        return found

    def pss_mib(self):
        """PSS of every process this cloud started (their sessions)."""
        total = 0
        for pid in os.listdir('/proc'):
            if not pid.isdigit():
                continue
            try:
                if os.getsid(int(pid)) not in self._sessions:
                    continue
                with open('/proc/%s/smaps_rollup' % pid) as f:
                    for line in f:
                        if line.startswith('Pss:'):
                            total += int(line.split()[1])
            except OSError:
                continue
        return total / 1024.0

    def _sample_memory(self):
        while not self._sampler_stop.wait(1):
            self.peak_pss_mib = max(self.peak_pss_mib, self.pss_mib())

    def report(self):
        lines = ['%-42s %6.1f s' % (name, seconds)
                 for name, seconds in self.timings]
        lines.append('%-42s %6.1f s' % (
            'total since the start',
            time.monotonic() - self._started))
        lines.append('%-42s %6.0f MiB' % (
            'peak PSS of the cloud', self.peak_pss_mib))
        return '\n'.join(lines)

    def _write_report(self):
        with open(os.path.join(self.dir, 'report.txt'), 'w') as f:
            f.write('loopback cloud %s\n%s\n' % (self.dir, self.report()))


def expected_services():
    """(binary, host) of every Nova service this cloud runs."""
    return ({('nova-conductor', host) for host in CONDUCTORS} |
            {('nova-scheduler', 'ctl')} |
            {('nova-compute', host) for host in COMPUTES})


def _tempest_summary(output):
    summary = {}
    for key, pattern in (('ran', r'Ran: (\d+) tests'),
                         ('passed', r' - Passed: (\d+)'),
                         ('skipped', r' - Skipped: (\d+)'),
                         ('failed', r' - Failed: (\d+)')):
        found = re.findall(pattern, output)
        summary[key] = int(found[-1]) if found else None
    summary['skips'] = re.findall(r'(\S+) \.\.\. SKIPPED: (.*)', output)
    return summary


def _ini(sections):
    out = []
    for section, values in sections.items():
        out.append('[%s]' % section)
        out += ['%s = %s' % item for item in values.items()]
    return '\n'.join(out) + '\n'


def _new_run_dir():
    top = os.environ.get('NOVA_EXT_LOOPBACK_DIR') or os.path.join(
        REPO, '.loopback-runs')
    os.makedirs(top, exist_ok=True)
    old = sorted(os.listdir(top))
    for name in old[:max(0, len(old) - KEEP_RUNS + 1)]:
        shutil.rmtree(os.path.join(top, name), ignore_errors=True)
    return os.path.join(top, time.strftime('%Y%m%d-%H%M%S-') +
                        str(os.getpid()))


def main():
    """Bring the cloud up, print the OS_* exports, keep it until Ctrl-C.

    ``--steps``: also run the operator's CLI steps (racks, flavors, a
    spread group); ``--tempest``: then nova-ext's tempest plugin.
    """
    import argparse
    parser = argparse.ArgumentParser(prog='tools/loopback-cloud.sh')
    parser.add_argument('--steps', action='store_true')
    parser.add_argument('--tempest', action='store_true')
    args = parser.parse_args()

    def stop(signum, frame):
        raise KeyboardInterrupt
    # SIGINT too: a shell starting this in the background ignores it, and
    # the ignoring would be inherited instead of Python's KeyboardInterrupt
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    cloud = LoopbackCloud()
    try:
        cloud.setUp()  # cleans up after itself when it fails
    except KeyboardInterrupt:
        return
    try:
        if args.steps or args.tempest:
            print(json.dumps(cloud.operator_steps(), indent=1))
        if args.tempest:
            summary, output = cloud.run_tempest()
            print(output[-6000:])
        print(cloud.report())
        print('\nThe loopback cloud is up (logs in %s). In another shell:\n'
              % cloud.dir)
        for key, value in cloud.environ().items():
            print('export %s=%s' % (key, value))
        print('\nCtrl-C stops it and drops its databases.')
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        print('stopping...', file=sys.stderr)
        cloud.cleanUp()


if __name__ == '__main__':
    main()
