# SPDX-License-Identifier: Apache-2.0
"""``nova-ext-manage configure nova|tempest``: the edits the DevStack plugin
and the loopback cloud make, read back the way Nova and tempest read them
(oslo.config, Nova's filter and weigher loaders, SQLAlchemy's URL parser).
"""

import io
import os
import shutil
import tempfile

from oslo_config import cfg
import sqlalchemy.engine
import testtools

from nova.conf import database
from nova.conf import scheduler
from nova.scheduler import filters as nova_filters
from nova.scheduler import weights as nova_weights
from tempest import config as tempest_config

from nova_ext.cmd import manage
from nova_ext import conf as ext_conf
from nova_ext.tempest import config as plugin_config

# Shaped like what DevStack's create_nova_conf writes, with an operator's
# comment that must survive.
DEVSTACK_NOVA_CONF = """\
[DEFAULT]
# keep me: the operator's own words
compute_driver = libvirt.LibvirtDriver

[database]
connection = mysql+pymysql://root:s%40cret@127.0.0.1/nova_cell1?charset=utf8

[api_database]
connection = mysql+pymysql://root:s%40cret@127.0.0.1/nova_api?charset=utf8

[filter_scheduler]
enabled_filters = ComputeFilter,AvailabilityZoneFilter,ImagePropertiesFilter

[placement]
region_name = RegionOne
"""


class ConfigureTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    def configure(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        args = manage.build_parser().parse_args(['configure'] + list(argv))
        try:
            command = manage.CATEGORIES['configure']
            code = command.run(args, None, out, err=err)
        except manage.CommandError as error:
            return 1, str(error)
        return code, out.getvalue() + err.getvalue()

    @staticmethod
    def read(path, opts):
        conf = cfg.ConfigOpts()
        opts(conf)
        conf([], default_config_files=[path])
        return conf

    @staticmethod
    def nova_opts(conf):
        conf.register_opts(scheduler.filter_scheduler_opts,
                           group='filter_scheduler')
        database.register_opts(conf)
        conf.register_opt(cfg.StrOpt('compute_driver'))
        ext_conf.register_opts(conf)


class TestConfigureNova(ConfigureTestCase):

    def test_all_features_as_nova_reads_them(self):
        path = self.write('nova.conf', DEVSTACK_NOVA_CONF)
        code, out = self.configure('nova', '--config-file', path, '--all',
                                   '--failure-domain', 'rack:r12,row:b')
        self.assertEqual(0, code, out)
        conf = self.read(path, self.nova_opts)

        scheduler = conf.filter_scheduler
        loaded = [cls.__name__ for cls in
                  nova_filters.HostFilterHandler().get_matching_classes(
                      scheduler.available_filters)]
        # Nova's own filters stay loadable next to ours.
        self.assertIn('ComputeFilter', loaded)
        self.assertIn('FailureDomainAntiAffinityFilter', loaded)
        self.assertEqual(['ComputeFilter', 'AvailabilityZoneFilter',
                          'ImagePropertiesFilter',
                          'FailureDomainAntiAffinityFilter'],
                         scheduler.enabled_filters)
        weighers = [cls.__name__ for cls in
                    nova_weights.HostWeightHandler().get_matching_classes(
                        scheduler.weight_classes)]
        self.assertIn('RAMWeigher', weighers)
        self.assertIn('NovaExtWeighers', weighers)

        self.assertEqual(['maintenance', 'host_class', 'failure_domain'],
                         conf.nova_ext.request_filters)
        self.assertEqual('per_flavor', conf.nova_ext.quota_driver)
        for url in (conf.database.connection, conf.api_database.connection):
            parsed = sqlalchemy.engine.make_url(url)
            self.assertEqual('nova_ext', parsed.query['plugin'])
            self.assertEqual('utf8', parsed.query['charset'])
            self.assertEqual('s@cret', parsed.password)
        self.assertEqual('nova_ext_libvirt.LibvirtDriver',
                         conf.compute_driver)
        self.assertEqual(['domain_metadata', 'oem_strings', 'memory_sharing'],
                         conf.nova_ext.guest_mutators)
        self.assertEqual({'rack': 'r12', 'row': 'b'},
                         conf.nova_ext.failure_domain)
        with open(path) as handle:
            self.assertIn("# keep me: the operator's own words",
                          handle.read())

    def test_twice_is_once_and_undo_restores_the_file(self):
        path = self.write('nova.conf', DEVSTACK_NOVA_CONF)
        argv = ('nova', '--config-file', path, '--all', '--failure-domain',
                'rack:r1', '--set', 'nova_ext.bin_packing_weight_multiplier=2')
        self.assertEqual(0, self.configure(*argv)[0])
        with open(path) as handle:
            once = handle.read()
        code, out = self.configure(*argv)
        self.assertIn('unchanged', out)
        with open(path) as handle:
            self.assertEqual(once, handle.read())
        self.assertEqual(0, self.configure(*(argv + ('--undo',)))[0])
        with open(path) as handle:
            self.assertEqual(DEVSTACK_NOVA_CONF, handle.read())

    def test_only_the_features_named(self):
        path = self.write('nova.conf', DEVSTACK_NOVA_CONF)
        self.assertEqual(0, self.configure('nova', '--config-file', path,
                                           '--weighers')[0])
        conf = self.read(path, self.nova_opts)
        self.assertEqual(['nova.scheduler.filters.all_filters'],
                         conf.filter_scheduler.available_filters)
        self.assertNotIn('FailureDomainAntiAffinityFilter',
                         conf.filter_scheduler.enabled_filters)
        self.assertIsNone(conf.nova_ext.quota_driver)
        self.assertNotIn('plugin', conf.database.connection)
        self.assertEqual('libvirt.LibvirtDriver', conf.compute_driver)
        self.assertIn('nova_ext.scheduler.weights.all_weighers',
                      conf.filter_scheduler.weight_classes)

    def test_unset_options_start_from_nova_s_defaults(self):
        path = self.write('nova.conf', '[DEFAULT]\n')
        self.assertEqual(0, self.configure('nova', '--config-file', path,
                                           '--filters', '--weighers')[0])
        conf = self.read(path, self.nova_opts)
        self.assertEqual(['ComputeFilter', 'ComputeCapabilitiesFilter',
                          'ImagePropertiesFilter',
                          'ServerGroupAntiAffinityFilter',
                          'ServerGroupAffinityFilter',
                          'FailureDomainAntiAffinityFilter'],
                         conf.filter_scheduler.enabled_filters)
        self.assertEqual(['nova.scheduler.weights.all_weighers',
                          'nova_ext.scheduler.weights.all_weighers'],
                         conf.filter_scheduler.weight_classes)

    def test_warnings_for_what_cannot_take_effect(self):
        path = self.write('nova-cpu.conf', '[DEFAULT]\n')
        code, out = self.configure('nova', '--config-file', path,
                                   '--request-filters', '--quota')
        self.assertEqual(0, code)
        self.assertIn('no [api_database] connection here: nova-api, '
                      'nova-conductor and nova-scheduler activate nova-ext '
                      'through ?plugin=nova_ext on that URL', out)

    def test_dry_run_prints_the_diff_and_writes_nothing(self):
        path = self.write('nova.conf', DEVSTACK_NOVA_CONF)
        code, out = self.configure('nova', '--config-file', path, '--quota',
                                   '--dry-run')
        self.assertEqual(0, code)
        self.assertIn('+quota_driver = per_flavor', out)
        with open(path) as handle:
            self.assertEqual(DEVSTACK_NOVA_CONF, handle.read())

    def test_bad_input_is_refused_and_nothing_is_written(self):
        path = self.write('nova.conf', DEVSTACK_NOVA_CONF)
        for argv, message in (
                ((), 'nothing to do'),
                (('--failure-domain', 'rack'), 'expected LEVEL:DOMAIN'),
                (('--set', 'bin_packing_weight_multiplier=2'),
                 'expected SECTION.OPTION=VALUE'),
                (('--set', 'nova_ext.quota_driver'),
                 'expected SECTION.OPTION=VALUE')):
            code, out = self.configure('nova', '--config-file', path, *argv)
            self.assertEqual(1, code, argv)
            self.assertIn(message, out)
        code, out = self.configure('nova', '--config-file',
                                   os.path.join(self.dir, 'missing.conf'),
                                   '--all')
        self.assertIn('no such file', out)
        with open(path) as handle:
            self.assertEqual(DEVSTACK_NOVA_CONF, handle.read())


class TestConfigureTempest(ConfigureTestCase):

    @staticmethod
    def tempest_opts(conf):
        for group, opts in plugin_config.list_opts():
            conf.register_opts(opts, group=group)
        conf.register_opts(tempest_config.ComputeFeaturesGroup,
                           group='compute-feature-enabled')

    def test_feature_flags_and_scheduler_filters(self):
        path = self.write('tempest.conf', '[compute-feature-enabled]\n'
                                          'scheduler_enabled_filters = '
                                          'ComputeFilter\n')
        self.assertEqual(0, self.configure('tempest', '--config-file', path,
                                           '--filters', '--quota')[0])
        conf = self.read(path, self.tempest_opts)
        flags = conf.nova_ext_feature_enabled
        self.assertTrue(flags.failure_domain_filter)
        self.assertTrue(flags.per_flavor_quota)
        self.assertFalse(flags.bin_packing_weigher)
        self.assertFalse(flags.libvirt_driver)
        self.assertEqual(['ComputeFilter', 'FailureDomainAntiAffinityFilter'],
                         conf['compute-feature-enabled']
                         .scheduler_enabled_filters)
        self.assertEqual(0, self.configure('tempest', '--config-file', path,
                                           '--filters', '--quota',
                                           '--undo')[0])
        conf = self.read(path, self.tempest_opts)
        self.assertFalse(conf.nova_ext_feature_enabled.failure_domain_filter)
        self.assertEqual(['ComputeFilter'], conf['compute-feature-enabled']
                         .scheduler_enabled_filters)


# DevStack's nova_cellN.conf: the cell's database, its vhost, no API
# database (lib/nova's create_nova_conf, CELLSV2_SETUP=superconductor).
DEVSTACK_CELL_CONDUCTOR_CONF = """\
[DEFAULT]
transport_url = rabbit://stackrabbit:secret@127.0.0.1:5672/nova_cell1

[database]
connection = mysql+pymysql://root:secret@127.0.0.1/nova_cell1?charset=utf8

[conductor]
workers = 2
"""


class TestConfigureRoles(ConfigureTestCase):

    def test_cell_conductor_gets_nothing(self):
        path = self.write('nova_cell1.conf', DEVSTACK_CELL_CONDUCTOR_CONF)
        code, out = self.configure('nova', '--config-file', path, '--all',
                                   '--role', 'cell-conductor')
        self.assertEqual(0, code, out)
        with open(path) as handle:
            self.assertEqual(DEVSTACK_CELL_CONDUCTOR_CONF, handle.read())
        self.assertIn('quota left out for cell-conductor: Nova checks '
                      'instance quota in nova-api and the (super)conductor '
                      'only', out)

    def test_superconductor_and_api_get_the_quota_driver_only(self):
        path = self.write('nova.conf', DEVSTACK_NOVA_CONF)
        code, out = self.configure('nova', '--config-file', path, '--all',
                                   '--role', 'api,superconductor')
        self.assertEqual(0, code, out)
        conf = self.read(path, self.nova_opts)
        self.assertEqual('per_flavor', conf.nova_ext.quota_driver)
        self.assertEqual('nova_ext', sqlalchemy.engine.make_url(
            conf.api_database.connection).query['plugin'])
        self.assertNotIn('FailureDomainAntiAffinityFilter',
                         conf.filter_scheduler.enabled_filters)
        self.assertEqual([], conf.nova_ext.request_filters)

    def test_roles_together_get_the_union(self):
        path = self.write('nova.conf', DEVSTACK_NOVA_CONF)
        code, out = self.configure('nova', '--config-file', path, '--all',
                                   '--role', 'scheduler', '--role',
                                   'cell-conductor')
        self.assertEqual(0, code, out)
        conf = self.read(path, self.nova_opts)
        self.assertIn('FailureDomainAntiAffinityFilter',
                      conf.filter_scheduler.enabled_filters)
        self.assertIsNone(conf.nova_ext.quota_driver)

    def test_unknown_role_is_one_clear_line(self):
        path = self.write('nova.conf', DEVSTACK_NOVA_CONF)
        code, out = self.configure('nova', '--config-file', path, '--quota',
                                   '--role', 'supercondutor')
        self.assertEqual(1, code)
        self.assertEqual('--role supercondutor: expected one of api, '
                         'cell-conductor, compute, conductor, scheduler, '
                         'superconductor', out)

    def test_devstack_dbcounter_urls_keep_their_plugin(self):
        # DevStack's database_connection_url with MYSQL_GATHER_PERFORMANCE
        path = self.write('nova.conf', DEVSTACK_NOVA_CONF.replace(
            '?charset=utf8', '?charset=utf8&plugin=dbcounter'))
        code, out = self.configure('nova', '--config-file', path, '--quota')
        self.assertEqual(0, code, out)
        conf = self.read(path, self.nova_opts)
        for url in (conf.database.connection, conf.api_database.connection):
            parsed = sqlalchemy.engine.make_url(url)
            # SQLAlchemy loads every plugin named, in order
            self.assertEqual(('dbcounter', 'nova_ext'),
                             parsed.query['plugin'])
            self.assertEqual('utf8', parsed.query['charset'])
        code, out = self.configure('nova', '--config-file', path, '--quota',
                                   '--undo')
        conf = self.read(path, self.nova_opts)
        self.assertEqual(
            'mysql+pymysql://root:s%40cret@127.0.0.1/nova_api?charset=utf8'
            '&plugin=dbcounter', conf.api_database.connection)
