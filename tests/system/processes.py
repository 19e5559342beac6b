# SPDX-License-Identifier: Apache-2.0
"""Real Nova processes on loopback, against this machine's MariaDB and
RabbitMQ, for tests that must see what a separate nova-api or
nova-conductor does with nova.conf.

Each run creates uniquely named databases and a RabbitMQ vhost-free
transport (the default vhost, unique topics are not needed: nothing is
scheduled), and drops the databases afterwards.
"""

import functools
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid

import fixtures
import pymysql

MARIADB = ('127.0.0.1', 3306)
RABBITMQ = ('127.0.0.1', 5672)
BIN = os.path.dirname(sys.executable)


def require_services():
    """Fail loudly (not skip) when MariaDB or RabbitMQ is down."""
    for name, address, start in (
            ('MariaDB', MARIADB, 'start-stop-daemon --start --oknodo '
                                 '--background --exec /usr/sbin/mariadbd'),
            ('RabbitMQ', RABBITMQ, 'rabbitmq-server -detached')):
        try:
            socket.create_connection(address, timeout=3).close()
        except OSError as error:
            raise RuntimeError('%s is not reachable on %s:%d (%s); start it '
                               'with: %s' % (name, address[0], address[1],
                                             error, start))
    _allow_connections(MARIADB_CONNECTIONS)


# Each test cloud runs several Nova and placement processes, each with
# oslo.db's default pool (5 connections, 50 more under load): two system
# tests in parallel went past MariaDB's default of 151 ('Too many
# connections', CI of 2026-11-26). DevStack configures 1024.
MARIADB_CONNECTIONS = 1024


def _allow_connections(wanted):
    """Raise MariaDB's max_connections to ``wanted`` for the server's life
    (as DevStack's my.cnf does), or say how when it cannot be done.
    """
    try:
        with Databases.connect() as connection:
            cursor = connection.cursor()
            cursor.execute("SELECT @@GLOBAL.max_connections")
            (allowed,), = cursor.fetchall()
            if allowed < wanted:
                cursor.execute('SET GLOBAL max_connections = %d' % wanted)
    except pymysql.MySQLError as error:
        raise RuntimeError(
            'MariaDB must allow %d connections for the system tests (%s); '
            'run as its root: SET GLOBAL max_connections = %d'
            % (wanted, error, wanted))


class Databases(fixtures.Fixture):
    """Fresh MariaDB databases named nxt_<run>_<name>; dropped on cleanup."""

    def __init__(self, *names):
        super().__init__()
        self.names = names

    def _setUp(self):
        run = uuid.uuid4().hex[:8]
        self.databases = {n: 'nxt_%s_%s' % (run, n) for n in self.names}
        with self.connect() as connection:
            for database in self.databases.values():
                connection.cursor().execute('CREATE DATABASE %s' % database)
        self.addCleanup(self._drop)

    def _drop(self):
        with self.connect() as connection:
            for database in self.databases.values():
                connection.cursor().execute(
                    'DROP DATABASE IF EXISTS %s' % database)

    @staticmethod
    def connect():
        return pymysql.connect(host=MARIADB[0], port=MARIADB[1],
                               user='root', autocommit=True)

    def url(self, name, plugin=True):
        return 'mysql+pymysql://root@%s:%d/%s%s' % (
            MARIADB[0], MARIADB[1], self.databases[name],
            '?plugin=nova_ext' if plugin else '')


class Vhost(fixtures.Fixture):
    """A RabbitMQ vhost of its own, deleted on cleanup: system tests run
    in parallel, and Nova's queues ('conductor', 'scheduler' ...) are named
    alike in every run, so a shared vhost lets one run's conductor answer
    another run's computes.
    """

    def _setUp(self):
        self.name = 'nxt_%s' % uuid.uuid4().hex[:8]
        self._ctl('add_vhost', self.name)
        self.addCleanup(self._ctl, 'delete_vhost', self.name)
        self._ctl('set_permissions', '-p', self.name, 'guest', '.*', '.*',
                  '.*')

    @staticmethod
    def _ctl(*args):
        subprocess.run(('rabbitmqctl',) + args, check=True,
                       capture_output=True, timeout=60)

    @property
    def transport_url(self):
        return 'rabbit://guest:guest@%s:%d/%s' % (RABBITMQ + (self.name,))


def nova_conf(dbs, vhost, host, lock_path, placement, databases=True,
              plugin=True, extra='', cell_database='cell1'):
    """nova.conf for one real Nova process on loopback.

    ``placement``: the ``[placement]`` lines (how the process reaches it);
    ``databases``: False for nova-compute, which must not have them;
    ``plugin``: ``?plugin=nova_ext`` on the database URLs; ``extra``: more
    nova.conf text, appended; ``cell_database``: the ``[database]`` (cell1
    for one cell, cell0 for the API-level services of a superconductor
    deployment).
    """
    lines = [
        '[DEFAULT]',
        'transport_url = %s' % vhost.transport_url,
        'host = %s' % host,
        'graceful_shutdown_timeout = 5',
        '[placement]',
    ] + list(placement) + [
        '[conductor]', 'workers = 1',
        '[oslo_concurrency]', 'lock_path = %s' % lock_path,
    ]
    if databases:
        lines += [
            '[api_database]', 'connection = %s' % dbs.url('api', plugin),
            '[database]', 'connection = %s' % dbs.url(cell_database,
                                                      plugin),
        ]
    return '\n'.join(lines) + '\n' + extra + '\n'


