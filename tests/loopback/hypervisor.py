# SPDX-License-Identifier: Apache-2.0
"""The loopback cloud's real compute: nova-ext's libvirt driver on a
libvirtd and QEMU of this machine.

:class:`QemuCompute` (used by :class:`tests.loopback.loopback.LoopbackCloud`)

* installs the Debian packages it needs when they are missing and this is
  root with apt-get, and otherwise stops with the ``apt-get install`` line
  that would fix it (:func:`ensure_packages`);
* starts a libvirtd of its own (:class:`Libvirtd`): a private mount
  namespace puts the run directory's ``etc``, ``run``, ``lib``, ``log`` and
  ``cache`` over libvirt's directories, so it reads our ``qemu.conf``
  (QEMU as root, no cgroups or namespaces: none of that exists in a
  container without systemd), its domains and logs stay in the run
  directory and its socket is in a directory of its own; a libvirtd of the
  machine, if any, is not touched;
* installs the driver shim (``nova-ext-manage driver install``), writes the
  compute's nova.conf (the fake computes' base file, then an overlay that
  ``nova-ext-manage configure nova --libvirt-driver --failure-domain``
  edits, as an operator would) and starts nova-compute with
  ``compute_driver = nova_ext_libvirt.LibvirtDriver``, ``virt_type = qemu``
  (TCG: no KVM needed) and every guest mutator, plus ``exploding``, a
  third-party mutator with a bug (:mod:`tests.loopback.exploding_mutator`),
  installed for this cloud only;
* once the cloud is up, maps the compute into the cell and disables its
  service: the cloud's scheduling tests and operator steps keep landing on
  the four fake computes, and whoever wants the real hypervisor (our
  tempest plugin's libvirt test, :meth:`QemuCompute.boot_steps`) enables it
  for as long as it needs it.

The guest is :mod:`tests.loopback.guest_image`'s boot sector.
"""

import os
import shutil
import subprocess
import tempfile
import time

import fixtures

from tests.system import processes

CELL = 'cell2'
HOST = 'cmp-qemu'
RACK = 'r3'
DISABLED_REASON = 'nova-ext loopback: QEMU compute, targeted boots only'
# what starts libvirtd and QEMU, builds libvirt-python and provides the
# libvirt-qemu user libvirtd's QEMU driver insists on
PACKAGES = ('libvirt-daemon-system', 'libvirt-daemon-driver-qemu',
            'qemu-system-x86', 'qemu-utils', 'libvirt-dev', 'pkg-config')
MUTATORS = 'domain_metadata,oem_strings,memory_sharing,exploding'
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PLUGINS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'mutator_plugins')
PRIVATE_DIRS = ('/run/libvirt', '/var/lib/libvirt', '/var/log/libvirt',
                '/var/cache/libvirt', '/etc/libvirt')
QEMU_CONF = '''\
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
'''
LIBVIRTD_CONF = '''\
unix_sock_dir = "%(sockets)s"
unix_sock_group = "root"
unix_sock_ro_perms = "0777"
unix_sock_rw_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:file:%(log)s"
'''


class Unavailable(Exception):
    """This machine cannot run the QEMU compute; the message says why."""


def missing_packages():
    missing = []
    for package in PACKAGES:
        result = subprocess.run(
            ['dpkg-query', '-W', '-f', '${db:Status-Status}', package],
            capture_output=True, text=True)
        if result.stdout.strip() != 'installed':
            missing.append(package)
    return missing


def ensure_packages():
    """Install what is missing when this is root with apt-get, or raise
    :class:`Unavailable` naming it.
    """
    if not shutil.which('dpkg-query'):
        raise Unavailable('the QEMU compute is set up from Debian packages '
                          '(%s); this machine has no dpkg'
                          % ' '.join(PACKAGES))
    missing = missing_packages()
    if not missing:
        return []
    command = ['apt-get', 'install', '-y', '--no-install-recommends'
               ] + missing
    if os.getuid() != 0 or not shutil.which('apt-get'):
        raise Unavailable('the QEMU compute needs: %s' % ' '.join(command))
    environment = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    result = subprocess.run(command, capture_output=True, text=True,
                            env=environment)
    if result.returncode:  # a stale package list: refresh it once
        subprocess.run(['apt-get', 'update'], capture_output=True,
                       env=environment)
        result = subprocess.run(command, capture_output=True, text=True,
                                env=environment)
    if result.returncode:
        raise Unavailable('%s failed:\n%s' % (' '.join(command),
                                              result.stderr[-2000:]))
    return missing


