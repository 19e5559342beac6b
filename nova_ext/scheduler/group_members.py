# SPDX-License-Identifier: Apache-2.0
"""Where a server group's members are: what a spread request counts.

:func:`where` answers ``LiveCloud.group_members`` (:mod:`nova_ext.
scheduler.cloud`), read by a group's turn when it takes the spread lock
(:mod:`nova_ext.scheduler.group_turns`), by the failure_domain request
filter and by ``nova-ext-manage explain``. A member is where:

* its instance records a host (set by the compute's claim): one query of
  the API database for the members' cells, one per cell, no placement;
  while it is being moved (a task under way: migration, resize,
  evacuation), also where placement holds its allocations (the
  destination claimed for it);
* else, a turn claimed a host for it (in flight: not yet built): on the
  host that turn wrote in the spread ledger (:mod:`nova_ext.scheduler.
  spread_ledger`), one query for the whole group; or, where this process
  made or read the claim, as it remembers it (:data:`_in_flight`, kept
  until the member records a host). Until ``db sync`` created the ledger,
  every member in flight is read from placement instead (its allocations,
  ``MEMBER_READS`` at a time, each remembered by this process, so that a
  burst reads it at most once per scheduler process);
* else, when it is being rescheduled (its build failed: the compute cleared
  its host and gave its allocations back, and the conductor is about to
  claim an alternate host, which nova-ext keeps in the same failure
  domains): the host its last build ran on, from its instance actions.
  Counted there, the member keeps its place in every domain through the
  reschedule, so no request of the group can take it meanwhile.

A member that failed to schedule, failed to build for good, was shelved
away or deleted holds nothing. A member counts on every host it holds
resources on (a move in progress holds two), never on none while it holds
any: counted too often, never too little.
"""

import collections
from concurrent import futures
import time

import cachetools
from oslo_log import log as logging
import sqlalchemy as sa

from nova.compute import task_states
from nova.compute import vm_states
from nova import context as nova_context
from nova.db.api import api as api_db
from nova.db.api import models as api_models
from nova.db.main import api as main_db
from nova.db.main import models as main_models
from nova import exception
from nova import objects
from nova.scheduler.client import report

from nova_ext import cache
from nova_ext.scheduler import spread_ledger

LOG = logging.getLogger(__name__)

# Allocation reads in flight at once when a group is counted: placement
# answers them in parallel, and a group of 100 members read one at a time
# is most of a count's time.
MEMBER_READS = 8

# {member uuid: frozenset of hosts} where a member in flight holds
# resources (this process's claim, or placement's answer), kept by this
# process for IN_FLIGHT_SECONDS or until the member records a host (or
# holds nothing), at most IN_FLIGHT_KEPT members (the oldest go first). A
# member stays in the failure domains it was claimed in until it records a
# host (a reschedule keeps them), so what was said stays true: counted too
# often at worst, never too little.
IN_FLIGHT_SECONDS = 120
IN_FLIGHT_KEPT = 10000
_in_flight = cachetools.TTLCache(maxsize=IN_FLIGHT_KEPT,
                                 ttl=IN_FLIGHT_SECONDS)
cache.register_reset(_in_flight.clear)

# {resource provider uuid: host}: the name of a compute node's provider
# (its root's), which never changes; the PROVIDERS_KEPT most recently used
PROVIDERS_KEPT = 10000
_provider_names = cachetools.LRUCache(maxsize=PROVIDERS_KEPT)
cache.register_reset(_provider_names.clear)

# the event Nova's compute records, with its host, for each build attempt
BUILD_EVENT = 'compute__do_build_and_run_instance'


def per_host(where, not_counted=()):
    """{host: members there} of ``where`` ({member: hosts}), leaving out
    the members in ``not_counted`` (the servers a request places or moves).
    """
    counts = collections.Counter()
    for member, hosts in where.items():
        if member not in not_counted:
            counts.update(hosts)
    return counts


class Members(dict):
    """{member uuid: frozenset of hosts}, as :func:`where` found them, and
    ``settled``: the members whose rows in the spread ledger no count needs
    any more (they record a host, failed, or left the group), for the turn
    that counted to delete with its own claims.
    """

    settled = frozenset()


