# SPDX-License-Identifier: Apache-2.0
"""nova-ext-manage explain on a cloud whose scheduler then really schedules.

Each explanation is taken just before a boot through the REST API; the
scheduler's pick must be the host the explanation named, and a NoValidHost
must be blamed on the filter that removed the last host. Explaining must
change nothing in placement or the databases.
"""

import io
import json

import sqlalchemy

from nova import context as nova_context
from nova.db.api import api as api_db
from nova.db.main import api as main_db
from nova import objects

from nova_ext.cmd import manage
from nova_ext import explain
from tests.functional import base


def parse(*argv):
    return manage.build_parser().parse_args(['explain'] + list(argv))


class ExplainTest(base.NovaExtTestCase):
    ENABLED_FILTERS = base.NOVA_DEFAULT_FILTERS + [
        'FailureDomainAntiAffinityFilter']
    # Packing at a large multiplier outweighs Nova's spreading RAMWeigher:
    # the fullest host wins, so each pick is deterministic.
    NOVA_EXT_FLAGS = {'bin_packing_weight_multiplier': 10.0,
                      'failure_domain_spread_weight_multiplier': 0.0}

    def setUp(self):
        super().setUp()
        self.flavor = self.create_flavor('m1', vcpu=1, memory_mb=1024)
        self.set_failure_domains('rack', {'r1': ['host1', 'host2'],
                                          'r2': ['host3', 'host4']})

    def explain(self, *argv):
        return explain.explain_request(parse(*argv))

    def test_explain_names_the_host_the_scheduler_picks(self):
        # host3 gets a first server: packing now prefers it over the others.
        self.boot('seed', self.flavor, zone='nova:host3')
        for i in range(3):
            result = self.explain('--flavor', 'm1')
            self.assertIsNone(result['no_valid_host'])
            self.assertEqual(4, len(result['candidates']))
            server = self.boot('s%d' % i, self.flavor)
            self.assertEqual(result['selected'], self.host_of(server))
            self.assertEqual('host3', result['selected'])
            best = result['hosts'][0]
            self.assertEqual('host3', best['host'])
            packing = [w for w in best['weighers']
                       if w['weigher'] == 'BinPackingWeigher']
            self.assertEqual(10.0, packing[0]['multiplier'])
            self.assertEqual(packing[0]['normalised'] * 10.0,
                             packing[0]['contribution'])
            self.assertAlmostEqual(
                best['weight'],
                sum(w['contribution'] for w in best['weighers']))
            # [scheduler] max_attempts = 3: two alternates
            self.assertEqual(2, len(result['alternates']))

        out = io.StringIO()
        self.assertEqual(0, explain.run(parse('--flavor', 'm1'),
                                        base.cloud.CONF, out))
        self.assertIn('selected: host3', out.getvalue())
        self.assertIn('BinPackingWeigher', out.getvalue())
        # weighers adding nothing are left out of the table
        self.assertNotIn('CrossCellWeigher', out.getvalue())

    def test_no_valid_host_names_the_filter_that_removed_the_last_host(self):
        group = self.create_server_group('spread')
        hints = {'nova_ext:spread_level': 'rack'}
        for i in range(2):
            self.boot('m%d' % i, self.flavor, group, hints)

        result = self.explain('--flavor', 'm1', '--group', group,
                              '--hint', 'nova_ext:spread_level=rack')
        added = {step['name']: step['added']
                 for step in result['request_filters']}
        self.assertEqual(['root_required=!COMPUTE_STATUS_DISABLED'],
                         added['compute_status_filter'])
        self.assertEqual(2, len(result['request']['group']['members']))
        by_filter = {step['filter']: step['removed']
                     for step in result['filters']}
        self.assertEqual(2, len(by_filter['ServerGroupAntiAffinityFilter']))
        last = by_filter['FailureDomainAntiAffinityFilter']
        self.assertEqual(2, len(last))
        self.assertIn('already holds 1 member(s) of the group (max 1)',
                      last[0]['reason'])
        self.assertIn('FailureDomainAntiAffinityFilter',
                      result['no_valid_host'])
        self.assertIsNone(result['selected'])
        out = io.StringIO()
        explain.run(parse('--flavor', 'm1', '--group', group, '--hint',
                          'nova_ext:spread_level=rack'), base.cloud.CONF,
                    out)
        self.assertIn('NO VALID HOST: filter FailureDomainAntiAffinityFilter',
                      out.getvalue())

        server = self.boot('m2', self.flavor, group, hints,
                           expected_state='ERROR')
        self.assertNoValidHost(server)

    def test_flavor_too_big_is_blamed_on_placement(self):
        self.create_flavor('huge', vcpu=1, memory_mb=1024 * 1024)
        result = self.explain('--flavor', 'huge')
        self.assertEqual([], result['candidates'])
        self.assertIn('placement returned no allocation candidates',
                      result['no_valid_host'])
        self.assertIn('MEMORY_MB:1048576', result['placement_query'])

    def test_server_request_spec_evaluated_now(self):
        server = self.boot('s0', self.flavor, zone='nova:host2')
        result = self.explain('--server', server['id'])
        self.assertTrue(result['stored_request_spec'])
        self.assertEqual('m1', result['request']['flavor']['name'])
        # the forced host of the original boot is not part of "now"
        self.assertEqual(4, len(result['candidates']))
        self.assertEqual('host2', result['selected'])

    def test_unknown_names_fail_with_one_line(self):
        for argv, message in (
                (('--flavor', 'nope'), 'no flavor nope'),
                (('--flavor', 'm1', '--group', 'nope'),
                 'no server group nope'),
                (('--flavor', 'm1', '--image',
                  'c0ffee00-0000-4000-8000-000000000000'), 'no image'),
                (('--server', 'c0ffee00-0000-4000-8000-000000000000'),
                 'no server')):
            error = self.assertRaises(
                explain.ExplainError, explain.run, parse(*argv),
                base.cloud.CONF, io.StringIO())
            self.assertIn(message, str(error))
            self.assertTrue(str(error).startswith('explain: '), argv)
            self.assertEqual(1, len(str(error).splitlines()), argv)

    def test_aggregate_key_near_misses_are_reported(self):
        self.create_aggregate('rack-r3-case', ['host1'],
                              {'Nova_Ext:failure_domain:rack': 'r3'})
        self.create_aggregate('rack-r3-typo', ['host2'],
                              {'nova_ext:failure_domian:rack': 'r3'})

        out = io.StringIO()
        self.assertEqual(0, explain.run(parse('--flavor', 'm1', '--json'),
                                        base.cloud.CONF, out=out))
        result = json.loads(out.getvalue())
        self.assertEqual([
            {'aggregate': 'rack-r3-case',
             'problem': "key 'Nova_Ext:failure_domain:rack' is not "
                        "'nova_ext:failure_domain:rack' (case or spaces "
                        "differ); it is ignored"},
            {'aggregate': 'rack-r3-typo',
             'problem': "key 'nova_ext:failure_domian:rack' is not read by "
                        "nova-ext; it is ignored (did you mean "
                        "'nova_ext:failure_domain:rack'?)"}],
            result['aggregate_problems'])
        # the aggregates of setUp, with exact keys, are not mentioned
        self.assertIsNone(result['no_valid_host'])

        out = io.StringIO()
        explain.run(parse('--flavor', 'm1'), base.cloud.CONF, out=out)
        lines = out.getvalue().splitlines()
        self.assertEqual(
            ["WARNING: aggregate rack-r3-case: key 'Nova_Ext:failure_domain:"
             "rack' is not 'nova_ext:failure_domain:rack' (case or spaces "
             "differ); it is ignored",
             "WARNING: aggregate rack-r3-typo: key 'nova_ext:failure_domian:"
             "rack' is not read by nova-ext; it is ignored (did you mean "
             "'nova_ext:failure_domain:rack'?)"], lines[:2])
        self.assertTrue(lines[2].startswith('flavor m1:'), lines[2])

    # -- read-only proof --------------------------------------------------

    def _placement_state(self):
        state = {}
        for rp in self.placement.get(
                '/resource_providers', version='1.14').body[
                    'resource_providers']:
            url = '/resource_providers/%s' % rp['uuid']
            state[rp['uuid']] = (
                self.placement.get(url + '/usages').body['usages'],
                self.placement.get(url + '/allocations').body['allocations'],
                self.placement.get(url + '/traits', version='1.6').body[
                    'traits'],
                rp['generation'])
        return state

    def _row_counts(self):
        ctxt = nova_context.get_admin_context()
        engines = {'api': api_db.get_engine()}
        for cell in objects.CellMappingList.get_all(ctxt):
            with nova_context.target_cell(ctxt, cell) as cctxt:
                engines[cell.name] = main_db.get_engine(context=cctxt)
        counts = {}
        for name, engine in engines.items():
            with engine.connect() as connection:
                for table in sqlalchemy.inspect(engine).get_table_names():
                    counts[(name, table)] = connection.execute(
                        sqlalchemy.text('SELECT COUNT(*) FROM %s' % table)
                    ).scalar()
        return counts

    def test_explain_writes_nothing(self):
        group = self.create_server_group('g')
        self.boot('s0', self.flavor, group)
        server = self.boot('s1', self.flavor)
        placement_before = self._placement_state()
        rows_before = self._row_counts()
        self.assertTrue(any(rows_before.values()))

        self.explain('--flavor', 'm1', '--group', group)
        self.explain('--server', server['id'])
        self.explain('--flavor', 'm1', '--num', '2')

        self.assertEqual(placement_before, self._placement_state())
        self.assertEqual(rows_before, self._row_counts())
