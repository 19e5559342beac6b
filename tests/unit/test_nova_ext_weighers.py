# SPDX-License-Identifier: Apache-2.0
"""NovaExtWeighers: every nova-ext weigher in one slot of Nova's handler,
ranking hosts exactly as the weighers would one by one.
"""

import gc
import types
import weakref

from oslo_utils.fixture import uuidsentinel as uuids

from nova import objects
from nova.scheduler import filters as nova_scheduler_filters
from nova.scheduler import utils as scheduler_utils
from nova.scheduler import weights as nova_scheduler_weights
from nova import test
from nova.tests.unit.scheduler import fakes

from nova_ext.scheduler import aggregate_keys
from nova_ext.scheduler.filters import failure_domain
from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import weights
from nova_ext.scheduler.weights import bin_packing
from nova_ext.scheduler.weights import failure_domain_spread
from nova_ext.scheduler.weights import image_locality
from tests.unit import test_failure_domains

RACK_KEY = 'nova_ext:failure_domain:rack'
PACKING_KEY = 'nova_ext:bin_packing_weight_multiplier'
SPREAD_KEY = 'nova_ext:failure_domain_spread_weight_multiplier'


def aggregate(agg_id, metadata, hosts=()):
    return objects.Aggregate(id=agg_id, name='agg%d' % agg_id,
                             metadata=metadata, hosts=list(hosts))


def host(index, aggregates):
    name = 'host%d' % index
    return fakes.FakeHostState(name, name, {
        'vcpus_total': 16, 'vcpus_used': index % 7,
        'cpu_allocation_ratio': 1.0,
        'total_usable_ram_mb': 32768,
        'free_ram_mb': 32768 - 1024 * (index * 5 % 13),
        'ram_allocation_ratio': 1.0,
        'total_usable_disk_gb': 100, 'free_disk_mb': 90 * 1024,
        'disk_allocation_ratio': 1.0, 'aggregates': aggregates,
        'instances': {}})


def request(policy='anti-affinity'):
    group = objects.InstanceGroup(
        uuid=uuids.group, policy=policy, members=[uuids.member],
        hosts=['host0'])
    return objects.RequestSpec(
        flavor=objects.Flavor(vcpus=2, memory_mb=2048, root_gb=10,
                              ephemeral_gb=0, swap=0, extra_specs={}),
        image=objects.ImageMeta.from_dict({'id': uuids.image}),
        is_bfv=False, instance_uuid=uuids.new, instance_group=group,
        scheduler_hints={'nova_ext:spread_level': ['rack']})


class Exploding(nova_scheduler_weights.BaseHostWeigher):

    def _weigh_object(self, host_state, spec_obj):
        raise RuntimeError('boom')


class FailsOnHost5(bin_packing.BinPackingWeigher):
    """A per-request weigher that breaks on one of the hosts."""

    multiplier_option = 'image_locality_weight_multiplier'

    def weigh_all(self, host_states, state):
        if any(host_state.host == 'host5' for host_state in host_states):
            raise RuntimeError('boom')
        return super().weigh_all(host_states, state)


class NoSuchMultiplier(bin_packing.BinPackingWeigher):
    """A per-request weigher whose multiplier cannot be read."""

    multiplier_option = 'no_such_weight_multiplier'


class NovaExtWeighersTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        # three racks; rack r2 doubles the packing multiplier, as an
        # operator would with aggregate metadata
        names = ['host%d' % i for i in range(12)]
        self.racks = [
            aggregate(1, {RACK_KEY: 'r0'}, names[0::3]),
            aggregate(2, {RACK_KEY: 'r1'}, names[1::3]),
            aggregate(3, {RACK_KEY: 'r2', 'nova_ext:'
                          'bin_packing_weight_multiplier': '2.0'},
                      names[2::3])]
        self.hosts = [host(i, [self.racks[i % 3]]) for i in range(12)]
        self.handler = nova_scheduler_weights.HostWeightHandler()
        self.flags(failure_domain_spread_weight_multiplier=3.0,
                   image_locality_weight_multiplier=0.5, group='nova_ext')

    def request(self, policy='anti-affinity'):
        """A request of the group, being scheduled (its SchedulingRequest
        open until the test ends).
        """
        spec_obj = request(policy)
        scope = scheduling_request.opened(
            spec_obj, [spec_obj.instance_uuid], self.view(),
            test_failure_domains.StaticCloud())
        scope.__enter__()
        self.addCleanup(scope.__exit__, None, None, None)
        return spec_obj

    def view(self):
        """What nova-ext reads of nova-scheduler's HostManager."""
        return types.SimpleNamespace(
            enabled_filters=[],
            aggs_by_id={agg.id: agg for agg in self.racks})

    def ranking(self, weighers, spec_obj=None):
        weighed = self.handler.get_weighed_objects(
            [cls() for cls in weighers], self.hosts,
            spec_obj or self.request())
        return [(w.obj.host, w.weight) for w in weighed]

    def filtered(self, spec_obj):
        """The hosts nova-ext's filter passes, run by Nova's handler."""
        return nova_scheduler_filters.HostFilterHandler(
        ).get_filtered_objects(
            [failure_domain.FailureDomainAntiAffinityFilter()], self.hosts,
            spec_obj)

    def assertSameAsOneByOne(self, spec_obj=None):
        one_by_one = self.ranking([bin_packing.BinPackingWeigher,
                                   failure_domain_spread
                                   .FailureDomainSpreadWeigher,
                                   image_locality.ImageLocalityWeigher],
                                  spec_obj)
        together = self.ranking([weights.NovaExtWeighers], spec_obj)
        self.assertEqual([h for h, _ in one_by_one],
                         [h for h, _ in together])
        for (_, expected), (_, got) in zip(one_by_one, together):
            self.assertAlmostEqual(expected, got, places=12)
        return together

    def override_more_multipliers(self):
        """Rack r1 packs at 0.5; hosts 0 and 4 are in a second aggregate
        too: host 0's halves the spread multiplier, host 4's asks a larger
        packing multiplier than rack r1 (Nova takes the least) and a
        malformed spread one (Nova keeps the configured one).
        """
        self.hosts[0].aggregates = self.hosts[0].aggregates + [
            aggregate(4, {SPREAD_KEY: '1.5'})]
        self.hosts[4].aggregates = self.hosts[4].aggregates + [
            aggregate(5, {PACKING_KEY: '5', SPREAD_KEY: 'many'})]
        self.hosts[4].aggregates[0].metadata[PACKING_KEY] = '0.5'

    def test_all_weighers_is_one_slot_holding_every_plugin(self):
        self.assertEqual([weights.NovaExtWeighers], weights.all_weighers())
        self.assertEqual(
            ['BinPackingWeigher', 'FailureDomainSpreadWeigher',
             'ImageLocalityWeigher'],
            sorted(type(part).__name__
                   for part in weights.NovaExtWeighers().parts))

    def test_a_weighed_request_leaves_no_host_behind(self):
        # Given a request filtered and weighed by Nova's handlers, with
        # nova-ext's filter and weighers, inside its SchedulingRequest
        spec_obj = request()
        with scheduling_request.opened(
                spec_obj, [spec_obj.instance_uuid], self.view(),
                test_failure_domains.StaticCloud()):
            passed = self.filtered(spec_obj)
            weighed = self.handler.get_weighed_objects(
                [weights.NovaExtWeighers()], passed, spec_obj)
            self.assertEqual(8, len(weighed))
        # When nova-scheduler drops a host (its compute service deleted)
        # while this thread waits for its next request
        gone = weakref.ref(self.hosts.pop())
        del passed, weighed
        gc.collect()
        # Then nothing nova-ext kept of the request holds it
        self.assertIsNone(gone())

    def test_weights_are_returned_one_per_host_as_nova_asks(self):
        # Given the hosts weighed as Nova's handler hands them
        weighed = [nova_scheduler_weights.WeighedHost(h, 0.0)
                   for h in self.hosts]
        # When NovaExtWeighers weighs them
        returned = weights.NovaExtWeighers().weigh_objects(weighed,
                                                           self.request())
        # Then it returns one weight per host and leaves theirs alone
        # (Nova's BaseWeigher.weigh_objects contract)
        self.assertEqual(len(self.hosts), len(returned))
        self.assertEqual([0.0] * len(self.hosts),
                         [w.weight for w in weighed])
        self.assertGreater(len(set(returned)), 1)

    def test_same_ranking_and_weights_as_one_by_one(self):
        together = self.assertSameAsOneByOne()
        # the weighers did decide something: the spread weigher sends the
        # request away from rack r0, which holds the group's member
        self.assertNotIn(together[0][0], ('host0', 'host3', 'host6',
                                          'host9'))

    def test_aggregate_metadata_overrides_a_multiplier(self):
        self.flags(bin_packing_weight_multiplier=1.5, group='nova_ext')
        packing = bin_packing.BinPackingWeigher()
        weighed = [type('W', (), {'obj': h})() for h in self.hosts]
        for _ in range(2):  # what one request learnt misleads no other
            _raw, _normalised, multipliers = weights.scores(
                packing, weighed, self.request())
            self.assertEqual([2.0 if i % 3 == 2 else 1.5
                              for i in range(len(self.hosts))], multipliers)
        self.hosts[0].aggregates[0].metadata[
            'nova_ext:bin_packing_weight_multiplier'] = '3.0'
        _raw, _normalised, multipliers = weights.scores(
            packing, weighed, self.request())
        self.assertEqual(3.0, multipliers[0])

    def test_explained_one_by_one(self):
        composite = weights.NovaExtWeighers()
        self.assertEqual(
            [type(part).__name__ for part in composite.parts],
            [type(w).__name__ for w in weights.expand([composite])])

    def test_a_failing_weigher_loses_its_vote_only(self):
        composite = weights.NovaExtWeighers()
        alone = composite.total_scores(
            [type('W', (), {'obj': h})() for h in self.hosts], self.request())
        composite.parts.append(Exploding())
        with_failure = composite.total_scores(
            [type('W', (), {'obj': h})() for h in self.hosts], self.request())
        self.assertEqual(alone, with_failure)
        self.assertIn('Exploding failed for instance', self.stdlog.logger
                      .output)

    def test_same_as_one_by_one_with_several_overriding_aggregates(self):
        self.override_more_multipliers()
        self.assertSameAsOneByOne()

    def test_multipliers_read_together_are_novas(self):
        self.override_more_multipliers()
        self.flags(bin_packing_weight_multiplier=1.5, group='nova_ext')
        parts = weights.NovaExtWeighers().parts
        columns = weights.multipliers_per_part(parts, self.hosts,
                                               self.request())
        for part, column in zip(parts, columns):
            option = part.multiplier_option
            configured = getattr(weights.CONF.nova_ext, option)
            self.assertEqual(
                [scheduler_utils.get_weight_multiplier(
                    host_state, aggregate_keys.multiplier_key(option),
                    configured)
                 for host_state in self.hosts], column.tolist())
        packing = columns[[type(part) for part in parts].index(
            bin_packing.BinPackingWeigher)]
        # racks r1 and r2 override (host 4 takes the least of 0.5 and 5),
        # the hosts of rack r0 keep the configured multiplier
        self.assertEqual([2.0 if i % 3 == 2 else 0.5 if i % 3 == 1 else 1.5
                          for i in range(len(self.hosts))], packing.tolist())

    def test_parts_standing_aside_leave_the_others_score(self):
        # a soft-anti-affinity group: the packing and image weighers
        # stand aside for Nova's group weigher, the spread weigher
        # serves it
        self.override_more_multipliers()
        spec_obj = self.request('soft-anti-affinity')
        self.assertSameAsOneByOne(spec_obj)
        spread = failure_domain_spread.FailureDomainSpreadWeigher()
        weighed = [type('W', (), {'obj': h})() for h in self.hosts]
        _raw, normalised, multipliers = weights.scores(spread, weighed,
                                                       spec_obj)
        self.assertTrue(any(normalised))
        self.assertEqual(
            [m * w for m, w in zip(multipliers, normalised)],
            weights.NovaExtWeighers().total_scores(weighed, spec_obj))

    def test_parts_standing_aside_read_no_multiplier(self):
        # a soft-affinity group: every nova-ext weigher stands aside (the
        # spread hint conflicts with the policy), so the malformed
        # multiplier of host 4's aggregate is never read
        self.override_more_multipliers()
        weighed = [type('W', (), {'obj': h})() for h in self.hosts]
        self.assertEqual(
            [0.0] * len(self.hosts),
            weights.NovaExtWeighers().total_scores(
                weighed, self.request('soft-affinity')))
        self.assertNotIn("Could not decode", self.stdlog.logger.output)
        weights.NovaExtWeighers().total_scores(weighed, self.request())
        self.assertIn("Could not decode", self.stdlog.logger.output)

    def assertPartLosesItsVoteOnly(self, index, part):
        """``part``, inserted at ``index`` among the composite's parts,
        fails (logged) and leaves the others' weights as they were.
        """
        self.override_more_multipliers()
        composite = weights.NovaExtWeighers()
        weighed = [type('W', (), {'obj': h})() for h in self.hosts]
        alone = composite.total_scores(weighed, self.request())
        composite.parts.insert(index, part)
        self.assertEqual(alone, composite.total_scores(weighed,
                                                       self.request()))
        self.assertIn('%s failed for instance' % type(part).__name__,
                      self.stdlog.logger.output)

    def test_a_failing_per_request_weigher_loses_its_vote_only(self):
        self.assertPartLosesItsVoteOnly(0, FailsOnHost5())

    def test_a_part_with_all_weights_equal_reads_no_multiplier(self):
        # no host runs the image: the image weigher says nothing, and its
        # malformed multiplier on rack r0 is never read
        self.hosts[0].aggregates[0].metadata[
            'nova_ext:image_locality_weight_multiplier'] = 'lots'
        composite = weights.NovaExtWeighers()
        composite.parts = [image_locality.ImageLocalityWeigher()]
        weighed = [type('W', (), {'obj': h})() for h in self.hosts]
        self.assertEqual([0.0] * len(self.hosts),
                         composite.total_scores(weighed, self.request()))
        self.assertNotIn("Could not decode", self.stdlog.logger.output)

    def test_a_multiplier_that_cannot_be_read_costs_one_vote(self):
        self.assertPartLosesItsVoteOnly(1, NoSuchMultiplier())


