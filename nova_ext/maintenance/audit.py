# SPDX-License-Identifier: Apache-2.0
"""``nova-ext-manage spread audit``: every server group with spread
constraints, judged where its members run now.

:func:`collect` reads the cloud into plain data (:class:`CloudState`):
Nova's API and cell databases through nova.conf (server groups, their
members' instance records and stored request specs, aggregates, compute
services), placement through ``[placement]`` (hosts in maintenance, failure
domains reported as traits). :func:`report` judges it
(:mod:`nova_ext.maintenance.judge`) and says, for each violated constraint,
why: the members and domains involved and the evidence of what changed
that the records hold (a host in no domain, a host forced at create, the
migration that brought a member where it is). Driven by ``[nova_ext]
failure_domain_levels``, ``default_spread_level``,
``default_max_per_domain``, ``failure_domain_sources``,
``hosts_without_failure_domain`` and ``maintenance_trait``, as the
scheduler is.
"""

import collections
import typing as ty

from nova.api.openstack import common as api_common
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import servicegroup

from nova_ext import errors
from nova_ext.maintenance import domains as scheduler_domains
from nova_ext.maintenance import judge
from nova_ext.maintenance import plan

# a migration in one of these states has brought its server where it is
ARRIVED = ('completed', 'finished', 'confirmed', 'done')


class AuditError(errors.OperatorError):
    pass


class Member(ty.NamedTuple):
    uuid: str
    name: str
    host: ty.Optional[str]
    status: str
    task_state: ty.Optional[str]
    project_id: str
    # what its stored request says of a forced host, or None
    forced: ty.Optional[str] = None
    # when it was launched (Nova's launched_at), or None
    launched_at: ty.Any = None


class GroupState(ty.NamedTuple):
    uuid: str
    name: str
    project_id: str
    policy: str
    max_per_host: int
    members: ty.Tuple[Member, ...]
    # every constraint some member's request asks, in the order first seen
    constraints: tuple
    # {constraint text: names of the members asking it}
    asked: ty.Mapping[str, ty.List[str]]
    notes: ty.Tuple[str, ...] = ()

    @property
    def placement(self):
        return {member.uuid: member.host for member in self.members}

    def case(self):
        return plan.Case(self.uuid, self.name, self.policy,
                         self.constraints, self.placement, self.max_per_host)


class CloudState(ty.NamedTuple):
    layout: judge.Layout
    # {host: {'enabled':, 'up':, 'maintenance':}} of every compute service
    hosts: ty.Mapping[str, ty.Mapping[str, bool]]
    groups: ty.List[GroupState]
    levels: ty.Tuple[str, ...]


# -- reading the cloud --------------------------------------------------------

def _gather(ctxt, fn, *args, **kwargs):
    """``fn`` in every cell but cell0, results joined; an AuditError naming
    a cell that did not answer (a partial audit would call a group fine
    because it cannot see its members).
    """
    joined = []
    for cell, result in nova_context.scatter_gather_skip_cell0(
            ctxt, fn, *args, **kwargs).items():
        if nova_context.is_cell_failure_sentinel(result):
            raise AuditError('cell %s did not answer: %s' % (
                cell, 'timed out' if result is
                nova_context.did_not_respond_sentinel else result))
        joined.extend(result)
    return joined


def compute_hosts(ctxt, maintenance_nodes):
    """{host: {'enabled', 'up', 'maintenance'}} of every nova-compute
    service; ``maintenance_nodes``: the compute node (resource provider)
    names carrying the maintenance trait.
    """
    services = _gather(ctxt, objects.ServiceList.get_by_binary,
                       'nova-compute', include_disabled=True)
    nodes = _gather(ctxt, objects.ComputeNodeList.get_all)
    maintenance_nodes = set(maintenance_nodes)
    in_maintenance = {node.host for node in nodes
                      if node.hypervisor_hostname in maintenance_nodes}
    group_api = servicegroup.API()
    return {service.host: {
        'enabled': not service.disabled and not service.forced_down,
        'up': bool(group_api.service_is_up(service)),
        'maintenance': service.host in in_maintenance}
        for service in services}