def where(context, group_uuid):
    """The :class:`Members` of server group ``group_uuid`` that hold
    resources somewhere (module docstring).
    """
    started = time.monotonic()
    mapped = _members_and_cells(context, group_uuid)
    members = [member for member, _cell_id in mapped]
    found, nothing, rescheduling, moving = _recorded(context, mapped)
    recorded = set(found)
    for member in nothing | recorded:
        _in_flight.pop(member, None)
    for member, hosts in _read_from_placement(context, moving).items():
        found[member] = found[member] | hosts
    try:
        ledger = spread_ledger.claims(group_uuid)
    except spread_ledger.Unavailable:
        ledger = None  # before db sync: placement says where
    to_read = []
    for member in members:
        if member in found or member in nothing:
            continue
        if ledger is not None and member in ledger:
            found[member] = frozenset([ledger[member]])
            continue
        known = _in_flight.get(member)
        if known is not None:
            found[member] = known
        elif ledger is None or member in rescheduling:
            # with the ledger, a member no turn claimed holds nothing: only
            # one whose failed build gave its claim back is looked for
            to_read.append(member)
    read = _read_from_placement(context, to_read)
    for member, hosts in read.items():
        found[member] = _in_flight[member] = hosts
    rescheduled = [member for member in to_read
                   if member not in read and member in rescheduling]
    for member in rescheduled:
        host = _last_build_host(context, rescheduling[member], member)
        if host is not None:
            found[member] = frozenset([host])
    counted = Members(found)
    if ledger:
        member_set = set(members)
        counted.settled = frozenset(
            member for member in ledger if member not in member_set
            or member in nothing or member in recorded)
    LOG.debug("nova-ext: server group %s counted in %.0f ms: %d of %d "
              "members hold resources (%s, %d read from placement, %d "
              "being moved, %d being rescheduled)", group_uuid,
              (time.monotonic() - started) * 1000, len(found), len(members),
              'no ledger' if ledger is None else '%d from the ledger' % len(
                  [m for m in members if m in ledger]),
              len(to_read), len(moving), len(rescheduled))
    return counted


def claimed(member, host):
    """A claim of this process for ``member`` on ``host`` succeeded: it is
    in flight there (no need to ask placement where).
    """
    _in_flight[member] = frozenset([host])


def _recorded(context, mapped):
    """What Nova's records say of the members of ``mapped`` ([(member, the
    id of its cell mapping or None)]): ({member: frozenset([its host])} for
    those whose instance records a host, {members that hold nothing and
    will not}, {member being rescheduled: its cell}, [members with a host
    and a task under way]).

    A member holds nothing when it failed to schedule (in cell0), when its
    instance is gone, or when it records no host and no task is under way
    for it (a build that failed for good, a server shelved away). One whose
    build failed and is being rescheduled is in its cell without a host,
    building, in task state scheduling; one being moved (a task under way,
    a host recorded) may hold a destination too. The others, not yet in a
    cell or in it without a host and still building, are in flight.
    """
    recorded, nothing, rescheduling, moving = {}, set(), {}, []
    cells = {}
    cell_mappings = None
    for member, cell_id in mapped:
        if cell_id is None:
            continue  # not scheduled yet, or scheduled and not yet created
        if cell_mappings is None:
            cell_mappings = {cell.id: cell for cell in
                             objects.CellMappingList.get_all(context)}
        cell = cell_mappings[cell_id]
        if cell.uuid == objects.CellMapping.CELL0_UUID:
            nothing.add(member)
            continue
        cells.setdefault(cell.uuid, (cell, []))[1].append(member)
    for cell, uuids in cells.values():
        with nova_context.target_cell(context, cell) as cell_context:
            instances = _instance_states(cell_context, uuids)
        nothing.update(set(uuids) - {uuid for uuid, _, _, _ in instances})
        for uuid, host, vm_state, task_state in instances:
            if host:
                recorded[uuid] = frozenset([host])
                if task_state and vm_state != vm_states.BUILDING:
                    moving.append(uuid)
            elif (vm_state == vm_states.BUILDING
                  and task_state == task_states.SCHEDULING):
                rescheduling[uuid] = cell
            elif vm_state != vm_states.BUILDING and not task_state:
                nothing.add(uuid)
    return recorded, nothing, rescheduling, moving


# The two reads below take the columns a count needs, not Nova's objects:
# building the InstanceGroup (an object per member row), an InstanceMapping
# (with its CellMapping) and an Instance per member was most of a count,
# and grew with the group (about 0.2 ms a member; a group of 300 took 60 ms
# to count, under its lock).

