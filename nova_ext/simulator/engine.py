# SPDX-License-Identifier: Apache-2.0
"""Replay a workload on a modeled cluster through Nova's scheduler code.

For each nova.conf fragment the simulator builds, as nova-scheduler does:

* a ``HostManager`` (a subclass that reads aggregates from the model instead
  of the API database): Nova's own code loads ``[filter_scheduler]
  available_filters`` / ``enabled_filters`` / ``weight_classes``, and its
  ``get_filtered_hosts`` / ``get_weighed_hosts`` run the filters and
  weighers through ``HostFilterHandler`` and ``HostWeightHandler``;
* one ``HostState`` per host from an ``objects.ComputeNode``, an
  ``objects.Service`` and the host's ``objects.Aggregate`` list;
* one ``objects.RequestSpec`` per arrival (flavor, image, server group,
  scheduler hints), sorted by ``SchedulerManager._get_sorted_hosts`` (which
  honours ``host_subset_size`` and ``shuffle_best_same_weighed_hosts``) and
  consumed with ``SchedulerManager._consume_selected_host``
  (``HostState.consume_from_request``).

Before placement, as in nova-scheduler: Nova's request pre-filters
(``ALL_REQUEST_FILTERS``) and nova-ext's, activated by the configuration's
``available_filters`` / ``weight_classes`` and ``[nova_ext]
request_filters``, edit the RequestSpec; ``resources_from_request_spec``
turns it into placement's query.

What is modeled, because there is no placement service, database or
compute:

* placement (:mod:`cloud`): one provider per host, in its aggregates, with
  its host group's traits and the maintenance trait when in maintenance; it
  answers the query's required and forbidden traits and (forbidden)
  aggregates as placement does, and its inventory (allocation ratios
  applied, reservations removed) the query's VCPU, MEMORY_MB and DISK_GB;
* the compute: once placed, an instance is in its host's
  ``HostState.instances`` and the host reports its usage back (a new
  ``ComputeNode`` record, as the resource tracker writes), so Nova's weighers
  see what they would see on the next request of a real cloud;
* the databases and glance nova-ext's plugins ask (aggregates by key, image
  properties, which hosts run an image) are answered by the model
  (:class:`nova_ext.simulator.cloud.SimulatedCloud`, the cloud each request
  is opened with), always current (as with their cache options set to 0).
"""

import collections
import dataclasses
import logging
import random
import statistics
import time
import types
import typing as ty
import urllib.parse
import uuid

import nova.conf
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.scheduler import utils as scheduler_utils
from oslo_config import cfg

from nova_ext import conf as ext_conf
from nova_ext import errors
from nova_ext import explain
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import request_filters as ext_request_filters
from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import weights
from nova_ext.simulator import cloud
from nova_ext.simulator import fleet
from nova_ext.simulator import model as sim_model
from nova_ext.simulator import spread
from nova_ext import upstream

LOG = logging.getLogger(__name__)

RESOURCES = ('vcpu', 'ram', 'disk')
# the inventory of the model's compute node providers, in RESOURCES' order
PLACEMENT_RESOURCES = ('VCPU', 'MEMORY_MB', 'DISK_GB')

# Options whose pre-filters (Nova's) need what the model does not have.
UNSUPPORTED_OPTIONS = {
    ('scheduler', 'limit_tenants_to_placement_aggregate'):
        "Nova's require_tenant_aggregate pre-filter reads aggregates from "
        "the API database, which the simulator does not have",
    ('scheduler', 'enable_isolated_aggregate_filtering'):
        "Nova's isolate_aggregates pre-filter reads aggregates from the API "
        "database, which the simulator does not have",
    ('scheduler', 'query_placement_for_image_type_support'):
        "the model's images have no disk_format and its hosts report no "
        "COMPUTE_IMAGE_TYPE_* traits",
}
UTILISATION_SAMPLES = 200


