# SPDX-License-Identifier: Apache-2.0
"""Where a server group's members are (nova_ext.scheduler.group_members),
read from Nova's own API and cell databases (Nova's test databases) and a
placement that answers allocations.
"""

import collections
import os

import fixtures
from oslo_config import cfg
from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import task_states
from nova.compute import vm_states
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import test

from nova_ext import cache
from nova_ext.quota import db as ext_db
from nova_ext.scheduler import group_members
from nova_ext.scheduler import spread_ledger

CONF = cfg.CONF


class Response(object):

    def __init__(self, body):
        self.body = body

    def __bool__(self):
        return self.body is not None

    def json(self):
        return self.body


class Placement(object):
    """Allocations per consumer, and compute-node providers named after
    their hosts; counts the allocation reads.
    """

    def __init__(self, hosts):
        self.providers = {getattr(uuids, 'rp_' + host): host
                          for host in hosts}
        self.allocations = {}
        self.reads = []

    def claim(self, member, host):
        self.allocations[member] = {getattr(uuids, 'rp_' + host): {}}

    def get_allocs_for_consumer(self, context, consumer):
        self.reads.append(consumer)
        return {'allocations': self.allocations.get(consumer, {})}

    def get(self, url, version=None, global_request_id=None):
        uuid = url.rsplit('/', 1)[1]
        name = self.providers.get(uuid)
        return Response(None if name is None else {
            'uuid': uuid, 'name': name, 'root_provider_uuid': uuid})


class MembersTestCase(test.TestCase):
    """Members of a group in Nova's databases, and a placement."""

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self.placement = Placement(['h1', 'h2', 'h3'])
        self.stub_out('nova.scheduler.client.report.report_client_singleton',
                      lambda: self.placement)
        cache.forget_all()
        self.addCleanup(cache.forget_all)
        self.members = []

    def member(self, name, cell=None, host=None, vm_state=vm_states.BUILDING,
               task_state=None):
        uuid = getattr(uuids, name)
        self.members.append(uuid)
        mapping = objects.InstanceMapping(
            self.context, instance_uuid=uuid, project_id='p',
            cell_mapping=self.cell_mappings[cell] if cell else None)
        mapping.create()
        if cell:
            with nova_context.target_cell(
                    self.context, self.cell_mappings[cell]) as cctxt:
                objects.Instance(cctxt, uuid=uuid, project_id='p',
                                 host=host, vm_state=vm_state,
                                 task_state=task_state).create()
        return uuid

    def build_attempt(self, uuid, host):
        """Nova's compute recording a build attempt on ``host``."""
        with nova_context.target_cell(
                self.context, self.cell_mappings['cell1']) as cctxt:
            objects.InstanceAction.action_start(cctxt, uuid, 'create',
                                                want_result=False)
            objects.InstanceActionEvent.event_start(
                cctxt, uuid, group_members.BUILD_EVENT, want_result=False,
                host=host)

    def group(self):
        group = objects.InstanceGroup(
            self.context, name='web', policy='anti-affinity',
            project_id='p', user_id='u', members=self.members)
        group.create()
        return group.uuid


