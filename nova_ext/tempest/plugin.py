# SPDX-License-Identifier: Apache-2.0
"""Tempest's entry into nova-ext's tests and options."""

import os

from tempest.test_discover import plugins

from nova_ext.tempest import config as project_config


class NovaExtTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        # the directory holding the nova_ext package: test ids then start
        # with nova_ext.tempest
        top_level = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        return os.path.join(top_level, 'nova_ext', 'tempest', 'tests'), \
            top_level

    def register_opts(self, conf):
        for group, options in project_config.list_opts():
            conf.register_group(group)
            conf.register_opts(options, group=group)

    def get_opt_lists(self):
        return [(group.name, options)
                for group, options in project_config.list_opts()]