def image_id(name):
    """The glance id of the model's image ``name``."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, 'image-' + name))


class ConfigError(errors.OperatorError, ValueError):
    """A nova.conf fragment the simulator cannot apply."""


_nova_ready = False


def setup_nova():
    """Register Nova's objects and options once, without config files."""
    global _nova_ready
    if _nova_ready:
        return

    objects.register_all()
    ext_conf.register_opts(nova.conf.CONF)
    # No CONF() call here: parsing resets every override, including those a
    # test process's fixtures rely on (it broke later tests in the same
    # worker). Commands parse Nova's defaults themselves (parse_defaults).
    _nova_ready = True


def parse_defaults():
    """For a command line: Nova's and nova-ext's defaults, no config files
    (fragments are applied as overrides on top).
    """

    ext_conf.register_opts(nova.conf.CONF)
    if upstream.get('nova.conf.CONF._args') is None:
        nova.conf.CONF([], project='nova', default_config_files=[],
                       default_config_dirs=[])


def apply_fragment(conf, path):
    """Apply every option of the nova.conf fragment ``path`` as an override;
    return what to clear afterwards.
    """
    sections = {}
    try:
        cfg.ConfigParser(path, sections).parse()
    except (OSError, cfg.ParseError) as error:
        raise ConfigError('%s: cannot read: %s' % (path, error))
    applied = []
    try:
        for section, options in sections.items():
            group = None if section == 'DEFAULT' else section
            for name, values in options.items():
                try:
                    opt = upstream.registered_opt(conf, name, group)
                except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
                    raise ConfigError('%s: [%s] %s is not a Nova or nova-ext '
                                      'option' % (path, section, name))
                value = list(values) if opt.multi else values[-1]
                try:
                    conf.set_override(name, value, group=group)
                except (ValueError, cfg.Error) as error:
                    raise ConfigError('%s: [%s] %s: %s'
                                      % (path, section, name, error))
                applied.append((name, group))
    except ConfigError:
        clear_fragment(conf, applied)
        raise
    return applied


def clear_fragment(conf, applied):
    for name, group in applied:
        conf.clear_override(name, group=group)


# -- results ------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    config: str
    config_path: str
    arrivals: int
    placed_before_first_failure: int
    placed: int
    failed: int
    first_failure: ty.Optional[int]
    first_failure_reason: ty.Optional[str]
    stranded: ty.Dict[str, float]      # % of capacity, at the first failure
    free: ty.Dict[str, float]          # % of capacity, at the first failure
    image_downloads: int
    failure_domain_violations: int
    spread_members: int
    schedule_ms_mean: float
    schedule_ms_p95: float
    filters: ty.List[str]
    weighers: ty.List[str]
    placements: ty.List[ty.Optional[str]]
    utilisation: ty.List[ty.Tuple[int, float, float, float]]
    percent_of_bound: ty.Optional[float] = None
    # nova-ext's pre-filters the configuration activated, in their order
    request_filters: ty.List[str] = dataclasses.field(default_factory=list)
    # explain's breakdown of the arrival asked for; None when not asked or
    # not reached (the run stopped at its first NoValidHost)
    explain: ty.Optional[dict] = None
    # per spread-constraint set of the workload (spread.SetFigures)
    spread_sets: ty.List[spread.SetFigures] = dataclasses.field(
        default_factory=list)

    def as_dict(self, with_placements=False):
        data = dataclasses.asdict(self)
        for figures, item in zip(self.spread_sets, data['spread_sets']):
            item['fully_placed_percent'] = figures.fully_placed_percent
        # the comparison lists the breakdowns together, under "explain"
        data.pop('explain')
        if not with_placements:
            data.pop('placements')
        return data


@dataclasses.dataclass
class Comparison:
    cluster: str
    workload: str
    seed: int
    hosts: int
    volume_bound: int
    bound_excludes_maintenance: bool
    results: ty.List[Result]
    explain_arrival: ty.Optional[int] = None   # 1-based

    def as_dict(self, with_placements=False):
        data = {
            'cluster': self.cluster, 'workload': self.workload,
            'seed': self.seed, 'hosts': self.hosts,
            'volume_bound': self.volume_bound,
            'bound_excludes_maintenance': self.bound_excludes_maintenance,
            'results': [r.as_dict(with_placements) for r in self.results],
        }
        if self.explain_arrival is not None:
            data['explain'] = {
                'arrival': self.explain_arrival,
                'configs': [{'config': r.config, 'explanation': r.explain}
                            for r in self.results]}
        return data


