# SPDX-License-Identifier: Apache-2.0
"""Failure-domain spread while members are in flight, on moves, and why not.

Given hosts in three racks (two hosts each) and a group spread one member
per rack, then: a member already placed but not yet built counts (the
conductor's view of the group does not have it yet); the fault of a refused
member names the full racks, the group and the maximum; every move keeps
the limit without counting the mover against its own rack; a rebuild stays
on its host; an unreachable coordination backend refuses or schedules as
``[nova_ext] spread_coordination_unavailable`` says.
"""

import threading

from nova.compute import manager as compute_manager
from nova.tests import fixtures as nova_fixtures

from tests.functional import base

HINTS = {'nova_ext:spread_level': 'rack'}


class SpreadTestCase(base.RackedTestCase):

    def one_member_per_rack(self, name):
        group = self.create_server_group(name)
        servers = [self.boot('%s-%d' % (name, i), self.flavor, group, HINTS)
                   for i in range(3)]
        self.assertCountEqual(['r1', 'r2', 'r3'],
                              [self.rack(s) for s in servers])
        return group, {self.rack(s): s for s in servers}


class InFlightMemberTest(SpreadTestCase):

    def test_member_placed_but_not_built_counts(self):
        """Nova's view of the group (the members' hosts) lacks a member
        whose build has not reached its compute; its placement allocation
        has it.
        """
        release = threading.Event()
        held_on_compute = threading.Event()
        builders = []
        build = compute_manager.ComputeManager.build_and_run_instance

        def held_build(manager, context, instance, *args, **kwargs):
            if instance.display_name != 'held':
                return build(manager, context, instance, *args, **kwargs)
            held_on_compute.set()

            # The RPC cast returns at once, as on a real cloud. (Blocking
            # here would block the conductor too: the test fixtures turn
            # casts into calls, made under the cell databases' lock.)
            def build_when_released():
                release.wait(120)
                build(manager, context, instance, *args, **kwargs)

            builder = threading.Thread(target=build_when_released)
            builder.start()
            builders.append(builder)

        self.useFixture(nova_fixtures.fixtures.MonkeyPatch(
            'nova.compute.manager.ComputeManager.build_and_run_instance',
            held_build))
        self.addCleanup(lambda: [b.join(120) for b in builders])
        self.addCleanup(release.set)
        group = self.create_server_group('web')
        server = self._build_server(name='held', flavor_id=self.flavor,
                                    networks='none')
        held = self.api.post_server({'server': server, 'os:scheduler_hints':
                                     dict(HINTS, group=group)})
        self.assertTrue(held_on_compute.wait(60))

        others = [self.boot('web-%d' % i, self.flavor, group, HINTS,
                            expected_state=None) for i in range(3)]
        release.set()
        held = self._wait_for_state_change(held, 'ACTIVE')
        active = [s for s in others if s['status'] == 'ACTIVE'] + [held]
        racks = [self.rack(self.admin_api.get_server(s['id']))
                 for s in active]
        self.assertCountEqual(['r1', 'r2', 'r3'], racks)
        refused = [s for s in others if s['status'] == 'ERROR']
        self.assertEqual(1, len(refused), others)
        self.assertNoValidHost(refused[0], 'rack:max=1: every rack left is '
                               'full')


class ReasonTest(SpreadTestCase):

    def test_fault_names_full_racks_group_and_max(self):
        group, _members = self.one_member_per_rack('web')
        fourth = self.boot('web-3', self.flavor, group, HINTS,
                           expected_state='ERROR')
        self.assertNoValidHost(
            fourth, 'every rack left is full (max 1 per rack): r1 (1), r2 '
                    '(1), r3 (1) (server group web %s)' % group)

    def test_multi_create_beyond_the_racks_names_the_limit(self):
        group = self.create_server_group('batch')
        server = self._build_server(name='batch', flavor_id=self.flavor,
                                    networks='none')
        server.update(min_count=4, max_count=4)
        self.api.post_server({'server': server, 'os:scheduler_hints': dict(
            HINTS, group=group)})
        servers = self._wait_for_assert(lambda: self._all_in(
            'batch', 4, 'ERROR'), max_retries=100, sleep=0.1)
        self.assertNoValidHost(servers[0], 'max 1 per rack')

    def test_malformed_max_names_the_hint(self):
        group = self.create_server_group('bad')
        server = self.boot('bad', self.flavor, group, dict(
            HINTS, **{'nova_ext:spread_max_per_domain': '+2'}),
            expected_state='ERROR')
        self.assertNoValidHost(server, "nova_ext:spread_max_per_domain='+2'")


