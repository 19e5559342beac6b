# SPDX-License-Identifier: Apache-2.0
"""The DevStack plugin (devstack/settings, devstack/plugin.sh), phase by
phase, through tests/devstack/harness.sh: DevStack's functions and the lines
of lib/nova and lib/tempest that write nova.conf and tempest.conf, around the
real plugin, which runs the real ``nova-ext-manage`` of this environment.

``db sync`` runs for real against sqlite files named by nova.conf, as
DevStack's MySQL URLs would be. ``driver install`` writes into a scratch
``nova`` package (symlinks to the installed Nova, with a ``virt`` directory
of its own) put first on PYTHONPATH: the real Nova tree is shared with the
functional tests running alongside, which install the same module and would
lose it to this test's ``clean``.

Service names come from DevStack, not from us:
tests/devstack/devstack-services.txt (written by tools/devstack_services.py
from DevStack's stackrc and lib/) holds every name DevStack gives a
service, and stackrc's default ENABLED_SERVICES. The harness runs with that
default unless a test names another node's services, which must be
DevStack's names too. With a DevStack checkout (NOVA_EXT_DEVSTACK_DIR, or
where Zuul or DevStack put one) every test also runs through DevStack's own
functions and stackrc, and the list is compared with what the checkout says
now.
"""

import os
import re
import sqlite3
import subprocess
import sys

import fnmatch

import fixtures
from oslo_config import cfg
import testtools

from nova_ext.virt.libvirt import shim

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
HARNESS = os.path.join(TOP, 'tests', 'devstack', 'harness.sh')
SHELL_FILES = [os.path.join(TOP, 'devstack', 'settings'),
               os.path.join(TOP, 'devstack', 'plugin.sh'), HARNESS]
BIN = os.path.dirname(sys.executable)
SERVICES_LIST = os.path.join(TOP, 'tests', 'devstack', 'devstack-services.txt')
DEVSTACK_SERVICES_TOOL = os.path.join(TOP, 'tools', 'devstack_services.py')
# Where a DevStack checkout is found: the variable, Zuul's required-projects
# place, DevStack's own.
DEVSTACK_CHECKOUTS = [
    os.environ.get('NOVA_EXT_DEVSTACK_DIR', ''),
    os.path.expanduser('~/src/opendev.org/openstack/devstack'),
    '/opt/stack/devstack']

DEVSTACK_FILTERS = ['ComputeFilter', 'ComputeCapabilitiesFilter',
                    'ImagePropertiesFilter', 'ServerGroupAntiAffinityFilter',
                    'ServerGroupAffinityFilter', 'SameHostFilter',
                    'DifferentHostFilter']
OUR_FILTER = 'FailureDomainAntiAffinityFilter'
FLAGS = ['failure_domain_filter', 'bin_packing_weigher', 'host_class',
         'maintenance', 'per_flavor_quota', 'libvirt_driver']


def devstack_services():
    """(stackrc's default ENABLED_SERVICES, every DevStack service name or
    name pattern), from the checked-in list.
    """
    defaults, names = [], []
    with open(SERVICES_LIST) as f:
        for line in f:
            fields = line.split('#')[0].split()
            if fields:
                names.append(fields[0])
                if fields[1:] == ['default']:
                    defaults.append(fields[0])
    return defaults, names


def is_devstack_service(name):
    # "*" stands for what DevStack puts in a name (a cell number): at
    # least one character
    return any(re.fullmatch(fnmatch.translate(pattern).replace('.*', '.+'),
                            name) for pattern in devstack_services()[1])


def services_settings_enables():
    """The services devstack/settings itself enables (the plugin's own)."""
    with open(os.path.join(TOP, 'devstack', 'settings')) as f:
        return {name for line in re.findall(
            r'^\s*enable_service\s+(.*)$', f.read(), re.MULTILINE)
            for name in line.split()}


def services_asked_about(path):
    """Every name ``path`` hands ``is_service_enabled``."""
    with open(path) as f:
        text = f.read()
    return {name for words in re.findall(
        r'\bis_service_enabled((?:[ \t]+[\w.$-]+)+)', text)
        for name in words.split()}


def devstack_checkout():
    for path in DEVSTACK_CHECKOUTS:
        if path and all(os.path.isfile(os.path.join(path, name))
                        for name in ('stackrc', 'functions',
                                     'functions-common')):
            return path
    return None


def read_ini(path):
    """{section: {option: [every value]}}, as oslo.config reads the file."""
    sections = {}
    cfg.ConfigParser(path, sections).parse()
    return sections


def one(sections, section, option):
    values = sections.get(section, {}).get(option)
    return values[-1] if values else None


