# SPDX-License-Identifier: Apache-2.0
"""What nova-ext reads of a request's hosts, once per request."""

from oslo_utils.fixture import uuidsentinel as uuids

from nova import objects
from nova import test
from nova.tests.unit.scheduler import fakes

from nova_ext.scheduler import host_facts


def host(name, *aggregates):
    return fakes.FakeHostState(name, name, {'aggregates': list(aggregates)})


def request():
    return objects.RequestSpec(instance_uuid=uuids.instance)


class HostFactsTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.rack = objects.Aggregate(id=1, metadata={})
        self.zone = objects.Aggregate(id=2, metadata={})
        self.hosts = [host('h1', self.rack, self.zone), host('h2', self.rack),
                      host('h3')]

    def test_names_and_aggregate_sets_in_order(self):
        spec_obj = request()
        self.assertEqual(['h1', 'h2', 'h3'],
                         host_facts.names(spec_obj, self.hosts))
        self.assertEqual([(self.rack, self.zone), (self.rack,), ()],
                         host_facts.aggregate_sets(spec_obj, self.hosts))

    def test_the_weighers_get_what_the_filters_read(self):
        # Given the filters read every candidate for a request
        spec_obj = request()
        host_facts.aggregate_sets(spec_obj, self.hosts)
        # When nova-scheduler's HostManager hands a host a new aggregate
        # list before the weighers run
        self.hosts[1].aggregates = [self.zone]
        # Then the request weighs with the aggregates it filtered with
        self.assertEqual([(self.rack,), ()], host_facts.aggregate_sets(
            spec_obj, self.hosts[1:]))
        # and the next request reads them again
        self.assertEqual([(self.zone,), ()], host_facts.aggregate_sets(
            request(), self.hosts[1:]))

    def test_hosts_not_read_yet_are_read(self):
        spec_obj = request()
        self.assertEqual(['h2'], host_facts.names(spec_obj, self.hosts[1:2]))
        self.assertEqual(['h1', 'h2', 'h3'],
                         host_facts.names(spec_obj, self.hosts))
        self.assertEqual(['h3', 'h1'], host_facts.names(
            spec_obj, [self.hosts[2], self.hosts[0]]))