class WhereTest(MembersTestCase):
    """Given a group whose members are built, in flight (claimed, not
    built), not scheduled yet, failed (cell0) and being rescheduled (build
    failed, allocations given back, no host), when the group is counted
    before ``db sync`` made the spread ledger's table, then each member
    that holds resources in placement, or is about to claim an alternate in
    the domains of its failed host, counts on its host.
    """

    def test_each_member_counts_where_it_holds_or_will_hold_resources(self):
        built = self.member('built', 'cell1', host='h1',
                            vm_state=vm_states.ACTIVE)
        flying = self.member('flying')  # claimed, not created in a cell yet
        self.placement.claim(flying, 'h2')
        self.member('waiting')  # not scheduled yet: holds nothing
        self.member('failed', 'cell0', vm_state=vm_states.ERROR)
        rescheduled = self.member('rescheduled', 'cell1',
                                  task_state=task_states.SCHEDULING)
        self.build_attempt(rescheduled, 'h3')

        where = group_members.where(self.context, self.group())

        self.assertEqual({built: {'h1'}, flying: {'h2'},
                          rescheduled: {'h3'}}, where)
        # the failed and the built are not asked of placement
        self.assertEqual({flying, uuids.waiting, rescheduled},
                         set(self.placement.reads))

    def test_a_member_in_flight_is_read_once_until_it_records_a_host(self):
        flying = self.member('flying')
        self.placement.claim(flying, 'h2')
        group = self.group()
        self.assertEqual({flying: {'h2'}},
                         group_members.where(self.context, group))
        del self.placement.reads[:]
        self.assertEqual({flying: {'h2'}},
                         group_members.where(self.context, group))
        self.assertEqual([], self.placement.reads)

    def test_what_placement_said_ages_out(self):
        flying = self.member('flying')
        self.placement.claim(flying, 'h2')
        group = self.group()
        group_members.where(self.context, group)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.group_members._in_flight',
            group_members.cachetools.TTLCache(maxsize=10, ttl=0)))
        del self.placement.allocations[flying]  # failed, claims given back
        self.assertEqual({}, group_members.where(self.context, group))

    def test_a_rescheduled_member_without_a_recorded_attempt_is_not_counted(
            self):
        self.member('rescheduled', 'cell1', task_state=task_states.SCHEDULING)
        self.assertEqual({}, group_members.where(self.context, self.group()))

    def test_a_member_being_moved_counts_at_its_source_and_destination(self):
        moving = self.member('moving', 'cell1', host='h1',
                             vm_state=vm_states.ACTIVE,
                             task_state=task_states.RESIZE_MIGRATING)
        self.placement.claim(moving, 'h2')  # the destination's claim
        self.assertEqual({moving: {'h1', 'h2'}},
                         group_members.where(self.context, self.group()))

    def test_a_claim_this_process_made_is_not_asked_of_placement(self):
        flying = self.member('flying')
        group_members.claimed(flying, 'h3')
        self.assertEqual({flying: {'h3'}},
                         group_members.where(self.context, self.group()))
        self.assertEqual([], self.placement.reads)

    def test_per_host_leaves_out_the_servers_not_counted(self):
        where = {uuids.a: frozenset(['h1']), uuids.b: frozenset(['h1', 'h2']),
                 uuids.moving: frozenset(['h2'])}
        self.assertEqual({'h1': 2, 'h2': 1},
                         dict(group_members.per_host(where, {uuids.moving})))


class LedgerTest(MembersTestCase):
    """Given nova-ext's tables (``db sync``), when a turn records its claims
    in the spread ledger, then a later count finds them there without
    asking placement, never asks placement where a member no turn claimed
    is, and names the rows no count needs any more.
    """

    def setUp(self):
        super().setUp()
        self.flags(connection='sqlite:///%s' % os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'nova_ext.sqlite'),
            group='nova_ext_database')
        ext_db.reset()
        self.addCleanup(ext_db.reset)
        ext_db.sync(CONF)

    def test_claims_of_earlier_turns_are_counted_from_the_ledger(self):
        flying = self.member('flying')  # claimed, its instance not created
        self.member('waiting')  # not scheduled yet
        built = self.member('built', 'cell1', host='h1',
                            vm_state=vm_states.ACTIVE)
        group = self.group()
        spread_ledger.record(group, {flying: 'h2', built: 'h3'}, ())

        counted = group_members.where(self.context, group)

        self.assertEqual({flying: {'h2'}, built: {'h1'}}, counted)
        self.assertEqual([], self.placement.reads)
        # the built member's row is no longer needed; the next turn's
        # record deletes it with its own claims
        self.assertEqual({built}, counted.settled)
        spread_ledger.record(group, {uuids.waiting: 'h3'}, counted.settled)
        self.assertEqual({flying: 'h2', uuids.waiting: 'h3'},
                         spread_ledger.claims(group))

    def test_a_member_rescheduled_is_still_looked_for(self):
        rescheduled = self.member('rescheduled', 'cell1',
                                  task_state=task_states.SCHEDULING)
        self.build_attempt(rescheduled, 'h3')
        self.assertEqual({rescheduled: {'h3'}},
                         group_members.where(self.context, self.group()))

    def test_a_member_that_holds_nothing_any_more_leaves_the_ledger(self):
        failed = self.member('failed', 'cell1', vm_state=vm_states.ERROR)
        shelved = self.member('shelved', 'cell1',
                              vm_state=vm_states.SHELVED_OFFLOADED)
        unshelving = self.member('unshelving', 'cell1',
                                 vm_state=vm_states.SHELVED_OFFLOADED,
                                 task_state=task_states.UNSHELVING)
        group = self.group()
        spread_ledger.record(group, {failed: 'h1', shelved: 'h2',
                                     unshelving: 'h3', uuids.gone: 'h1'}, ())

        counted = group_members.where(self.context, group)

        # a build that failed for good, a server shelved away, a member out
        # of the group: nothing; one being unshelved is in flight
        self.assertEqual({unshelving: {'h3'}}, counted)
        self.assertEqual({failed, shelved, uuids.gone}, counted.settled)