def read_tempest_conf(path):
    from nova_ext.tempest import config as tempest_config

    conf = cfg.ConfigOpts()
    for group, opts in tempest_config.list_opts():
        conf.register_opts(opts, group=group)
    conf.register_opts([cfg.ListOpt('scheduler_enabled_filters',
                                    default=[])],
                       group='compute-feature-enabled')
    conf(args=[], default_config_files=[path])
    return conf


class DevStackHarnessTestCase(testtools.TestCase):
    """A scratch DevStack layout and the harness that runs plugin phases."""

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.nova_conf = os.path.join(self.dir, 'etc', 'nova', 'nova.conf')
        self.cpu_conf = os.path.join(self.dir, 'etc', 'nova', 'nova-cpu.conf')
        self.cell1_conf = os.path.join(self.dir, 'etc', 'nova',
                                       'nova_cell1.conf')
        self.tempest_conf = os.path.join(self.dir, 'opt', 'stack', 'tempest',
                                         'etc', 'tempest.conf')
        self.api_db = os.path.join(self.dir, 'opt', 'stack', 'data',
                                   'nova_api.sqlite')
        self.calls = os.path.join(self.dir, 'calls.log')
        self.virt_dir = self._scratch_nova()
        self.shim = os.path.join(self.virt_dir, 'nova_ext_libvirt.py')
        # The caller's toggles must not leak into the phases.
        self.env = {name: value for name, value in os.environ.items()
                    if not name.startswith(('NOVA_EXT_', 'NOVA_'))
                    and name not in ('ENABLED_SERVICES', 'DISABLED_SERVICES',
                                     'VIRT_DRIVER', 'PYTHONPATH', 'USE_VENV',
                                     'OFFLINE', 'TEMPEST_PLUGINS')}
        self.env.update(NOVA_EXT_HARNESS_DIR=self.dir, NOVA_BIN_DIR=BIN,
                        PYTHONPATH=os.path.dirname(os.path.dirname(
                            self.virt_dir)))

    def _scratch_nova(self):
        import nova

        real = os.path.dirname(nova.__file__)
        package = os.path.join(self.dir, 'python', 'nova')
        virt = os.path.join(package, 'virt')
        os.makedirs(virt)
        for name in os.listdir(real):
            if name != 'virt':
                os.symlink(os.path.join(real, name),
                           os.path.join(package, name))
        for name in os.listdir(os.path.join(real, 'virt')):
            # tests.functional.test_libvirt_driver installs the shim into
            # the venv's Nova and leaves it: this Nova starts without it
            if name.startswith(shim.MODULE + '.'):
                continue
            os.symlink(os.path.join(real, 'virt', name),
                       os.path.join(virt, name))
        return virt

    def run_harness(self, *args, ok=True, **env):
        # A node's services are named as DevStack names them: a name of
        # our own spelling would be enabled here and nowhere else.
        services = env.get('ENABLED_SERVICES')
        if services is not None:
            unknown = [name for name in services.split(',')
                       if not is_devstack_service(name)]
            self.assertEqual([], unknown, 'not DevStack service names '
                             '(tests/devstack/devstack-services.txt)')
        result = subprocess.run(
            [HARNESS] + list(args), env=dict(self.env, **env),
            capture_output=True, text=True, timeout=300)
        if ok and result.returncode != 0:
            self.fail('%s: exit %d\n%s\n%s' % (
                ' '.join(args), result.returncode, result.stdout[-3000:],
                result.stderr[-6000:]))
        return result

    def stack_to_post_config(self, init_nova=False, **env):
        """stack.sh's order: settings, lib/nova's nova.conf, the plugin's
        install phase, the plugin's post-config phase.
        """
        self.run_harness('devstack', 'create_nova_conf', **env)
        if init_nova:
            self.run_harness('devstack', 'init_nova', **env)
        with open(self.nova_conf) as f:
            before = f.read()
        self.run_harness('stack', 'install', **env)
        self.run_harness('stack', 'post-config', **env)
        return before

    def read(self, path):
        with open(path) as f:
            return f.read()

    def recorded(self, prefix):
        if not os.path.exists(self.calls):
            return []
        with open(self.calls) as f:
            return [line.rstrip('\n') for line in f
                    if line.startswith(prefix)]

    def nova_ext_tables(self):
        if not os.path.exists(self.api_db):
            return []
        with sqlite3.connect(self.api_db) as db:
            return sorted(row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND "
                "name LIKE 'nova_ext%'"))