@api_db.context_manager.reader
def _members_and_cells(context, group_uuid):
    """[(member, the id of its cell mapping, or None when it has no
    mapping or its mapping no cell)] for each member of server group
    ``group_uuid``, as ``InstanceGroup.get_by_uuid`` lists them: one query
    of the API database. Raises InstanceGroupNotFound as it does.
    """
    group = api_models.InstanceGroup
    member = api_models.InstanceGroupMember
    mapping = api_models.InstanceMapping
    rows = context.session.query(
        member.instance_uuid, mapping.cell_id).select_from(group).outerjoin(
            member, member.group_id == group.id).outerjoin(
                mapping, mapping.instance_uuid == member.instance_uuid).filter(
                    group.uuid == group_uuid).all()
    if not rows:
        raise exception.InstanceGroupNotFound(group_uuid=group_uuid)
    # a group without members is one row, with no member
    return [(uuid, cell_id) for uuid, cell_id in rows if uuid is not None]


@main_db.pick_context_manager_reader
def _instance_states(context, uuids):
    """[(uuid, host, vm_state, task_state)] of the instances of ``uuids``
    in the cell ``context`` targets that are neither deleted nor soft
    deleted: the rows ``InstanceList.get_by_filters`` returns for
    ``{'uuid': uuids, 'deleted': False}``.
    """
    instance = main_models.Instance
    return context.session.query(
        instance.uuid, instance.host, instance.vm_state,
        instance.task_state).filter(
            instance.uuid.in_(uuids), instance.deleted == 0,
            sa.or_(instance.vm_state != vm_states.SOFT_DELETED,
                   instance.vm_state.is_(None))).all()


def _read_from_placement(context, members):
    """{member: frozenset of hosts} for the ``members`` that hold
    allocations in placement.
    """
    if not members:
        return {}
    client = report.report_client_singleton()

    def providers_of(member):
        return list(client.get_allocs_for_consumer(
            context, member).get('allocations', {}))

    with futures.ThreadPoolExecutor(
            max_workers=MEMBER_READS,
            thread_name_prefix='nova-ext-members') as executor:
        providers = dict(zip(members, executor.map(providers_of, members)))
    names = _provider_hosts(context, client, {
        uuid for uuids in providers.values() for uuid in uuids})
    found = {}
    for member, uuids in providers.items():
        hosts = frozenset(names[uuid] for uuid in uuids if uuid in names)
        if hosts:
            found[member] = hosts
    return found


def _provider_hosts(context, client, provider_uuids):
    """{provider uuid: host} for compute-node providers: the name of the
    provider's root, asked from placement once per provider and process.
    """
    hosts = {}
    for uuid in provider_uuids:
        name = _provider_names.get(uuid)
        if name is None:
            name = _provider_names[uuid] = _root_name(context, client, uuid)
        if name:
            hosts[uuid] = name
    return hosts


def _root_name(context, client, uuid):
    resp = client.get('/resource_providers/%s' % uuid, version='1.14',
                      global_request_id=context.global_id)
    if not resp:
        return ''
    provider = resp.json()
    root = provider.get('root_provider_uuid') or uuid
    if root != uuid:
        resp = client.get('/resource_providers/%s' % root, version='1.14',
                          global_request_id=context.global_id)
        provider = resp.json() if resp else {}
    # a compute node's provider is named after its node, which is its host
    # for every driver but ironic
    return provider.get('name') or ''


def _last_build_host(context, cell, member):
    """The host of the member's latest build attempt (Nova's compute
    records each, with its host, as an event of the instance's create
    action in its cell), or None.
    """
    latest = None
    try:
        with nova_context.target_cell(context, cell) as cell_context:
            for action in objects.InstanceActionList.get_by_instance_uuid(
                    cell_context, member):
                if action.action != 'create':
                    continue
                for event in objects.InstanceActionEventList.get_by_action(
                        cell_context, action.id):
                    if event.event == BUILD_EVENT and event.host and (
                            latest is None
                            or event.start_time > latest.start_time):
                        latest = event
    except Exception as error:
        # counted nowhere, as before nova-ext knew of reschedules
        LOG.warning("nova-ext: could not read where server %s last tried "
                    "to build (%s); it is not counted while rescheduled",
                    member, error)
        return None
    return latest.host if latest is not None else None