class Libvirtd(fixtures.Fixture):
    """A libvirtd of our own; ``uri`` reaches it."""

    def __init__(self, directory, log_dir):
        super().__init__()
        self.dir, self.log_dir = directory, log_dir

    def _setUp(self):
        import libvirt

        # a UNIX socket path has at most 107 bytes: not in the run dir
        self.sockets = tempfile.mkdtemp(prefix='nxt-libvirt-')
        self.addCleanup(shutil.rmtree, self.sockets, ignore_errors=True)
        self.uri = 'qemu:///system?socket=%s/libvirt-sock' % self.sockets
        self.log_path = os.path.join(self.log_dir, 'libvirtd.log')
        etc = os.path.join(self.dir, 'etc', 'libvirt')
        os.makedirs(etc, exist_ok=True)
        with open(os.path.join(etc, 'qemu.conf'), 'w') as f:
            f.write(QEMU_CONF)
        libvirtd_conf = os.path.join(etc, 'libvirtd.conf')
        with open(libvirtd_conf, 'w') as f:
            f.write(LIBVIRTD_CONF % {'sockets': self.sockets,
                                     'log': self.log_path})
        script = ['set -e']
        for path in PRIVATE_DIRS:
            private = os.path.join(self.dir, path.lstrip('/'))
            os.makedirs(private, exist_ok=True)
            # the mount point itself is an empty directory on the machine
            script.append('mkdir -p %s && mount --bind %s %s' % (
                path, private, path))
        script.append('exec libvirtd --config %s --pid-file %s' % (
            libvirtd_conf, os.path.join(self.dir, 'libvirtd.pid')))
        self.process = self.useFixture(processes.Process(
            ['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
             '\n'.join(script)], self.log_path.replace('.log', '-out')))
        # libvirt prints every error on stderr unless told otherwise; the
        # refused connections while libvirtd starts are expected
        libvirt.registerErrorHandler(lambda context, error: None, None)
        deadline = time.monotonic() + 60
        while True:
            try:
                libvirt.open(self.uri).close()
                break
            except libvirt.libvirtError as error:
                if self.process.process.poll() is not None or \
                        time.monotonic() > deadline:
                    raise Unavailable('libvirtd did not start (%s); its '
                                      'log:\n%s' % (error,
                                                    self.process.log()))
                time.sleep(0.2)
        # registered after the process's: runs first, while libvirtd still
        # answers; QEMU outlives a stopped libvirtd otherwise
        self.addCleanup(self.destroy_all)

    def destroy_all(self):
        import libvirt

        try:
            connection = libvirt.open(self.uri)
        except libvirt.libvirtError:
            return
        try:
            for domain in connection.listAllDomains():
                if domain.isActive():
                    domain.destroy()
                domain.undefineFlags(
                    libvirt.VIR_DOMAIN_UNDEFINE_NVRAM |
                    libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE)
        finally:
            connection.close()

    def read_only(self):
        import libvirt
        return libvirt.openReadOnly(self.uri)

    def domains(self):
        """{name: XML} of every domain defined, running or not."""
        connection = self.read_only()
        try:
            return {domain.name(): domain.XMLDesc(0)
                    for domain in connection.listAllDomains()}
        finally:
            connection.close()


