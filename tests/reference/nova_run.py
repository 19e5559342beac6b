# SPDX-License-Identifier: Apache-2.0
"""A model cluster and request (tests/reference/spread_model.py) turned into
Nova's own scheduler objects, and run through Nova's own scheduling loop:
``SchedulerManager._schedule`` (per-instance filtering of the hosts the
previous instance left, weighing, claims, consumption, alternates), with
the filters and weighers nova.conf names, loaded by Nova's HostManager.

What stands in for the rest of a cloud: placement is a dictionary of each
host's room (its allocation candidates are the hosts with room; a claim
takes one), Nova's databases are the model (no cells, instances as the
model places them), and nova-ext's group count is what placement would say
(the members, less the servers being scheduled or moved).
"""

import collections
import dataclasses
import uuid

from oslo_config import cfg

from nova import context as nova_context
from nova import objects
from nova.scheduler import manager

from nova_ext.scheduler import cloud
from nova_ext.scheduler import nova_patches
from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import spread_requests
from nova_ext.simulator import fleet
from nova_ext import upstream

CONF = cfg.CONF

OUR_FILTER = 'FailureDomainAntiAffinityFilter'
# Nova's filters the runs mix with nova-ext's, each rejecting a host the
# model marks: a disabled service, a host outside the flavor's aggregate
# (passes_other_filters), a host holding a member of an anti-affinity group
NOVA_FILTERS = ('ComputeFilter', 'AggregateInstanceExtraSpecsFilter',
                'ServerGroupAntiAffinityFilter')
TIER_KEY = 'tier'
FLAVOR_TIER = 'aggregate_instance_extra_specs:' + TIER_KEY


def _uuid(name):
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, 'spread-property-' + name))


class Placement(object):
    """Allocation candidates and claims, from the model's room per host."""

    def __init__(self, room_by_uuid):
        self.room = dict(room_by_uuid)
        self.claims = {}

    def candidates(self):
        """(allocation requests by provider, provider summaries)."""
        alloc_reqs = {
            rp: [{'allocations': {rp: {'resources': {'VCPU': 1}}},
                  'mappings': {}}]
            for rp, room in self.room.items() if room > 0}
        summaries = {rp: {'resources': {}, 'traits': []}
                     for rp in alloc_reqs}
        return alloc_reqs, summaries

    def claim_resources(self, context, consumer_uuid, alloc_request,
                        project_id, user_id, allocation_request_version=None,
                        consumer_generation=None):
        rp, = alloc_request['allocations']
        if self.room.get(rp, 0) < 1:
            return False
        self.room[rp] -= 1
        self.claims[consumer_uuid] = rp
        return True

    def delete_allocation_for_instance(self, context, uuid, force=False):
        rp = self.claims.pop(uuid, None)
        if rp is not None:
            self.room[rp] += 1


class ModelCloud(cloud.Cloud):
    """What nova-ext's plugins ask of a cloud, answered by the model: its
    failure domains are declared by aggregates, no host runs an image yet,
    the group's members are where the model puts them (``members``:
    {member: host or None}).
    """

    def __init__(self, members):
        self.members = members

    def hosts_running_image(self, image_id):
        return frozenset()

    def failure_domain_traits(self, level):
        return {}

    def group_members(self, context, group_uuid):
        return {member: frozenset([host])
                for member, host in self.members.items() if host is not None}


class ModelScheduler(manager.SchedulerManager):
    """Nova's SchedulerManager with the model for placement and databases;
    everything between is Nova's.
    """

    def __init__(self, host_manager, host_states, placement):
        # not super().__init__(): it builds a HostManager reading the
        # databases and a placement client
        self.host_manager = host_manager
        self.host_states = host_states
        self.model_placement = placement

    @property
    def placement_client(self):
        return self.model_placement

    def _get_all_host_states(self, context, spec_obj, provider_summaries):
        # Nova's documented template method
        return iter([state for state in self.host_states
                     if state.uuid in provider_summaries])


def _aggregates(cluster):
    aggregates = []
    by_domain = collections.defaultdict(list)
    for host in cluster.hosts:
        for level, domain in sorted(host.domains.items()):
            by_domain[(level, domain)].append(host.name)
    for (level, domain), hosts in sorted(by_domain.items()):
        aggregates.append(fleet.aggregate(
            len(aggregates) + 1, '%s-%s' % (level, domain), hosts,
            {'nova_ext:failure_domain:%s' % level: domain}))
    tiered = [host.name for host in cluster.hosts
              if host.passes_other_filters]
    aggregates.append(fleet.aggregate(len(aggregates) + 1, 'tier-gold',
                                      tiered, {TIER_KEY: 'gold'}))
    return aggregates


def configure(conf, levels, own_domain, filter_order, weighers_only_ours):
    """The nova.conf a run uses (``conf``: an oslo.config fixture)."""
    conf.config(group='filter_scheduler', available_filters=[
        'nova.scheduler.filters.all_filters',
        'nova_ext.scheduler.filters.all_filters'],
        enabled_filters=list(filter_order),
        weight_classes=['nova_ext.scheduler.weights.all_weighers']
        if weighers_only_ours else ['nova.scheduler.weights.all_weighers',
                                    'nova_ext.scheduler.weights.all_weighers'],
        host_subset_size=1, shuffle_best_same_weighed_hosts=False)
    conf.config(group='nova_ext', failure_domain_levels=list(levels),
                hosts_without_failure_domain='host' if own_domain
                else 'reject', failure_domain_sources=['aggregates'],
                bin_packing_weight_multiplier=0.0,
                image_locality_weight_multiplier=0.0,
                default_spread_level=None)


@dataclasses.dataclass(frozen=True)
class Load:
    """What Nova's default weighers read of a host, beside its room."""
    io_operations: int = 0
    memory_mb_used: int = 0
    vcpus_used: int = 0
    failed_builds: int = 0


