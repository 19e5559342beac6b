# SPDX-License-Identifier: Apache-2.0
"""Where hosts are, what a request asks, and what its constraints say of
hosts (nova_ext.scheduler.failure_domains), read from one
SchedulingRequest. Nova's whole loop with these: test_spread_properties.
"""

import collections
import types

import fixtures
from oslo_utils.fixture import uuidsentinel as uuids

from nova import objects
from nova import test
from nova.tests.unit.scheduler import fakes

from nova_ext import cache
from nova_ext.scheduler import cloud
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import spread_constraints

RACK = failure_domains.AGGREGATE_KEY_PREFIX + 'rack'
ROW = failure_domains.AGGREGATE_KEY_PREFIX + 'row'


def aggregate(agg_id, hosts, metadata, name=None):
    return objects.Aggregate(id=agg_id, uuid=getattr(uuids, 'agg%d' % agg_id),
                             name=name or 'agg%d' % agg_id,
                             hosts=list(hosts), metadata=dict(metadata))


def racks(**hosts_by_rack):
    """One aggregate per rack: racks(r1=['h1', 'h2'], r2=['h3'])."""
    return [aggregate(index, hosts, {RACK: rack}, 'rack-' + rack)
            for index, (rack, hosts) in enumerate(sorted(
                hosts_by_rack.items()), 1)]


class StaticCloud(cloud.Cloud):
    """A cloud whose compute traits name ``traits`` ({level: {provider:
    domains}}) and whose hosts run no image.
    """

    def __init__(self, traits=None):
        self.traits = traits or {}

    def failure_domain_traits(self, level):
        return self.traits.get(level, {})

    def hosts_running_image(self, image_id):
        return frozenset()


def host_manager(aggregates=(), filters=()):
    """What a SchedulingRequest reads of nova-scheduler's HostManager."""
    return types.SimpleNamespace(
        enabled_filters=list(filters),
        aggs_by_id={agg.id: agg for agg in aggregates})


def host(name, instances=()):
    return fakes.FakeHostState(name, name, {}, instances=[
        objects.Instance(uuid=uuid) for uuid in instances])


def request(hints=None, extra_specs=None, group=None, instance_uuid=uuids.new,
            num_instances=1):
    return objects.RequestSpec(
        scheduler_hints={k: [v] for k, v in (hints or {}).items()},
        flavor=objects.Flavor(extra_specs=extra_specs or {}),
        instance_group=group, instance_uuid=instance_uuid,
        num_instances=num_instances)


def group(policy='anti-affinity', hosts=(), members=()):
    return objects.InstanceGroup(uuid=uuids.group, name='web', policy=policy,
                                 hosts=list(hosts), members=list(members))


def opened(test_case, spec, aggregates=(), members=None, servers=None,
           filters=()):
    """The spec's SchedulingRequest, open for the rest of the test."""
    context = scheduling_request.opened(
        spec, servers or [spec.instance_uuid],
        host_manager(aggregates, filters), StaticCloud(), members=members)
    found = context.__enter__()
    test_case.addCleanup(context.__exit__, None, None, None)
    return found


class DomainsTest(test.NoDBTestCase):

    def domains(self, *aggregates):
        return failure_domains.Domains(list(aggregates), lambda level: {})

    def test_an_aggregate_declares_its_hosts_domain(self):
        domains = self.domains(*racks(r1=['h1', 'h2'], r2=['h3']))
        self.assertEqual(['r1', 'r1', 'r2', failure_domains.NO_DOMAIN],
                         [domains.of(h, 'rack') for h in
                          ('h1', 'h2', 'h3', 'h4')])

    def test_host_level_is_every_hosts_own(self):
        self.assertEqual('host:h1', self.domains().of('h1', 'host'))

    def test_hosts_without_domain_become_their_own_when_configured(self):
        self.flags(hosts_without_failure_domain='host', group='nova_ext')
        self.assertEqual('host:h4',
                         self.domains(*racks(r1=['h1'])).of('h4', 'rack'))

    def test_two_aggregates_disagreeing_mean_no_domain_warned_once(self):
        clashing = racks(r1=['h1'], r2=['h1'])
        for _ in range(2):
            self.assertIs(failure_domains.NO_DOMAIN,
                          self.domains(*clashing).of('h1', 'rack'))
        self.assertEqual(1, self.stdlog.logger.output.count(
            'host h1 is in aggregates declaring different %s (r1, r2)'
            % RACK))

    def test_levels_are_independent(self):
        domains = self.domains(*racks(r1=['h1']),
                               aggregate(9, ['h1'], {ROW: 'a'}))
        self.assertEqual(('r1', 'a'), (domains.of('h1', 'rack'),
                                       domains.of('h1', 'row')))


class TraitDomainsTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        cache.forget_all()
        self.asked = []

        def traits(level):
            self.asked.append(level)
            return {'h1': {'R1'}, 'h2': {'R2'}, 'h3': {'A', 'B'}}

        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.cloud._domains_from_traits', traits))
        self.traits = cloud.LiveCloud().failure_domain_traits

    def test_trait_names_are_placement_custom_traits(self):
        self.assertEqual('CUSTOM_NOVA_EXT_FD_RACK_R_1',
                         failure_domains.domain_trait('rack', 'r-1'))

    def test_traits_place_a_host_no_aggregate_places(self):
        domains = failure_domains.Domains(racks(r9=['h2']), self.traits)
        self.assertEqual('R1', domains.of('h1', 'rack'))
        # aggregates win
        self.assertEqual('r9', domains.of('h2', 'rack'))
        # two domain traits: none
        self.assertIs(failure_domains.NO_DOMAIN, domains.of('h3', 'rack'))
        # the live cloud asks placement once per level and cache period
        failure_domains.Domains([], self.traits).of('h1', 'rack')
        self.assertEqual(['rack'], self.asked)

    def test_traits_alone_when_aggregates_are_not_a_source(self):
        self.flags(failure_domain_sources=['traits'], group='nova_ext')
        self.assertEqual('R2', failure_domains.Domains(
            racks(r9=['h2']), self.traits).of('h2', 'rack'))

    def test_no_traits_when_they_are_not_a_source(self):
        self.flags(failure_domain_sources=['aggregates'], group='nova_ext')
        self.assertIs(failure_domains.NO_DOMAIN,
                      failure_domains.Domains([], self.traits).of(
                          'h1', 'rack'))
        self.assertEqual([], self.asked)


class SpreadAskedTest(test.NoDBTestCase):

    def asked(self, hints=None, extra_specs=None, policy='anti-affinity',
              default_level=None):
        return failure_domains.spread_asked(
            request(hints, extra_specs, group(policy)), default_level)

    def test_no_key_no_spread(self):
        self.assertIsNone(self.asked())

    def test_old_keys_are_one_hard_max(self):
        spread = self.asked({'nova_ext:spread_level': 'rack',
                             'nova_ext:spread_max_per_domain': '12'})
        self.assertEqual((spread_constraints.Constraint('rack', 'max', 12),),
                         spread.constraints)

    def test_flavor_wins_over_hint(self):
        spread = self.asked({'nova_ext:spread_level': 'row'},
                            {'nova_ext:spread_level': 'rack'})
        self.assertEqual('rack', spread.constraints[0].level)

    def test_unknown_level_is_named(self):
        error = self.assertRaises(failure_domains.InvalidSpreadRequest,
                                  self.asked,
                                  {'nova_ext:spread_level': 'rakc'})
        self.assertIn("scheduler hint nova_ext:spread_level='rakc' is not a "
                      "failure-domain level", str(error))

    def test_max_per_domain_in_plain_decimal_only(self):
        for bad in ('1_000', '+3', '\uff13', ' 3', '3 ', '03', '2.0', '1e3',
                    '10000000', '9' * 400, '0', '-1'):
            error = self.assertRaises(
                failure_domains.InvalidSpreadRequest, self.asked,
                {'nova_ext:spread_level': 'rack',
                 'nova_ext:spread_max_per_domain': bad})
            self.assertIn('nova_ext:spread_max_per_domain=%r' % bad,
                          str(error))
            self.assertIn('plain decimal digits', str(error))

    def test_affinity_group_conflicts(self):
        error = self.assertRaises(failure_domains.InvalidSpreadRequest,
                                  self.asked, {'nova_ext:spread_level':
                                               'rack'}, policy='affinity')
        self.assertIn("conflicts with server group %s policy 'affinity'"
                      % uuids.group, str(error))

    def test_hint_needs_a_group_a_flavor_does_not(self):
        error = self.assertRaises(
            failure_domains.InvalidSpreadRequest, failure_domains.spread_asked,
            request({'nova_ext:spread_constraints': 'rack:max=1'}))
        self.assertIn('needs a server group', str(error))
        self.assertIsNone(failure_domains.spread_asked(
            request(extra_specs={'nova_ext:spread_level': 'rack'})))

    def test_old_and_new_keys_together_are_refused_naming_both(self):
        error = self.assertRaises(
            failure_domains.InvalidSpreadRequest, self.asked,
            {'nova_ext:spread_constraints': 'rack:max=1'},
            {'nova_ext:spread_level': 'row'})
        self.assertIn('nova_ext:spread_constraints and flavor extra spec '
                      'nova_ext:spread_level cannot be combined', str(error))

    def test_default_level_spreads_spreadable_groups_only(self):
        self.assertEqual('rack', self.asked(
            policy='soft-anti-affinity',
            default_level='rack').constraints[0].level)
        self.assertIsNone(self.asked(policy='affinity', default_level='rack'))


