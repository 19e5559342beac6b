# SPDX-License-Identifier: Apache-2.0
"""The simulator's failure-domain levels (rows/rack_size and the
``failure_domains`` list) and its spread-constraint figures, on models
small enough to work out by hand.
"""

import io
import json
import os

from nova_ext.cmd import manage
from nova_ext.simulator import engine
from nova_ext.simulator import model
from nova_ext.simulator import spread
from tests.unit import test_simulator

# Seven hosts: a group of five in racks of two, a group of two in racks of
# its own size; racks dealt to two rows in turn (the format before
# failure_domains).
OLD_FORMAT = """\
name: old
rows: 2
rack_size: 2
host_groups:
  - {name: a, count: 5, vcpus: 4, ram_mb: 8192, disk_gb: 100}
  - {name: b, count: 2, vcpus: 4, ram_mb: 8192, disk_gb: 100, rack_size: 3}
"""

# Ten hosts: racks of 2, rows of 2 racks (consecutive), rows dealt to 2
# rooms in turn.
THREE_LEVELS = """\
name: rooms
failure_domains:
  - {level: rack, size: 2}
  - {level: row, size: 2}
  - {level: room, count: 2}
host_groups:
  - {name: h, count: 10, vcpus: 4, cpu_allocation_ratio: 1.0,
     ram_mb: 8192, disk_gb: 100}
"""

# Eight hosts in two rooms of two rows of two one-host racks.
EIGHT_IN_ROOMS = """\
name: eight
failure_domains:
  - {level: rack, size: 1}
  - {level: row, size: 2}
  - {level: room, size: 2}
host_groups:
  - {name: h, count: 8, vcpus: 4, cpu_allocation_ratio: 1.0,
     ram_mb: 8192, disk_gb: 100}
"""

# A group of two spread across rooms, by spread_constraints.
ROOM_WORKLOAD = """\
flavors:
  - {name: small, vcpus: 1, ram_mb: 1024, disk_gb: 1}
groups:
  - {name: g, policy: anti-affinity, spread_constraints: 'room:max=1'}
sequence:
  - {flavor: small, group: g, count: 2}
"""

ROOM_CONF = """\
[filter_scheduler]
available_filters = nova.scheduler.filters.all_filters
available_filters = nova_ext.scheduler.filters.all_filters
weight_classes = nova.scheduler.weights.all_weighers
enabled_filters = ComputeFilter,ServerGroupAntiAffinityFilter,
  FailureDomainAntiAffinityFilter
ram_weight_multiplier = -1.0
cpu_weight_multiplier = -1.0
disk_weight_multiplier = -1.0

[nova_ext]
failure_domain_levels = rack,row,room
"""


def domains(cluster):
    return {h.name: h.domains for h in cluster.hosts}