class Run(object):
    """One model request, scheduled by Nova."""

    def __init__(self, cluster, request, policy='anti-affinity', loads=None):
        self.cluster = cluster
        self.request = request
        self.policy = policy
        # {host name: Load}: what Nova's own weighers read (I/O operations,
        # memory and vCPUs in use, failed builds); none by default
        self.loads = loads or {}
        self.host_uuids = {host.name: _uuid('node-' + host.name)
                           for host in cluster.hosts}
        self.host_names = {u: n for n, u in self.host_uuids.items()}

    def host_manager(self):
        return upstream.host_manager_without_databases(
            _aggregates(self.cluster))

    def host_states(self, host_manager):
        members_on = collections.defaultdict(dict)
        for member, host in self.request.members.items():
            if host is not None:
                members_on[host][member] = objects.Instance(uuid=member)
        no_load = Load()
        nodes = [fleet.Node(host.name, vcpus=64, memory_mb=262144,
                            local_gb=2000, uuid=self.host_uuids[host.name],
                            instances=members_on[host.name],
                            io_workload=self.loads.get(
                                host.name, no_load).io_operations,
                            memory_mb_used=self.loads.get(
                                host.name, no_load).memory_mb_used,
                            vcpus_used=self.loads.get(
                                host.name, no_load).vcpus_used)
                 for host in self.cluster.hosts]
        built = fleet.Fleet(nodes, _aggregates(self.cluster),
                            host_manager.host_state_cls)
        for host, state in zip(self.cluster.hosts, built.states):
            if not host.enabled:
                state.update(service=dict(state.service, disabled=True))
            # what BuildFailureWeigher reads (the compute's stats say 0)
            state.failed_builds = self.loads.get(
                host.name, no_load).failed_builds
        return built.states

    def spec(self, server_uuids, constraints_text):
        moving = [u for u in server_uuids if u in self.request.members]
        members = sorted(self.request.members) + [
            u for u in server_uuids if u not in self.request.members]
        # as the conductor loads it: the hosts of the members, once each
        hosts = sorted({h for h in self.request.members.values() if h})
        group = objects.InstanceGroup(
            id=1, uuid=_uuid('group'), name='spread', project_id='p',
            user_id='u', policy=self.policy, policies=[self.policy],
            rules={}, members=members, hosts=hosts)
        hints = {'group': [group.uuid]}
        if constraints_text:
            hints['nova_ext:spread_constraints'] = [constraints_text]
        flavor = objects.Flavor(
            id=1, flavorid='1', name='small', vcpus=1, memory_mb=512,
            root_gb=1, ephemeral_gb=0, swap=0,
            extra_specs={FLAVOR_TIER: 'gold'})
        return objects.RequestSpec(
            instance_uuid=server_uuids[0], project_id='p', user_id='u',
            availability_zone=None, num_instances=len(server_uuids),
            flavor=flavor, image=objects.ImageMeta.from_dict(
                {'id': _uuid('image'), 'properties': {}}),
            numa_topology=None,
            pci_requests=objects.InstancePCIRequests(requests=[]),
            instance_group=group, scheduler_hints=hints,
            ignore_hosts=sorted(self.request.excluded) or None,
            force_hosts=None, force_nodes=None, requested_destination=None,
            retry=None, limits=None, is_bfv=False, requested_resources=[],
            requested_networks=objects.NetworkRequestList(objects=[]),
            request_level_params=objects.RequestLevelParams()), moving

    def counted_members(self, not_counted):
        """{host: members there} as placement tells nova-ext inside the
        group's lock: the servers of this request are not counted.
        """
        return collections.Counter(
            host for member, host in self.request.members.items()
            if host is not None and member not in not_counted)

    def server_uuids(self, move_of=None):
        if move_of is not None:
            return [move_of]
        return [_uuid('server-%d' % index)
                for index in range(self.request.servers)]

    def first_filtered(self, constraints_text, move_of=None):
        """The names of the hosts Nova's filters (as configured) pass for
        the request's first server.
        """
        host_manager = self.host_manager()
        states = [state for state, host in zip(
            self.host_states(host_manager), self.cluster.hosts)
            if host.room > 0]
        servers = self.server_uuids(move_of)
        spec, _moving = self.spec(servers, constraints_text)
        with scheduling_request.opened(
                spec, servers, host_manager, ModelCloud(self.request.members),
                members=self.counted_members(set(servers))):
            passed = host_manager.get_filtered_hosts(states, spec, 0)
        return sorted(state.host for state in passed or ())

    def schedule(self, constraints_text, move_of=None):
        """The host names Nova picks, in order; raises NoValidHost."""
        host_manager = self.host_manager()
        states = self.host_states(host_manager)
        room = {self.host_uuids[h.name]: h.room for h in self.cluster.hosts}
        placement = Placement(room)
        scheduler = ModelScheduler(host_manager, states, placement)
        servers = self.server_uuids(move_of)
        spec, _moving = self.spec(servers, constraints_text)
        alloc_reqs, summaries = placement.candidates()
        context = nova_context.get_admin_context()
        # as nova-scheduler's select_destinations runs it, once placement
        # answered: inside the request nova-ext spans (its NoValidHost
        # reason), Nova's own loop in the group's turn (the members counted
        # from the model, each claim reserved in the turn), wrapped as in
        # nova-scheduler
        nova_patches.install()
        selections = spread_requests.scheduled_in_request(
            scheduler, spec, servers, ModelCloud(self.request.members),
            lambda: scheduler._schedule(
                context, spec, servers, alloc_reqs, summaries,
                allocation_request_version='1.36', return_alternates=True))
        return [selection[0].service_host for selection in selections]
