# SPDX-License-Identifier: Apache-2.0
"""Activation of request filters into Nova's list: idempotent, ordered."""

import fixtures

from nova.scheduler import request_filter
from nova import test

from nova_ext.scheduler import request_filters


class ActivateTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.nova_filters = list(request_filter.ALL_REQUEST_FILTERS)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.request_filter.ALL_REQUEST_FILTERS',
            list(self.nova_filters)))

    def ours(self):
        return [f.nova_ext_name for f in request_filter.ALL_REQUEST_FILTERS
                if hasattr(f, 'nova_ext_name')]

    def test_nothing_configured_nothing_added(self):
        self.assertEqual([], request_filters.activate())
        self.assertEqual(self.nova_filters,
                         request_filter.ALL_REQUEST_FILTERS)

    def test_appended_after_nova_in_order_once(self):
        self.flags(request_filters=['host_class', 'maintenance'],
                   group='nova_ext')
        self.assertEqual(['host_class', 'maintenance'],
                         request_filters.activate())
        self.assertEqual(['host_class', 'maintenance'],
                         request_filters.activate())
        self.assertEqual(['host_class', 'maintenance'], self.ours())
        self.assertEqual(self.nova_filters, request_filter.ALL_REQUEST_FILTERS[
            :len(self.nova_filters)])

    def test_unknown_name_is_skipped(self):
        self.flags(request_filters=['nope', 'maintenance'], group='nova_ext')
        self.assertEqual(['maintenance'], request_filters.activate())
