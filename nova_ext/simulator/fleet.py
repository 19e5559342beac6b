# SPDX-License-Identifier: Apache-2.0
"""Synthetic compute fleets: Nova's own scheduler objects for hosts that
exist only in memory.

``nova-ext-manage simulate`` (:mod:`nova_ext.simulator.engine`, from a
cluster model) and ``tools/benchmark_scheduler.py`` (from its fixed fleet)
both turn a description of hosts into what ``HostManager._get_host_states``
builds on a cloud: one ``HostState(host, node, cell)`` per compute node,
``update(compute, dict(service), aggregates, instances)`` from an
``objects.ComputeNode``, an ``objects.Service`` (as a dict, as Nova hands
it) and the host's ``objects.Aggregate`` list, the aggregate objects shared
among their hosts as ``HostManager`` shares them.

A :class:`Node` describes one compute node (capacity, allocation ratios,
reservations, usage); :class:`Fleet` builds the HostStates of a list of
nodes and keeps them current: :meth:`Fleet.report` is a node's resource
tracker reporting new usage, :class:`Heartbeat` its service heartbeat.
"""

import collections
import dataclasses
import time
import typing as ty
import uuid

from nova import objects
from oslo_utils import timeutils

# A compute reports its service every [DEFAULT] report_interval (10 s);
# ComputeFilter takes it for down after service_down_time (60 s).
HEARTBEAT_SECONDS = 20.0

CELL_UUID = str(uuid.uuid5(uuid.NAMESPACE_DNS, 'cell1'))


@dataclasses.dataclass
class Node:
    """One compute node: what its driver reports and what it runs."""
    host: str
    vcpus: int
    memory_mb: int
    local_gb: int
    cpu_allocation_ratio: float = 1.0
    ram_allocation_ratio: float = 1.0
    disk_allocation_ratio: float = 1.0
    reserved_ram_mb: int = 0
    reserved_disk_gb: int = 0
    # the hypervisor's disk_available_least (None: the free disk)
    disk_available_least_gb: ty.Optional[int] = None
    uuid: ty.Optional[str] = None  # None: derived from the host name
    # usage by instances (reservations come on top)
    vcpus_used: int = 0
    memory_mb_used: int = 0
    local_gb_used: int = 0
    running_vms: int = 0
    current_workload: int = 0
    io_workload: int = 0
    # uuid -> objects.Instance, the HostState's instance list
    instances: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.uuid is None:
            self.uuid = str(uuid.uuid5(uuid.NAMESPACE_DNS,
                                       'node-' + self.host))


def aggregate(aggregate_id, name, hosts, metadata, aggregate_uuid=None):
    """An ``objects.Aggregate`` (uuid derived from the name unless given)."""
    return objects.Aggregate(
        id=aggregate_id,
        uuid=aggregate_uuid or str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
        name=name, hosts=list(hosts), metadata=dict(metadata))


def service(service_id, host, now):
    """The nova-compute service record of ``host``, as the dict
    ``HostManager._get_host_states`` hands ``HostState.update``.
    """
    return dict(objects.Service(
        id=service_id, uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, host)),
        host=host, binary='nova-compute', topic='compute',
        report_count=1000, disabled=False, disabled_reason=None,
        forced_down=False, created_at=now, updated_at=now,
        last_seen_up=now))


def host_ip(index):
    return '10.%d.%d.%d' % (index // 65536, (index // 256) % 256,
                            index % 256)


def compute_node(index, node, now):
    """``node``'s ``objects.ComputeNode`` record as its resource tracker
    writes it (``index``: its position in the fleet, from 0).
    """
    memory_mb_used = node.reserved_ram_mb + node.memory_mb_used
    local_gb_used = node.reserved_disk_gb + node.local_gb_used
    return objects.ComputeNode(
        id=index + 1, uuid=node.uuid, service_id=index + 1, host=node.host,
        hypervisor_hostname=node.host, vcpus=node.vcpus,
        memory_mb=node.memory_mb, local_gb=node.local_gb,
        vcpus_used=node.vcpus_used, memory_mb_used=memory_mb_used,
        local_gb_used=local_gb_used,
        free_ram_mb=node.memory_mb - memory_mb_used,
        free_disk_gb=node.local_gb - local_gb_used,
        disk_available_least=(
            node.local_gb - local_gb_used
            if node.disk_available_least_gb is None
            else node.disk_available_least_gb),
        hypervisor_type='QEMU', hypervisor_version=8002000,
        cpu_info='{"arch": "x86_64"}',
        current_workload=node.current_workload,
        running_vms=node.running_vms, metrics='[]', host_ip=host_ip(index),
        stats={'num_instances': str(node.running_vms),
               'io_workload': str(node.io_workload),
               'failed_builds': '0'},
        numa_topology=None,
        supported_hv_specs=[objects.HVSpec(
            arch='x86_64', hv_type='kvm', vm_mode='hvm')],
        pci_device_pools=objects.PciDevicePoolList(objects=[]),
        cpu_allocation_ratio=node.cpu_allocation_ratio,
        ram_allocation_ratio=node.ram_allocation_ratio,
        disk_allocation_ratio=node.disk_allocation_ratio, mapped=1,
        created_at=now, updated_at=now)


class Fleet:
    """The HostStates of ``nodes``, each in its ``aggregates``
    (``objects.Aggregate``), built with ``state_cls`` (a HostManager's
    ``host_state_cls``, or ``HostState``) in cell ``cell_uuid``.
    """

    def __init__(self, nodes, aggregates, state_cls, cell_uuid=CELL_UUID,
                 now=None):
        now = now or timeutils.utcnow()
        self.nodes = list(nodes)
        self.aggregates = list(aggregates)
        self.aggregates_of = collections.defaultdict(list)
        for agg in self.aggregates:
            for host in agg.hosts:
                self.aggregates_of[host].append(agg)
        self.states = []
        for index, node in enumerate(self.nodes):
            state = state_cls(node.host, node.host, cell_uuid)
            state.update(compute_node(index, node, now),
                         service(index + 1, node.host, now),
                         self.aggregates_of[node.host], node.instances)
            self.states.append(state)

    def report(self, index):
        """Node ``index`` reports its usage (``nodes[index]``'s, as it is
        now) to its HostState, as its resource tracker would.
        """
        self.states[index].update(compute=compute_node(
            index, self.nodes[index], timeutils.utcnow()))


class Heartbeat:
    """Fresh ``last_seen_up`` for every service of ``host_states``, as
    computes report them, at most every ``interval`` seconds (call it
    between requests): ComputeFilter passes every host however long a run
    takes.
    """

    def __init__(self, host_states, interval=HEARTBEAT_SECONDS):
        self.host_states = host_states
        self.interval = interval
        self.last = time.monotonic()

    def __call__(self, force=False):
        if not force and time.monotonic() - self.last < self.interval:
            return
        stamp = timeutils.utcnow(with_timezone=True)
        for state in self.host_states:
            record = dict(state.service)
            record['last_seen_up'] = record['updated_at'] = stamp
            state.update(service=record)
        self.last = time.monotonic()
