# SPDX-License-Identifier: Apache-2.0
"""Audits, repairs and drains on a whole Nova in one process.

Each test changes the cloud as an operator would (aggregates through the
REST API, a server forced onto a host), then runs ``nova-ext-manage spread
audit``, ``spread rebalance --execute`` or ``host drain`` -- the command's
own code, reading Nova's databases and placement, moving servers through
Nova's REST API with openstacksdk -- and checks the cloud afterwards
through the REST API: where every server is, no server lost or left
moving, no hard constraint violated that was not before.
"""

import io
import json
import os
import sys

import fixtures
from keystoneauth1 import adapter
from keystoneauth1 import noauth
from keystoneauth1 import session
from keystoneauth1 import token_endpoint
import testtools

from nova_ext.cmd import manage
from nova_ext import errors
from nova_ext.maintenance import commands
from nova_ext.maintenance import compute_api
from tests.functional import base

CONF = base.cloud.CONF
TRAIT = 'CUSTOM_NOVA_EXT_MAINTENANCE'
# four racks of two hosts; racks r1, r2 in row a, r3, r4 in row b
RACKS = {'r1': ['host1', 'host2'], 'r2': ['host3', 'host4'],
         'r3': ['host5', 'host6'], 'r4': ['host7', 'host8']}
ROWS = {'a': RACKS['r1'] + RACKS['r2'], 'b': RACKS['r3'] + RACKS['r4']}


class MaintenanceTestCase(base.NovaExtTestCase):

    HOSTS = [host for hosts in RACKS.values() for host in hosts]
    ENABLED_FILTERS = base.NOVA_DEFAULT_FILTERS + [
        'FailureDomainAntiAffinityFilter']
    NOVA_EXT_FLAGS = {'request_filters': 'maintenance'}
    NOVA_FLAGS = {'quota': {'instances': -1, 'cores': -1, 'ram': -1}}

    def setUp(self):
        super().setUp()
        self.aggregates = {}
        for rack, hosts in RACKS.items():
            self.aggregates[rack] = self.create_aggregate(
                'rack-' + rack, hosts,
                {'nova_ext:failure_domain:rack': rack})
        for row, hosts in ROWS.items():
            self.create_aggregate('row-' + row, hosts,
                                  {'nova_ext:failure_domain:row': row})
        self.rack_of = {h: r for r, hosts in RACKS.items() for h in hosts}
        self.row_of = {h: r for r, hosts in ROWS.items() for h in hosts}
        self.flavor = self.create_flavor('small')
        # moves are followed closely: the embedded cloud runs them inline
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.maintenance.commands.POLL_SECONDS', 0.01))

    # -- the commands, as nova-ext-manage runs them ------------------------

    def placement_adapter(self):
        return adapter.Adapter(session.Session(
            auth=token_endpoint.Token(self.placement_fixture.endpoint,
                                      'admin')), service_type='placement')

    def connect(self):
        """openstacksdk on the in-process API, as the admin."""
        return compute_api.connect(session=session.Session(
            auth=noauth.NoAuth(endpoint=self.api_fixture.base_url),
            additional_headers={
                'X-Auth-User': 'admin',
                'X-Auth-Project-Id': self.api_fixture.project_id,
                'X-Roles': 'reader,member,admin'}))

    def nova_ext_manage(self, *argv):
        """(exit code, output) of one command on this cloud."""
        args = manage.build_parser().parse_args(list(argv))
        maintenance = manage.Maintenance(self.placement_adapter(), TRAIT)
        out = io.StringIO()
        if args.category == 'spread' and args.command == 'audit':
            code = commands.audit_command(CONF, args, maintenance, out)
        elif args.category == 'spread':
            code = commands.rebalance_command(CONF, args, maintenance,
                                              self.connect, out)
        else:
            code = commands.drain_command(CONF, args, maintenance,
                                          self.connect, out)
        self.addDetail('nova-ext-manage %s' % ' '.join(argv),
                       testtools.content.text_content(out.getvalue()))
        if os.environ.get('NOVA_EXT_SHOW'):
            print(out.getvalue(), file=sys.__stderr__)
        return code, out.getvalue()

    def audit(self, *argv):
        code, out = self.nova_ext_manage('spread', 'audit', '--json', *argv)
        return code, json.loads(out)

    # -- the cloud ---------------------------------------------------------

    def group(self, name, constraints, members, policy='anti-affinity'):
        """A group of ``members`` servers booted with ``constraints``."""
        group = self.create_server_group(name, policy)
        hints = {'nova_ext:spread_constraints': constraints}
        servers = [self.boot('%s-%d' % (name, index), self.flavor, group,
                             hints) for index in range(1, members + 1)]
        return group, servers

    def servers(self):
        return {s['name']: s for s in self.admin_api.get_servers()}

    def hosts_now(self):
        return {name: self.host_of(s) for name, s in self.servers().items()}

    def rack_counts(self, prefix):
        counts = {}
        for name, host in self.hosts_now().items():
            if name.startswith(prefix + '-'):
                counts[self.rack_of[host]] = counts.get(
                    self.rack_of[host], 0) + 1
        return counts

    def assertSettled(self):
        """No server lost, none left moving or in ERROR."""
        states = {name: server['status']
                  for name, server in self.servers().items()}
        self.assertEqual({'ACTIVE'}, set(states.values()), states)

    def re_rack(self, host, old, new):
        """Move ``host`` from rack ``old``'s aggregate to ``new``'s."""
        self.admin_api.remove_host_from_aggregate(self.aggregates[old], host)
        self.admin_api.add_host_to_aggregate(self.aggregates[new], host)
        self.rack_of[host] = new


