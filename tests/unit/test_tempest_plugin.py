# SPDX-License-Identifier: Apache-2.0
"""Tempest finds nova-ext's plugin, its options and its tests.

Running the tests needs a cloud: tests/system/test_loopback_cloud.py runs
them with ``tempest run`` against the loopback cloud.
"""

import os

import testtools


class TestTempestPlugin(testtools.TestCase):

    def test_tempest_discovers_the_plugin_options_and_tests(self):
        from oslo_config import cfg
        from tempest.test_discover import plugins

        manager = plugins.TempestTestPluginManager()
        self.assertIn('nova_ext', manager.get_plugin_load_tests_tuple())
        test_dir, top_level = manager.get_plugin_load_tests_tuple()[
            'nova_ext']
        self.assertTrue(os.path.isfile(os.path.join(
            test_dir, 'scenario', 'test_scheduling.py')))
        self.assertTrue(os.path.isdir(os.path.join(top_level, 'nova_ext')))

        conf = cfg.ConfigOpts()
        manager.register_plugin_opts(conf)
        conf([])
        self.assertFalse(conf.nova_ext_feature_enabled.failure_domain_filter)
        self.assertEqual('rack', conf.nova_ext.spread_level)
        self.assertIn(('nova_ext_feature_enabled',
                       manager.get_plugin_options_list()[0][1]),
                      manager.get_plugin_options_list())

    def test_every_test_module_imports(self):
        import importlib
        import pkgutil

        from nova_ext.tempest import tests

        names = [name for _, name, _ in pkgutil.walk_packages(
            tests.__path__, tests.__name__ + '.')]
        self.assertIn('nova_ext.tempest.tests.api.test_extra_specs', names)
        for name in names:
            importlib.import_module(name)
