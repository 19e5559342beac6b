# SPDX-License-Identifier: Apache-2.0
"""Functional tests: a whole Nova in one process, set up as an operator would.

Each test class describes its cloud (hosts, enabled filters, ``[nova_ext]``
options); the base class turns that into the nova.conf lines an operator
writes (docs/source/scheduler.rst) and starts Nova's services with it.
"""

from nova_ext.sandbox import cloud

NOVA_DEFAULT_FILTERS = cloud.NOVA_DEFAULT_FILTERS

RACKS = {'r1': ['host1', 'host2'], 'r2': ['host3', 'host4'],
         'r3': ['host5', 'host6']}


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
        # Nova keeps 255 bytes of the message: one shorter is whole; at
        # 255, nova-ext's reasons end with the group, ")", or, cut to fit
        # by nova-ext, with "..."; one Nova cut ends anywhere
        self.assertTrue(len(message.encode('utf-8')) < 255
                        or message.endswith(('...', ')')),
                        'the fault was cut by Nova: %r' % message)
        if reason_contains:
            self.assertIn(reason_contains, message)


class RackedTestCase(NovaExtTestCase):
    """Six hosts in three racks of two (:data:`RACKS`), declared with
    aggregate metadata, and the failure-domain filter on. Its soft twin, the
    spread weigher, is off so that tests see the filter alone; tests of the
    weigher switch it on.
    """

    HOSTS = ['host1', 'host2', 'host3', 'host4', 'host5', 'host6']
    ENABLED_FILTERS = NOVA_DEFAULT_FILTERS + [
        'FailureDomainAntiAffinityFilter']
    NOVA_EXT_FLAGS = {'failure_domain_spread_weight_multiplier': 0.0}

    def setUp(self):
        super().setUp()
        self.set_failure_domains('rack', RACKS)
        self.flavor = self.create_flavor('small')
        self.rack_of = {h: r for r, hosts in RACKS.items() for h in hosts}

    def rack(self, server):
        return self.rack_of[self.host_of(server)]

    def _all_in(self, prefix, count, status):
        """The ``count`` servers named ``prefix...``, all in ``status``."""
        servers = [self.admin_api.get_server(s['id'])
                   for s in self.admin_api.get_servers()
                   if s['name'].startswith(prefix)]
        self.assertEqual(count, len(servers))
        self.assertEqual([status] * count, [s['status'] for s in servers],
                         [s.get('fault') for s in servers])
        return servers
