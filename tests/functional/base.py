# SPDX-License-Identifier: Apache-2.0
"""Functional tests: a whole Nova in one process, set up as an operator would.

Each test class describes its cloud (hosts, enabled filters, ``[nova_ext]``
options); the base class turns that into the nova.conf lines an operator
writes (docs/source/scheduler.rst) and starts Nova's services with it.
"""

from nova_ext.sandbox import cloud

NOVA_DEFAULT_FILTERS = cloud.NOVA_DEFAULT_FILTERS


class NovaExtTestCase(cloud.EmbeddedNova):

    ENABLED_FILTERS = NOVA_DEFAULT_FILTERS
    NOVA_EXT_FLAGS = {}
    # Nova's own sections: {'scheduler': {'max_placement_results': 2}}
    NOVA_FLAGS = {}

    @property
    def NOVA_CONF(self):
        lines = [
            '[filter_scheduler]',
            'available_filters = nova.scheduler.filters.all_filters',
            'available_filters = nova_ext.scheduler.filters.all_filters',
            'enabled_filters = ' + ','.join(self.ENABLED_FILTERS),
            'weight_classes = nova.scheduler.weights.all_weighers,'
            'nova_ext.scheduler.weights.all_weighers',
            '[nova_ext]',
        ]
        for name, value in self.NOVA_EXT_FLAGS.items():
            lines.append('%s = %s' % (name, value))
        for section, options in self.NOVA_FLAGS.items():
            lines.append('[%s]' % section)
            for name, value in options.items():
                lines.append('%s = %s' % (name, value))
        return '\n'.join(lines) + '\n'

    def assertNoValidHost(self, server, reason_contains=None):
        self.assertEqual('ERROR', server['status'])
        message = server['fault']['message']
        self.assertIn('No valid host', message)
        if reason_contains:
            self.assertIn(reason_contains, message)