class LevelsTest(test_simulator.SimulatorTestCase):

    def load(self, text):
        return model.load_cluster(self.write('cluster.yaml', text))

    def test_old_format_gives_the_same_hosts_and_domains(self):
        cluster = self.load(OLD_FORMAT)
        # racks numbered across groups, a group starting its own rack;
        # racks dealt to the rows in turn: as before failure_domains
        self.assertEqual({
            'a-001': {'rack': 'r001', 'row': 'row1'},
            'a-002': {'rack': 'r001', 'row': 'row1'},
            'a-003': {'rack': 'r002', 'row': 'row2'},
            'a-004': {'rack': 'r002', 'row': 'row2'},
            'a-005': {'rack': 'r003', 'row': 'row1'},
            'b-001': {'rack': 'r004', 'row': 'row2'},
            'b-002': {'rack': 'r004', 'row': 'row2'},
        }, domains(cluster))
        self.assertEqual('r003', cluster.hosts[4].rack)
        self.assertEqual('row1', cluster.hosts[4].row)
        self.assertEqual(['rack', 'row'], cluster.levels())
        self.assertEqual([
            ('rack-r001', ['a-001', 'a-002'],
             {'nova_ext:failure_domain:rack': 'r001'}),
            ('rack-r002', ['a-003', 'a-004'],
             {'nova_ext:failure_domain:rack': 'r002'}),
            ('rack-r003', ['a-005'], {'nova_ext:failure_domain:rack': 'r003'}),
            ('rack-r004', ['b-001', 'b-002'],
             {'nova_ext:failure_domain:rack': 'r004'}),
            ('row-row1', ['a-001', 'a-002', 'a-005'],
             {'nova_ext:failure_domain:row': 'row1'}),
            ('row-row2', ['a-003', 'a-004', 'b-001', 'b-002'],
             {'nova_ext:failure_domain:row': 'row2'}),
        ], [(a.name, a.hosts, a.metadata) for a in cluster.aggregates])

    def test_builtin_old_format_cluster_keeps_its_racks_and_rows(self):
        cluster = model.load_cluster(model.DEFAULT_CLUSTER)
        by_name = {h.name: h for h in cluster.hosts}
        self.assertEqual(('r001', 'row1'), (by_name['gp-020'].rack,
                                            by_name['gp-020'].row))
        self.assertEqual(('r002', 'row2'), (by_name['gp-021'].rack,
                                            by_name['gp-021'].row))
        # the mem group starts rack 22 (420 gp hosts fill 21), row 1
        self.assertEqual(('r022', 'row1'), (by_name['mem-001'].rack,
                                            by_name['mem-001'].row))
        self.assertEqual(25 + 3 + 1, len(cluster.aggregates))

    def test_three_levels(self):
        cluster = self.load(THREE_LEVELS)
        self.assertEqual(['rack', 'row', 'room'], cluster.levels())
        got = domains(cluster)
        self.assertEqual({'rack': 'rack001', 'row': 'row001',
                          'room': 'room001'}, got['h-001'])
        self.assertEqual({'rack': 'rack002', 'row': 'row001',
                          'room': 'room001'}, got['h-004'])
        self.assertEqual({'rack': 'rack003', 'row': 'row002',
                          'room': 'room002'}, got['h-005'])
        # row 3 is dealt back to room 1
        self.assertEqual({'rack': 'rack005', 'row': 'row003',
                          'room': 'room001'}, got['h-010'])
        rooms = {a.metadata['nova_ext:failure_domain:room']: a.hosts
                 for a in cluster.aggregates
                 if 'nova_ext:failure_domain:room' in a.metadata}
        self.assertEqual({
            'room001': ['h-001', 'h-002', 'h-003', 'h-004', 'h-009',
                        'h-010'],
            'room002': ['h-005', 'h-006', 'h-007', 'h-008']}, rooms)

    def assertError(self, text, field, message):
        error = self.assertRaises(model.ModelError, self.load, text)
        self.assertEqual(field, error.field)
        self.assertIn(message, error.message)

    def test_bad_levels_are_clear_errors(self):
        self.assertError(THREE_LEVELS.replace('name: rooms',
                                              'name: rooms\nrows: 2'),
                         'rows', 'not both')
        self.assertError(THREE_LEVELS.replace('{level: rack, size: 2}',
                                              '{level: rack, count: 2}'),
                         'failure_domains[0].size', 'innermost')
        self.assertError(THREE_LEVELS.replace('level: room', 'level: host'),
                         'failure_domains[2].level', 'not a level name')
        self.assertError(THREE_LEVELS.replace('level: room', 'level: row'),
                         'failure_domains[2].level', 'listed twice')
        self.assertError(THREE_LEVELS.replace('count: 2', 'count: 2, '
                                              'size: 2'),
                         'failure_domains[2].size', 'one of them')


class UnknownLevelTest(test_simulator.SimulatorTestCase):

    def test_a_level_the_cluster_does_not_define_is_one_error_line(self):
        # the configuration lets requests spread across rooms and the
        # workload asks for it; the rack/row cluster has no rooms
        error = self.assertRaises(
            engine.ConfigError, self.compare, OLD_FORMAT, ROOM_WORKLOAD,
            extra={'rooms': ROOM_CONF})
        message = str(error)
        self.assertNotIn('\n', message)
        self.assertIn('failure_domain_levels lists room', message)
        self.assertIn('server group g', message)
        self.assertIn('(its levels: rack, row)', message)

    def test_a_level_nobody_asks_for_is_no_error(self):
        # Nova's default levels name power, which the cluster lacks
        workload = ROOM_WORKLOAD.replace('room:max=1', 'rack:max=1')
        result = self.compare(OLD_FORMAT, workload, 'nova-packing')
        self.assertEqual(2, result.results[0].placed)