def servers_on(ctxt, hosts):
    """Every server on ``hosts`` (as :class:`Member`), by name."""
    found = _gather(ctxt, objects.InstanceList.get_by_filters,
                    {'host': sorted(hosts), 'deleted': False})
    return sorted((Member(i.uuid, i.display_name, i.host, _status(i),
                          i.task_state, i.project_id) for i in found),
                  key=lambda m: (m.name, m.uuid))


def finished_migrations_from(ctxt, hosts):
    """{server uuid: (its name, migration id, source host)} of the cold
    migrations away from ``hosts`` waiting to be confirmed (their servers
    in VERIFY_RESIZE).
    """
    found = {}
    for host in sorted(hosts):
        for migration in _gather(ctxt, objects.MigrationList.get_by_filters,
                                 {'source_compute': host,
                                  'status': 'finished',
                                  'migration_type': 'migration'}):
            found[migration.instance_uuid] = (migration.id, host)
    if not found:
        return {}
    names = {instance.uuid: instance.display_name for instance in _gather(
        ctxt, objects.InstanceList.get_by_filters,
        {'uuid': sorted(found), 'deleted': False})}
    return {uuid: (names.get(uuid, uuid), number, host)
            for uuid, (number, host) in found.items()}


def nodes_of(ctxt, hosts):
    """{host: [compute node names]} for ``hosts``."""
    found = collections.defaultdict(list)
    for node in _gather(ctxt, objects.ComputeNodeList.get_all):
        if node.host in hosts:
            found[node.host].append(node.hypervisor_hostname)
    return dict(found)


def _groups(ctxt, group=None, project=None):
    if project:
        found = list(objects.InstanceGroupList.get_by_project_id(ctxt,
                                                                 project))
    else:
        found = list(objects.InstanceGroupList.get_all(ctxt))
    if group is None:
        return found
    chosen = [g for g in found if group in (g.uuid, g.name)]
    if not chosen:
        raise AuditError('no server group %s%s' % (
            group, ' in project %s' % project if project else ''))
    if len(chosen) > 1:
        raise AuditError('%d server groups are named %s; give the UUID of '
                         'one: %s' % (len(chosen), group, ', '.join(
                             sorted(g.uuid for g in chosen))))
    return chosen


def _status(instance):
    return api_common.status_from_state(instance.vm_state,
                                        instance.task_state)


def _forced(spec):
    hosts = list(spec.force_hosts or []) if 'force_hosts' in spec else []
    nodes = list(spec.force_nodes or []) if 'force_nodes' in spec else []
    if not hosts and not nodes:
        return None
    zone = spec.availability_zone if 'availability_zone' in spec else None
    return 'created on a forced host (--availability-zone %s:%s)' % (
        zone or '<zone>', ':'.join(hosts[:1] + nodes[:1]))


def collect(conf, maintenance_nodes, group=None, project=None, ctxt=None,
            every_group=False, on_hosts=None):
    """The cloud as plain data: every server group (``group``: one, by
    name or UUID; ``project``: one project's) whose members' requests ask
    for spread (``every_group``: every group), and every compute host's
    domains and usability. ``on_hosts``: only the groups with a member on
    one of these hosts (a drain's; none for an empty set).
    """
    ctxt = ctxt or nova_context.get_admin_context()
    hosts = compute_hosts(ctxt, maintenance_nodes)
    groups = [] if on_hosts is not None and not on_hosts else _groups(
        ctxt, group, project)
    uuids = [uuid for g in groups for uuid in (g.members or [])]
    instances = {}
    if uuids:
        instances = {instance.uuid: instance for instance in _gather(
            ctxt, objects.InstanceList.get_by_filters,
            {'uuid': uuids, 'deleted': False})}
    if on_hosts is not None:
        # each member's request spec is one query: only the groups asked
        groups = [g for g in groups if any(
            uuid in instances and instances[uuid].host in on_hosts
            for uuid in g.members or [])]
    default_level = conf.nova_ext.default_spread_level
    states = []
    for server_group in groups:
        state = _group_state(ctxt, server_group, instances, default_level)
        if state.constraints or every_group:
            states.append(state)
    levels = tuple(conf.nova_ext.failure_domain_levels)
    where = scheduler_domains.HostDomains(
        objects.AggregateList.get_all(ctxt), conf)
    known = set(hosts) | {m.host for s in states for m in s.members
                          if m.host}
    layout = judge.Layout(
        {host: {level: where.of(host, level) for level in levels}
         for host in known},
        [host for host, facts in hosts.items()
         if facts['enabled'] and facts['up'] and not facts['maintenance']])
    return CloudState(layout, hosts, states, levels)


