# SPDX-License-Identifier: Apache-2.0
"""nova-ext-manage simulate on models small enough to work out by hand."""

import io
import json
import os
import textwrap

import fixtures
from nova import test

from nova_ext.cmd import manage
from nova_ext.simulator import cloud
from nova_ext.simulator import engine
from nova_ext.simulator import fleet
from nova_ext.simulator import model

CONF_DIR = os.path.join(model.EXAMPLES, 'conf')

# Two hosts of 4 vCPU (ratio 1), 8 GiB, 100 GB, in two racks of one row.
TWO_HOSTS = """\
name: two
rows: 1
rack_size: 1
host_groups:
  - name: h
    count: 2
    vcpus: 4
    cpu_allocation_ratio: 1.0
    ram_mb: 8192
    disk_gb: 100
"""

# Three flavors; every arrival in order.
SEQUENCE = """\
flavors:
  - {name: small, vcpus: 1, ram_mb: 2048, disk_gb: 10}
  - {name: big, vcpus: 2, ram_mb: 4096, disk_gb: 20}
  - {name: ram, vcpus: 1, ram_mb: 6144, disk_gb: 10}
images:
  names: [a, b]
sequence:
  - {flavor: small, image: a}
  - {flavor: small, image: b}
  - {flavor: big, image: a}
  - {flavor: big, image: a}
  - {flavor: ram, image: b}
"""


