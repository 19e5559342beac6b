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

    def test_the_aggregates_of_hosts_no_filter_read_are_not_kept(self):
        # Given no filter read the request's aggregates (no spread asked)
        spec_obj = request()
        # When the multiplier check asks which aggregates the hosts are in
        found = host_facts.aggregates_of(spec_obj, self.hosts)
        # Then each comes once, and nothing is kept per host
        self.assertEqual([id(self.rack), id(self.zone)], list(map(id, found)))
        self.assertEqual(0, len(host_facts._request.aggregate_sets))

    def test_the_aggregates_of_hosts_a_filter_read_are_those_it_read(self):
        # Given a filter read every candidate's aggregates
        spec_obj = request()
        host_facts.aggregate_sets(spec_obj, self.hosts)
        # When a host gets another aggregate before the weighers run
        self.hosts[2].aggregates = [objects.Aggregate(id=3, metadata={})]
        # Then the request weighs with the aggregates it filtered with
        self.assertEqual(
            [id(self.rack), id(self.zone)],
            list(map(id, host_facts.aggregates_of(spec_obj, self.hosts))))

    def test_hosts_not_read_yet_are_read(self):
        spec_obj = request()
        self.assertEqual(['h2'], host_facts.names(spec_obj, self.hosts[1:2]))
        self.assertEqual(['h1', 'h2', 'h3'],
                         host_facts.names(spec_obj, self.hosts))
        self.assertEqual(['h3', 'h1'], host_facts.names(
            spec_obj, [self.hosts[2], self.hosts[0]]))


class InOrderTest(test.NoDBTestCase):
    """PerHost serves the hosts a filter kept by position."""

    def setUp(self):
        super().setUp()
        self.hosts = [host('h1'), host('h2'), host('h3')]
        self.reads = []
        self.names = host_facts.PerHost(self.read_names)

    def read_names(self, host_states):
        self.reads.append([h.host for h in host_states])
        return [h.host for h in host_states]

    def test_the_hosts_a_filter_kept_are_served_in_order(self):
        # Given a filter read every candidate, then dropped h2
        self.names.of(self.hosts)
        self.names.narrow(self.hosts, [True, False, True])
        # When a weigher asks for the hosts kept, as Nova hands them on
        kept = [self.hosts[0], self.hosts[2]]
        # Then it gets their values, without a read or a per-host index
        self.assertEqual(['h1', 'h3'], self.names.of(kept))
        self.assertEqual([['h1', 'h2', 'h3']], self.reads)
        self.assertEqual(0, len(self.names))

    def test_other_hosts_are_looked_up_or_read(self):
        self.names.of(self.hosts)
        self.names.narrow(self.hosts, [True, False, True])
        self.assertEqual(['h3', 'h1'],
                         self.names.of([self.hosts[2], self.hosts[0]]))
        # the host the filter dropped is read again, alone
        self.assertEqual(['h2'], self.names.of([self.hosts[1]]))
        self.assertEqual([['h1', 'h2', 'h3'], ['h2']], self.reads)

    def test_narrowing_other_hosts_changes_nothing(self):
        self.names.of(self.hosts)
        self.names.narrow(self.hosts[:2], [True, False])
        self.assertEqual(['h1', 'h2', 'h3'], self.names.of(self.hosts))
        self.assertEqual(['h1', 'h3'],
                         self.names.of([self.hosts[0], self.hosts[2]]))
        self.assertEqual(1, len(self.reads))

    def test_callers_changing_their_lists_change_no_answer(self):
        asked = list(self.hosts)
        answer = self.names.of(asked)
        answer[0] = 'changed'
        asked.reverse()
        self.assertEqual(['h1', 'h2', 'h3'], self.names.of(self.hosts))
        self.assertEqual(1, len(self.reads))