class ThirdLevelSpreadTest(test_simulator.SimulatorTestCase):

    def simulate(self, cluster_text, workload_text):
        args = manage.build_parser().parse_args([
            'simulate', '--cluster', self.write('c.yaml', cluster_text),
            '--workload', self.write('w.yaml', workload_text),
            '--conf', 'nova-packing', '--conf',
            self.write('rooms.conf', ROOM_CONF), '--json', '-'])
        out = io.StringIO()
        self.assertEqual(0, manage.CATEGORIES['simulate'].run(
            args, None, out, err=io.StringIO()))
        return json.loads(out.getvalue())['results']

    def test_simulate_spreads_across_rooms(self):
        packing, rooms = self.simulate(EIGHT_IN_ROOMS, ROOM_WORKLOAD)
        [checked] = packing['spread_sets']
        # the second member, in the first one's room, is the violation
        self.assertEqual(('room:max=1', 1, 2, 1, 1), (
            checked['name'], checked['hard_violations'],
            checked['members_placed'], checked['groups'],
            checked['fully_placed']))
        [checked] = rooms['spread_sets']
        self.assertEqual(0, checked['hard_violations'])
        self.assertEqual(100.0, checked['fully_placed_percent'])
        self.assertEqual(2, checked['domain_bound'])

    def test_third_level_placements(self):
        packing, rooms = self.compare(
            EIGHT_IN_ROOMS, ROOM_WORKLOAD, 'nova-packing',
            extra={'rooms': ROOM_CONF}).results
        # host anti-affinity alone: the next host, in the same room
        self.assertEqual(['h-001', 'h-002'], packing.placements)
        # room:max=1: the second member in the other room
        self.assertEqual('h-001', rooms.placements[0])
        self.assertIn(rooms.placements[1],
                      ['h-005', 'h-006', 'h-007', 'h-008'])

    def test_builtin_three_level_example(self):
        cluster = model.load_cluster(os.path.join(model.EXAMPLES,
                                                  'cluster-rooms.yaml'))
        self.assertEqual(['rack', 'row', 'room'], cluster.levels())
        self.assertEqual(240, len(cluster.hosts))
        self.assertEqual({'room001', 'room002'},
                         {h.domains['room'] for h in cluster.hosts})
        workload = model.load_workload(os.path.join(
            model.EXAMPLES, 'workload-spread.yaml'))
        workload.arrivals = workload.arrivals[:40]
        result = engine.compare(cluster, workload, [
            ('rooms', os.path.join(test_simulator.CONF_DIR,
                                   'nova-ext-spread-rooms.conf'))]).results[0]
        self.assertEqual(40, result.placed)
        self.assertEqual(['rack-row', 'rack-soft-host', 'room'],
                         [s.name for s in result.spread_sets])
        self.assertEqual([0, 0, 0],
                         [s.hard_violations for s in result.spread_sets])
        self.assertTrue(sum(s.members_placed for s in result.spread_sets))