def recorded_by_novas_objects(context, members):
    """What ``group_members._recorded`` said of ``members`` when it read
    Nova's objects (InstanceMappingList, then InstanceList per cell): the
    reference its four-column reads must agree with.
    """
    recorded, nothing, rescheduling, moving = {}, set(), {}, []
    cells = {}
    for mapping in objects.InstanceMappingList.get_by_instance_uuids(
            context, members):
        cell = mapping.cell_mapping if 'cell_mapping' in mapping else None
        if cell is None:
            continue
        if cell.uuid == objects.CellMapping.CELL0_UUID:
            nothing.add(mapping.instance_uuid)
            continue
        cells.setdefault(cell.uuid, (cell, []))[1].append(
            mapping.instance_uuid)
    for cell, in_cell in cells.values():
        with nova_context.target_cell(context, cell) as cell_context:
            instances = objects.InstanceList.get_by_filters(
                cell_context, {'uuid': in_cell, 'deleted': False},
                expected_attrs=[])
        nothing.update(set(in_cell)
                       - {instance.uuid for instance in instances})
        for instance in instances:
            if instance.host:
                recorded[instance.uuid] = frozenset([instance.host])
                if instance.task_state and (
                        instance.vm_state != vm_states.BUILDING):
                    moving.append(instance.uuid)
            elif (instance.vm_state == vm_states.BUILDING
                  and instance.task_state == task_states.SCHEDULING):
                rescheduling[instance.uuid] = cell.uuid
            elif (instance.vm_state != vm_states.BUILDING
                  and not instance.task_state):
                nothing.add(instance.uuid)
    return recorded, nothing, rescheduling, sorted(moving)


class RecordedTest(MembersTestCase):
    """Given members in every state Nova's records can hold them in (no
    instance mapping, a mapping without a cell, cell0, a cell with or
    without a host, each vm state and task state a count tells apart,
    deleted, soft deleted), when the group is counted, then what the count
    reads of them is what Nova's own objects say (the reference), and the
    count builds no Nova object per member.
    """

    VM_STATES = (vm_states.BUILDING, vm_states.ACTIVE, vm_states.ERROR,
                 vm_states.SOFT_DELETED, vm_states.SHELVED_OFFLOADED)
    TASK_STATES = (None, task_states.SCHEDULING, task_states.MIGRATING)

    def setUp(self):
        super().setUp()
        self.members.append(uuids.never_mapped)
        self.member('unscheduled')  # a mapping without a cell
        self.member('failed', 'cell0', vm_state=vm_states.ERROR)
        for vm_state in self.VM_STATES:
            for task_state in self.TASK_STATES:
                for host in (None, 'h1'):
                    for deleted in (False, True):
                        uuid = self.member(
                            '%s-%s-%s-%s' % (vm_state, task_state, host,
                                             deleted), 'cell1', host=host,
                            vm_state=vm_state, task_state=task_state)
                        if deleted:
                            self.destroy(uuid)

    def destroy(self, uuid):
        with nova_context.target_cell(
                self.context, self.cell_mappings['cell1']) as cctxt:
            objects.Instance.get_by_uuid(cctxt, uuid).destroy()

    def test_what_the_count_reads_is_what_novas_objects_say(self):
        group_uuid = self.group()
        mapped = group_members._members_and_cells(self.context, group_uuid)
        self.assertEqual(
            sorted(objects.InstanceGroup.get_by_uuid(
                self.context, group_uuid).members),
            sorted(member for member, _cell_id in mapped))
        recorded, nothing, rescheduling, moving = group_members._recorded(
            self.context, mapped)
        self.assertEqual(
            recorded_by_novas_objects(self.context, self.members),
            (recorded, nothing,
             {uuid: cell.uuid for uuid, cell in rescheduling.items()},
             sorted(moving)))
        # every kind is there to tell apart
        self.assertTrue(recorded and nothing and rescheduling and moving)

    def test_no_nova_object_is_built_per_member(self):
        group_uuid = self.group()
        built = collections.Counter()
        for cls in (objects.Instance, objects.InstanceMapping,
                    objects.InstanceGroup):
            original = cls._from_db_object

            def counted(*args, cls=cls, original=original, **kwargs):
                built[cls.__name__] += 1
                return original(*args, **kwargs)

            self.stub_out('nova.objects.%s._from_db_object' % cls.__name__,
                          counted)
        group_members.where(self.context, group_uuid)
        self.assertEqual({}, dict(built))

    def test_a_group_without_members_or_without_a_row(self):
        self.members = []
        empty = self.group()
        self.assertEqual(
            [], objects.InstanceGroup.get_by_uuid(self.context,
                                                  empty).members)
        self.assertEqual({}, group_members.where(self.context, empty))
        for read in (objects.InstanceGroup.get_by_uuid, group_members.where):
            self.assertRaises(exception.InstanceGroupNotFound, read,
                              self.context, uuids.no_such_group)
