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
from nova.scheduler import host_manager
from nova.scheduler import request_filter

from nova_ext.cmd import manage
from nova_ext import explain
from tests.functional import base

CONF = base.cloud.CONF


def parse(*argv):
    return manage.build_parser().parse_args(['explain'] + list(argv))


class ExplainTestCase(base.NovaExtTestCase):
    ENABLED_FILTERS = base.NOVA_DEFAULT_FILTERS + [
        'FailureDomainAntiAffinityFilter']
    # Packing at a large multiplier outweighs Nova's spreading RAMWeigher:
    # the fullest host wins, so each pick is deterministic.
    NOVA_EXT_FLAGS = {'bin_packing_weight_multiplier': 10.0,
                      'failure_domain_spread_weight_multiplier': 0.0}

    def setUp(self):
        super().setUp()
        self.flavor = self.create_flavor('m1', vcpu=1, memory_mb=1024)
        self.flavors = {'m1': self.flavor}

    def add_flavor(self, name, memory_mb):
        self.flavors[name] = self.create_flavor(name, vcpu=1,
                                                memory_mb=memory_mb)

    def seed(self, **servers_on):
        """One server of the named flavor on each host: ``host3='big'``."""
        for host, flavor in servers_on.items():
            self.boot('seed-' + host, self.flavors[flavor],
                      zone='nova:' + host)

    def explain(self, *argv):
        return explain.explain_request(parse(*argv))

    def explain_text(self, *argv):
        out = io.StringIO()
        self.assertEqual(0, explain.run(parse(*argv), CONF, out))
        return out.getvalue()

    def multi_create(self, name, flavor_id, count, group=None, hints=None,
                     expected_state='ACTIVE'):
        """One request for ``count`` servers (``min_count`` = ``max_count``)
        and their hosts, in the order Nova scheduled them (``name-1``
        first).
        """
        server = self._build_server(name=name, flavor_id=flavor_id,
                                    networks='none')
        server['min_count'] = server['max_count'] = count
        hints = dict(hints or {})
        if group:
            hints['group'] = group
        body = {'server': server}
        if hints:
            body['os:scheduler_hints'] = hints
        self.api.post_server(body)
        servers = []
        for index in range(1, count + 1):
            [created] = self.admin_api.get_servers(
                search_opts={'name': '^%s-%d$' % (name, index)})
            servers.append(self._wait_for_state_change(created,
                                                       expected_state))
        return servers

    def reload_scheduler(self):
        # what a nova-scheduler restarted with a changed nova.conf does:
        # load enabled_filters and weight_classes again
        self.scheduler_service.manager.host_manager = (
            host_manager.HostManager())