def _group_state(ctxt, server_group, instances, default_level):
    """The group's :class:`GroupState` (no constraints when no member's
    request asks for spread).
    """
    members, notes = [], []
    asked = collections.OrderedDict()
    constraints = collections.OrderedDict()
    from_default = False
    for uuid in server_group.members or []:
        instance = instances.get(uuid)
        if instance is None:
            continue  # deleted, or being deleted
        forced = None
        try:
            spec = objects.RequestSpec.get_by_instance_uuid(ctxt, uuid)
        except exception.RequestSpecNotFound:
            notes.append('%s has no stored request spec' %
                         instance.display_name)
        else:
            forced = _forced(spec)
            try:
                found, default = scheduler_domains.constraints_asked(
                    spec, server_group, default_level)
            except scheduler_domains.UnreadableSpread as error:
                notes.append('%s: its request cannot be read: %s' % (
                    instance.display_name, error))
                found, default = (), False
            from_default = from_default or default
            for constraint in found:
                constraints.setdefault(constraint, None)
                asked.setdefault(str(constraint), []).append(
                    instance.display_name)
        members.append(Member(uuid, instance.display_name, instance.host,
                              _status(instance), instance.task_state,
                              instance.project_id, forced,
                              instance.launched_at))
    if len(asked) > 1 and any(len(names) < len(members)
                              for names in asked.values()):
        notes.append('members asked different constraints (%s); each is '
                     'judged over every member, as the scheduler judges '
                     'each request' % '; '.join(
                         '%s by %s' % (text, ', '.join(sorted(names)))
                         for text, names in asked.items()))
    if from_default:
        notes.append('[nova_ext] default_spread_level applies: soft, only '
                     'the weigher follows it')
    rules = server_group.rules or {}
    return GroupState(server_group.uuid, server_group.name,
                      server_group.project_id, server_group.policy,
                      int(rules.get('max_server_per_host', 1)),
                      tuple(sorted(members, key=lambda m: (m.name, m.uuid))),
                      tuple(constraints), dict(asked), tuple(notes))


def arrivals(ctxt, members):
    """{member uuid: how it came to its host}: the last migration that
    brought it there (type, id, when), else its launch there, for
    ``members`` (Member objects).
    """
    found = {}
    for member in members:
        if member.host is None:
            continue
        migrations = _gather(ctxt, objects.MigrationList.get_by_filters,
                             {'instance_uuid': member.uuid})
        brought = [m for m in migrations if m.dest_compute == member.host
                   and m.status in ARRIVED]
        if brought:
            last = max(brought, key=lambda m: (m.created_at, m.id))
            found[member.uuid] = 'came to %s by %s %d (%s)' % (
                member.host, last.migration_type or 'migration', last.id,
                _when(last.updated_at or last.created_at))
        elif member.launched_at:
            found[member.uuid] = 'has run on %s since its create (%s)' % (
                member.host, _when(member.launched_at))
    return found


def _when(moment):
    return moment.strftime('%Y-%m-%d %H:%M:%S') if hasattr(
        moment, 'strftime') else str(moment)


# -- judging ------------------------------------------------------------------

def judged(state):
    """[(GroupState, [Verdict])] for every group of ``state``."""
    return [(group, judge.judge_all(group.constraints, state.layout,
                                    group.placement))
            for group in state.groups]


def offending_members(state):
    """The members involved in a violated constraint."""
    found = []
    for group, verdicts in judged(state):
        involved = set()
        for verdict in verdicts:
            involved.update(verdict.homeless)
            for domain in verdict.over:
                involved.update(verdict.members[domain])
        found.extend(m for m in group.members if m.uuid in involved)
    return found


def _where(member):
    return '%s on %s' % (member.name, member.host)