class DevStackPluginTest(DevStackHarnessTestCase):

    def test_every_phase_with_every_feature(self):
        before = self.stack_to_post_config(
            init_nova=True, NOVA_EXT_FAILURE_DOMAIN='rack:r1')
        conf = read_ini(self.nova_conf)
        # settings appended to NOVA_FILTERS, which lib/nova wrote.
        self.assertEqual(DEVSTACK_FILTERS + [OUR_FILTER], one(
            conf, 'filter_scheduler', 'enabled_filters').split(','))
        self.assertEqual(['nova.scheduler.filters.all_filters',
                          'nova_ext.scheduler.filters.all_filters'],
                         conf['filter_scheduler']['available_filters'])
        self.assertEqual(
            'nova.scheduler.weights.all_weighers,'
            'nova_ext.scheduler.weights.all_weighers',
            one(conf, 'filter_scheduler', 'weight_classes'))
        self.assertEqual('10.0', one(conf, 'nova_ext',
                                     'bin_packing_weight_multiplier'))
        self.assertEqual('maintenance,host_class,failure_domain',
                         one(conf, 'nova_ext', 'request_filters'))
        self.assertEqual('per_flavor', one(conf, 'nova_ext', 'quota_driver'))
        for section, db in (('database', 'nova_cell0'),
                            ('api_database', 'nova_api')):
            self.assertEqual(
                'sqlite:///%s/opt/stack/data/%s.sqlite?plugin=nova_ext'
                % (self.dir, db), one(conf, section, 'connection'))
        self.assertEqual('nova_ext_libvirt.LibvirtDriver',
                         one(conf, 'DEFAULT', 'compute_driver'))
        self.assertEqual('domain_metadata,oem_strings,memory_sharing',
                         one(conf, 'nova_ext', 'guest_mutators'))
        self.assertEqual('rack:r1', one(conf, 'nova_ext', 'failure_domain'))
        # The cell conductor's file is left as lib/nova wrote it.
        self.assertNotIn('nova_ext', read_ini(self.cell1_conf))
        self.assertNotIn('plugin=nova_ext', self.read(self.cell1_conf))

        # db sync ran against the API database nova.conf names.
        self.assertEqual(['nova_ext_activations', 'nova_ext_flavor_quotas',
                          'nova_ext_spread_claims'],
                         [t for t in self.nova_ext_tables()
                          if t != 'nova_ext_alembic_version'])
        with open(self.shim) as f:
            self.assertIn('nova_ext.virt.libvirt.driver', f.read())

        # install: nova-ext editable without letting pip near Nova.
        self.assertIn('pip_install --no-deps -e %s/opt/stack/nova-ext'
                      % self.dir, self.recorded('pip_install'))
        requirements = [line.strip() for line in self.recorded('    ')]
        self.assertIn('oslo.db>=16.0.0', requirements)
        self.assertFalse([r for r in requirements if r.startswith('nova')])
        self.assertEqual([], self.recorded('setup_develop'))

        # The compute gets the edits through lib/nova's copy at start.
        self.run_harness('devstack', 'start_nova_compute')
        cpu = read_ini(self.cpu_conf)
        self.assertEqual('nova_ext_libvirt.LibvirtDriver',
                         one(cpu, 'DEFAULT', 'compute_driver'))
        self.assertEqual('rack:r1', one(cpu, 'nova_ext', 'failure_domain'))

        # A second post-config (stack.sh re-run on a kept nova.conf)
        # changes nothing.
        after = self.read(self.nova_conf)
        self.run_harness('stack', 'post-config',
                         NOVA_EXT_FAILURE_DOMAIN='rack:r1')
        self.assertEqual(after, self.read(self.nova_conf))

        # extra: the quota check runs; a disagreeing process is a warning,
        # not the end of stack.sh. Here nova-api started with the driver
        # (with no process at all, the check has nothing to compare).
        with sqlite3.connect(self.api_db) as db:
            db.execute("INSERT INTO nova_ext_activations (host, binary, pid, "
                       "quota_driver, created_at) VALUES ('ctl', "
                       "'nova-osapi_compute', 1, 'per_flavor', "
                       "'2026-01-01 00:00:00')")
        result = self.run_harness('stack', 'extra')
        self.assertIn('[nova_ext] quota_driver here: per_flavor',
                      result.stdout)
        self.assertIn('nova-ext Upgrade Check Results', result.stdout)
        self.assertEqual([], self.recorded('warn'))
        with sqlite3.connect(self.api_db) as db:
            db.execute("INSERT INTO nova_ext_activations (host, binary, pid, "
                       "quota_driver, created_at) VALUES ('ctl', "
                       "'nova-conductor', 1, NULL, '2026-01-01 00:00:00')")
        result = self.run_harness('stack', 'extra')
        self.assertIn('MISMATCH', result.stdout)
        self.assertEqual(['quota driver', 'upgrade check'], [
            'quota driver' in line and 'quota driver' or 'upgrade check'
            for line in self.recorded('warn nova-ext:')])

        # test-config, after lib/tempest wrote tempest.conf.
        self.run_harness('devstack', 'configure_tempest')
        self.run_harness('stack', 'test-config',
                         NOVA_EXT_FAILURE_DOMAIN='rack:r1')
        tempest = read_tempest_conf(self.tempest_conf)
        for flag in FLAGS:
            self.assertTrue(tempest.nova_ext_feature_enabled[flag], flag)
        self.assertEqual(DEVSTACK_FILTERS + [OUR_FILTER], tempest[
            'compute-feature-enabled'].scheduler_enabled_filters)
        self.assertEqual('rack', tempest.nova_ext.spread_level)

        # unstack leaves everything for the next stack.sh.
        self.run_harness('unstack')
        self.assertEqual(after, self.read(self.nova_conf))
        self.assertTrue(os.path.exists(self.shim))

        # clean takes out what post-config put in, toggles aside, and the
        # filter settings added to what lib/nova wrote.
        # (clean.sh sources the same local.conf as stack.sh: the failure
        # domain configure wrote is the one it takes out)
        self.run_harness('clean', NOVA_EXT_ENABLE_QUOTA='False',
                         NOVA_EXT_FAILURE_DOMAIN='rack:r1')
        self.assertEqual(before.replace(',' + OUR_FILTER, ''),
                         self.read(self.nova_conf))
        self.assertFalse(os.path.exists(self.shim))

    def test_each_toggle_off_leaves_its_feature_out(self):
        expectations = {
            'NOVA_EXT_ENABLE_FILTERS': lambda conf: (
                'available_filters' not in conf['filter_scheduler']
                and OUR_FILTER not in one(conf, 'filter_scheduler',
                                          'enabled_filters')),
            'NOVA_EXT_ENABLE_WEIGHERS': lambda conf: (
                'weight_classes' not in conf['filter_scheduler']
                and 'bin_packing_weight_multiplier' not in conf['nova_ext']),
            'NOVA_EXT_ENABLE_REQUEST_FILTERS': lambda conf: (
                'request_filters' not in conf['nova_ext']),
            'NOVA_EXT_ENABLE_QUOTA': lambda conf: (
                'quota_driver' not in conf['nova_ext']
                # [api_database] keeps ?plugin=nova_ext: nova-scheduler
                # activates the scheduler features through it; nova-ext's
                # tables stay, for the filters' spread ledger
                and 'plugin' not in one(conf, 'database', 'connection')
                and 'nova_ext_spread_claims' in self.nova_ext_tables()),
            'NOVA_EXT_ENABLE_LIBVIRT_DRIVER': lambda conf: (
                one(conf, 'DEFAULT', 'compute_driver')
                == 'libvirt.LibvirtDriver'
                and 'guest_mutators' not in conf['nova_ext']
                and not os.path.exists(self.shim)),
        }
        for toggle, feature_absent in expectations.items():
            for path in (self.api_db, self.calls):
                if os.path.exists(path):
                    os.unlink(path)
            self.stack_to_post_config(**{toggle: 'False'})
            conf = read_ini(self.nova_conf)
            self.assertTrue(feature_absent(conf), toggle)
            # ... and only that one.
            others = [t for t in expectations if t != toggle]
            self.assertEqual([], [t for t in others
                                  if expectations[t](conf)], toggle)
            self.run_harness('devstack', 'configure_tempest')
            self.run_harness('stack', 'test-config', **{toggle: 'False'})
            tempest = read_tempest_conf(self.tempest_conf)
            enabled = [flag for flag in FLAGS
                       if tempest.nova_ext_feature_enabled[flag]]
            off = {'NOVA_EXT_ENABLE_FILTERS': ['failure_domain_filter'],
                   'NOVA_EXT_ENABLE_WEIGHERS': ['bin_packing_weigher'],
                   'NOVA_EXT_ENABLE_REQUEST_FILTERS': ['host_class',
                                                       'maintenance'],
                   'NOVA_EXT_ENABLE_QUOTA': ['per_flavor_quota'],
                   'NOVA_EXT_ENABLE_LIBVIRT_DRIVER': []}[toggle]
            # No failure domain here: tempest's libvirt test would find no
            # traits, so its flag stays off.
            self.assertEqual([f for f in FLAGS
                              if f not in off + ['libvirt_driver']],
                             enabled, toggle)
            self.run_harness('clean')

    def test_request_filters_without_filters_or_weighers(self):
        # The engine plugin activates them in nova-scheduler: they need
        # neither of the other two toggles, and tempest is told so.
        off = {'NOVA_EXT_ENABLE_FILTERS': 'False',
               'NOVA_EXT_ENABLE_WEIGHERS': 'False',
               'NOVA_EXT_ENABLE_QUOTA': 'False',
               'NOVA_EXT_ENABLE_LIBVIRT_DRIVER': 'False'}
        self.stack_to_post_config(**off)
        conf = read_ini(self.nova_conf)
        self.assertEqual('maintenance,host_class,failure_domain',
                         one(conf, 'nova_ext', 'request_filters'))
        self.assertNotIn('weight_classes', conf['filter_scheduler'])
        self.run_harness('devstack', 'configure_tempest', **off)
        self.run_harness('stack', 'test-config', **off)
        tempest = read_tempest_conf(self.tempest_conf)
        self.assertEqual(['host_class', 'maintenance'], [
            flag for flag in FLAGS
            if tempest.nova_ext_feature_enabled[flag]])

    def test_install_into_a_system_python(self):
        # DevStack without its global venv runs pip as root.
        checkout = os.path.join(self.dir, 'checkout')
        os.makedirs(os.path.join(checkout, 'nova_ext.egg-info'))
        with open(os.path.join(checkout, 'requirements.txt'), 'w') as f:
            f.write('pbr>=6.0.0\nnova>=33.0.0,<35\nnova-foo>=1\n')
        self.run_harness('stack', 'install', GLOBAL_VENV='False',
                         NOVA_EXT_DIR=checkout)
        self.assertEqual(['pip_install -r', '    pbr>=6.0.0',
                          '    nova-foo>=1',
                          'pip_install --no-deps -e %s' % checkout,
                          'safe_chown -R stack %s/nova_ext.egg-info'
                          % checkout],
                         [re.sub(r'^(pip_install -r) \S+$', r'\1', line)
                          for line in self.recorded('')])

    def test_everything_off_leaves_nova_and_tempest_alone(self):
        off = {toggle: 'no' for toggle in (
            'NOVA_EXT_ENABLE_FILTERS', 'NOVA_EXT_ENABLE_WEIGHERS',
            'NOVA_EXT_ENABLE_REQUEST_FILTERS', 'NOVA_EXT_ENABLE_QUOTA',
            'NOVA_EXT_ENABLE_LIBVIRT_DRIVER')}
        before = self.stack_to_post_config(**off)
        self.assertEqual(before, self.read(self.nova_conf))
        self.assertEqual(DEVSTACK_FILTERS, one(read_ini(
            self.nova_conf), 'filter_scheduler', 'enabled_filters').split(','))
        self.run_harness('devstack', 'configure_tempest', **off)
        tempest_before = self.read(self.tempest_conf)
        self.run_harness('stack', 'test-config', **off)
        self.assertEqual(tempest_before, self.read(self.tempest_conf))
        self.assertEqual([], self.nova_ext_tables())
        self.assertFalse(os.path.exists(self.shim))

    def test_disabled_service_does_nothing(self):
        before = self.stack_to_post_config(DISABLED_SERVICES='nova-ext')
        self.assertEqual(before, self.read(self.nova_conf))
        self.assertEqual([], self.recorded('pip_install'))
        self.assertEqual(DEVSTACK_FILTERS, one(read_ini(
            self.nova_conf), 'filter_scheduler', 'enabled_filters').split(','))

    def test_libvirt_driver_follows_virt_driver_and_computes(self):
        self.stack_to_post_config(VIRT_DRIVER='fake')
        conf = read_ini(self.nova_conf)
        self.assertNotIn('compute_driver', conf['DEFAULT'])
        self.assertNotIn('guest_mutators', conf['nova_ext'])
        self.assertFalse(os.path.exists(self.shim))

        # Asked for explicitly, it is installed whatever VIRT_DRIVER says.
        self.stack_to_post_config(VIRT_DRIVER='fake',
                                  NOVA_EXT_ENABLE_LIBVIRT_DRIVER='True')
        self.assertEqual('nova_ext_libvirt.LibvirtDriver', one(
            read_ini(self.nova_conf), 'DEFAULT', 'compute_driver'))
        self.assertTrue(os.path.exists(self.shim))
        self.run_harness('clean')

        # A controller without nova-compute keeps Nova's driver.
        self.stack_to_post_config(ENABLED_SERVICES='n-api,n-cond,n-sch')
        self.assertEqual('libvirt.LibvirtDriver', one(
            read_ini(self.nova_conf), 'DEFAULT', 'compute_driver'))
        self.assertFalse(os.path.exists(self.shim))

    def test_compute_only_node(self):
        # lib/nova writes no database URL there; the API node syncs.
        self.stack_to_post_config(ENABLED_SERVICES='n-cpu',
                                  NOVA_EXT_FAILURE_DOMAIN='row:b,rack:r2')
        conf = read_ini(self.nova_conf)
        self.assertNotIn('api_database', conf)
        self.assertEqual('per_flavor', one(conf, 'nova_ext', 'quota_driver'))
        self.assertEqual('row:b,rack:r2',
                         one(conf, 'nova_ext', 'failure_domain'))
        self.assertEqual([], self.nova_ext_tables())
        self.assertTrue(os.path.exists(self.shim))
        # no request filters: no nova-scheduler here to run them
        self.assertNotIn('request_filters', conf['nova_ext'])
        # extra: no database here, so neither the quota check nor the
        # upgrade check runs; the driver check reads nova-cpu.conf
        self.run_harness('devstack', 'start_nova_compute',
                         ENABLED_SERVICES='n-cpu')
        result = self.run_harness('stack', 'extra', ENABLED_SERVICES='n-cpu')
        self.assertNotIn('Upgrade Check Results', result.stdout)
        self.assertNotIn('quota driver here', result.stdout)
        self.assertIn('--config-file %s driver check' % self.cpu_conf,
                      result.stderr)
        self.assertEqual([], self.recorded('warn'))
        self.run_harness('clean', NOVA_EXT_FAILURE_DOMAIN='row:b,rack:r2')
        self.assertNotIn('nova_ext', read_ini(self.nova_conf))

    def test_settings_append_the_filter_once(self):
        script = ('source %s/devstack/settings; source %s/devstack/settings; '
                  'echo "$NOVA_FILTERS"' % (TOP, TOP))
        result = subprocess.run(
            ['bash', '-c', 'enable_service() { :; }; is_service_enabled() { '
             ':; }; trueorfalse() { echo "$1"; }; NOVA_FILTERS=A,B; '
             'DEST=/opt/stack; ' + script],
            capture_output=True, text=True, check=True)
        self.assertEqual('A,B,%s\n' % OUR_FILTER, result.stdout)

    def test_a_failing_command_stops_the_stack(self):
        # nova.conf missing: configure must fail, and so must the phase.
        result = self.run_harness('stack', 'post-config', ok=False)
        self.assertNotEqual(0, result.returncode)
        self.assertIn('die nova-ext-manage configure nova failed',
                      self.recorded('die'))

    def test_shell_syntax(self):
        for path in SHELL_FILES:
            subprocess.run(['bash', '-n', path], check=True)

    def test_shellcheck(self):
        result = subprocess.run(
            [os.path.join(BIN, 'shellcheck'), '-x'] + SHELL_FILES,
            capture_output=True, text=True, cwd=TOP)
        self.assertEqual(0, result.returncode, result.stdout)