class AuditAndRepairTest(MaintenanceTestCase):

    def test_healthy_groups_audit_clean(self):
        self.group('web', 'rack:max=1', 3)
        self.group('db', 'rack:skew=1;row:max=2', 3)
        code, audit = self.audit()
        self.assertEqual(0, code)
        self.assertEqual(0, audit['hard_violations'])
        by_name = {g['name']: g for g in audit['groups']}
        self.assertEqual({'web', 'db'}, set(by_name))
        self.assertEqual([True, True], [
            c['holds'] for c in by_name['db']['constraints']])

    def test_a_re_racked_host_is_found_and_repaired(self):
        # Given a rack:max=1 group, one member per rack
        _group, servers = self.group('web', 'rack:max=1', 3)
        hosts = {s['name']: self.host_of(s) for s in servers}
        before = self.rack_counts('web')
        self.assertEqual([1, 1, 1], sorted(before.values()))
        # When the host of web-2 is re-racked into web-1's rack
        moved = hosts['web-2']
        target = self.rack_of[hosts['web-1']]
        self.re_rack(moved, self.rack_of[moved], target)
        # Then the audit reports it, exit code 2, with the cause
        code, audit = self.audit()
        self.assertEqual(2, code)
        [web] = audit['groups']
        [entry] = web['constraints']
        self.assertFalse(entry['holds'])
        [cause] = [c for c in entry['causes'] if c['kind'] == 'over_max']
        self.assertEqual(target, cause['domain'])
        self.assertEqual(['web-1', 'web-2'], sorted(cause['members']))
        # and the table says so in words
        code, text = self.nova_ext_manage('spread', 'audit')
        self.assertEqual(2, code)
        self.assertIn('rack %s holds 2 members (max 1)' % target, text)
        # When the operator rebalances
        code, out = self.nova_ext_manage('spread', 'rebalance', '--execute')
        self.assertEqual(0, code, out)
        self.assertIn('1 move (lower bound 1: the fewest possible)', out)
        # Then one server moved, the constraint holds again
        self.assertSettled()
        self.assertEqual([1, 1, 1], sorted(self.rack_counts('web').values()))
        self.assertEqual(0, self.audit()[0])

    def test_a_forced_host_is_named_as_the_cause(self):
        group, servers = self.group('web', 'rack:max=1', 2)
        taken = self.rack_of[self.host_of(servers[0])]
        other = [h for h in RACKS[taken] if h != self.host_of(servers[0])][0]
        # an administrator forces a third member into a full rack
        self.boot('web-3', self.flavor, group,
                  {'nova_ext:spread_constraints': 'rack:max=1'},
                  zone='nova:%s' % other)
        code, audit = self.audit()
        self.assertEqual(2, code)
        causes = audit['groups'][0]['constraints'][0]['causes']
        kinds = {cause['kind']: cause for cause in causes}
        self.assertIn('forced', kinds)
        self.assertIn('web-3 was created on a forced host '
                      '(--availability-zone nova:%s)' % other,
                      kinds['forced']['text'])
        code, out = self.nova_ext_manage('spread', 'rebalance', '--execute')
        self.assertEqual(0, code, out)
        self.assertSettled()
        self.assertEqual(0, self.audit()[0])

    def test_plan_only_moves_nothing(self):
        _group, servers = self.group('web', 'rack:max=1', 2)
        first = self.host_of(servers[0])
        second = self.host_of(servers[1])
        self.re_rack(second, self.rack_of[second], self.rack_of[first])
        before = self.hosts_now()
        code, out = self.nova_ext_manage('spread', 'audit', '--plan')
        self.assertEqual(2, code)
        self.assertIn('repair plan', out)
        code, out = self.nova_ext_manage('spread', 'rebalance')
        self.assertEqual(0, code)
        self.assertEqual(before, self.hosts_now())


