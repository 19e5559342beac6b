# SPDX-License-Identifier: Apache-2.0
"""The failure_domain pre-filter: which domains it leaves out of placement's
query, and when it must leave one in.
"""

import collections
import types

from oslo_utils.fixture import uuidsentinel as uuids

from nova import context as nova_context
from nova import objects
from nova import test

from nova_ext import cache
from nova_ext.scheduler import cloud
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler.request_filters import failure_domain
from nova_ext.scheduler import scheduling_request

RACK = failure_domains.AGGREGATE_KEY_PREFIX + 'rack'
SPREAD = {'nova_ext:spread_level': 'rack'}


def aggregate(name, rack, *hosts):
    return objects.Aggregate(id=len(name) * 100 + sum(map(ord, name)),
                             uuid=getattr(uuids, name), name=name,
                             metadata={RACK: rack}, hosts=list(hosts))


def request(hints=SPREAD, extra_specs=None, policy='anti-affinity',
            hosts=(), rebuild=False):
    hints = {k: [v] for k, v in (hints or {}).items()}
    if rebuild:
        hints['_nova_check_type'] = ['rebuild']
    group = objects.InstanceGroup(uuid=uuids.group, name='web',
                                  policy=policy, hosts=list(hosts),
                                  members=[])
    return objects.RequestSpec(
        scheduler_hints=hints, instance_uuid=uuids.new,
        flavor=objects.Flavor(extra_specs=extra_specs or {}),
        instance_group=group)


class Cloud(cloud.Cloud):
    """The test's compute traits, and a member on each host of the group
    wherever the group is counted.
    """

    def __init__(self, test_case):
        self.test_case = test_case

    def failure_domain_traits(self, level):
        return self.test_case.trait_domains

    def group_members(self, context, group_uuid):
        hosts = self.test_case.spec.instance_group.hosts
        return {'member-%d' % index: frozenset([host])
                for index, host in enumerate(hosts)}


class ExcludeFullDomainsTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.ctxt = nova_context.get_admin_context()
        self.aggregates = [aggregate('r1a', 'r1', 'h1'),
                           aggregate('r1b', 'r1', 'h2'),
                           aggregate('r2', 'r2', 'h3', 'h4')]
        self.trait_domains = {}
        cache.forget_all()

    def run_filter(self, spec, members=None):
        """(applied, forbidden aggregates, forbidden traits) of the
        pre-filter, run inside the request as nova-scheduler runs it
        (``members``: as placement counts them inside the spread lock;
        None: the conductor's ``group.hosts``).
        """
        self.spec = spec
        view = types.SimpleNamespace(
            enabled_filters=[],
            aggs_by_id={agg.id: agg for agg in self.aggregates})
        with scheduling_request.opened(spec, [spec.instance_uuid], view,
                                       Cloud(self), members=members) as found:
            applied = failure_domain.exclude_full_domains(self.ctxt, spec)
            self.reason = found.why_no_host
        destination = (spec.requested_destination
                       if 'requested_destination' in spec else None)
        forbidden = set(destination.forbidden_aggregates or ()
                        if destination else ())
        return applied, forbidden, set(spec.root_forbidden)

    def test_every_aggregate_of_a_full_rack_is_forbidden(self):
        spec = request(hosts=['h1'])
        self.assertEqual((True, {uuids.r1a, uuids.r1b}, set()),
                         self.run_filter(spec))
        self.assertIn('failure_domain request filter left rack r1 out of '
                      'the placement query: it already holds the maximum '
                      'of 1 member of server group web', self.reason)

    def test_rack_below_its_maximum_is_left_in(self):
        spec = request(dict(SPREAD, **{'nova_ext:spread_max_per_domain':
                                       '2'}), hosts=['h1'])
        self.assertEqual((False, set(), set()), self.run_filter(spec))
        spec = request(dict(SPREAD, **{'nova_ext:spread_max_per_domain':
                                       '2'}), hosts=['h1', 'h2'])
        self.assertEqual((True, {uuids.r1a, uuids.r1b}, set()),
                         self.run_filter(spec))

    def test_flavor_extra_spec_asks_as_the_hint_does(self):
        spec = request(None, extra_specs=SPREAD, hosts=['h3'])
        self.assertEqual((True, {uuids.r2}, set()), self.run_filter(spec))

    def test_soft_group_no_level_and_rebuild_are_left_alone(self):
        for spec in (request(policy='soft-anti-affinity', hosts=['h1']),
                     request(None, hosts=['h1']),
                     request(hosts=['h1'], rebuild=True)):
            self.assertEqual((False, set(), set()), self.run_filter(spec))

    def test_malformed_request_is_left_to_the_filter(self):
        for hints in ({'nova_ext:spread_level': 'rakc'},
                      dict(SPREAD, **{'nova_ext:spread_max_per_domain':
                                      'lots'})):
            self.assertEqual((False, set(), set()),
                             self.run_filter(request(hints, hosts=['h1'])))

    def test_trait_declared_rack_is_a_forbidden_trait(self):
        self.flags(failure_domain_sources=['traits'], group='nova_ext')
        self.trait_domains = {'h1': {'R1'}, 'h2': {'R1'}, 'h3': {'R2'}}
        self.assertEqual(
            (True, set(), {'CUSTOM_NOVA_EXT_FD_RACK_R1'}),
            self.run_filter(request(hosts=['h1'])))

    def test_rack_declared_both_ways_is_excluded_both_ways(self):
        self.aggregates = [aggregate('r1', 'R1', 'h1'),
                           aggregate('r2', 'R2', 'h3')]
        self.trait_domains = {'h1': {'R1'}, 'h2': {'R1'}}
        self.assertEqual(
            (True, {uuids.r1}, {'CUSTOM_NOVA_EXT_FD_RACK_R1'}),
            self.run_filter(request(hosts=['h2'])))

    def test_aggregate_holding_a_host_of_no_single_rack_stays(self):
        # h2 is in r1 and r2: in no rack for the filter, which may accept
        # it; forbidding r1's aggregate would remove it
        self.aggregates.append(aggregate('r2b', 'r2', 'h2'))
        self.assertEqual((False, set(), set()),
                         self.run_filter(request(hosts=['h1'])))

    def test_trait_on_a_host_an_aggregate_puts_elsewhere_stays(self):
        # aggregates win: h3 carries R1's trait but is in rack r2
        self.trait_domains = {'h5': {'R1'}, 'h3': {'R1'}}
        self.assertEqual((False, set(), set()),
                         self.run_filter(request(hosts=['h5'])))

    def test_live_counts_win_over_the_conductors_hosts(self):
        # the request was opened with its group counted, without the
        # server being moved, whose source host is still in group.hosts
        self.assertEqual((False, set(), set()), self.run_filter(
            request(hosts=['h1']), members=collections.Counter()))
        self.assertEqual((True, {uuids.r2}, set()), self.run_filter(
            request(hosts=['h1']), members=collections.Counter(h3=1)))

    def test_outside_a_request_nova_ext_spans_it_does_nothing(self):
        spec = request(hosts=['h1'])
        self.assertFalse(failure_domain.exclude_full_domains(self.ctxt,
                                                             spec))