class MoveTest(SpreadTestCase):
    """Every rack holds its one member; the member in r1 moves. Counting it
    against r1 would leave no rack; not counting it, the other host of r1
    takes it.
    """

    def setUp(self):
        super().setUp()
        # moving a server is an admin action
        self.api = self.admin_api

    def assertMovedWithinItsRack(self, before, after):
        self.assertEqual('r1', self.rack(after))
        self.assertNotEqual(self.host_of(before), self.host_of(after))

    def test_cold_migrate(self):
        _group, members = self.one_member_per_rack('cold')
        moved = self._migrate_server(members['r1'])
        self.assertMovedWithinItsRack(members['r1'],
                                      self.admin_api.get_server(moved['id']))
        self._confirm_resize(moved)

    def test_resize_to_another_host(self):
        _group, members = self.one_member_per_rack('resize')
        bigger = self.create_flavor('bigger', memory_mb=1024)
        moved = self._resize_server(members['r1'], bigger)
        self.assertMovedWithinItsRack(members['r1'],
                                      self.admin_api.get_server(moved['id']))

    def test_live_migrate(self):
        _group, members = self.one_member_per_rack('live')
        moved = self._live_migrate(members['r1'])
        self.assertMovedWithinItsRack(members['r1'],
                                      self.admin_api.get_server(moved['id']))

    def test_evacuate(self):
        _group, members = self.one_member_per_rack('evac')
        source = self.host_of(members['r1'])
        self.computes[source].stop()
        service = self.admin_api.get_services(
            host=source, binary='nova-compute')[0]
        self.admin_api.put_service_force_down(service['id'], True)
        moved = self._evacuate_server(members['r1'], expected_state='SHUTOFF')
        self.assertMovedWithinItsRack(members['r1'], moved)

    def test_unshelve_keeps_the_limit(self):
        group, members = self.one_member_per_rack('shelf')
        self._shelve_server(members['r1'])
        newcomer = self.boot('shelf-new', self.flavor, group, HINTS)
        self.assertEqual('r1', self.rack(newcomer))
        self.api.post_server_action(members['r1']['id'], {'unshelve': None})
        unshelved = self._wait_for_server_parameter(
            members['r1'], {'status': 'SHELVED_OFFLOADED',
                            'OS-EXT-STS:task_state': None})
        self.assertIsNone(self.host_of(unshelved))
        self._delete_server(newcomer)
        unshelved = self._unshelve_server(members['r1'])
        self.assertEqual('r1', self.rack(
            self.admin_api.get_server(unshelved['id'])))

    def test_rebuild_stays_on_its_host(self):
        _group, members = self.one_member_per_rack('rebuild')
        rebuilt = self._rebuild_server(
            members['r2'], '155d900f-4e14-4e4c-a73d-069cbf4541e6')
        self.assertEqual(self.host_of(members['r2']), self.host_of(
            self.admin_api.get_server(rebuilt['id'])))


class BackendDownRefusesTest(SpreadTestCase):

    NOVA_EXT_FLAGS = dict(SpreadTestCase.NOVA_EXT_FLAGS,
                          coordination_backend_url='redis://127.0.0.1:1')

    def test_spread_request_refused_naming_the_backend(self):
        group = self.create_server_group('web')
        server = self.boot('web', self.flavor, group, HINTS,
                           expected_state='ERROR')
        self.assertNoValidHost(
            server, 'coordination backend redis://127.0.0.1:1 is '
                    'unreachable')
        # requests without a spread never touch the backend
        plain = self.boot('plain', self.flavor)
        self.assertEqual('ACTIVE', plain['status'])


class BackendDownSchedulesTest(SpreadTestCase):

    NOVA_EXT_FLAGS = dict(SpreadTestCase.NOVA_EXT_FLAGS,
                          coordination_backend_url='redis://127.0.0.1:1',
                          spread_coordination_unavailable='schedule')

    def test_spread_request_scheduled_without_the_lock(self):
        group, _members = self.one_member_per_rack('web')
        fourth = self.boot('web-3', self.flavor, group, HINTS,
                           expected_state='ERROR')
        self.assertNoValidHost(fourth, 'max 1 per rack')