class ExplainTest(ExplainTestCase):

    def setUp(self):
        super().setUp()
        self.set_failure_domains('rack', {'r1': ['host1', 'host2'],
                                          'r2': ['host3', 'host4']})

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
        self.assertIn('already holds 1 member of the group (max 1)',
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

    def test_spread_constraints_show_in_the_filter_reasons(self):
        group = self.create_server_group('skew')
        constraint = 'rack:skew=1,min_domains=3'
        hints = {'nova_ext:spread_constraints': constraint}
        for i in range(2):
            self.boot('k%d' % i, self.flavor, group, hints)

        result = self.explain('--flavor', 'm1', '--group', group, '--hint',
                              'nova_ext:spread_constraints=' + constraint)
        by_filter = {step['filter']: step['removed']
                     for step in result['filters']}
        last = by_filter['FailureDomainAntiAffinityFilter']
        self.assertEqual(2, len(last))
        self.assertIn('%s: rack ' % constraint, last[0]['reason'])
        self.assertIn('already holds 1 member of the group (fewer than 3 '
                      'racks eligible: the least counts as 0)',
                      last[0]['reason'])
        self.assertIsNone(result['selected'])

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

    def test_server_is_explained_as_a_move_without_itself(self):
        # Given an ACTIVE member of a rack:max=1 group in each rack
        group = self.create_server_group('web')
        hints = {'nova_ext:spread_constraints': 'rack:max=1'}
        first = self.boot('w1', self.flavor, group, hints)
        self.boot('w2', self.flavor, group, hints)
        # When explain evaluates the first member
        result = self.explain('--server', first['id'])
        # Then it is not counted against itself: its own rack has room for
        # it, and it would go there (the other rack is full); its current
        # host is named
        self.assertIsNone(result['no_valid_host'])
        self.assertEqual(self.host_of(first), result['current_host'])
        rack_of = {'host1': 'r1', 'host2': 'r1', 'host3': 'r2',
                   'host4': 'r2'}
        self.assertEqual(rack_of[self.host_of(first)],
                         rack_of[result['selected'].split()[0]])
        self.assertIn('its current host %s is marked *'
                      % self.host_of(first),
                      self.explain_text('--server', first['id']))

    def test_unknown_names_fail_with_one_line(self):
        for argv, message in (
                (('--flavor', 'nope'), 'no flavor nope'),
                (('--flavor', 'm1', '--group', 'nope'),
                 'no server group nope'),
                (('--flavor', 'm1', '--image',
                  'c0ffee00-0000-4000-8000-000000000000'), 'no image'),
                (('--server', 'c0ffee00-0000-4000-8000-000000000000'),
                 'no server'),
                # issue 34: an unknown zone explained a placement on a host
                (('--flavor', 'm1', '--az', 'nowhere'),
                 '--az nowhere: no such availability zone (zones: nova)'),
                (('--flavor', 'm1', '--az', 'nowhere:host1'),
                 'no such availability zone'),
                (('--flavor', 'm1', '--num', '0'), '--num 0: from 1 to 1000'),
                (('--flavor', 'm1', '--num', '100000'),
                 '--num 100000: from 1 to 1000')):
            error = self.assertRaises(
                explain.ExplainError, explain.run, parse(*argv),
                base.cloud.CONF, io.StringIO())
            self.assertIn(message, str(error))
            self.assertTrue(str(error).startswith('explain: '), argv)
            self.assertEqual(1, len(str(error).splitlines()), argv)

    def test_what_if_header_masks_secret_options(self):
        # [key_manager] fixed_key is secret=True in Nova without looking
        # like a password; a password with spaces, '@' and ','
        result = self.explain('--flavor', 'm1', '--set',
                              'key_manager.fixed_key=0123 abcd@ef,gh')
        self.assertEqual(['key_manager.fixed_key=***'], result['set'])
        self.assertNotIn('abcd', json.dumps(result))

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

    # -- what-if --------------------------------------------------------

    def test_what_if_picks_the_host_the_changed_scheduler_picks(self):
        self.add_flavor('big', 2048)
        self.seed(host3='big', host1='m1', host2='m1')
        argv = ('--flavor', 'm1',
                '--set', 'nova_ext.bin_packing_weight_multiplier=-1')

        both = self.explain(*argv)
        self.assertEqual(['nova_ext.bin_packing_weight_multiplier=-1'],
                         both['set'])
        # packing at 10 picks the fullest host; spreading, the emptiest
        self.assertEqual('host3', both['current']['selected'])
        self.assertEqual('host4', both['what_if']['selected'])
        packing = [w for w in both['what_if']['hosts'][0]['weighers']
                   if w['weigher'] == 'BinPackingWeigher']
        self.assertEqual(-1.0, packing[0]['multiplier'])
        # the scheduler's configuration is as it was
        self.assertEqual(10.0, CONF.nova_ext.bin_packing_weight_multiplier)

        text = self.explain_text(*argv)
        self.assertIn('what if nova_ext.bin_packing_weight_multiplier=-1:',
                      text)
        self.assertIn('selected now: host3\n', text)
        self.assertIn('selected with the change: host4\n', text)
        out = io.StringIO()
        explain.run(parse('--json', *argv), CONF, out)
        self.assertEqual({'set', 'current', 'what_if'},
                         set(json.loads(out.getvalue())))

        self.flags(bin_packing_weight_multiplier=-1, group='nova_ext')
        server = self.boot('s0', self.flavor)
        self.assertEqual('host4', self.host_of(server))

    def test_what_if_loads_the_filters_it_names(self):
        group = self.create_server_group('spread')
        hints = {'nova_ext:spread_level': 'rack'}
        members = [self.host_of(self.boot('m%d' % i, self.flavor, group,
                                          hints)) for i in range(2)]
        # of the two hosts without a member, packing prefers this one
        [free] = sorted(set(self.HOSTS) - set(members))[:1]
        self.seed(**{free: 'm1'})
        nova_filters = ','.join(base.NOVA_DEFAULT_FILTERS)

        both = self.explain(
            '--flavor', 'm1', '--group', group,
            '--hint', 'nova_ext:spread_level=rack',
            '--set', 'filter_scheduler.enabled_filters=' + nova_filters)
        self.assertIn('FailureDomainAntiAffinityFilter',
                      both['current']['no_valid_host'])
        self.assertIsNone(both['what_if']['no_valid_host'])
        self.assertEqual(free, both['what_if']['selected'])
        self.assertNotIn('FailureDomainAntiAffinityFilter',
                         [step['filter']
                          for step in both['what_if']['filters']])
        self.assertIn('FailureDomainAntiAffinityFilter',
                      CONF.filter_scheduler.enabled_filters)

        self.flags(enabled_filters=base.NOVA_DEFAULT_FILTERS,
                   group='filter_scheduler')
        self.reload_scheduler()
        server = self.boot('m2', self.flavor, group, hints)
        self.assertEqual(free, self.host_of(server))

    def test_what_if_refuses_what_nova_conf_could_not_say(self):
        for assignment, message in (
                ('filter_scheduler.no_such_option=1',
                 'Nova and nova-ext have no option no_such_option in '
                 '[filter_scheduler]'),
                ('no_such_section.ram_weight_multiplier=1',
                 'Nova and nova-ext have no section [no_such_section]'),
                ('nova_ext.bin_packing_weight_multiplier=lots',
                 'nova_ext.bin_packing_weight_multiplier=lots:'),
                ('filter_scheduler.ram_weight_multiplier',
                 'expected SECTION.OPTION=VALUE'),
                ('filter_scheduler.enabled_filters=ComputeFilter\nx=1',
                 'control character')):
            error = self.assertRaises(
                explain.ExplainError, explain.run,
                parse('--flavor', 'm1', '--set', assignment), CONF,
                io.StringIO())
            self.assertIn(message, str(error))
            self.assertTrue(str(error).startswith('explain: --set '),
                            assignment)
            self.assertEqual(1, len(str(error).splitlines()), assignment)
        self.assertEqual(10.0, CONF.nova_ext.bin_packing_weight_multiplier)

    def test_what_if_with_an_unknown_filter_names_it(self):
        # issue 42: "unexpected SchedulerHostFilterNotFound"
        error = self.assertRaises(
            explain.ExplainError, explain.run,
            parse('--flavor', 'm1', '--set',
                  'filter_scheduler.enabled_filters=ComputeFilter,'
                  'NoSuchFilter'), CONF, io.StringIO())
        self.assertEqual(
            'explain: [filter_scheduler] enabled_filters (with --set) names '
            'NoSuchFilter, which no [filter_scheduler] available_filters '
            'provides (nova-scheduler would not start)', str(error))

    # -- --num: a multi-create -------------------------------------------

    def test_num_places_each_instance_as_a_multi_create_does(self):
        # packing fills host3 first, then the next fullest host
        self.add_flavor('half', 3072)
        self.add_flavor('small', 512)
        self.add_flavor('tiny', 256)
        self.seed(host3='m1', host2='small', host1='tiny')
        result = self.explain('--flavor', 'half', '--num', '3')
        self.assertIsNone(result['no_valid_host'])
        self.assertEqual(['host3', 'host3', 'host2'],
                         [i['host'] for i in result['instances']])
        self.assertEqual('host3', result['selected'])
        servers = self.multi_create('packed', self.flavors['half'], 3)
        self.assertEqual(['host3', 'host3', 'host2'],
                         [self.host_of(s) for s in servers])

        # spreading: each pick makes its host fuller for the next one;
        # unconsumed, the emptiest host4 would take all three
        self.flags(bin_packing_weight_multiplier=-10, group='nova_ext')
        result = self.explain('--flavor', 'm1', '--num', '3')
        self.assertEqual(['host4', 'host1', 'host4'],
                         [i['host'] for i in result['instances']])
        text = self.explain_text('--flavor', 'm1', '--num', '3')
        self.assertIn('instance 2 of 3: host1 (alternates: host2)\n', text)
        self.assertNotIn('selected:', text)
        servers = self.multi_create('spread', self.flavor, 3)
        self.assertEqual(['host4', 'host1', 'host4'],
                         [self.host_of(s) for s in servers])

    def test_num_in_an_anti_affinity_group(self):
        self.add_flavor('small', 512)
        self.add_flavor('tiny', 256)
        self.seed(host3='m1', host2='small', host1='tiny')
        group = self.create_server_group('web')
        result = self.explain('--flavor', 'm1', '--group', group,
                              '--num', '3')
        self.assertEqual(['host3', 'host2', 'host1'],
                         [i['host'] for i in result['instances']])
        # no member of the request is another one's alternate
        self.assertEqual([['host4']] * 3,
                         [i['alternates'] for i in result['instances']])
        self.assertEqual([], result['request']['group']['members'])
        servers = self.multi_create('web', self.flavor, 3, group)
        self.assertEqual(['host3', 'host2', 'host1'],
                         [self.host_of(s) for s in servers])

    def test_num_names_the_instance_that_finds_no_host(self):
        # two racks hold two members of a one-per-rack group, not three
        group = self.create_server_group('spread')
        argv = ('--flavor', 'm1', '--group', group,
                '--hint', 'nova_ext:spread_level=rack', '--num', '3')
        result = self.explain(*argv)
        self.assertEqual(2, len(result['instances']))
        self.assertIsNone(result['selected'])
        self.assertTrue(result['no_valid_host'].startswith(
            'instance 3 of 3: filter FailureDomainAntiAffinityFilter '
            'removed the last host(s)'), result['no_valid_host'])
        self.assertIn('NO VALID HOST: instance 3 of 3',
                      self.explain_text(*argv))
        servers = self.multi_create(
            'spread', self.flavor, 3, group, {'nova_ext:spread_level': 'rack'},
            expected_state='ERROR')
        for server in servers:
            self.assertNoValidHost(self.admin_api.get_server(server['id']))

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
        self.explain('--flavor', 'm1', '--group', group, '--num', '3')
        request_filters = list(request_filter.ALL_REQUEST_FILTERS)
        self.explain(
            '--flavor', 'm1', '--group', group, '--num', '3',
            '--set', 'nova_ext.bin_packing_weight_multiplier=-1',
            '--set', 'nova_ext.request_filters=host_class',
            '--set', 'filter_scheduler.enabled_filters=ComputeFilter')

        self.assertEqual(placement_before, self._placement_state())
        self.assertEqual(rows_before, self._row_counts())
        # nor is the process's configuration changed
        self.assertEqual(10.0, CONF.nova_ext.bin_packing_weight_multiplier)
        self.assertEqual(self.ENABLED_FILTERS,
                         CONF.filter_scheduler.enabled_filters)
        self.assertEqual([], CONF.nova_ext.request_filters)
        self.assertEqual(request_filters, request_filter.ALL_REQUEST_FILTERS)


class ExplainTwoCellsTest(ExplainTestCase):
    """host1 and host2 in cell1, host3 and host4 in cell2."""

    NUMBER_OF_CELLS = 2
    HOST_CELLS = {'host1': 'cell1', 'host2': 'cell1',
                  'host3': 'cell2', 'host4': 'cell2'}

    def test_hosts_of_both_cells_alternates_of_one(self):
        self.add_flavor('half', 3072)
        self.add_flavor('small', 512)
        self.seed(host3='m1', host1='small')

        result = self.explain('--flavor', 'half')
        self.assertEqual(['host1', 'host2', 'host3', 'host4'],
                         result['candidates'])
        self.assertEqual('host3', result['selected'])
        # [scheduler] max_attempts = 3, but cell2 has one other host
        self.assertEqual(['host4'], result['alternates'])

        # host3 takes two, the third goes to the other cell
        result = self.explain('--flavor', 'half', '--num', '3')
        self.assertEqual(
            [{'instance': 1, 'host': 'host3', 'alternates': ['host4']},
             {'instance': 2, 'host': 'host3', 'alternates': ['host4']},
             {'instance': 3, 'host': 'host1', 'alternates': ['host2']}],
            result['instances'])
        servers = self.multi_create('half', self.flavors['half'], 3)
        self.assertEqual(['host3', 'host3', 'host1'],
                         [self.host_of(s) for s in servers])