class SimulatorTestCase(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as out:
            out.write(textwrap.dedent(text))
        return path

    def compare(self, cluster_text, workload_text, *configs, extra=None,
                explain_arrival=None):
        cluster = model.load_cluster(self.write('cluster.yaml',
                                                cluster_text))
        workload = model.load_workload(self.write('workload.yaml',
                                                  workload_text))
        paths = [(name, os.path.join(CONF_DIR, name + '.conf'))
                 for name in configs]
        for name, text in (extra or {}).items():
            paths.append((name, self.write(name + '.conf', text)))
        return engine.compare(cluster, workload, paths,
                              explain_arrival=explain_arrival)


class HandWorkedPlacementsTest(SimulatorTestCase):

    def test_packing_and_spreading_place_as_worked_out_by_hand(self):
        result = self.compare(TWO_HOSTS, SEQUENCE, 'nova-defaults',
                              'nova-packing', 'nova-ext-bin-packing')
        defaults, packing, bin_packing = result.results
        # Spreading: each arrival goes to the host with the most free RAM
        # (ties: the first host); the 6 GiB "ram" flavor then fits nowhere.
        self.assertEqual(['h-001', 'h-002', 'h-001', 'h-002', None],
                         defaults.placements)
        self.assertEqual(4, defaults.placed_before_first_failure)
        self.assertEqual(4, defaults.first_failure)
        # Stacking fills h-001 (1+1+2 vCPU), then h-002 takes the second
        # "big" and still has 2 vCPU and 4 GiB... not the 6 GiB "ram".
        self.assertEqual(['h-001', 'h-001', 'h-001', 'h-002', None],
                         packing.placements)
        # BinPackingWeigher keeps each host balanced (stranded weight 10):
        # a second "small" on h-001 would leave it 50 % vCPU/RAM but 80 %
        # disk free (imbalance 0.3, weight -(0.6 + 3)); on h-002 75/75/90 %
        # (-(0.8 + 1.5)), so it goes there; the first "big" ties and takes
        # h-001, the second fits only h-002.
        self.assertEqual(['h-001', 'h-002', 'h-001', 'h-002', None],
                         bin_packing.placements)
        self.assertEqual(4, bin_packing.placed_before_first_failure)
        # 5 arrivals need 7 vCPU <= 8 and 22 GiB > 16 GiB: the bound is 4.
        self.assertEqual(4, result.volume_bound)
        self.assertEqual(100.0, packing.percent_of_bound)
        # first boot of an image on a host: stacking a, b on h-001 and a on
        # h-002; spreading a on h-001, b and a on h-002
        self.assertEqual(3, packing.image_downloads)
        self.assertEqual(3, defaults.image_downloads)

    def test_stranded_capacity_at_first_failure(self):
        result = self.compare(TWO_HOSTS, SEQUENCE, 'nova-packing')
        packing = result.results[0]
        # h-001 has no vCPU or RAM left: its 60 GB of disk are stranded
        # (30% of 200 GB). h-002 (2 vCPU, 4 GiB, 80 GB left) still takes a
        # "small": nothing stranded there.
        self.assertEqual({'vcpu': 0.0, 'ram': 0.0, 'disk': 30.0},
                         packing.stranded)
        self.assertEqual(25.0, packing.free['vcpu'])
        self.assertEqual(25.0, packing.free['ram'])
        self.assertEqual(70.0, packing.free['disk'])

    def test_departures_free_capacity(self):
        workload = SEQUENCE.replace(
            '  - {flavor: ram, image: b}\n',
            '  - {depart: 2}\n  - {flavor: ram, image: b}\n')
        packing = self.compare(TWO_HOSTS, workload,
                               'nova-packing').results[0]
        # the first "big" leaves h-001 (1+1 vCPU, 4 GiB used), where the
        # 6 GiB flavor still does not fit; h-002 has 4 GiB: NoValidHost
        self.assertEqual(['h-001', 'h-001', 'h-001', 'h-002', None],
                         packing.placements)
        workload = SEQUENCE.replace(
            '  - {flavor: ram, image: b}\n',
            '  - {depart: 3}\n  - {flavor: ram, image: b}\n')
        packing = self.compare(TWO_HOSTS, workload,
                               'nova-packing').results[0]
        # the second "big" leaves h-002 empty: the 6 GiB flavor lands there
        self.assertEqual(['h-001', 'h-001', 'h-001', 'h-002', 'h-002'],
                         packing.placements)
        self.assertIsNone(packing.first_failure)

    def test_maintenance_and_host_class_pre_select_hosts(self):
        cluster = TWO_HOSTS.replace('    disk_gb: 100\n', (
            '    disk_gb: 100\n    maintenance: 1\n'))
        workload = SEQUENCE.replace('sequence:', 'sequence:\n'
                                    '  - {flavor: small, count: 2}')
        result = self.compare(cluster, workload, 'nova-packing', extra={
            'no-prefilter': '[nova_ext]\nrequest_filters =\n'})
        with_filter, without = result.results
        self.assertNotIn('h-002', with_filter.placements)
        self.assertIn('h-002', without.placements)

        cluster = TWO_HOSTS + (
            '  - {name: gpu, count: 1, vcpus: 4, cpu_allocation_ratio: 1.0,'
            ' ram_mb: 8192, disk_gb: 100, host_class: gpu}\n')
        workload = SEQUENCE.replace(
            '  - {name: ram,',
            '  - {name: g, vcpus: 1, ram_mb: 1024, disk_gb: 1, '
            'extra_specs: {"nova_ext:host_class": gpu}}\n  - {name: ram,'
        ).replace('sequence:', 'sequence:\n  - {flavor: g, count: 3}')
        packing = self.compare(cluster, workload,
                               'nova-packing').results[0]
        self.assertEqual(['gpu-001'] * 3, packing.placements[:3])


class FailureDomainTest(SimulatorTestCase):
    # Four hosts, two per rack; a group of two asks for one per rack.
    CLUSTER = TWO_HOSTS.replace('rack_size: 1', 'rack_size: 2').replace(
        'count: 2', 'count: 4')
    WORKLOAD = """\
        flavors:
          - {name: small, vcpus: 1, ram_mb: 1024, disk_gb: 1}
        groups:
          - {name: g, policy: anti-affinity, spread_level: rack}
        sequence:
          - {flavor: small, group: g, count: 2}
    """

    def test_hard_filter_has_no_violations(self):
        result = self.compare(self.CLUSTER, self.WORKLOAD, 'nova-packing',
                              'nova-ext-failure-domain')
        packing, spread = result.results
        # stacking puts the second member on h-002, in h-001's rack
        self.assertEqual(['h-001', 'h-002'], packing.placements)
        self.assertEqual(1, packing.failure_domain_violations)
        self.assertEqual(['h-001', 'h-003'], spread.placements)
        self.assertEqual(0, spread.failure_domain_violations)
        self.assertEqual(2, spread.spread_members)


class DeclaredLevelTest(SimulatorTestCase):
    # Two power feeds, declared only by the cluster file's aggregates (the
    # generated aggregates are racks and rows); a group spread by power.
    CLUSTER = """\
        name: feeds
        rows: 1
        rack_size: 1
        host_groups:
          - {name: a, count: 2, vcpus: 4, cpu_allocation_ratio: 1.0,
             ram_mb: 8192, disk_gb: 100}
          - {name: b, count: 2, vcpus: 4, cpu_allocation_ratio: 1.0,
             ram_mb: 8192, disk_gb: 100}
        aggregates:
          - name: feed-a
            host_groups: [a]
            metadata: {'nova_ext:failure_domain:power': pa}
          - name: feed-b
            host_groups: [b]
            metadata: {'nova_ext:failure_domain:power': pb}
    """
    WORKLOAD = FailureDomainTest.WORKLOAD.replace('spread_level: rack',
                                                  'spread_level: power')

    def test_level_from_aggregates_is_spread_and_counted(self):
        result = self.compare(self.CLUSTER, self.WORKLOAD, 'nova-packing',
                              'nova-ext-failure-domain')
        packing, spread = result.results
        # anti-affinity alone: the second member on the same feed
        self.assertEqual(['a-001', 'a-002'], packing.placements)
        self.assertEqual(1, packing.failure_domain_violations)
        self.assertEqual(['a-001', 'b-001'], spread.placements)
        self.assertEqual(0, spread.failure_domain_violations)
        self.assertEqual(2, spread.spread_members)


# nova-ext's filters available (so its pre-filters activate), Nova's
# filters and packing weighers; the [nova_ext] section follows.
PRE_FILTERS = """\
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
available_filters = nova_ext.scheduler.filters.all_filters
weight_classes = nova.scheduler.weights.all_weighers
ram_weight_multiplier = -1.0
cpu_weight_multiplier = -1.0
disk_weight_multiplier = -1.0

[nova_ext]
"""


class RealRequestFiltersTest(SimulatorTestCase):
    """The pre-filters run as in nova-scheduler, and the model answers the
    placement query they build.
    """
    # Two general hosts and a gpu host class; the gpu host is last, so
    # packing (ties: the first host) never picks it unless routed there.
    CLUSTER = TWO_HOSTS + (
        '  - {name: gpu, count: 1, vcpus: 4, cpu_allocation_ratio: 1.0,'
        ' ram_mb: 8192, disk_gb: 100, host_class: gpu,'
        ' traits: [CUSTOM_GPU]}\n')
    WORKLOAD = """\
        flavors:
          - {name: small, vcpus: 1, ram_mb: 1024, disk_gb: 1}
          - {name: fast, vcpus: 1, ram_mb: 1024, disk_gb: 1,
             extra_specs: {'trait:CUSTOM_GPU': required}}
        images:
          names: [plain, cuda]
          properties:
            cuda: {nova_ext_host_class: gpu, os_distro: ubuntu}
        sequence:
          - {flavor: small, image: cuda, count: 2}
          - {flavor: small, image: plain}
          - {flavor: fast, image: plain}
    """

    def test_host_class_by_image_property(self):
        result = self.compare(self.CLUSTER, self.WORKLOAD, extra={
            'routed': PRE_FILTERS + 'request_filters = host_class\n'
            'host_class_isolation = true\n',
            'unrouted': PRE_FILTERS + 'request_filters =\n'},
            explain_arrival=1)
        routed, unrouted = result.results
        # glance's nova_ext_host_class (the model's) routes the image's
        # servers to the gpu aggregate, isolation keeps the others off it
        # (member_of=!in:), where alone the trait CUSTOM_GPU is; unrouted,
        # packing takes the first host but for that trait
        self.assertEqual(['gpu-001', 'gpu-001', 'h-001', None],
                         routed.placements)
        self.assertEqual(['h-001', 'h-001', 'h-001', 'gpu-001'],
                         unrouted.placements)
        self.assertEqual(['host_class'], routed.request_filters)
        steps = {step['name']: step for step
                 in routed.explain['request_filters']}
        gpu_aggregate = fleet.aggregate(0, 'class-gpu', [], {}).uuid
        self.assertEqual(['member_of=in:%s' % gpu_aggregate],
                         steps['host_class']['added'])
        self.assertIn('member_of=in:%s' % gpu_aggregate,
                      routed.explain['placement_query'])
        self.assertEqual(['gpu-001'], routed.explain['candidates'])

    def test_failure_domain_leaves_full_racks_out_of_placement(self):
        # no FailureDomainAntiAffinityFilter: the pre-filter alone
        result = self.compare(
            FailureDomainTest.CLUSTER, FailureDomainTest.WORKLOAD, extra={
                'pre-filter': PRE_FILTERS + 'request_filters = '
                'failure_domain\n',
                'none': PRE_FILTERS + 'request_filters =\n'},
            explain_arrival=2)
        spread, packing = result.results
        self.assertEqual(['h-001', 'h-003'], spread.placements)
        self.assertEqual(0, spread.failure_domain_violations)
        self.assertEqual(['h-001', 'h-002'], packing.placements)
        self.assertEqual(1, packing.failure_domain_violations)
        rack = fleet.aggregate(0, 'rack-r001', [], {}).uuid
        self.assertIn('member_of=!in:%s' % rack,
                      spread.explain['placement_query'])
        self.assertEqual(['h-003', 'h-004'], spread.explain['candidates'])
        self.assertEqual(['h-001', 'h-002', 'h-003', 'h-004'],
                         packing.explain['candidates'])

    def test_full_racks_everywhere_is_the_pre_filters_reason(self):
        workload = FailureDomainTest.WORKLOAD.replace('count: 2', 'count: 3')
        spread = self.compare(
            FailureDomainTest.CLUSTER, workload, extra={
                'pre-filter': PRE_FILTERS + 'request_filters = '
                'failure_domain\n'}).results[0]
        self.assertEqual(['h-001', 'h-003', None], spread.placements)
        self.assertIn('failure_domain request filter left rack r001, r002 '
                      'out of the placement query',
                      spread.first_failure_reason)

    def test_unknown_class_fails_the_request_with_the_filters_reason(self):
        workload = self.WORKLOAD.replace('nova_ext_host_class: gpu',
                                         'nova_ext_host_class: fpga')
        routed = self.compare(self.CLUSTER, workload, extra={
            'routed': PRE_FILTERS + 'request_filters = host_class\n'}
        ).results[0]
        self.assertEqual(0, routed.first_failure)
        self.assertEqual('request filter: Scheduling failed: no host '
                         'aggregate has '
                         'nova_ext:host_class=fpga (classes: gpu)',
                         routed.first_failure_reason)

    def test_an_option_needing_a_database_is_refused(self):
        error = self.assertRaises(
            engine.ConfigError, self.compare, TWO_HOSTS, SEQUENCE,
            extra={'tenants': '[scheduler]\n'
                   'limit_tenants_to_placement_aggregate = true\n'})
        self.assertIn('[scheduler] limit_tenants_to_placement_aggregate: '
                      "Nova's require_tenant_aggregate", str(error))


class PlacementQueryTest(test.NoDBTestCase):

    def test_what_placement_reads_from_nova_s_query(self):
        query = cloud.parse_query(
            'limit=1000&member_of=in:a,b&member_of=!in:c,d&member_of=e'
            '&required=T1,!T2&required1=in:T3,T4&resources=VCPU:1,'
            'MEMORY_MB:512&resources1=VCPU:2&root_required=R,!F')
        self.assertEqual({'VCPU': 3, 'MEMORY_MB': 512}, query.resources)
        self.assertEqual({'T1', 'R'}, query.required)
        self.assertEqual({'T2', 'F'}, query.forbidden)
        self.assertEqual((frozenset({'T3', 'T4'}),), query.any_traits)
        self.assertEqual((frozenset({'a', 'b'}), frozenset({'e'})),
                         query.member_of)
        self.assertEqual({'c', 'd'}, query.not_member_of)
        self.assertEqual(1000, query.limit)
        # Nova's query for a server group's member carries no limit
        self.assertIsNone(cloud.parse_query('resources=VCPU:1').limit)


class ModelErrorTest(SimulatorTestCase):

    def assertModelError(self, loader, text, line, field, message):
        path = self.write('bad.yaml', text)
        error = self.assertRaises(model.ModelError, loader, path)
        self.assertEqual((path, line, field), (error.path, error.line,
                                               error.field))
        self.assertIn(message, str(error))
        self.assertTrue(str(error).startswith('%s:%d: ' % (path, line)),
                        str(error))

    def test_wrong_type_names_file_line_and_field(self):
        self.assertModelError(
            model.load_cluster, TWO_HOSTS.replace('vcpus: 4', 'vcpus: four'),
            7, 'host_groups[0].vcpus', 'must be a whole number')

    def test_unknown_field_is_a_typo(self):
        self.assertModelError(
            model.load_cluster, TWO_HOSTS.replace(
                '    disk_gb: 100\n',
                '    disk_gb: 100\n    maintenence: 1\n'),
            11, 'host_groups[0].maintenence', 'unknown field')

    def test_missing_field(self):
        self.assertModelError(
            model.load_cluster, TWO_HOSTS.replace('    count: 2\n', ''),
            5, 'host_groups[0]', 'missing required field '
            'host_groups[0].count')

    def test_unknown_flavor_in_sequence(self):
        self.assertModelError(
            model.load_workload, SEQUENCE.replace('{flavor: big, image: a}',
                                                  '{flavor: huge}', 1),
            10, 'sequence[2].flavor', "no flavor named 'huge'")

    def test_trait_names_are_placement_s(self):
        self.assertModelError(
            model.load_cluster, TWO_HOSTS.replace(
                '    disk_gb: 100\n', '    disk_gb: 100\n'
                '    traits: [CUSTOM_OK, custom-bad]\n'),
            11, 'host_groups[0].traits', "'custom-bad'")

    def test_properties_of_an_unknown_image(self):
        self.assertModelError(
            model.load_workload, SEQUENCE.replace(
                '  names: [a, b]\n', '  names: [a, b]\n'
                '  properties:\n    c: {nova_ext_host_class: gpu}\n'),
            8, 'images.properties.c', "no image named 'c'")

    def test_invalid_yaml(self):
        self.assertModelError(model.load_workload,
                              SEQUENCE.replace('sequence:', 'sequence: ]'),
                              7, None, 'not valid YAML')

    def test_bad_conf_fragment(self):
        path = self.write('bad.conf', '[nova_ext]\nno_such_option = 1\n')
        error = self.assertRaises(
            engine.ConfigError, self.compare, TWO_HOSTS, SEQUENCE,
            extra={'bad': open(path).read()})
        self.assertIn('[nova_ext] no_such_option is not a Nova or nova-ext '
                      'option', str(error))


class CommandTest(SimulatorTestCase):

    def test_simulate_json(self):
        cluster = self.write('c.yaml', TWO_HOSTS)
        workload = self.write('w.yaml', SEQUENCE)
        args = manage.build_parser().parse_args([
            'simulate', '--cluster', cluster, '--workload', workload,
            '--conf', 'nova-packing', '--json', '-'])
        out = io.StringIO()
        self.assertEqual(0, manage.CATEGORIES['simulate'].run(
            args, None, out, err=io.StringIO()))
        data = json.loads(out.getvalue())
        self.assertEqual(4, data['volume_bound'])
        self.assertEqual(4, data['results'][0]
                         ['placed_before_first_failure'])

    def test_bad_model_is_a_clear_error(self):
        bad = self.write('c.yaml', TWO_HOSTS.replace('count: 2',
                                                     'count: -1'))
        self.assertEqual(1, manage.main(['simulate', '--cluster', bad]))

    def test_builtin_examples_load(self):
        for name in ('cluster-100.yaml', 'cluster-500.yaml'):
            cluster = model.load_cluster(os.path.join(model.EXAMPLES, name))
            self.assertEqual(int(name[8:11]), len(cluster.hosts))
        cluster = model.load_cluster(model.DEFAULT_CLUSTER)
        self.assertEqual({'row1', 'row2', 'row3'},
                         {h.row for h in cluster.hosts})
        workload = model.load_workload(model.DEFAULT_WORKLOAD, seed=3)
        self.assertEqual(40000, len(workload.arrivals))
        self.assertTrue(workload.groups)


class ImageLocalityTest(SimulatorTestCase):

    def test_same_image_follows_the_first(self):
        workload = """\
            flavors:
              - {name: small, vcpus: 1, ram_mb: 1024, disk_gb: 1}
            images:
              names: [a, b]
            sequence:
              - {flavor: small, image: a, count: 2}
              - {flavor: small, image: b, count: 2}
        """
        result = self.compare(TWO_HOSTS, workload, 'nova-defaults',
                              'nova-ext-image-locality')
        defaults, locality = result.results
        # RAMWeigher spreads: every host downloads both images
        self.assertEqual(['h-001', 'h-002', 'h-001', 'h-002'],
                         defaults.placements)
        self.assertEqual(4, defaults.image_downloads)
        # the second "a" follows the first; "b" goes where RAM is freest
        self.assertEqual(['h-001', 'h-001', 'h-002', 'h-002'],
                         locality.placements)
        self.assertEqual(2, locality.image_downloads)


# Nova picks at random among the two best hosts.
RANDOM_PICK = '[filter_scheduler]\nhost_subset_size = 2\n'


def without_timings(comparison):
    data = comparison.as_dict(with_placements=True)
    for result in data['results']:
        # wall-clock times differ from run to run
        del result['schedule_ms_mean'], result['schedule_ms_p95']
    return data


class ExplainArrivalTest(SimulatorTestCase):

    def test_picked_host_is_the_simulators_in_every_configuration(self):
        for arrival in range(1, 6):
            result = self.compare(TWO_HOSTS, SEQUENCE, 'nova-defaults',
                                  'nova-packing', 'nova-ext-bin-packing',
                                  extra={'random': RANDOM_PICK},
                                  explain_arrival=arrival)
            for config in result.results:
                explanation = config.explain
                self.assertIsNotNone(explanation, config.config)
                self.assertEqual(config.placements[arrival - 1],
                                 explanation['selected'],
                                 (config.config, arrival))
                if explanation['selected'] is None:
                    self.assertTrue(explanation['no_valid_host'])
                elif not explanation['random_choice']:
                    self.assertEqual(explanation['selected'],
                                     explanation['hosts'][0]['host'])

    def test_weighers_are_broken_down(self):
        packing = self.compare(TWO_HOSTS, SEQUENCE, 'nova-packing',
                               explain_arrival=2).results[0].explain
        # h-001 took the first "small": both hosts are candidates
        self.assertEqual(['h-001', 'h-002'], packing['candidates'])
        self.assertEqual(['h-001', 'h-002'],
                         [host['host'] for host in packing['hosts']])
        ram = [weigher for weigher in packing['hosts'][0]['weighers']
               if weigher['weigher'] == 'RAMWeigher'][0]
        self.assertEqual(-1.0, ram['multiplier'])
        self.assertEqual(6144, ram['raw'])
        self.assertEqual(ram['multiplier'] * ram['normalised'],
                         ram['contribution'])
        self.assertEqual('small', packing['request']['flavor']['name'])

    def test_filter_removed_host_is_named_with_its_filter(self):
        spread = self.compare(FailureDomainTest.CLUSTER,
                              FailureDomainTest.WORKLOAD,
                              'nova-ext-failure-domain',
                              explain_arrival=2).results[0]
        removed = {step['filter']: step['removed']
                   for step in spread.explain['filters']}
        self.assertEqual([{'host': 'h-001', 'reason': None}],
                         removed['ServerGroupAntiAffinityFilter'])
        self.assertEqual(
            [{'host': 'h-002', 'reason': 'rack:max=1: rack r001 already '
              'holds 1 member of the group (max 1)'}],
            removed['FailureDomainAntiAffinityFilter'])
        self.assertEqual('h-003', spread.explain['selected'])
        self.assertEqual('h-003', spread.placements[1])

    def test_replay_is_the_same_with_and_without_explain(self):
        configs = ('nova-defaults', 'nova-ext-bin-packing')
        extra = {'random': RANDOM_PICK}
        plain = self.compare(TWO_HOSTS, SEQUENCE, *configs, extra=extra)
        for arrival in (1, 3):
            explained = self.compare(TWO_HOSTS, SEQUENCE, *configs,
                                     extra=extra, explain_arrival=arrival)
            data = without_timings(explained)
            self.assertEqual(arrival, data.pop('explain')['arrival'])
            self.assertEqual(without_timings(plain), data)

    def test_arrival_after_the_first_failure_is_not_replayed(self):
        workload = SEQUENCE + '  - {flavor: small, image: a}\n'
        packing = self.compare(TWO_HOSTS, workload, 'nova-packing',
                               explain_arrival=6).results[0]
        self.assertIsNone(packing.explain)


class ExplainCommandTest(SimulatorTestCase):

    def simulate(self, *extra):
        args = manage.build_parser().parse_args([
            'simulate', '--cluster', self.write('c.yaml', TWO_HOSTS),
            '--workload', self.write('w.yaml', SEQUENCE),
            '--conf', 'nova-packing', '--conf', 'nova-defaults'] + list(extra))
        out = io.StringIO()
        self.assertEqual(0, manage.CATEGORIES['simulate'].run(
            args, None, out, err=io.StringIO()))
        return out.getvalue()

    def test_table_then_one_breakdown_per_configuration(self):
        out = self.simulate('--explain', '2')
        table, packing = out.split('\narrival 2 with nova-packing:\n')
        packing, defaults = packing.split(
            '\narrival 2 with nova-defaults:\n')
        self.assertIn('placed before 1st NoValidHost', table)
        # hand-worked: stacking puts the second "small" on h-001, spreading
        # on h-002
        self.assertIn('selected: h-001\n', packing)
        self.assertIn('selected: h-002\n', defaults)
        self.assertIn('flavor small: 1 VCPU, 2048 MB RAM', packing)

    def test_json_has_the_breakdowns_under_explain(self):
        data = json.loads(self.simulate('--explain', '5', '--json', '-'))
        self.assertEqual(5, data['explain']['arrival'])
        self.assertEqual(['nova-packing', 'nova-defaults'],
                         [c['config'] for c in data['explain']['configs']])
        for config in data['explain']['configs']:
            self.assertIsNone(config['explanation']['selected'])
            self.assertTrue(config['explanation']['no_valid_host'])

    def test_no_explain_no_breakdown(self):
        self.assertNotIn('\narrival ', self.simulate())
        self.assertNotIn('explain',
                         json.loads(self.simulate('--json', '-')))

    def test_arrival_outside_the_run_is_refused_before_replaying(self):
        self.useFixture(fixtures.MockPatch(
            'nova_ext.simulator.engine.compare',
            side_effect=AssertionError('replayed')))
        cluster = self.write('c.yaml', TWO_HOSTS)
        workload = self.write('w.yaml', SEQUENCE)
        # ('-1' is argparse's to refuse: not a whole number)
        for explain, arrivals in (('0', '5'), ('6', '5'), ('4', '3')):
            err = io.StringIO()
            self.assertEqual(1, manage.main([
                'simulate', '--cluster', cluster, '--workload', workload,
                '--conf', 'nova-packing', '--arrivals', arrivals,
                '--explain', explain], err=err))
            self.assertEqual(
                ['nova-ext-manage: --explain %s: no such arrival; this run '
                 'replays arrivals 1 to %s' % (explain, arrivals)],
                err.getvalue().splitlines())