class DevStackShapesTest(DevStackHarnessTestCase):
    """The shapes DevStack really runs in: Nova in its own virtualenv,
    offline, tempest plugins in tempest's environment, dbcounter on the
    database URLs, per-cell conductor files.
    """

    def test_use_venv_installs_into_novas_venv(self):
        self.run_harness('stack', 'install', USE_VENV='True')
        venv = '[venv %s/opt/stack/nova.venv]' % self.dir
        installs = self.recorded('pip_install')
        self.assertEqual(2, len(installs), installs)
        for line in installs:
            self.assertTrue(line.startswith('pip_install ' + venv), line)
        self.assertIn('--no-deps -e %s/opt/stack/nova-ext' % self.dir,
                      installs[-1])

    def test_offline_installs_nothing_and_needs_nova_ext_there(self):
        # nova-ext already in Nova's environment, and lib/tempest told to
        # put it in tempest's: nothing to install
        plugins = '--no-deps %s/opt/stack/nova-ext' % self.dir
        self.run_harness('stack', 'install', OFFLINE='True',
                         TEMPEST_PLUGINS=plugins)
        self.assertEqual([], self.recorded(''))
        # not there: one clear line, stack.sh stops
        empty_bin = os.path.join(self.dir, 'empty-bin')
        os.mkdir(empty_bin)
        result = self.run_harness('stack', 'install', ok=False,
                                  OFFLINE='True', NOVA_BIN_DIR=empty_bin,
                                  TEMPEST_PLUGINS=plugins)
        self.assertNotEqual(0, result.returncode)
        self.assertIn('nova-ext is not installed in Nova\'s environment '
                      '(%s has no nova-ext-manage): with OFFLINE=True '
                      'install it beforehand' % empty_bin, result.stderr)
        self.assertEqual([], self.recorded('pip_install'))

    def test_tempest_plugin_lands_in_tempests_venv(self):
        self.stack_to_post_config()
        self.run_harness('devstack', 'configure_tempest')
        self.run_harness('stack', 'test-config')
        self.assertEqual(['tempest-venv pip install --no-deps -e '
                          '%s/opt/stack/nova-ext' % self.dir],
                         self.recorded('tempest-venv'))
        self.assertTrue(read_tempest_conf(
            self.tempest_conf).nova_ext_feature_enabled.per_flavor_quota)

    def test_tempest_plugins_listing_nova_ext_is_left_to_lib_tempest(self):
        self.stack_to_post_config()
        self.run_harness('devstack', 'configure_tempest')
        self.run_harness('stack', 'test-config', TEMPEST_PLUGINS=(
            '/opt/stack/other-plugin %s/opt/stack/nova-ext' % self.dir))
        self.assertEqual([], self.recorded('tempest-venv'))

    def test_offline_with_tempest_needs_tempest_plugins(self):
        # lib/tempest rebuilds tempest's venv on every stack.sh: offline,
        # TEMPEST_PLUGINS is the one way nova-ext gets there, and stack.sh
        # says so at install, before the stack rather than after it.
        result = self.run_harness('stack', 'install', ok=False,
                                  OFFLINE='True')
        self.assertNotEqual(0, result.returncode)
        self.assertIn('OFFLINE=True with tempest: add nova-ext to '
                      'TEMPEST_PLUGINS in local.conf (TEMPEST_PLUGINS='
                      '"--no-deps %s/opt/stack/nova-ext")' % self.dir,
                      result.stderr)
        # without tempest there is nothing to ask for
        self.run_harness('stack', 'install', OFFLINE='True',
                         ENABLED_SERVICES='n-api,n-cond,n-sch,n-cpu')
        # with it, test-config leaves the install to lib/tempest and stops
        # clearly if the plugin did not land in tempest's venv
        self.stack_to_post_config()
        self.run_harness('devstack', 'configure_tempest')
        result = self.run_harness(
            'stack', 'test-config', ok=False, OFFLINE='True',
            TEMPEST_PLUGINS='--no-deps %s/opt/stack/nova-ext' % self.dir,
            HARNESS_TEMPEST_PYTHON='/usr/bin/python3')
        self.assertNotEqual(0, result.returncode)
        self.assertIn("nova-ext's tempest plugin is not in tempest's "
                      "environment %s/opt/stack/tempest/.tox/tempest: add "
                      "it to TEMPEST_PLUGINS" % self.dir, result.stderr)
        self.assertEqual([], self.recorded('tempest-venv'))

    def test_cell_conductor_files_go_through_their_role(self):
        self.stack_to_post_config()
        before = self.read(self.cell1_conf)
        cell2 = os.path.join(os.path.dirname(self.cell1_conf),
                             'nova_cell2.conf')
        with open(cell2, 'w') as f:
            f.write(before.replace('nova_cell1', 'nova_cell2'))
        result = self.run_harness('stack', 'post-config')
        for path in (self.cell1_conf, cell2):
            self.assertIn('--config-file %s --role cell-conductor' % path,
                          result.stderr)
            self.assertIn('%s: unchanged' % path, result.stdout)
        self.assertEqual(before, self.read(self.cell1_conf))
        self.assertIn('quota left out for cell-conductor', result.stderr)


