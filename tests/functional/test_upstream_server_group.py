# SPDX-License-Identifier: Apache-2.0
"""Upstream Nova's own server-group functional tests, with nova-ext on.

Nova promises affinity, anti-affinity, soft-affinity and soft-anti-affinity
(``nova.tests.functional.test_server_group``). Every test of that module
runs here unchanged (each at the newest microversion its module tests:
:func:`_test_classes`), except that right before its first service
starts, its nova.conf gets what the DevStack plugin writes: ``nova-ext-manage
configure nova --filters --weighers --request-filters --quota --set
nova_ext.bin_packing_weight_multiplier=10.0`` (``nova_ext.configure``, the
code the plugin calls), appended to the filters and weighers the upstream
test chose. The libvirt driver is left out: these tests run Nova's fake
computes.

Upstream tests that also fail without nova-ext are listed in
doc/source/scheduler.rst; there are none on Nova 34.0.0.
"""

import os
import sys

import fixtures
from nova.scheduler import request_filter
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import test_server_group as upstream

from nova_ext import cache
from nova_ext import configure
from nova_ext.sandbox import cloud

CONF = cloud.CONF

# What devstack/plugin.sh switches on for a controller (libvirt computes
# only add the driver).
DEVSTACK_FEATURES = ['filters', 'weighers', 'request_filters', 'quota']
DEVSTACK_ASSIGNMENTS = ['nova_ext.bin_packing_weight_multiplier=10.0']


class ConfiguredAsDevStackDoes(object):
    """Mixin: nova.conf as the upstream test set it, then nova-ext's
    features switched on, before the API (the first service) starts.
    """

    def useFixture(self, fixture):
        if (isinstance(fixture, nova_fixtures.OSAPIFixture)
                and not getattr(self, '_nova_ext_configured', False)):
            self._nova_ext_configured = True
            self._configure_nova_ext()
        return super().useFixture(fixture)

    def _configure_nova_ext(self):
        # A wheel install puts api-paste.ini under <venv>/etc/nova, not
        # under Nova's default state_path (the site-packages directory).
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        scheduler = CONF.filter_scheduler
        self.nova_conf_path = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'nova.conf')
        with open(self.nova_conf_path, 'w') as conf:
            conf.write('[filter_scheduler]\n')
            for path in scheduler.available_filters:
                conf.write('available_filters = %s\n' % path)
            conf.write('enabled_filters = %s\n'
                       % ','.join(scheduler.enabled_filters))
            conf.write('weight_classes = %s\n'
                       % ','.join(scheduler.weight_classes))
        configure.configure_file(self.nova_conf_path, 'nova',
                                 DEVSTACK_FEATURES,
                                 assignments=DEVSTACK_ASSIGNMENTS)
        cloud.apply_config_file(CONF, self.nova_conf_path)
        # A fresh nova-scheduler process: no request filters or cached
        # lookups from an earlier test.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS',
            list(request_filter.ALL_REQUEST_FILTERS)))
        cache.forget_all()
        cloud.EmbeddedNova._open_databases_like_a_nova_process(self)


def _with_nova_ext(test_class):
    return type(test_class.__name__, (ConfiguredAsDevStackDoes, test_class),
                {'__module__': __name__,
                 '__doc__': test_class.__doc__})


def _test_classes(module):
    """The concrete test classes of ``module`` that no other class of it
    extends: ServerGroupTestV21, V215 and V264 are left out because
    ServerGroupTestV295 inherits each of their tests and runs it at the
    newest microversion. nova-ext acts in the scheduler, not in the API
    layer those microversions change, and the three older runs cost about
    eight minutes of the suite per Nova release.
    """
    classes = [value for value in vars(module).values()
               if isinstance(value, type)
               and value.__module__ == module.__name__
               and any(attr.startswith('test_') for attr in dir(value))]
    return [cls for cls in classes
            if not any(other is not cls and issubclass(other, cls)
                       for other in classes)]


for _class in _test_classes(upstream):
    globals()[_class.__name__] = _with_nova_ext(_class)
del _class