def causes(group, verdict, layout, arrived):
    """Why ``verdict``'s constraint does not hold: [{'kind', 'text', ...}]
    from the evidence at hand.
    """
    constraint = verdict.constraint
    level = constraint.level
    by_uuid = {m.uuid: m for m in group.members}
    found = []
    for uuid in verdict.homeless:
        member = by_uuid[uuid]
        found.append({'kind': 'no_domain', 'members': [member.name],
                      'host': member.host,
                      'text': '%s: %s is in no %s (no aggregate or trait '
                              'places it, or two aggregates disagree)' % (
                                  _where(member), member.host, level)})
    least_domain, least = verdict.least
    for domain, count in sorted(verdict.over.items(), key=lambda i: str(i)):
        there = sorted((by_uuid[uuid] for uuid in verdict.members[domain]),
                       key=lambda m: m.name)
        if constraint.kind == judge.MAX:
            kind = 'over_max'
            text = '%s %s holds %d members (max %d): %s' % (
                level, domain, count, constraint.value,
                ', '.join(_where(m) for m in there))
        else:
            kind = 'over_skew'
            if least_domain is None:
                base = 'the least counts as 0'
            else:
                base = 'the least filled eligible %s %s holds %d' % (
                    level, least_domain, least)
            text = '%s %s holds %d members, %s: %d above it (skew %d): %s' % (
                level, domain, count, base, count - least, constraint.value,
                ', '.join(_where(m) for m in there))
        found.append({'kind': kind, 'domain': domain, 'count': count,
                      'limit': verdict.limit,
                      'members': [m.name for m in there], 'text': text})
    if verdict.too_few and not verdict.holds:
        found.append({'kind': 'too_few_domains',
                      'eligible': len(verdict.eligible),
                      'text': 'only %d %s%s eligible, fewer than '
                              'min_domains=%d: the least counts as 0' % (
                                  len(verdict.eligible), level,
                                  '' if len(verdict.eligible) == 1 else 's',
                                  constraint.min_domains)})
    involved = sorted([by_uuid[uuid] for uuid in verdict.homeless] + [
        by_uuid[uuid] for domain in verdict.over
        for uuid in verdict.members[domain]], key=lambda m: m.name)
    for member in involved:
        if member.forced:
            found.append({'kind': 'forced', 'members': [member.name],
                          'text': '%s was %s' % (member.name, member.forced)})
        if member.uuid in arrived:
            found.append({'kind': 'arrived', 'members': [member.name],
                          'text': '%s %s' % (member.name,
                                             arrived[member.uuid])})
    return found


def report(state, arrived=None):
    """The audit of ``state`` as a dict (what ``--json`` prints):
    ``groups`` (each with its constraints' verdicts and causes, and its
    members per domain at every level asked), ``hard_violations`` and
    ``soft_violations`` (counts).
    """
    arrived = arrived or {}
    groups = []
    hard = soft = 0
    for group, verdicts in judged(state):
        entries = []
        for verdict in verdicts:
            if not verdict.holds:
                if verdict.constraint.hard:
                    hard += 1
                else:
                    soft += 1
            entries.append({
                'constraint': str(verdict.constraint),
                'level': verdict.constraint.level,
                'hard': verdict.constraint.hard,
                'holds': verdict.holds, 'excess': verdict.excess,
                'causes': [] if verdict.holds else causes(
                    group, verdict, state.layout, arrived)})
        names = {m.uuid: m.name for m in group.members}
        per_level = {}
        for verdict in verdicts:
            per_level[verdict.constraint.level] = {
                str(domain): sorted(names[uuid] for uuid in there)
                for domain, there in verdict.members.items()}
            if verdict.homeless:
                per_level[verdict.constraint.level]['(no domain)'] = sorted(
                    names[uuid] for uuid in verdict.homeless)
        groups.append({
            'uuid': group.uuid, 'name': group.name,
            'project_id': group.project_id, 'policy': group.policy,
            'members': [{'uuid': m.uuid, 'name': m.name, 'host': m.host,
                         'status': m.status} for m in group.members],
            'constraints': entries, 'domains': per_level,
            'notes': list(group.notes)})
    return {'groups': groups, 'hard_violations': hard,
            'soft_violations': soft}
