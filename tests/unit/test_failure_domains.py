# SPDX-License-Identifier: Apache-2.0
"""How a request's spread and a host's failure domain are read."""

from oslo_utils.fixture import uuidsentinel as uuids

from nova import objects
from nova import test
from nova.tests.unit.scheduler import fakes

from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import host_facts

RACK = failure_domains.AGGREGATE_KEY_PREFIX + 'rack'


def host(name, *racks, instances=None):
    aggregates = [objects.Aggregate(id=i, metadata={RACK: rack})
                  for i, rack in enumerate(racks)]
    return fakes.FakeHostState(name, name, {'aggregates': aggregates},
                               instances=instances)


def request(hints=None, extra_specs=None, group=None, instance_uuid=uuids.new):
    return objects.RequestSpec(
        scheduler_hints={k: [v] for k, v in (hints or {}).items()},
        flavor=objects.Flavor(extra_specs=extra_specs or {}),
        instance_group=group, instance_uuid=instance_uuid)


def group(policy='anti-affinity', hosts=(), members=()):
    return objects.InstanceGroup(uuid=uuids.group, policy=policy,
                                 hosts=list(hosts),
                                 members=list(members))


class HostDomainTest(test.NoDBTestCase):

    def test_domain_from_aggregate_metadata(self):
        self.assertEqual('r1', failure_domains.host_domain(
            host('h1', 'r1'), 'rack'))

    def test_no_metadata_means_no_domain(self):
        self.assertIs(failure_domains.NO_DOMAIN,
                      failure_domains.host_domain(host('h1'), 'rack'))

    def test_conflicting_aggregates_mean_no_domain(self):
        self.assertIs(failure_domains.NO_DOMAIN,
                      failure_domains.host_domain(host('h1', 'r1', 'r2'),
                                                  'rack'))

    def test_host_as_own_domain_when_configured(self):
        self.flags(hosts_without_failure_domain='host', group='nova_ext')
        self.assertEqual('host:h1',
                         failure_domains.host_domain(host('h1'), 'rack'))


class DomainFinderTest(test.NoDBTestCase):
    """A request's domain finder places every host as domain_of does."""

    def test_same_domains_as_domain_of(self):
        hosts = [host('h1', 'r1'), host('h2', 'r1', 'r1'), host('h3'),
                 host('h4', 'r1', 'r2'), host('h5', 'r2'),
                 host('h6'), host('h7', 'r3')]
        for own_domain in (False, True):
            trait_domains = {'h6': {'R6'}}
            spread = failure_domains.SpreadRequest(
                'rack', 1, {}, own_domain, trait_domains=trait_domains,
                aggregate_domains={},
                host_domains=failure_domains.host_domain_memo(
                    'rack', own_domain, trait_domains, True, {}))
            self.assertEqual([spread.domain_of(h) for h in hosts],
                             spread.domains_of(hosts))
        self.assertEqual(['r1', 'r1', 'host:h3', 'host:h4', 'r2', 'R6', 'r3'],
                         spread.domains_of(hosts))
        # the conflict is logged by the whole reading, as domain_of logs it
        self.assertIn('different %s (r1, r2)' % RACK,
                      self.stdlog.logger.output)

    def test_hosts_sharing_aggregate_objects(self):
        # as nova-scheduler's HostManager gives them: one object per
        # aggregate, shared by its hosts
        r1 = objects.Aggregate(id=1, metadata={RACK: 'r1'})
        r2 = objects.Aggregate(id=2, metadata={RACK: 'r2'})
        zone = objects.Aggregate(id=3, metadata={'availability_zone': 'z'})

        def shared(name, *aggregates):
            return fakes.FakeHostState(name, name,
                                       {'aggregates': list(aggregates)})

        hosts = [shared('h1', r1, zone), shared('h2', r1, zone),
                 shared('h3', r1, r2), shared('h4', r1, r2),
                 shared('h5', zone), shared('h6', zone), shared('h7', r2)]
        trait_domains = {'h6': {'R6'}}
        reads = []

        def aggregate_sets(host_states):
            reads.append([h.host for h in host_states])
            return host_facts.read_aggregate_sets(host_states)

        spread = failure_domains.SpreadRequest(
            'rack', 1, {}, True, trait_domains=trait_domains,
            aggregate_domains={}, host_domains=failure_domains
            .host_domain_memo('rack', True, trait_domains, True, {},
                              aggregate_sets))

        self.assertEqual(['r1', 'r1', 'host:h3', 'host:h4', 'host:h5', 'R6',
                          'r2'], spread.domains_of(hosts))
        # the filter's candidates are read together, in one pass
        self.assertEqual([[h.host for h in hosts]], reads)
        self.assertEqual([spread.domain_of(h) for h in hosts],
                         spread.domains_of(hosts))
        # the weigher asks again for the hosts the filter kept: looked up
        self.assertEqual(['host:h4', 'host:h5', 'R6'],
                         spread.domains_of(hosts[3:6]))
        self.assertEqual(1, len(reads))
        # every host of the disagreeing pair is named in the log
        for name in ('h3', 'h4'):
            self.assertIn('host %s is in aggregates declaring different %s '
                          '(r1, r2)' % (name, RACK),
                          self.stdlog.logger.output)