def create_nova_databases(conf, cell0_url, cells=None, bin_dir=None,
                          nova_ext=True):
    """What an operator runs before Nova's services start: the API
    database, cell0 and cell1 mapped, cell1's schema, nova-ext's tables.

    ``cells``: (name, database URL, transport URL, cell conductor's
    nova.conf) of each cell when ``conf`` is the API-level nova.conf of a
    superconductor deployment (its ``[database]`` is cell0); each cell is
    mapped and its schema created with its own conductor's file.
    ``bin_dir``: the console scripts' directory (another release's venv);
    ``nova_ext``: False leaves nova-ext's tables to the caller.
    """
    conf = ('--config-file', conf)
    manage = functools.partial(run, bin_dir=bin_dir)

    manage('nova-manage', *conf, 'api_db', 'sync')
    manage('nova-manage', *conf, 'cell_v2', 'map_cell0',
           '--database_connection', cell0_url)
    if cells is None:
        manage('nova-manage', *conf, 'cell_v2', 'create_cell', '--name',
               'cell1')
    for name, database, transport, _ in cells or ():
        manage('nova-manage', *conf, 'cell_v2', 'create_cell', '--name',
               name, '--database_connection', database, '--transport-url',
               transport)
    manage('nova-manage', *conf, 'db', 'sync')
    for _, _, _, cell_conf in cells or ():
        manage('nova-manage', '--config-file', cell_conf, 'db', 'sync',
               '--local_cell')
    if nova_ext:
        manage('nova-ext-manage', *conf, 'db', 'sync')


def discover_computes(conf, hypervisors, expected, timeout=120,
                      bin_dir=None):
    """``discover_hosts`` until ``hypervisors()`` (names, from nova-api)
    lists ``expected`` of them: each nova-compute must have registered its
    node first. Returns the names. ``bin_dir``: as for :func:`run`.
    """
    deadline = time.monotonic() + timeout
    while True:
        run('nova-manage', '--config-file', conf, 'cell_v2',
            'discover_hosts', bin_dir=bin_dir)
        found = hypervisors()
        if len(found) >= expected:
            return found
        if time.monotonic() > deadline:
            raise AssertionError('%d of %d computes registered within %ds: '
                                 '%s' % (len(found), expected, timeout,
                                         found))
        time.sleep(1)


def run(*argv, env=None, bin_dir=None):
    """Run a console script of this venv (or of ``bin_dir``); return its
    output or fail.
    """
    result = subprocess.run((os.path.join(bin_dir or BIN, argv[0]),) +
                            argv[1:],
                            capture_output=True, text=True, env=env,
                            timeout=300)
    if result.returncode:
        raise AssertionError('%s exited %d:\n%s\n%s' % (
            ' '.join(argv), result.returncode, result.stdout,
            result.stderr[-3000:]))
    return result.stdout


class Process(fixtures.Fixture):
    """A long-running process, stopped on cleanup; its log file kept."""

    def __init__(self, argv, log_path, env=None, cwd=None):
        super().__init__()
        self.argv, self.log_path, self.env = argv, log_path, env
        self.cwd = cwd

    def _setUp(self):
        self.output = open(self.log_path + '.out', 'w')
        self.process = subprocess.Popen(
            self.argv, stdout=self.output, stderr=subprocess.STDOUT,
            env=self.env, cwd=self.cwd, start_new_session=True)
        self.addCleanup(self.stop)

    def stop(self):
        """SIGTERM to the process group, SIGKILL after 20 s; again on
        cleanup, a no-op then.
        """
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait()
        if not self.output.closed:
            self.output.close()

    def log(self):
        text = ''
        for path in (self.log_path, self.log_path + '.out'):
            if os.path.exists(path):
                with open(path) as f:
                    text += f.read()
        return text

    def wait_for_log(self, needle, timeout=90, count=1):
        """The log, once it holds ``needle`` ``count`` times."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log()
            if text.count(needle) >= count:
                return text
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError('%r not logged by %s within %ds (exit code '
                             '%s); log:\n%s' % (
                                 needle, ' '.join(self.argv[:2]), timeout,
                                 self.process.poll(), self.log()[-4000:]))


def http_get(url, timeout=60):
    """GET ``url`` once the server listens; return the HTTP status."""
    import urllib.error
    import urllib.request
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def api_paste_ini(prefix=None):
    return os.path.join(prefix or sys.prefix, 'etc', 'nova', 'api-paste.ini')


def copy_api_paste(config_dir, trust_identity_headers=False, prefix=None):
    """Nova's api-paste.ini; optionally without keystonemiddleware, so the
    caller's X-User-Id/X-Project-Id/X-Roles headers are taken as keystone
    would have set them (Nova 34 has no noauth pipeline any more), and
    the token ``admin`` is the administrator (tests/system/token_identity.py:
    openstacksdk's ``admin_token`` auth). ``prefix``: the venv whose Nova's
    file it is (default: this one).
    """
    target = os.path.join(config_dir, 'api-paste.ini')
    shutil.copy(api_paste_ini(prefix), target)
    if trust_identity_headers:
        with open(target) as f:
            text = f.read()
        with open(target, 'w') as f:
            f.write(text.replace(' authtoken keystonecontext',
                                 ' token_identity keystonecontext') +
                    '\n[filter:token_identity]\npaste.filter_factory = '
                    'tests.system.token_identity:filter_factory\n')


# nova-api under a WSGI server: Nova's own application object, served by
# the standard library (uWSGI or mod_wsgi in production).
# Nova parses sys.argv as its own command line: the port comes by env.
WSGI_SERVER = """
import os
from wsgiref import simple_server
from nova.wsgi.osapi_compute import application
simple_server.make_server('127.0.0.1', int(os.environ['WSGI_PORT']),
                          application).serve_forever()
"""