def volume_bound(workload, capacity):
    """The longest prefix of the arrivals whose live instances' summed
    VCPU, MEMORY_MB and DISK_GB each fit in ``capacity``: no scheduler can
    place more before its first NoValidHost.
    """
    used = [0, 0, 0]
    for arrival in workload.arrivals:
        for index in workload.departures.get(arrival.index, ()):
            for i, amount in enumerate(
                    workload.arrivals[index].flavor.resources()):
                used[i] -= amount
        for i, amount in enumerate(arrival.flavor.resources()):
            used[i] += amount
        if any(u > c for u, c in zip(used, capacity)):
            return arrival.index
    return len(workload.arrivals)


# -- the simulated cloud ------------------------------------------------------

class Simulation:
    """One cluster model and one workload; :meth:`run` per configuration."""

    def __init__(self, cluster, workload):
        setup_nova()
        self.cluster = cluster
        self.workload = workload
        self.cell_uuid = fleet.CELL_UUID

    # -- building Nova's objects --

    def _aggregates(self):
        return [fleet.aggregate(i + 1, agg.name, agg.hosts, agg.metadata)
                for i, agg in enumerate(self.cluster.aggregates)]

    def _fleet(self, state_cls, aggregates):
        """The model's hosts as Nova's HostStates (:mod:`fleet`), empty."""
        nodes = [fleet.Node(
            host=host.name, vcpus=host.group.vcpus,
            memory_mb=host.group.ram_mb, local_gb=host.group.disk_gb,
            cpu_allocation_ratio=host.group.cpu_allocation_ratio,
            ram_allocation_ratio=host.group.ram_allocation_ratio,
            disk_allocation_ratio=host.group.disk_allocation_ratio,
            reserved_ram_mb=host.group.reserved_ram_mb,
            reserved_disk_gb=host.group.reserved_disk_gb,
            disk_available_least_gb=host.group.disk_available_least_gb)
            for host in self.cluster.hosts]
        return fleet.Fleet(nodes, aggregates, state_cls, self.cell_uuid)

    def _flavor(self, flavor, flavor_id):
        return objects.Flavor(
            id=flavor_id, flavorid=flavor.name, name=flavor.name,
            vcpus=flavor.vcpus, memory_mb=flavor.ram_mb,
            root_gb=flavor.disk_gb, ephemeral_gb=flavor.ephemeral_gb,
            swap=flavor.swap_mb, rxtx_factor=1.0, vcpu_weight=0,
            disabled=False, is_public=True,
            extra_specs=dict(flavor.extra_specs), description=None)

    # -- one configuration --

    def run(self, config_path, name=None, progress=None, seed=None,
            explain_arrival=None):
        """Replay the workload with the nova.conf fragment ``config_path``
        applied on top of Nova's defaults; return a :class:`Result`, with
        explain's breakdown of arrival ``explain_arrival`` (1-based).
        """
        conf = nova.conf.CONF
        applied = apply_fragment(conf, config_path)
        try:
            return self._run(conf, config_path, name, progress, seed,
                             explain_arrival)
        finally:
            clear_fragment(conf, applied)

    def _run(self, conf, config_path, name, progress, seed,
             explain_arrival):
        # Nova's pre-filters, plus nova-ext's as this configuration's
        # HostManager activates them (as a restarted nova-scheduler would),
        # for the duration of the run
        with ext_request_filters.as_configured():
            return self._run_configured(conf, config_path, name, progress,
                                        seed, explain_arrival)

    def _run_configured(self, conf, config_path, name, progress, seed,
                        explain_arrival):
        for group, option in UNSUPPORTED_OPTIONS:
            if getattr(getattr(conf, group), option):
                raise ConfigError(
                    '%s: [%s] %s: %s' % (config_path, group, option,
                                         UNSUPPORTED_OPTIONS[group, option]))
        self._check_levels(conf, config_path)
        aggregates = self._aggregates()
        try:
            host_manager = upstream.host_manager_without_databases(
                aggregates)
        except exception.SchedulerHostFilterNotFound as error:
            raise ConfigError('%s: %s' % (config_path, error))
        scheduler = types.SimpleNamespace(host_manager=host_manager)
        active = [f.nova_ext_name for f in upstream.request_filters()
                  if hasattr(f, 'nova_ext_name')]

        hosts = self.cluster.hosts
        simulated = self._fleet(host_manager.host_state_cls, aggregates)
        capacity = [sim_model.host_capacity(h.group) for h in hosts]
        used = [[0, 0, 0] for _ in hosts]
        instances_on = [0] * len(hosts)
        index_of = {h.name: i for i, h in enumerate(hosts)}
        # the hosts placement can ever return: not those the maintenance
        # pre-filter leaves out (stranded and utilisation are of these)
        allowed = [not (h.maintenance and 'maintenance' in active)
                   for h in hosts]

        # placement, glance and the databases nova-ext's plugins ask
        simulated_cloud = cloud.SimulatedCloud(
            [h.name for h in hosts], aggregates, self._traits(conf),
            {image_id(image): properties for image, properties
             in self.workload.image_properties.items()},
            self._failure_domains(conf))
        image_instances = collections.Counter()
        ctxt = nova_context.get_admin_context()

        # Nova picks among host_subset_size best hosts with ``random``:
        # seeded for repeatable runs, and given back afterwards so the
        # process's other users of ``random`` are not made predictable.
        random_state = random.getstate()
        random.seed(self.workload.seed if seed is None else seed)
        try:
            result = self._replay(
                conf, config_path, name, progress, host_manager,
                scheduler, simulated, simulated_cloud, ctxt, capacity,
                used, instances_on, index_of, allowed, image_instances,
                objects, explain_arrival)
        finally:
            random.setstate(random_state)
        result.request_filters = active
        return result

    def _levels_asked(self, conf):
        """{level: what asks for it} over the workload's groups, its
        flavors' extra specs and ``[nova_ext] default_spread_level``.
        """
        asked = {}
        for group in self.workload.groups.values():
            for level in group.levels():
                asked.setdefault(level, 'server group %s' % group.name)
        for flavor in self.workload.flavors:
            specs = flavor.extra_specs
            levels = [text.partition(':')[0] for text in specs.get(
                failure_domains.SPREAD_CONSTRAINTS, '').split(';') if text]
            if failure_domains.SPREAD_LEVEL in specs:
                levels.append(specs[failure_domains.SPREAD_LEVEL])
            for level in levels:
                asked.setdefault(level, 'flavor %s' % flavor.name)
        if conf.nova_ext.default_spread_level:
            asked.setdefault(conf.nova_ext.default_spread_level,
                             '[nova_ext] default_spread_level')
        return asked

    def _check_levels(self, conf, config_path):
        """Refuse a level the configuration lets requests spread across and
        the workload asks for, but the cluster does not define: every host
        would be in no domain there and the run would measure nothing.
        (A level the configuration does not list is the scheduler's to
        refuse, as on a cloud; one nobody asks for, e.g. the default
        ``power``, is harmless.)
        """
        defined = self.cluster.levels()
        for level, who in sorted(self._levels_asked(conf).items()):
            if (level in conf.nova_ext.failure_domain_levels
                    and level != failure_domains.HOST_LEVEL
                    and level not in defined):
                raise ConfigError(
                    '%s: [nova_ext] failure_domain_levels lists %s, which %s '
                    'spreads across, but cluster %s defines no %s level '
                    '(its levels: %s)' % (
                        config_path, level, who, self.cluster.path, level,
                        ', '.join(defined) or 'none'))

    def _traits(self, conf):
        """{host: traits of its compute node provider}: its group's, the
        maintenance trait on hosts in maintenance, and what every current
        compute reports.
        """
        return {host.name: set(host.group.traits) | {cloud.OWNER_NOVA} | (
                {conf.nova_ext.maintenance_trait} if host.maintenance
                else set())
                for host in self.cluster.hosts}

    def _failure_domains(self, conf):
        """{level: {host: {domain, ...}}} for every level of ``[nova_ext]
        failure_domain_levels``, read from the model's aggregates'
        ``nova_ext:failure_domain:<level>`` metadata as the scheduler reads
        a cloud's (the generated racks and rows, and any level an
        ``aggregates:`` entry of the cluster file declares).
        """
        prefix = failure_domains.AGGREGATE_KEY_PREFIX
        domains = {level: {} for level in conf.nova_ext.failure_domain_levels}
        for aggregate in self.cluster.aggregates:
            for key, domain in aggregate.metadata.items():
                level = key[len(prefix):] if key.startswith(prefix) else None
                if level in domains:
                    for host in aggregate.hosts:
                        domains[level].setdefault(host, set()).add(domain)
        return domains

    def _replay(self, conf, config_path, name, progress, host_manager,
                scheduler, simulated, simulated_cloud, ctxt, capacity, used,
                instances_on, index_of, allowed, image_instances, objects,
                explain_arrival):
        workload = self.workload
        hosts = self.cluster.hosts
        states = simulated.states
        flavors = {f.name: self._flavor(f, i + 1)
                   for i, f in enumerate(workload.flavors)}
        images = {}
        hosts_with_image = simulated_cloud.hosts_with_image
        domains = simulated_cloud.domains
        downloaded = set()
        claimed = {}      # arrival index -> (VCPU, MEMORY_MB, DISK_GB)
        groups = {}       # name -> (InstanceGroup uuid, members, hosts)
        group_domains = collections.defaultdict(collections.Counter)
        placements = []
        instance_uuids = []
        times = []
        violations = 0
        spread_members = 0
        first_failure = None
        first_reason = None
        snapshot = None
        failed = 0
        total_capacity = [sum(c[i] for c, a in zip(capacity, allowed) if a)
                          for i in range(3)]
        live = [0, 0, 0]
        sample_every = max(1, len(workload.arrivals) // UTILISATION_SAMPLES)
        utilisation = []
        heartbeat = fleet.Heartbeat(states)
        # building 10,000 HostStates on a loaded machine can take longer
        # than service_down_time: every service reports before the first
        # request, or ComputeFilter would see them all down
        heartbeat(force=True)
        rng_uuid = random.Random(workload.seed)
        explanation = None
        checker = spread.Checker(self.cluster, workload,
                                 conf.nova_ext.default_max_per_domain)

        def report(i):
            node = simulated.nodes[i]
            node.vcpus_used, node.memory_mb_used, node.local_gb_used = used[i]
            node.running_vms = instances_on[i]
            simulated.report(i)

        def depart(index):
            i = placements[index]
            if i is None:
                return
            arrival = workload.arrivals[index]
            amounts = claimed.pop(index)
            for r in range(3):
                used[i][r] -= amounts[r]
                live[r] -= amounts[r]
            instances_on[i] -= 1
            states[i].instances.pop(instance_uuids[index], None)
            image_instances[(i, arrival.image)] -= 1
            if not image_instances[(i, arrival.image)]:
                hosts_with_image[image_id(arrival.image)].discard(
                    hosts[i].name)
            if arrival.group:
                checker.departed(arrival.group, i)
                members, on_hosts = groups[arrival.group][1:]
                members.discard(instance_uuids[index])
                on_hosts[hosts[i].name] -= 1
                if not on_hosts[hosts[i].name]:
                    del on_hosts[hosts[i].name]
            report(i)

        for arrival in workload.arrivals:
            heartbeat()
            for index in workload.departures.get(arrival.index, ()):
                depart(index)
            instance_uuid = str(uuid.UUID(int=rng_uuid.getrandbits(128),
                                          version=4))
            instance_uuids.append(instance_uuid)
            spec = self._request_spec(arrival, instance_uuid, flavors,
                                      images, groups, objects)
            # the members as placement would count them, the request's
            # server not yet among them
            members = collections.Counter(
                groups[arrival.group][2] if arrival.group else ())
            with scheduling_request.opened(spec, [instance_uuid],
                                           host_manager, simulated_cloud,
                                           members=members) as request:
                explaining = arrival.index + 1 == explain_arrival
                steps, reason = self._pre_filter(ctxt, spec, host_manager,
                                                 explaining)
                candidates = []
                querystring = None
                amounts = (0, 0, 0)
                if reason is None:
                    querystring, amounts, candidates, reason = (
                        self._placement(ctxt, spec, host_manager,
                                        simulated_cloud, states, capacity,
                                        used, request))
                if explaining:
                    explanation = self._explain(
                        conf, host_manager, spec, candidates, steps,
                        querystring, reason, members, simulated_cloud)
                start = time.perf_counter()
                chosen = None
                if candidates:
                    try:
                        sorted_hosts = upstream.sorted_hosts(
                            scheduler, spec, candidates, 0)
                    except Exception as error:  # a filter's NoValidHost
                        sorted_hosts = []
                        reason = str(error)
                    if sorted_hosts:
                        chosen = sorted_hosts[0]
                        upstream.consume_selected_host(
                            chosen, spec, instance_uuid=instance_uuid)
                    elif request.why_no_host:
                        reason = request.why_no_host
            times.append(time.perf_counter() - start)

            if chosen is None:
                placements.append(None)
                failed += 1
                if first_failure is None:
                    first_failure = arrival.index
                    first_reason = reason or (
                        'no host passed the filters' if candidates else
                        'placement: no host has room')
                    snapshot = self._stranded(capacity, used, allowed)
                    if workload.stop_at_first_failure:
                        break
                continue

            i = index_of[chosen.host]
            placements.append(i)
            claimed[arrival.index] = amounts
            for r in range(3):
                used[i][r] += amounts[r]
                live[r] += amounts[r]
            instances_on[i] += 1
            chosen.instances[instance_uuid] = objects.Instance(
                uuid=instance_uuid, host=chosen.host, node=chosen.nodename,
                image_ref=arrival.image)
            if (i, arrival.image) not in downloaded:
                downloaded.add((i, arrival.image))
            image_instances[(i, arrival.image)] += 1
            hosts_with_image[spec.image.id].add(chosen.host)
            if arrival.group:
                if arrival.group in checker.constraints:
                    checker.placed(arrival.group, i, [
                        index_of[state.host] for state in candidates])
                group = workload.groups[arrival.group]
                _, members, on_hosts = groups[arrival.group]
                members.add(instance_uuid)
                on_hosts[chosen.host] += 1
                if group.spread_level in domains and group.policy in (
                        'anti-affinity', 'soft-anti-affinity'):
                    spread_members += 1
                    limit = group.max_per_domain or (
                        conf.nova_ext.default_max_per_domain)
                    on_domains = domains[group.spread_level].get(
                        hosts[i].name, ())
                    if any(group_domains[arrival.group][domain] >= limit
                           for domain in on_domains):
                        violations += 1
                    for domain in on_domains:
                        group_domains[arrival.group][domain] += 1
            report(i)

            if arrival.index % sample_every == 0:
                utilisation.append((arrival.index,) + tuple(
                    100.0 * live[r] / total_capacity[r]
                    if total_capacity[r] else 0.0 for r in range(3)))
            if progress is not None:
                progress(arrival.index + 1)

        if snapshot is None:
            snapshot = self._stranded(capacity, used, allowed)
        placed = sum(1 for p in placements if p is not None)
        before = first_failure if first_failure is not None else len(
            placements)
        times_ms = sorted(t * 1000.0 for t in times) or [0.0]
        return Result(
            config=name or config_path, config_path=config_path,
            arrivals=len(workload.arrivals),
            placed_before_first_failure=before, placed=placed,
            failed=failed, first_failure=first_failure,
            first_failure_reason=first_reason,
            stranded=snapshot[0], free=snapshot[1],
            image_downloads=len(downloaded),
            failure_domain_violations=violations,
            spread_members=spread_members,
            schedule_ms_mean=statistics.fmean(times_ms),
            schedule_ms_p95=times_ms[min(len(times_ms) - 1,
                                         int(0.95 * len(times_ms)))],
            filters=[type(f).__name__ for f in host_manager.enabled_filters],
            weighers=[type(w).__name__ for w in
                      weights.expand(host_manager.weighers)],
            placements=[None if p is None else hosts[p].name
                        for p in placements],
            utilisation=utilisation, explain=explanation,
            spread_sets=checker.finish(placements))

    @staticmethod
    def _pre_filter(ctxt, spec, host_manager, steps_wanted):
        """Nova's ``process_reqspec``: every pre-filter of Nova's list (its
        own, then nova-ext's activated ones) edits ``spec``. Returns (the
        steps explain shows, when ``steps_wanted``; the reason of a
        pre-filter that failed the request, or None).
        """
        # Nova 34's owner_nova_filter asks every cell's database for the
        # oldest nova-compute and requires OWNER_NOVA when all are current,
        # as the model's are: its answer, given before it asks
        spec.root_required.add(cloud.OWNER_NOVA)
        if steps_wanted:
            steps, failure = explain.apply_request_filters(ctxt, spec,
                                                           host_manager)
            return steps, failure and 'request filter: %s' % failure
        for pre_filter in upstream.request_filters():
            try:
                pre_filter(ctxt, spec)
            except exception.RequestFilterFailed as error:
                return None, 'request filter: %s' % error.message
        return None, None

    @staticmethod
    def _placement(ctxt, spec, host_manager, simulated_cloud, states,
                   capacity, used, request):
        """Placement's allocation candidates for ``spec``: the query Nova
        builds (``resources_from_request_spec``), answered by the model.
        Returns (query string, (VCPU, MEMORY_MB, DISK_GB) to claim,
        candidate HostStates, why there are none or None).
        """
        querystring = scheduler_utils.resources_from_request_spec(
            ctxt, spec, host_manager,
            enable_pinning_translate=True).to_querystring()
        query = cloud.parse_query(querystring)
        amounts = tuple(query.resources.get(resource_class, 0)
                        for resource_class in PLACEMENT_RESOURCES)
        missing = sorted(resource_class for resource_class, amount
                         in query.resources.items()
                         if amount and resource_class
                         not in PLACEMENT_RESOURCES)
        if missing:
            return querystring, amounts, [], (
                'placement: no host has %s (the model has only %s)' % (
                    ', '.join(missing), ', '.join(PLACEMENT_RESOURCES)))
        # placement returns at most the query's limit (Nova's [scheduler]
        # max_placement_results, absent for a server group's request), in
        # provider order here (placement's without [placement]
        # randomize_allocation_candidates): a cloud larger than the cap
        # shows its filters only the first hosts
        limit = query.limit
        candidates = []
        for i in simulated_cloud.eligible(query):
            cap = capacity[i]
            use = used[i]
            if (use[0] + amounts[0] <= cap[0]
                    and use[1] + amounts[1] <= cap[1]
                    and use[2] + amounts[2] <= cap[2]):
                candidates.append(states[i])
                if len(candidates) == limit:
                    break
        reason = None
        if not candidates:
            # the failure_domain pre-filter says which domains it left out
            reason = request.why_no_host or 'placement: no host has room'
        return querystring, amounts, candidates, reason

    def _explain(self, conf, host_manager, spec, candidates, steps,
                 querystring, reason, members, simulated_cloud):
        """explain's breakdown of ``spec`` on the placement candidates, just
        before the replay decides it. Nova's pick is random with
        ``host_subset_size`` or ``shuffle_best_same_weighed_hosts``: the
        random state is given back, so the replay's own pick draws the same
        and the run is the same as without the breakdown.
        """
        result = explain.new_result(spec, host_manager, conf)
        result['request_filters'] = steps
        if querystring is not None:
            result['placement_query'] = urllib.parse.unquote(querystring)
        result['candidates'] = sorted(explain.host_name(host)
                                      for host in candidates)
        if not candidates:
            result['no_valid_host'] = reason or 'placement: no host has room'
            return result
        random_state = random.getstate()
        # a clone: nothing the filters or weighers do to the request
        # reaches the replay's
        clone = spec.obj_clone()
        try:
            with scheduling_request.opened(clone, [clone.instance_uuid],
                                           host_manager, simulated_cloud,
                                           members=members):
                explain.filter_and_weigh(result, host_manager, candidates,
                                         clone, conf)
        finally:
            random.setstate(random_state)
        return result

    def _request_spec(self, arrival, instance_uuid, flavors, images, groups,
                      objects):
        image = images.get(arrival.image)
        if image is None:
            # Nova keeps the properties it knows (the model answers
            # nova-ext's lookups of the others, as glance would)
            image = images[arrival.image] = objects.ImageMeta.from_dict({
                'id': image_id(arrival.image), 'name': arrival.image,
                'properties': dict(self.workload.image_properties.get(
                    arrival.image, {}))})
        hints = {}
        instance_group = None
        if arrival.group:
            group = self.workload.groups[arrival.group]
            if arrival.group not in groups:
                groups[arrival.group] = (
                    str(uuid.uuid5(uuid.NAMESPACE_DNS, arrival.group)),
                    set(), collections.Counter())
            group_uuid, members, on_hosts = groups[arrival.group]
            hints['group'] = [group_uuid]
            if group.spread_level:
                hints['nova_ext:spread_level'] = [group.spread_level]
            if group.max_per_domain:
                hints['nova_ext:spread_max_per_domain'] = [
                    str(group.max_per_domain)]
            if group.spread_constraints:
                hints['nova_ext:spread_constraints'] = [
                    group.spread_constraints]
            # as the conductor loads it: the API has added the new member,
            # hosts are the distinct hosts of the members
            instance_group = objects.InstanceGroup(
                id=1, uuid=group_uuid, name=arrival.group,
                project_id='simulator', user_id='simulator',
                policy=group.policy, policies=[group.policy], rules={},
                members=sorted(members) + [instance_uuid],
                hosts=sorted(on_hosts))
        return objects.RequestSpec(
            instance_uuid=instance_uuid, project_id='simulator',
            user_id='simulator', availability_zone=None, num_instances=1,
            flavor=flavors[arrival.flavor.name], image=image,
            numa_topology=None,
            pci_requests=objects.InstancePCIRequests(requests=[]),
            instance_group=instance_group, scheduler_hints=hints,
            ignore_hosts=None, force_hosts=None, force_nodes=None,
            requested_destination=None, retry=None, limits=None,
            is_bfv=False, requested_resources=[],
            requested_networks=objects.NetworkRequestList(objects=[]),
            request_level_params=objects.RequestLevelParams())

    def _stranded(self, capacity, used, allowed):
        """(stranded %, free %) per resource: free capacity on hosts where
        no flavor of the workload fits any more, and all free capacity, as
        percentages of the capacity of the usable hosts.
        """
        smallest = [f.resources() for f in self.workload.flavors]
        total = [0.0, 0.0, 0.0]
        stranded = [0.0, 0.0, 0.0]
        free = [0.0, 0.0, 0.0]
        for cap, use, ok in zip(capacity, used, allowed):
            if not ok:
                continue
            left = [c - u for c, u in zip(cap, use)]
            fits = any(all(a <= f for a, f in zip(amounts, left))
                       for amounts in smallest)
            for r in range(3):
                total[r] += cap[r]
                free[r] += left[r]
                if not fits:
                    stranded[r] += left[r]
        pct = [100.0 / t if t else 0.0 for t in total]
        return ({k: stranded[r] * pct[r] for r, k in enumerate(RESOURCES)},
                {k: free[r] * pct[r] for r, k in enumerate(RESOURCES)})


def compare(cluster, workload, configs, progress_factory=None,
            explain_arrival=None):
    """Run every ``(name, path)`` of ``configs``; return a Comparison, with
    explain's breakdown of arrival ``explain_arrival`` (1-based) in each.
    """
    simulation = Simulation(cluster, workload)
    results = []
    all_exclude = True
    for name, path in configs:
        if progress_factory is not None:
            progress = progress_factory(name, len(workload.arrivals))
        else:
            progress = None
        try:
            results.append(simulation.run(
                path, name=name, progress=progress,
                explain_arrival=explain_arrival))
        finally:
            if progress is not None:
                progress(None)
        all_exclude &= 'maintenance' in results[-1].request_filters
    usable = [h for h in cluster.hosts if not (h.maintenance and all_exclude)]
    bound = volume_bound(workload, cluster.capacity(usable))
    for result in results:
        result.percent_of_bound = (100.0 * result.placed_before_first_failure
                                   / bound if bound else None)
    return Comparison(cluster.path, workload.path, workload.seed,
                      len(cluster.hosts), bound, all_exclude, results,
                      explain_arrival)
