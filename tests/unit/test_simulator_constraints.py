# SPDX-License-Identifier: Apache-2.0
"""The simulator's workload reads ``spread_constraints`` with the API
validator's grammar and messages (issue 42), its levels checked against
the cluster's.
"""

import io
import json

from nova import exception

from nova_ext.api.validators import nova_ext as validators
from nova_ext.cmd import manage
from nova_ext.scheduler import failure_domains
from nova_ext.simulator import model
from tests.unit import test_simulator
from tests.unit import test_simulator_domains

VALIDATOR_PREFIX = "Validation failed for extra spec '%s': " % (
    failure_domains.SPREAD_CONSTRAINTS)

# Each was an "unexpected ValueError" in the middle of a run, or silently
# accepted ('' and an unknown level).
BAD = [
    'rack:skew=0',
    'rack:max=0',
    'rack:max=1;rack:max=2',
    ';'.join(['rack:max=1'] * 1000),
    ';'.join('rack:max=%d' % n for n in range(1, 1001)),
    '',
    ' ',
    'zone:max=1',
    'rack:max=1,soft,hard',
    'rack',
    'rack:',
    'rack:max=1;',
    'rack:max=1_0',
    'rack:max=\u0663',
    'rack:max= 1',
    'rack:max=+1',
    'rack:max=1,min_domains=2',
    'rack:skew=1,min_domains=0',
    'rack:skew=1,min_domains=1,min_domains=2',
    'rack:spread=1',
    'rack:max=1,often',
]
GOOD = ['rack:max=1', 'rack:max=1;row:skew=1,min_domains=3,soft',
        'host:max=1;room:max=2', 'rack:max=1;rack:skew=2']

WORKLOAD = """\
flavors:
  - {name: small, vcpus: 1, ram_mb: 1024, disk_gb: 1}
groups:
  - name: g
    spread_constraints: %s
sequence:
  - {flavor: small, group: g}
"""
CONSTRAINTS_LINE = 5

MIXES = """\
flavors:
  - {name: small, vcpus: 1, ram_mb: 1024, disk_gb: 1}
arrivals: 10
server_groups:
  - {name: set, share: 0.5, size: 2,
     spread_constraints: %s}
"""


class SameGrammarTest(test_simulator.SimulatorTestCase):

    def setUp(self):
        super().setUp()
        self.cluster = model.load_cluster(self.write(
            'cluster.yaml', test_simulator_domains.THREE_LEVELS))
        # the API validator configured with the cluster's levels
        self.flags(group='nova_ext',
                   failure_domain_levels=self.cluster.levels())
        self.validator, = [
            v for v in validators.register()
            if v.name == failure_domains.SPREAD_CONSTRAINTS]

    def validator_says(self, value):
        error = self.assertRaises(
            exception.ValidationError, self.validator.validate,
            failure_domains.SPREAD_CONSTRAINTS, value)
        message = str(error)
        self.assertTrue(message.startswith(VALIDATOR_PREFIX), message)
        return message[len(VALIDATOR_PREFIX):]

    def workload_says(self, text, value):
        path = self.write('workload.yaml', text % json.dumps(value))
        error = self.assertRaises(model.ModelError, model.load_workload,
                                  path, cluster=self.cluster)
        return path, error

    def test_each_bad_constraint_gets_the_validator_s_message(self):
        self.assertEqual(['rack', 'row', 'room'], self.cluster.levels())
        for value in BAD:
            detail = self.validator_says(value)
            path, error = self.workload_says(WORKLOAD, value)
            self.assertEqual('%s:%d: groups[0].spread_constraints: %s' % (
                path, CONSTRAINTS_LINE, detail), str(error), value[:40])

    def test_server_group_sets_are_checked_the_same_way(self):
        for value in BAD:
            detail = self.validator_says(value)
            _, error = self.workload_says(MIXES, value)
            self.assertEqual(detail, error.message, value[:40])
            self.assertEqual('server_groups[0].spread_constraints',
                             error.field)

    def test_a_flavor_s_extra_spec_is_checked_the_same_way(self):
        text = (
            'flavors:\n'
            '  - name: small\n'
            '    vcpus: 1\n'
            '    ram_mb: 1024\n'
            '    extra_specs:\n'
            '      "nova_ext:spread_constraints": %s\n'
            'sequence:\n'
            '  - {flavor: small}\n')
        for value in BAD:
            detail = self.validator_says(value)
            path, error = self.workload_says(text, value)
            self.assertEqual(
                '%s:6: flavors[0].extra_specs.nova_ext:spread_constraints: '
                '%s' % (path, detail), str(error), value[:40])

    def test_good_constraints_are_accepted_by_both(self):
        for value in GOOD:
            self.validator.validate(failure_domains.SPREAD_CONSTRAINTS, value)
            workload = model.load_workload(
                self.write('workload.yaml', WORKLOAD % json.dumps(value)),
                cluster=self.cluster)
            self.assertEqual(value, workload.groups['g'].spread_constraints)

    def test_a_level_of_another_cluster_is_refused(self):
        old = model.load_cluster(self.write(
            'old.yaml', test_simulator_domains.OLD_FORMAT))
        self.assertNotIn('room', old.levels())
        path = self.write('workload.yaml', WORKLOAD % '"room:max=1"')
        error = self.assertRaises(model.ModelError, model.load_workload,
                                  path, cluster=old)
        self.assertIn("constraint 'room:max=1' names no failure-domain "
                      "level (known: rack, row, host)", str(error))
        # without a cluster only the grammar is checked
        model.load_workload(path)

    def test_simulate_says_it_in_one_line(self):
        cluster = self.write('cluster.yaml',
                             test_simulator_domains.THREE_LEVELS)
        for value in ('rack:skew=0', 'zone:max=1', '',
                      ';'.join(['rack:max=1'] * 1000)):
            workload = self.write('workload.yaml', WORKLOAD % json.dumps(
                value))
            err = io.StringIO()
            code = manage.main(['simulate', '--cluster', cluster,
                                '--workload', workload], err=err)
            self.assertEqual(1, code)
            line, = err.getvalue().splitlines()
            self.assertNotIn('unexpected', line)
            self.assertIn('groups[0].spread_constraints: ', line)
            self.assertLess(len(line), 1100)