class JudgementTest(test.NoDBTestCase):
    """Given hosts in racks and a group, when the constraints judge the
    hosts for the server being placed, then ...
    """

    def judge(self, constraints, hosts, members, aggregates, servers=1,
              placed=(), candidates=None):
        spec = request({'nova_ext:spread_constraints': constraints},
                       group=group(hosts=[]), num_instances=servers)
        found = opened(self, spec, aggregates, members=collections.Counter(
            members), servers=[getattr(uuids, 's%d' % i)
                               for i in range(servers)])
        found.candidates = candidates or hosts
        spec.instance_group.hosts.extend(placed)
        spread = found.spread()
        return failure_domains.Judgement(found, spread.hard, hosts)

    def test_max_refuses_a_full_domain(self):
        hosts = [host('h1'), host('h2'), host('h3')]
        judgement = self.judge('rack:max=1', hosts, {'h1': 1},
                               racks(r1=['h1', 'h2'], r2=['h3']))
        self.assertEqual([False, False, True],
                         [judgement.refusal(h) is None for h in hosts])
        self.assertEqual(('r1', 1), judgement.refusal(hosts[1])[1:])

    def test_skew_minimum_over_candidates_and_member_domains(self):
        # r3 holds a member but has no candidate: it still counts
        hosts = [host('h1'), host('h2')]
        judgement = self.judge('rack:skew=1', hosts,
                               {'h1': 1, 'h9': 1, 'h8': 1},
                               racks(r1=['h1'], r2=['h2'], r3=['h9', 'h8']))
        self.assertEqual(('r2', 0), judgement.least_filled(0))
        self.assertEqual([False, True],
                         [judgement.refusal(h) is None for h in hosts])

    def test_a_host_missing_one_level_sets_no_minimum_for_another(self):
        # h3 is in rack r3 but in no row: Kubernetes leaves it out of every
        # constraint; its empty rack must not hold r1 and r2 back
        hosts = [host('h1'), host('h2'), host('h3')]
        aggregates = racks(r1=['h1'], r2=['h2'], r3=['h3']) + [
            aggregate(9, ['h1', 'h2'], {ROW: 'a'})]
        judgement = self.judge('rack:skew=1;row:max=5', hosts,
                               {'h1': 1, 'h2': 1}, aggregates)
        self.assertEqual(('r1', 1), judgement.least_filled(0))
        self.assertEqual([True, True, False],
                         [judgement.refusal(h) is None for h in hosts])
        self.assertEqual('row', judgement.refusal(hosts[2]).constraint.level)

    def test_a_multi_create_keeps_the_domain_its_later_servers_need(self):
        # 4 servers over 2 racks of 2 hosts with skew 1: after the first
        # went to r1, r1 stays allowed for the second (2/0 then 2/2 is a
        # legal request), or the fourth would find no host
        hosts = [host('h1'), host('h2'), host('h3'), host('h4')]
        aggregates = racks(r1=['h1', 'h2'], r2=['h3', 'h4'])
        second = self.judge('rack:skew=1', hosts, {}, aggregates,
                            servers=4, placed=['h1'])
        self.assertEqual([True] * 4,
                         [second.refusal(h) is None for h in hosts])
        # with r1 at 2, only r2 can bring the request back within skew
        third = self.judge('rack:skew=1', hosts, {}, aggregates,
                           servers=4, placed=['h1', 'h2'])
        self.assertEqual([False, False, True, True],
                         [third.refusal(h) is None for h in hosts])

    def test_a_single_create_is_kubernetes_check(self):
        hosts = [host('h1'), host('h2')]
        judgement = self.judge('rack:skew=1', hosts, {'h1': 1},
                               racks(r1=['h1'], r2=['h2']))
        self.assertEqual([False, True],
                         [judgement.refusal(h) is None for h in hosts])


class MembersSeenByConductorTest(test.NoDBTestCase):

    def test_instances_correct_the_deduplicated_hosts(self):
        hosts = [host('h1', instances=[uuids.m1, uuids.m2, uuids.other]),
                 host('h2', instances=[uuids.m3])]
        self.assertEqual(
            {'h1': 2, 'h2': 1, 'h9': 1},
            failure_domains.members_seen_by_conductor(
                ['h1', 'h2', 'h9'], {uuids.m1, uuids.m2, uuids.m3}, hosts))


class AlternatesTest(test.NoDBTestCase):
    """Nova's conductor reschedules a failed build to the next alternate
    without the scheduler: alternates stay in the chosen host's domains.
    """

    def selection(self, host):
        return objects.Selection(service_host=host, nodename=host,
                                 compute_node_uuid=uuids.node,
                                 cell_uuid=uuids.cell, limits=None,
                                 allocation_request=None,
                                 allocation_request_version=None)

    def test_alternates_outside_the_chosen_domains_are_dropped(self):
        spec = request({'nova_ext:spread_constraints':
                        'rack:max=1;host:skew=5,soft'}, group=group())
        found = opened(self, spec, racks(r1=['h1', 'h2'], r2=['h3']))
        kept = found.alternates_kept_in_domains([[
            self.selection('h1'), self.selection('h3'),
            self.selection('h2')]])
        self.assertEqual([['h1', 'h2']],
                         [[s.service_host for s in per_server]
                          for per_server in kept])

    def test_no_hard_constraint_keeps_every_alternate(self):
        spec = request({'nova_ext:spread_constraints': 'rack:max=1,soft'},
                       group=group())
        found = opened(self, spec, racks(r1=['h1'], r2=['h3']))
        selections = [[self.selection('h1'), self.selection('h3')]]
        self.assertIs(selections,
                      found.alternates_kept_in_domains(selections))