class CheckerTest(test_simulator.SimulatorTestCase):
    """The independent check itself, on hand-made placements."""

    def checker(self, constraints, cluster_text=EIGHT_IN_ROOMS):
        cluster = model.load_cluster(self.write('c.yaml', cluster_text))
        workload = model.load_workload(self.write('w.yaml', (
            ROOM_WORKLOAD.replace("'room:max=1'", "'%s'" % constraints)
            .replace('count: 2', 'count: 4'))))
        return spread.Checker(cluster, workload, 1)

    def test_max_counts_live_members(self):
        checker = self.checker('room:max=2')
        everyone = list(range(8))
        self.assertEqual([], checker.placed('g', 0, everyone))
        self.assertEqual([], checker.placed('g', 1, everyone))
        [broken] = checker.placed('g', 2, everyone)   # third in room001
        self.assertEqual('room:max=2', str(broken))
        checker.departed('g', 0)
        checker.departed('g', 2)
        self.assertEqual([], checker.placed('g', 3, everyone))

    def test_skew_is_measured_over_eligible_domains(self):
        checker = self.checker('row:skew=1')
        everyone = list(range(8))
        self.assertEqual([], checker.placed('g', 0, everyone))   # row001
        # row001 holds 1, row002-4 none: a second member there is skew 2
        self.assertEqual(1, len(checker.placed('g', 1, everyone)))
        # with only row001's hosts offered, the minimum is its own count
        checker = self.checker('row:skew=1')
        self.assertEqual([], checker.placed('g', 0, [0, 1]))
        self.assertEqual([], checker.placed('g', 1, [0, 1]))
        # ... unless min_domains asks for more domains than offered
        checker = self.checker('row:skew=1,min_domains=2')
        self.assertEqual([], checker.placed('g', 0, [0, 1]))
        self.assertEqual(1, len(checker.placed('g', 1, [0, 1])))

    def test_soft_constraints_are_not_violated(self):
        checker = self.checker('room:max=1,soft')
        self.assertEqual([], checker.placed('g', 0, [0]))
        self.assertEqual([], checker.placed('g', 1, [1]))

    def test_domain_bound_is_exact_on_nested_levels(self):
        cluster = model.load_cluster(self.write('c.yaml', THREE_LEVELS))
        parse = spread.spread_constraints.parse

        def bound(text):
            return spread.domain_bound(cluster, parse(
                text, ['rack', 'row', 'room']))

        self.assertEqual(5, bound('rack:max=1'))
        # resources aside, a host holds any number without a host rule
        self.assertEqual(25, bound('rack:max=5'))
        self.assertEqual(10, bound('host:max=1;rack:max=5'))
        self.assertEqual(4, bound('rack:max=1;room:max=2'))
        # room001 holds rows 1 and 3 (3 racks), room002 row 2 (2 racks)
        self.assertEqual(5, bound('rack:max=1;row:max=2;room:max=3'))
        self.assertEqual(2, bound('room:max=1'))
        self.assertEqual(4, bound('host:max=1;rack:max=1;room:max=2'))
        self.assertIsNone(bound('rack:skew=1'))
        self.assertIsNone(bound('rack:max=1,soft'))


class PlacementCapTest(test_simulator.SimulatorTestCase):
    # Four one-host racks; a group of three, one per rack; [scheduler]
    # max_placement_results = 2.
    CLUSTER = test_simulator.TWO_HOSTS.replace('count: 2', 'count: 4')
    WORKLOAD = ROOM_WORKLOAD.replace('room:max=1', 'rack:max=1').replace(
        'count: 2', 'count: 3')
    CONF = test_simulator.PRE_FILTERS.replace(
        '[filter_scheduler]\n', '[scheduler]\nmax_placement_results = 2\n\n'
        '[filter_scheduler]\nenabled_filters = ComputeFilter,'
        'ServerGroupAntiAffinityFilter,FailureDomainAntiAffinityFilter\n')

    def test_a_group_s_request_is_not_capped(self):
        """Nova asks placement without a limit for a request naming a
        server group (resources_from_request_spec): the third member finds
        h-003 although the cap is 2 and h-001, h-002 come first, with or
        without the failure_domain pre-filter.
        """
        filter_only, excluded = self.compare(
            self.CLUSTER, self.WORKLOAD, extra={
                'filter-only': self.CONF + 'request_filters =\n',
                'pre-filter': self.CONF + 'request_filters = '
                'failure_domain\n'}).results
        self.assertEqual(['h-001', 'h-002', 'h-003'], filter_only.placements)
        self.assertEqual(['h-001', 'h-002', 'h-003'], excluded.placements)
        self.assertEqual([0, 0], [r.spread_sets[0].hard_violations
                                  for r in (filter_only, excluded)])