class DevStackDefaultServicesTest(DevStackHarnessTestCase):
    """The plugin on the node DevStack builds when local.conf names no
    services (stackrc's ENABLED_SERVICES), and on a scheduler-only node.
    """

    def test_default_services_get_every_scheduler_feature(self):
        # the harness runs with stackrc's default when given none
        self.assertNotIn('ENABLED_SERVICES', self.env)
        toggles = {'NOVA_EXT_ENABLE_REQUEST_FILTERS': 'True'}
        self.stack_to_post_config(**toggles)
        conf = read_ini(self.nova_conf)
        self.assertEqual('maintenance,host_class,failure_domain',
                         one(conf, 'nova_ext', 'request_filters'))
        self.assertIn('--request-filters', ' '.join(
            self.recorded('')) + self.run_harness(
                'stack', 'post-config', **toggles).stderr)

    def test_api_database_gets_the_engine_plugin_with_quota_off(self):
        # doc/source/devstack.rst: the request filters alone put
        # ?plugin=nova_ext on [api_database] (nova-scheduler activates them
        # through it); quota's [database] one stays out
        toggles = {'NOVA_EXT_ENABLE_REQUEST_FILTERS': 'True',
                   'NOVA_EXT_ENABLE_QUOTA': 'False',
                   'NOVA_EXT_ENABLE_FILTERS': 'False',
                   'NOVA_EXT_ENABLE_WEIGHERS': 'False'}
        self.stack_to_post_config(**toggles)
        conf = read_ini(self.nova_conf)
        self.assertEqual(
            'sqlite:///%s/opt/stack/data/nova_api.sqlite?plugin=nova_ext'
            % self.dir, one(conf, 'api_database', 'connection'))
        self.assertNotIn('plugin=', one(conf, 'database', 'connection'))

    def test_scheduler_only_node(self):
        node = {'ENABLED_SERVICES': 'n-sch'}
        self.run_harness('devstack', 'create_nova_conf', **node)
        # lib/nova writes no database URL on a node running only n-sch (its
        # own test asks for "n-sched"); local.conf's post-config adds them,
        # as it must for nova-scheduler to start at all
        self.assertNotIn('api_database', read_ini(self.nova_conf))
        with open(self.nova_conf, 'a') as f:
            f.write('[database]\nconnection = sqlite:///%s/opt/stack/data/'
                    'nova_cell0.sqlite\n[api_database]\nconnection = '
                    'sqlite:///%s\n' % (self.dir, self.api_db))
        self.run_harness('devstack', 'init_nova', **node)
        self.run_harness('stack', 'install', **node)
        self.run_harness('stack', 'post-config', **node)
        conf = read_ini(self.nova_conf)
        self.assertEqual('maintenance,host_class,failure_domain',
                         one(conf, 'nova_ext', 'request_filters'))
        self.assertTrue(one(conf, 'api_database', 'connection').endswith(
            '?plugin=nova_ext'))
        result = self.run_harness('stack', 'extra', **node)
        self.assertIn('nova-ext Upgrade Check Results', result.stdout)


