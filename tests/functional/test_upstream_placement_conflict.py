# SPDX-License-Identifier: Apache-2.0
"""Upstream Nova's functional test of a create whose allocation placement
refuses, with nova-ext on as DevStack switches it on.

``nova.tests.functional.test_servers.ConsumerGenerationConflictTest.
test_create_server_fails_as_placement_reports_consumer_conflict`` makes
every ``PUT`` to placement answer 409 while a server is created, and expects
the create to fail on the scheduler's allocation claim ("Failed to update
allocations for consumer"), with nothing allocated. A scheduling request
that wrote to placement before the claim (the maintenance pre-filter once
created its trait on the first request) failed earlier, on its own write,
with another fault: the request path must only read. This runs that test
unchanged, with every request filter on (``maintenance`` among them) and
the maintenance trait never created, as on a cloud where no host was ever
put in maintenance. The module's other tests are about moves, which
nova-ext's pre-filters treat like any request: only this one is run.
"""

from nova.tests.functional import test_servers as upstream

from nova_ext.sandbox import cloud
from tests.functional import test_upstream_server_group

UPSTREAM_TEST = ('test_create_server_fails_as_placement_reports_'
                 'consumer_conflict')


class ConsumerGenerationConflictTest(
        test_upstream_server_group.ConfiguredAsDevStackDoes,
        upstream.ConsumerGenerationConflictTest):
    __doc__ = upstream.ConsumerGenerationConflictTest.__doc__

    def test_request_filters_on(self):
        """The configuration the upstream test runs under has them."""
        self.assertIn('maintenance', cloud.CONF.nova_ext.request_filters)


def load_tests(loader, standard_tests, pattern):
    """Only the create test of the upstream class (see the docstring)."""
    suite = loader.suiteClass()
    for name in (UPSTREAM_TEST, 'test_request_filters_on'):
        suite.addTest(ConsumerGenerationConflictTest(name))
    return suite