class DrainTest(MaintenanceTestCase):

    def placed_group(self, name, constraints, hosts):
        """A group whose members are put on ``hosts`` (forced, as an
        administrator does).
        """
        group = self.create_server_group(name, 'soft-anti-affinity')
        hints = {'nova_ext:spread_constraints': constraints}
        return [self.boot('%s-%d' % (name, index), self.flavor, group,
                          hints, zone='nova:' + host)
                for index, host in enumerate(hosts, 1)]

    def test_drain_a_rack(self):
        # Given groups of max=1 (one with a free rack, r4, one without),
        # skew=1 and two levels, and a server in no group
        self.placed_group('free', 'rack:max=1', ['host1', 'host3', 'host5'])
        self.placed_group('full', 'rack:max=1',
                          ['host2', 'host4', 'host6', 'host7'])
        self.placed_group('level', 'rack:skew=1',
                          ['host1', 'host2', 'host3', 'host5', 'host8'])
        self.placed_group('two', 'rack:max=1;row:max=1', ['host1', 'host6'])
        self.boot('lonely', self.flavor, zone='nova:host5')
        _code, audit = self.audit()
        self.assertEqual(0, audit['hard_violations'])
        before = self.hosts_now()
        drained = RACKS['r3']
        # When rack r3 is drained
        code, out = self.nova_ext_manage('host', 'drain', '--domain',
                                         'rack=r3')
        # Then every server that could go went where the plan said
        after = self.hosts_now()
        self.assertSettled()
        self.assertEqual(2, code)
        self.assertEqual('r4', self.rack_of[after['free-3']])
        self.assertIn(self.rack_of[after['level-4']], ('r2', 'r4'))
        self.assertEqual(('r4', 'b'), (self.rack_of[after['two-2']],
                                       self.row_of[after['two-2']]))
        self.assertNotIn(after['lonely'], drained)
        # the blocked one stays, named with the constraint that blocks it
        self.assertEqual('host6', after['full-3'])
        self.assertIn('| full-3 | full  | host6 | rack:max=1 refuses rack r1 '
                      '(1 member), r2 (1 member), r4 (1 member) (max 1) |',
                      out)
        self.assertIn('still on host5, host6: full-3', out)
        # nothing else moved
        for name in ('free-1', 'free-2', 'full-1', 'full-2', 'full-4',
                     'level-1', 'level-2', 'level-3', 'level-5', 'two-1'):
            self.assertEqual(before[name], after[name], name)
        # no hard constraint is violated now
        code, audit = self.audit()
        self.assertEqual((0, 0), (code, audit['hard_violations']), audit)
        # the hosts stay in maintenance
        self.assertEqual(drained, self.maintenance_list()[1])

    def test_unknown_hosts_domains_and_groups_are_named(self):
        for argv, expected in (
                (('host', 'drain', 'host9'),
                 'no compute host host9 (nova-compute services: host1, '
                 'host2, host3, host4, host5, host6, host7, host8)'),
                (('host', 'drain', '--domain', 'rack=r9'),
                 '--domain rack=r9: no compute host is in rack r9 (racks: '
                 'r1, r2, r3, r4)'),
                (('host', 'drain', '--domain', 'shelf=1'),
                 '--domain shelf=1: shelf is not a failure-domain level '
                 '(known: rack, row, power)'),
                (('host', 'drain', '--domain', 'r3'),
                 "--domain 'r3': expected LEVEL=NAME, e.g. rack=r3"),
                (('host', 'drain'),
                 'host drain: name hosts, or --domain LEVEL=NAME'),
                (('spread', 'audit', '--group', 'nope'),
                 'no server group nope')):
            error = self.assertRaises(errors.OperatorError,
                                      self.nova_ext_manage, *argv)
            self.assertEqual(expected, str(error))
        # nothing was put in maintenance
        self.assertEqual([], self.maintenance_list()[1])

    def test_two_groups_of_one_name(self):
        self.create_server_group('twin')
        self.create_server_group('twin')
        error = self.assertRaises(errors.OperatorError, self.nova_ext_manage,
                                  'spread', 'audit', '--group', 'twin')
        self.assertIn('2 server groups are named twin; give the UUID of '
                      'one: ', str(error))

    def test_what_nova_refuses_is_reported_with_novas_reason(self):
        # r4, the only rack the plan may send free-3 to, has no room left:
        # capacity is Nova's to judge
        self.placed_group('free', 'rack:max=1', ['host1', 'host3', 'host5'])
        big = self.create_flavor('big', memory_mb=7680)
        for host in RACKS['r4']:
            self.boot('filler-' + host, big, zone='nova:' + host)
        code, out = self.nova_ext_manage('host', 'drain', '--domain',
                                         'rack=r3', '--json')
        self.assertEqual(2, code)
        document = json.loads(out)
        self.assertEqual('rack r4', document['plan']['moves'][0]['to'])
        [result] = document['results']
        # the embedded cloud schedules a live migration inside the API
        # call (a real one answers 202 and the migration fails later:
        # 'failed', with the reason from the instance action)
        self.assertEqual('cannot move', result['outcome'])
        self.assertIn('No valid host was found. FailureDomainAntiAffinity'
                      'Filter: rack:max=1', result['detail'])
        # what the executor reads when Nova answered 202 and the migration
        # failed afterwards: the error event of the instance action
        self.assertIn('No valid host was found. FailureDomainAntiAffinity'
                      'Filter: rack:max=1', self.connect().failure(
                          result['server'], compute_api.LIVE))
        self.assertEqual(['free-3'], document['left'])
        # the server is where it was, running
        self.assertSettled()
        self.assertEqual('host5', self.hosts_now()['free-3'])

    def test_a_cold_migration_left_unconfirmed_is_finished(self):
        # an earlier drain stopped after Nova moved the server, before it
        # confirmed: the server waits in VERIFY_RESIZE on another host
        [server] = self.placed_group('web', 'rack:max=1', ['host5'])
        self.admin_api.post_server_action(server['id'], {'migrate': None})
        self._wait_for_state_change(server, 'VERIFY_RESIZE')
        code, out = self.nova_ext_manage('host', 'drain', 'host5', '--cold')
        self.assertEqual(0, code, out)
        self.assertIn('web-1: cold migration from host5 under way since an '
                      'earlier run', out)
        self.assertIn('confirmed the cold migration', out)
        self.assertSettled()
        self.assertEqual([], [m for m in self.admin_api.get_migrations()
                              if m['status'] not in ('confirmed',)])

    def test_cold_drain(self):
        [server] = self.placed_group('web', 'rack:max=1', ['host5'])
        self.admin_api.post_server_action(server['id'], {'os-stop': None})
        self._wait_for_state_change(server, 'SHUTOFF')
        code, out = self.nova_ext_manage('host', 'drain', 'host5')
        self.assertEqual(2, code)
        self.assertIn('status SHUTOFF: live migration moves running '
                      'servers; --cold moves it', out)
        code, out = self.nova_ext_manage('host', 'drain', 'host5', '--cold')
        self.assertEqual(0, code, out)
        server = self.admin_api.get_server(server['id'])
        self.assertEqual('SHUTOFF', server['status'])
        self.assertNotEqual('host5', self.host_of(server))

    def maintenance_list(self):
        out = io.StringIO()
        args = manage.build_parser().parse_args(['host', 'maintenance',
                                                 'list'])
        code = manage.HostCommands.maintenance(
            args, self.placement_adapter(), TRAIT, out)
        return code, out.getvalue().split()

    def test_dry_run_changes_nothing(self):
        self.group('web', 'rack:max=1', 3)
        before = self.hosts_now()
        code, out = self.nova_ext_manage('host', 'drain', 'host1', 'host3',
                                         'host5', '--dry-run')
        self.assertEqual(0, code, out)
        self.assertIn('would be put in maintenance', out)
        self.assertEqual(before, self.hosts_now())
        self.assertEqual([], self.maintenance_list()[1])
