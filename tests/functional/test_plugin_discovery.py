# SPDX-License-Identifier: Apache-2.0
"""Third-party plugins in our entry-point namespaces load like ours.

Given an installed distribution ("acme-sched", written to a directory on
sys.path with its own dist-info, as pip would leave it) that registers a
working filter, a class that is not a filter and an entry point whose module
does not exist, when nova-scheduler starts with
``available_filters = nova_ext.scheduler.filters.all_filters``, then the
working filter is usable by name in ``enabled_filters``, the other two are
logged and skipped, and the scheduler serves requests.
"""

import os
import sys
import textwrap

import fixtures

from tests.functional import base

ACME_MODULE = '''
from nova.scheduler import filters


class AcmeAvoidHostFilter(filters.BaseHostFilter):
    """Rejects the host named by the scheduler hint acme_avoid."""

    def host_passes(self, host_state, spec_obj):
        return host_state.host != spec_obj.get_scheduler_hint('acme_avoid')


class NotAFilter:
    pass
'''

ACME_ENTRY_POINTS = '''
[nova_ext.scheduler.filters]
AcmeAvoidHostFilter = acme_sched:AcmeAvoidHostFilter
NotAFilter = acme_sched:NotAFilter
Broken = acme_sched.missing:Nope
'''


def install_fake_distribution(test, name, module_source, entry_points):
    site = test.useFixture(fixtures.TempDir()).path
    with open(os.path.join(site, name + '.py'), 'w') as f:
        f.write(module_source)
    dist_info = os.path.join(site, name.replace('_', '-') + '-1.0.dist-info')
    os.mkdir(dist_info)
    with open(os.path.join(dist_info, 'METADATA'), 'w') as f:
        f.write(textwrap.dedent('''\
            Metadata-Version: 2.1
            Name: %s
            Version: 1.0
            ''' % name.replace('_', '-')))
    with open(os.path.join(dist_info, 'entry_points.txt'), 'w') as f:
        f.write(entry_points)
    test.useFixture(fixtures.MonkeyPatch('sys.path', [site] + sys.path))
    # stevedore remembers each namespace's entry points for the life of the
    # process; a real nova-scheduler starts after the distribution is
    # installed, so start from an empty memory like it does.
    test.useFixture(fixtures.MonkeyPatch(
        'stevedore.extension.ExtensionManager.ENTRY_POINT_CACHE', {}))


class ThirdPartyFilterTest(base.NovaExtTestCase):
    HOSTS = ['host1', 'host2']
    ENABLED_FILTERS = base.NOVA_DEFAULT_FILTERS + [
        'FailureDomainAntiAffinityFilter', 'AcmeAvoidHostFilter']

    def setUp(self):
        # The distribution must be installed before nova-scheduler starts.
        install_fake_distribution(self, 'acme_sched', ACME_MODULE,
                                  ACME_ENTRY_POINTS)
        super().setUp()
        self.flavor = self.create_flavor('m1')

    def test_third_party_filter_is_enabled_by_name(self):
        for avoid, expected in (('host1', 'host2'), ('host2', 'host1')):
            server = self.boot("s-" + avoid, self.flavor,
                               hints={'acme_avoid': avoid})
            self.assertEqual(expected, self.host_of(server))

    def test_broken_entry_points_are_logged_and_skipped(self):
        log = self.stdlog.logger.output
        self.assertIn('skipping plugin Broken = acme_sched.missing:Nope', log)
        self.assertIn('skipping plugin NotAFilter', log)
        self.assertIn('loaded 2 plugin(s) from nova_ext.scheduler.filters: '
                      'AcmeAvoidHostFilter, FailureDomainAntiAffinityFilter',
                      log)