class QemuCompute(fixtures.Fixture):
    """nova-compute ``cmp-qemu`` of ``cloud`` on a private libvirtd."""

    def __init__(self, cloud):
        super().__init__()
        self.cloud = cloud
        self.timings = []

    def _setUp(self):
        started = time.monotonic()
        self.installed_packages = ensure_packages()
        self.timings.append(('packages', time.monotonic() - started))
        started = time.monotonic()
        self.libvirtd = self.useFixture(Libvirtd(
            os.path.join(self.cloud.dir, 'libvirt'),
            os.path.join(self.cloud.dir, 'logs')))
        self.cloud._sessions.add(self.libvirtd.process.process.pid)
        self.timings.append(('libvirtd start', time.monotonic() - started))
        self.uri = self.libvirtd.uri
        processes.run('nova-ext-manage', 'driver', 'install')
        # in the second cell: its conductor and vhost, like cmp3's
        base = self.cloud._write('nova/%s.conf' % HOST, self.cloud._nova_conf(
            HOST, databases=False, cell=CELL))
        self.conf = self._write_conf(base)
        process = self.useFixture(processes.Process(
            [os.path.join(processes.BIN, 'nova-compute'),
             '--config-file', base, '--config-file', self.conf,
             '--log-file', self.cloud._log(HOST)], self.cloud._log(HOST),
            # the exploding mutator's distribution is found on sys.path
            env=dict(os.environ, PYTHONPATH=os.pathsep.join((REPO,
                                                             PLUGINS)))))
        self.cloud._services[HOST] = process
        self.cloud._sessions.add(process.process.pid)

    def _write_conf(self, base):
        instances = os.path.join(self.cloud.dir, 'state', HOST, 'instances')
        os.makedirs(instances, exist_ok=True)
        path = os.path.join(self.cloud.dir, 'nova', HOST + '-libvirt.conf')
        # nova-compute runs as root here, and there is no sudo to start
        # Nova's privsep daemon with
        privsep = '%s --config-file %s --config-file %s' % (
            os.path.join(processes.BIN, 'privsep-helper'), base, path)
        with open(path, 'w') as f:
            f.write('[DEFAULT]\ninstances_path = %s\n'
                    '[libvirt]\nvirt_type = qemu\nconnection_uri = %s\n'
                    # TCG emulates a CPU model of its own
                    'cpu_mode = none\n'
                    '[nova_sys_admin]\nhelper_command = %s\n'
                    % (instances, self.uri, privsep))
        processes.run('nova-ext-manage', 'configure', 'nova',
                      '--config-file', path, '--libvirt-driver',
                      '--failure-domain', 'rack:' + RACK,
                      '--set', 'nova_ext.guest_mutators=' + MUTATORS)
        return path

    def register(self):
        """Once the cloud is up: wait for the service, map the host into
        the cell, disable the service (targeted boots only).
        """
        started = time.monotonic()
        session = self.cloud.session()
        deadline = time.monotonic() + 180
        while True:
            process = self.cloud._services[HOST].process
            if process.poll() is not None:
                raise AssertionError('nova-compute %s exited with %d' % (
                    HOST, process.returncode))
            status, body = self.cloud.compute_api(
                'GET', '/os-services?binary=nova-compute&host=' + HOST,
                session=session)
            services = body.get('services', [])
            if services and services[0]['state'] == 'up':
                self.service_id = services[0]['id']
                break
            if time.monotonic() > deadline:
                raise AssertionError('nova-compute %s not up after 180s: '
                                     '%s' % (HOST, services))
            time.sleep(1)
        processes.discover_computes(
            self.cloud.nova_conf, lambda: self._hypervisor(session), 1)
        self.set_enabled(False)
        self.timings.append(('service up, mapped', time.monotonic() -
                             started))

    def _hypervisor(self, session):
        # its node is named after the machine (libvirt's hostname), not
        # after the service's host
        body = self.cloud.compute_api('GET', '/os-hypervisors/detail',
                                      session=session)[1]
        found = [h for h in body.get('hypervisors', [])
                 if h['service']['host'] == HOST]
        if found:
            self.hypervisor = found[0]
        return [h['hypervisor_hostname'] for h in found]

    def set_enabled(self, enabled):
        body = {'status': 'enabled'} if enabled else {
            'status': 'disabled', 'disabled_reason': DISABLED_REASON}
        status, answer = self.cloud.compute_api(
            'PUT', '/os-services/%s' % self.service_id, body)
        if status != 200:
            raise AssertionError('enabling %s: %d %s' % (HOST, status,
                                                         answer))

    def tempest_conf(self):
        """tempest.conf lines for our plugin's libvirt test."""
        return ('[nova_ext_feature_enabled]\nlibvirt_driver = True\n'
                '[nova_ext]\nlibvirt_uri = %s\n' % self.uri)

    def wait_offered(self, offered=True, timeout=120):
        """Until placement does (not) carry COMPUTE_STATUS_DISABLED on
        the compute's provider: nova-compute syncs it after an enable.
        """
        session = self.cloud.session()
        url = '%s/resource_providers/%s/traits' % (
            self.cloud.urls['placement'], self.hypervisor['id'])
        deadline = time.monotonic() + timeout
        while True:
            traits = session.get(url, headers={
                'OpenStack-API-Version': 'placement 1.6'}).json()['traits']
            if ('COMPUTE_STATUS_DISABLED' not in traits) == offered:
                return traits
            if time.monotonic() > deadline:
                raise AssertionError('%s traits after %ds: %s' % (
                    HOST, timeout, traits))
            time.sleep(0.5)

    def boot_steps(self):
        """An operator's session on the QEMU compute with the openstack
        CLI: a server reaches ACTIVE (timed), one whose build a mutator
        breaks goes to ERROR, the next boots, deletes undefine them.
        Returns what the test asserts on.
        """
        found = {}
        cli = self.cloud.openstack
        with self.cloud.phase('QEMU compute steps (openstack CLI)'):
            self.set_enabled(True)
            found['traits'] = self.wait_offered()
            cli('flavor', 'create', '--ram', '64', '--vcpus', '1', '--disk',
                '1', '--property', 'nova_ext:oem_strings=asset=loopback-1',
                '--property', 'nova_ext:memory_sharing=false', 'qemu.tiny')
            boot = ('server', 'create', '--os-compute-api-version', '2.74',
                    '--flavor', 'qemu.tiny', '--image', self.cloud.image,
                    '--nic', 'none', '--host', HOST, '--wait', '-f', 'json')
            for name, extra in (('qemu-1', ()),
                                ('qemu-boom', ('--property',
                                               'nova_ext_test_explode=1')),
                                ('qemu-2', ())):
                started = time.monotonic()
                try:
                    cli(*boot, *extra, name)
                except AssertionError as error:  # --wait exits 1 on ERROR
                    found[name + ' cli'] = str(error)[-2000:]
                seconds = time.monotonic() - started
                self.cloud.timings.append(('  %s: server create --wait' % name,
                                           seconds))
                server = cli('server', 'show', '-f', 'json', name)
                found[name] = {
                    'status': server['status'],
                    'host': server.get('OS-EXT-SRV-ATTR:host'),
                    'instance_name': server.get(
                        'OS-EXT-SRV-ATTR:instance_name'),
                    'fault': str(server.get('fault')),
                    'cli_seconds': seconds,
                    'domains': self.libvirtd.domains(),
                    'qemu_pss_mib': self.qemu_pss_mib()}
            found['log'] = self.cloud._services[HOST].log()
            with open(os.path.join(self.cloud.dir, 'qemu-report.txt'),
                      'w') as f:
                for name in ('qemu-1', 'qemu-boom', 'qemu-2'):
                    f.write('%s: %s, %.1f s (openstack server create '
                            '--wait), QEMU PSS MiB %s\n' % (
                                name, found[name]['status'],
                                found[name]['cli_seconds'],
                                found[name]['qemu_pss_mib']))
                f.write(''.join(line for line in found['log'].splitlines(
                    True) if 'seconds to' in line))
            cli('server', 'delete', '--wait', 'qemu-1', 'qemu-boom',
                'qemu-2')
            found['domains_left'] = self.libvirtd.domains()
            self.set_enabled(False)
            self.wait_offered(False)
        return found

    def qemu_pss_mib(self):
        """{domain: PSS in MiB} of every running QEMU."""
        pids = os.path.join(self.libvirtd.dir, 'run', 'libvirt', 'qemu')
        found = {}
        for name in os.listdir(pids) if os.path.isdir(pids) else ():
            # driver.pid is libvirt's QEMU driver's own
            if not name.endswith('.pid') or name == 'driver.pid':
                continue
            try:
                with open(os.path.join(pids, name)) as f:
                    pid = f.read().strip()
                with open('/proc/%s/smaps_rollup' % pid) as f:
                    for line in f:
                        if line.startswith('Pss:'):
                            found[name[:-4]] = int(line.split()[1]) / 1024.0
            except OSError:
                continue
        return found