class DevStackNamesTest(testtools.TestCase):
    """Every service name the plugin asks DevStack about is one DevStack
    gives a service (or one devstack/settings enables itself).
    """

    def test_every_service_the_plugin_asks_about_is_devstacks(self):
        ours = services_settings_enables()
        self.assertEqual({'nova-ext'}, ours)
        for path in (os.path.join(TOP, 'devstack', 'plugin.sh'),
                     os.path.join(TOP, 'devstack', 'settings')):
            asked = services_asked_about(path)
            self.assertTrue(asked, path)
            self.assertEqual(
                [], sorted(name for name in asked - ours
                           if not is_devstack_service(name)),
                '%s asks is_service_enabled about names DevStack does not '
                'give any service (tests/devstack/devstack-services.txt)'
                % path)

    def test_the_check_catches_a_name_of_our_own(self):
        # the class this list exists for: nova-scheduler is n-sch
        self.assertTrue(is_devstack_service('n-sch'))
        self.assertTrue(is_devstack_service('n-cond-cell2'))
        for name in ('n-sched', 'nova-scheduler', 'n-cond-cell', 'n-schx'):
            self.assertFalse(is_devstack_service(name), name)

    def test_the_default_is_stackrcs_and_runs_the_scheduler(self):
        defaults, _names = devstack_services()
        for service in ('n-api', 'n-cond', 'n-sch', 'n-cpu', 'tempest'):
            self.assertIn(service, defaults)

    def test_the_list_is_what_devstack_says_now(self):
        checkout = devstack_checkout()
        if checkout is None:
            self.skipTest('no DevStack checkout (set NOVA_EXT_DEVSTACK_DIR)')

        def names(text):
            return [line.split('#')[0].split() for line in
                    text.splitlines() if line.split('#')[0].strip()]

        result = subprocess.run(
            [sys.executable, DEVSTACK_SERVICES_TOOL, checkout],
            capture_output=True, text=True, check=True)
        with open(SERVICES_LIST) as f:
            self.assertEqual(names(result.stdout), names(f.read()),
                             'DevStack at %s names its services otherwise: '
                             'run tools/devstack_services.py %s > %s'
                             % (checkout, checkout, SERVICES_LIST))


class RealDevStackMixin:
    """The same phases through DevStack's own functions and stackrc."""

    def setUp(self):
        super().setUp()
        checkout = devstack_checkout()
        if checkout is None:
            self.skipTest('no DevStack checkout (set NOVA_EXT_DEVSTACK_DIR)')
        self.env['HARNESS_DEVSTACK_DIR'] = checkout


class RealDevStackPluginTest(RealDevStackMixin, DevStackPluginTest):
    pass


class RealDevStackDefaultServicesTest(RealDevStackMixin,
                                      DevStackDefaultServicesTest):
    pass


class RealDevStackShapesTest(RealDevStackMixin, DevStackShapesTest):
    pass