class TraitDomainTest(test.NoDBTestCase):
    """Compute-reported domains: CUSTOM_NOVA_EXT_FD_<LEVEL>_<DOMAIN>."""

    def test_trait_names_are_placement_custom_traits(self):
        self.assertEqual('CUSTOM_NOVA_EXT_FD_RACK_R_12',
                         failure_domains.domain_trait('rack', 'r-12'))
        self.assertEqual('CUSTOM_NOVA_EXT_FD_POWER_PDU_3_A',
                         failure_domains.domain_trait('power', 'pdu 3.a'))

    def test_domain_from_traits_when_no_aggregate_says(self):
        self.assertEqual('R1', failure_domains.host_domain(
            host('h1'), 'rack', trait_domains={'h1': {'R1'}}))

    def test_aggregates_win_over_traits(self):
        self.assertEqual('r1', failure_domains.host_domain(
            host('h1', 'r1'), 'rack', trait_domains={'h1': {'R9'}}))

    def test_traits_alone_when_aggregates_are_not_a_source(self):
        self.assertEqual('R9', failure_domains.host_domain(
            host('h1', 'r1'), 'rack', trait_domains={'h1': {'R9'}},
            use_aggregates=False))

    def test_two_domain_traits_mean_no_domain(self):
        self.assertIs(failure_domains.NO_DOMAIN, failure_domains.host_domain(
            host('h1'), 'rack', trait_domains={'h1': {'R1', 'R2'}}))

    def test_members_on_hosts_known_only_by_traits_count(self):
        self.flags(failure_domain_sources=['traits'], group='nova_ext')
        self.stub_out('nova_ext.scheduler.failure_domains._trait_domains',
                      lambda level: {'h1': {'R1'}, 'h2': {'R1'},
                                     'h3': {'R2'}})
        spread, = failure_domains.spread_requests(
            request({'nova_ext:spread_level': 'rack'},
                    group=group(hosts=['h1'])),
            [host('h2'), host('h3')])
        self.assertEqual({'R1': 1}, dict(spread.members_per_domain))
        self.assertEqual('R1', spread.domain_of(host('h2')))


class SpreadRequestTest(test.NoDBTestCase):

    def test_no_level_no_spread(self):
        self.assertEqual([], failure_domains.spread_requests(
            request(group=group()), []))

    def test_hint_counts_members_per_domain(self):
        hosts = [host('h1', 'r1'), host('h2', 'r1'), host('h3', 'r2')]
        spread, = failure_domains.spread_requests(
            request({'nova_ext:spread_level': 'rack'},
                    group=group(hosts=['h1', 'h2'])), hosts)
        self.assertEqual(('rack', 1), spread[:2])
        self.assertEqual({'r1': 2}, dict(spread.members_per_domain))

    def test_instances_on_host_correct_deduplicated_group_hosts(self):
        members = [objects.Instance(uuid=u) for u in (uuids.a, uuids.b)]
        hosts = [host('h1', 'r1', instances=members)]
        spread, = failure_domains.spread_requests(
            request({'nova_ext:spread_level': 'rack'},
                    group=group(hosts=['h1'],
                                members=[uuids.a, uuids.b, uuids.new])),
            hosts)
        self.assertEqual({'r1': 2}, dict(spread.members_per_domain))

    def test_flavor_wins_over_hint(self):
        spread, = failure_domains.spread_requests(
            request({'nova_ext:spread_level': 'row',
                     'nova_ext:spread_max_per_domain': '5'},
                    {'nova_ext:spread_level': 'rack',
                     'nova_ext:spread_max_per_domain': '2'},
                    group=group()), [])
        self.assertEqual(('rack', 2), spread[:2])

    def test_unknown_level_is_named(self):
        error = self.assertRaises(
            failure_domains.InvalidSpreadRequest,
            failure_domains.spread_requests,
            request({'nova_ext:spread_level': 'pod'}, group=group()), [])
        self.assertIn("scheduler hint nova_ext:spread_level='pod'",
                      str(error))
        self.assertIn('rack, row, power', str(error))

    def test_bad_max_is_named(self):
        for bad in ('0', '-1', 'x'):
            error = self.assertRaises(
                failure_domains.InvalidSpreadRequest,
                failure_domains.spread_requests,
                request({'nova_ext:spread_level': 'rack',
                         'nova_ext:spread_max_per_domain': bad},
                        group=group()), [])
            self.assertIn('nova_ext:spread_max_per_domain', str(error))

    def test_affinity_group_conflicts(self):
        self.assertRaises(
            failure_domains.InvalidSpreadRequest,
            failure_domains.spread_requests,
            request({'nova_ext:spread_level': 'rack'},
                    group=group('affinity')), [])

    def test_flavor_without_group_does_not_spread(self):
        self.assertEqual([], failure_domains.spread_requests(
            request(extra_specs={'nova_ext:spread_level': 'rack'}), []))

    def test_default_level_applies_to_anti_affinity_groups_only(self):
        self.assertEqual([], failure_domains.spread_requests(
            request(group=group('affinity')), [], default_level='rack'))
        spread, = failure_domains.spread_requests(
            request(group=group('soft-anti-affinity')), [],
            default_level='rack')
        self.assertEqual('rack', spread.level)