class HostNameLength(weights.PerRequestWeigher):
    """Implements weigh only, as a third-party weigher may."""

    multiplier_option = 'image_locality_weight_multiplier'

    def prepare(self, spec_obj, host_states):
        return 10

    def weigh(self, host_state, state):
        return float(len(host_state.host) * state)


class HostNameLengths(weights.PerRequestWeigher):
    """Implements weigh_all only."""

    multiplier_option = 'image_locality_weight_multiplier'

    def prepare(self, spec_obj, host_states):
        return 10

    def weigh_all(self, host_states, state):
        return [float(len(host_state.host) * state)
                for host_state in host_states]


class WeighOrWeighAllTest(test.NoDBTestCase):

    def test_either_method_gives_both(self):
        hosts = [fakes.FakeHostState(name, name, {'aggregates': []})
                 for name in ('a', 'bb', 'ccc')]
        for weigher in (HostNameLength(), HostNameLengths()):
            self.assertEqual([10.0, 20.0, 30.0],
                             weigher.weigh_all(hosts, 10))
            self.assertEqual(20.0, weigher.weigh(hosts[1], 10))

    def test_neither_method_is_an_error(self):
        class Neither(weights.PerRequestWeigher):
            multiplier_option = 'image_locality_weight_multiplier'

        self.assertRaises(NotImplementedError, Neither().weigh,
                          fakes.FakeHostState('a', 'a', {}), None)