class OneAnswerPerRequestTest(test.NoDBTestCase):
    """The filter and the weigher of one request share one answer."""

    def setUp(self):
        super().setUp()
        self.hosts = [host('h1', 'r1'), host('h2', 'r1'), host('h3', 'r2')]
        self.spec = request({'nova_ext:spread_level': 'rack'},
                            group=group(hosts=['h1'], members=[uuids.m1]))

    def test_the_weigher_gets_the_filters_answer(self):
        first = failure_domains.spread_requests(self.spec, self.hosts)
        self.assertIs(first, failure_domains.spread_requests(
            self.spec, self.hosts[1:]))

    def test_the_hosts_a_filter_kept_get_its_answer_without_a_set(self):
        # Given the filter counted with every host, then kept h3 only
        first = failure_domains.spread_requests(self.spec, self.hosts)
        failure_domains.narrow(self.spec, first, self.hosts,
                               [False, False, True])
        # When the weigher asks with the host kept, in order
        # Then it gets the filter's answer, by one comparison of the lists
        self.assertIs(first, failure_domains.spread_requests(
            self.spec, self.hosts[2:]))
        self.assertIsNone(failure_domains._last_spread_request.hosts_set)
        # and a host the filter dropped was counted with too
        self.assertIs(first, failure_domains.spread_requests(
            self.spec, self.hosts[:1]))

    def test_more_hosts_than_counted_with_is_a_new_answer(self):
        first = failure_domains.spread_requests(self.spec, self.hosts[:2])
        self.assertIsNot(first, failure_domains.spread_requests(
            self.spec, self.hosts))

    def test_a_member_placed_by_this_multi_create_is_counted(self):
        before, = failure_domains.spread_requests(self.spec, self.hosts)
        self.spec.instance_group.hosts.append('h3')
        self.spec.instance_uuid = uuids.second
        after, = failure_domains.spread_requests(self.spec, self.hosts)
        self.assertEqual({'r1': 1}, dict(before.members_per_domain))
        self.assertEqual({'r1': 1, 'r2': 1}, dict(after.members_per_domain))

    def test_another_request_with_the_same_ids_is_a_new_answer(self):
        failure_domains.spread_requests(self.spec, self.hosts)
        other = request({'nova_ext:spread_level': 'rack',
                         'nova_ext:spread_max_per_domain': '2'},
                        group=group(hosts=['h1'], members=[uuids.m1]))
        self.assertEqual(2, failure_domains.spread_requests(
            other, self.hosts)[0].max_per_domain)

    def test_another_configuration_is_a_new_answer(self):
        self.assertEqual(1, failure_domains.spread_requests(
            self.spec, self.hosts)[0].max_per_domain)
        self.flags(default_max_per_domain=3, group='nova_ext')
        self.assertEqual(3, failure_domains.spread_requests(
            self.spec, self.hosts)[0].max_per_domain)

    def test_the_weigher_places_no_host_the_filter_placed(self):
        spread, = failure_domains.spread_requests(self.spec, self.hosts)
        self.assertEqual(['r1', 'r1', 'r2'], spread.domains_of(self.hosts))
        # were a host's aggregates read again, they would say 'moved'
        for host_state in self.hosts:
            host_state.aggregates = [objects.Aggregate(
                id=9, metadata={RACK: 'moved'})]
        again, = failure_domains.spread_requests(self.spec, self.hosts[1:])
        self.assertEqual(['r1', 'r2'], again.domains_of(self.hosts[1:]))
