#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""select_destinations with the host_class pre-filter vs. the same policy in
AggregateInstanceExtraSpecsFilter, against real placement.

Method
------
Each configuration starts its own embedded Nova (``nova_ext.sandbox.cloud.
EmbeddedNova``: Nova's real scheduler service and HostManager, the real
placement WSGI app over sqlite, the compute API) with no real computes. The
benchmark then registers N synthetic compute nodes the way a compute would
be seen: a Service and a ComputeNode in the cell database, a HostMapping in
the API database, and a resource provider with the node's uuid, name and
VCPU/MEMORY_MB/DISK_GB inventory in placement (through placement's REST
API). A fraction of them (default 10 %) are put in one host aggregate
through the compute API, which mirrors membership into placement; the
aggregate carries both ``nova_ext:host_class=gpu`` and ``gpu=true``.

* **host_class**: ``[nova_ext] request_filters = host_class``; flavor extra
  spec ``nova_ext:host_class=gpu``. Placement returns only eligible hosts.
* **AggregateInstanceExtraSpecsFilter**: added to ``enabled_filters``;
  flavor extra spec ``aggregate_instance_extra_specs:gpu=true``. Placement
  returns up to ``[scheduler] max_placement_results`` (1,000) of all hosts,
  and the Python filter keeps the eligible ones among them: with 10 %
  eligible that is about 100 of them, so this policy can even miss hosts.

Each synthetic compute is given the instance-info record a starting
nova-compute sends the scheduler (an empty instance list).

Timed: ``SchedulerManager.select_destinations`` for one instance, as the
conductor calls it, which includes the pre-filters, the placement
allocation-candidates query, building host states, filters, weighers and
the allocation claim in placement. Each request uses a new instance uuid;
claims stay (both configurations claim alike; hosts are far from full).
Median and 90th percentile of R requests after 2 untimed warm-ups.

``--scenario failure_domain``: the same synthetic computes in racks of
``--rack-size`` (default 20), one aggregate per rack carrying
``nova_ext:failure_domain:rack``; an anti-affinity server group spread one
member per rack already fills ``--full-fraction`` (default half) of the
racks. Every request is one more member (hint ``nova_ext:spread_level=
rack``), with FailureDomainAntiAffinityFilter enabled:

* **filter only**: Nova sends no candidate limit for a request naming a
  server group, so placement returns every host and the filter rejects
  the full racks' hosts;
* **failure_domain**: ``[nova_ext] request_filters = failure_domain``;
  placement returns only hosts of racks with room;
* the same two with placement's own cap, ``[placement]
  max_allocation_candidates`` = half the hosts (placement stops
  generating there, whatever Nova asks): column *reachable* counts the
  eligible hosts among what placement returns.

``[nova_ext] spread_serialize_groups = false``: the group's members are
the spec's ``instance_group.hosts`` (no placement allocations to count,
no lock), the same in every configuration. Column *pre-filter ms*: the
median of the pre-filter alone, called R times on the same request spec.
"""

import argparse
import cProfile
import logging
import os
import pstats
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_json  # noqa: E402  (a sibling script, not a package)

N_DEFAULT = 2000

FILTERS = ('ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,'
           'ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter')
AGGREGATE_FILTER_CONF = (
    '[filter_scheduler]\n'
    'available_filters = nova.scheduler.filters.all_filters\n'
    'enabled_filters = %s,AggregateInstanceExtraSpecsFilter\n' % FILTERS)
AGGREGATE_FILTER_SPECS = {'aggregate_instance_extra_specs:gpu': 'true'}
CONFIGS = {
    'host_class': {
        'nova_conf': lambda hosts: (
            '[filter_scheduler]\n'
            'available_filters = nova.scheduler.filters.all_filters\n'
            'available_filters = nova_ext.scheduler.filters.all_filters\n'
            'enabled_filters = %s\n'
            '[nova_ext]\nrequest_filters = host_class\n' % FILTERS),
        'extra_specs': {'nova_ext:host_class': 'gpu'},
        'member_of': True,
    },
    # Nova's default [scheduler] max_placement_results: the filter sees the
    # first 1,000 providers placement returns, so eligible hosts beyond them
    # are never considered (a weaker policy than host_class enforces).
    'AggregateInstanceExtraSpecsFilter': {
        'nova_conf': lambda hosts: AGGREGATE_FILTER_CONF,
        'extra_specs': AGGREGATE_FILTER_SPECS,
        'limit': lambda hosts: 1000,
    },
    # What an operator must set for the filter to enforce the same policy:
    # every provider reaches the filter.
    'AggregateInstanceExtraSpecsFilter, all hosts': {
        'nova_conf': lambda hosts: AGGREGATE_FILTER_CONF + (
            '[scheduler]\nmax_placement_results = %d\n' % hosts),
        'extra_specs': AGGREGATE_FILTER_SPECS,
        'limit': lambda hosts: hosts,
    },
}
COMMON_CONF = ('[DEFAULT]\n'
               '# synthetic computes never heartbeat\n'
               'service_down_time = 86400\n'
               '[quota]\ninstances = -1\ncores = -1\nram = -1\n')

FD_FILTERS = FILTERS + ',FailureDomainAntiAffinityFilter'
FD_CONF = ('[filter_scheduler]\n'
           'available_filters = nova.scheduler.filters.all_filters\n'
           'available_filters = nova_ext.scheduler.filters.all_filters\n'
           'enabled_filters = %s\n'
           '[nova_ext]\n'
           'spread_serialize_groups = false\n'
           'failure_domain_spread_weight_multiplier = 0.0\n' % FD_FILTERS)
FD_CONFIGS = {
    'filter only': {'nova_conf': FD_CONF},
    'failure_domain': {
        'nova_conf': FD_CONF + 'request_filters = failure_domain\n'},
    'filter only, placement cap': {
        'nova_conf': FD_CONF, 'placement_cap': True},
    'failure_domain, placement cap': {
        'nova_conf': FD_CONF + 'request_filters = failure_domain\n',
        'placement_cap': True},
}


def measure(name, hosts, eligible_fraction, requests, results,
            profile=False, debug_logging=False):
    """Run one configuration in its own embedded Nova; fill ``results``."""
    from oslo_utils import uuidutils

    from nova import context as nova_context
    from nova import objects
    from nova.tests.fixtures import glance

    from nova_ext.sandbox import cloud

    config = CONFIGS[name]

    class Bench(cloud.EmbeddedNova):
        HOSTS = []
        NOVA_CONF = COMMON_CONF + config['nova_conf'](hosts)

        def run_bench(self):
            ctxt = nova_context.get_admin_context()
            start = time.perf_counter()
            names, node_uuids = register_computes(self, hosts)
            eligible = names[::int(round(1 / eligible_fraction))]
            agg = self.create_aggregate('gpu', eligible, {
                'nova_ext:host_class': 'gpu', 'gpu': 'true'})
            setup_s = time.perf_counter() - start

            flavor_id = self.create_flavor('g1', vcpu=2, memory_mb=4096,
                                           disk=20)
            self.admin_api.post_extra_spec(
                flavor_id, {'extra_specs': config['extra_specs']})
            flavor = objects.Flavor.get_by_flavor_id(ctxt, flavor_id)
            image = objects.ImageMeta.from_dict({
                'id': glance.GlanceFixture.image1['id'], 'name': 'bench',
                'disk_format': 'raw', 'container_format': 'bare',
                'properties': {}})
            manager = self.scheduler_service.manager
            report_empty_instance_lists(manager, names)
            reachable = self._eligible_in_candidates(
                agg, {node_uuids[h] for h in eligible}, config)
            if not debug_logging:
                # Nova's test logging fixture formats every DEBUG message;
                # a production scheduler (debug = False) does not.
                logging.getLogger().setLevel(logging.INFO)
            user_ctxt = nova_context.RequestContext(
                'bench-user', 'bench-project', is_admin=True)

            times, chosen = [], set()
            profiler = cProfile.Profile()
            for i in range(requests + 2):
                uuid = uuidutils.generate_uuid()
                spec = objects.RequestSpec.from_components(
                    user_ctxt, uuid, image, flavor, None,
                    objects.InstancePCIRequests(requests=[]), {}, None,
                    None, project_id='bench-project', user_id='bench-user')
                if profile and i >= 2:
                    profiler.enable()
                t0 = time.perf_counter()
                selections = manager.select_destinations(
                    user_ctxt, spec_obj=spec, instance_uuids=[uuid],
                    return_objects=True, return_alternates=False)
                elapsed = time.perf_counter() - t0
                profiler.disable()
                if i >= 2:
                    times.append(elapsed * 1000.0)
                chosen.add(selections[0][0].service_host)
            if profile:
                print('--- profile of %s (cumulative) ---' % name)
                pstats.Stats(profiler).sort_stats('cumulative').print_stats(
                    40)
            results[name] = {
                'setup_s': setup_s, 'times': times,
                'all_chosen_eligible': chosen <= set(eligible),
                'eligible': len(eligible), 'reachable': reachable}

        def _eligible_in_candidates(self, aggregate_id, eligible_uuids,
                                    config):
            """Eligible hosts the scheduler's placement query can return.

            Those are the only hosts this configuration can ever choose.
            """
            limit = config['limit'](hosts) if 'limit' in config else hosts
            query = ('/allocation_candidates?resources=VCPU:2,MEMORY_MB:4096,'
                     'DISK_GB:20&limit=%d' % limit)
            if config.get('member_of'):
                aggregate = objects.Aggregate.get_by_id(
                    nova_context.get_admin_context(), aggregate_id)
                query += '&member_of=' + aggregate.uuid
            body = self.placement.get(query, version='1.21').body
            return len(set(body['provider_summaries']) & eligible_uuids)

    run(Bench, name)


def measure_failure_domain(name, hosts, rack_size, full_fraction, requests,
                           results, debug_logging=False):
    """One failure-domain configuration in its own embedded Nova."""
    from oslo_utils import uuidutils

    from nova import context as nova_context
    from nova import exception
    from nova import objects
    from nova.tests.fixtures import glance

    from nova_ext.sandbox import cloud
    from nova_ext.scheduler.request_filters import failure_domain

    config = FD_CONFIGS[name]

    class Bench(cloud.EmbeddedNova):
        HOSTS = []
        NOVA_CONF = COMMON_CONF + config['nova_conf']

        def run_bench(self):
            start = time.perf_counter()
            names, node_uuids = register_computes(self, hosts)
            racks = [names[i:i + rack_size]
                     for i in range(0, len(names), rack_size)]
            for i, rack in enumerate(racks):
                self.create_aggregate('rack-%d' % i, rack, {
                    'nova_ext:failure_domain:rack': 'r%d' % i})
            setup_s = time.perf_counter() - start
            if config.get('placement_cap'):
                self.placement_fixture.conf_fixture.config(
                    max_allocation_candidates=max(1, hosts // 2),
                    group='placement')
            full = racks[:int(len(racks) * full_fraction)]
            eligible = {node_uuids[h] for rack in racks[len(full):]
                        for h in rack}

            flavor = objects.Flavor.get_by_flavor_id(
                nova_context.get_admin_context(),
                self.create_flavor('m1', vcpu=2, memory_mb=4096, disk=20))
            image = objects.ImageMeta.from_dict({
                'id': glance.GlanceFixture.image1['id'], 'name': 'bench',
                'disk_format': 'raw', 'container_format': 'bare',
                'properties': {}})
            manager = self.scheduler_service.manager
            report_empty_instance_lists(manager, names)
            returned = spy_on_candidates(manager)
            if not debug_logging:
                logging.getLogger().setLevel(logging.INFO)
            user_ctxt = nova_context.RequestContext(
                'bench-user', 'bench-project', is_admin=True)
            group_uuid = uuidutils.generate_uuid()
            members = [uuidutils.generate_uuid() for _ in full]

            def spec(uuid):
                group = objects.InstanceGroup(
                    uuid=group_uuid, name='spread', policy='anti-affinity',
                    policies=['anti-affinity'],
                    hosts=[rack[0] for rack in full], members=members)
                return objects.RequestSpec.from_components(
                    user_ctxt, uuid, image, flavor, None,
                    objects.InstancePCIRequests(requests=[]),
                    {'scheduler_hints': {'group': group_uuid,
                                         'nova_ext:spread_level': 'rack'}},
                    group, None, project_id='bench-project',
                    user_id='bench-user')

            times, failed = [], 0
            for i in range(requests + 2):
                uuid = uuidutils.generate_uuid()
                t0 = time.perf_counter()
                try:
                    manager.select_destinations(
                        user_ctxt, spec_obj=spec(uuid),
                        instance_uuids=[uuid], return_objects=True,
                        return_alternates=False)
                except exception.NoValidHost:
                    failed += 1
                if i >= 2:
                    times.append((time.perf_counter() - t0) * 1000.0)
            pre_filter = []
            for _ in range(requests if 'failure_domain' in name else 0):
                t0 = time.perf_counter()
                failure_domain.exclude_full_domains(
                    user_ctxt, spec(uuidutils.generate_uuid()))
                pre_filter.append((time.perf_counter() - t0) * 1000.0)
            results[name] = {
                'setup_s': setup_s, 'times': times, 'failed': failed,
                'pre_filter_ms': (statistics.median(pre_filter)
                                  if pre_filter else None),
                'candidates': len(returned[0]) if returned else 0,
                'reachable': len(returned[0] & eligible) if returned else 0,
                'eligible': len(eligible)}

    run(Bench, name)


def spy_on_candidates(manager):
    """The provider uuids placement returns to each request, in a list."""
    client = manager.placement_client
    real = client.get_allocation_candidates
    returned = []

    def spy(context, resources):
        result = real(context, resources)
        returned.append(set((result[1] or {}) if result else ()))
        return result

    client.get_allocation_candidates = spy
    return returned


def run(bench_class, name):
    import testtools
    result = testtools.TestResult()
    bench_class('run_bench').run(result)
    for _case, error in result.errors + result.failures:
        print(error[-4000:], file=sys.stderr)
        raise SystemExit('%s: the embedded Nova failed' % name)


def register_computes(bench, hosts):
    """``hosts`` synthetic computes in cell1 of ``bench`` (an EmbeddedNova),
    seen as a compute would be: Service, ComputeNode, HostMapping and a
    resource provider with inventory. Returns (names, {name: node uuid}).
    """
    from oslo_utils import uuidutils

    from nova import context as nova_context
    from nova import objects

    ctxt = nova_context.get_admin_context()
    cell = bench.cell_mappings['cell1']
    names, node_uuids = [], {}
    with nova_context.target_cell(ctxt, cell) as cctxt:
        for i in range(hosts):
            host = 'h%05d' % i
            names.append(host)
            objects.Service(cctxt, host=host, binary='nova-compute',
                            topic='compute', report_count=0).create()
            node = objects.ComputeNode(
                cctxt, uuid=uuidutils.generate_uuid(), host=host,
                hypervisor_hostname=host, vcpus=64, memory_mb=262144,
                local_gb=2000, vcpus_used=0, memory_mb_used=0,
                local_gb_used=0, hypervisor_type='fake',
                hypervisor_version=1, cpu_info='{}',
                free_ram_mb=262144, free_disk_gb=2000,
                current_workload=0, running_vms=0,
                disk_available_least=2000,
                cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0,
                disk_allocation_ratio=1.0, supported_hv_specs=[],
                pci_device_pools=objects.PciDevicePoolList(),
                stats={}, numa_topology=None, host_ip='10.0.0.1',
                metrics='[]')
            node.create()
            node_uuids[host] = node.uuid
            objects.HostMapping(ctxt, host=host, cell_mapping=cell).create()
            _provider(bench, node)
    return names, node_uuids


def _provider(bench, node):
    bench.placement.post('/resource_providers', {
        'uuid': node.uuid, 'name': node.hypervisor_hostname},
        version='1.20')
    bench.placement.put(
        '/resource_providers/%s/inventories' % node.uuid, {
            'resource_provider_generation': 0,
            'inventories': {
                'VCPU': {'total': 64, 'allocation_ratio': 4.0},
                'MEMORY_MB': {'total': 262144},
                'DISK_GB': {'total': 2000}}})
    bench.placement.put(
        '/resource_providers/%s/traits' % node.uuid, {
            'resource_provider_generation': 1,
            'traits': ['COMPUTE_NODE', 'OWNER_NOVA']}, version='1.6')


def report_empty_instance_lists(manager, names):
    """What a starting nova-compute sends the scheduler: without it the
    scheduler would query the cell database once per candidate host per
    request.
    """
    for host in names:
        manager.host_manager._instance_info[host] = {
            'instances': {}, 'updated': True}


def main_failure_domain(args):
    results = {}
    started = time.perf_counter()
    for name in FD_CONFIGS:
        measure_failure_domain(name, args.hosts, args.rack_size,
                               args.full_fraction, args.requests, results,
                               debug_logging=args.debug_logging)
    baseline = statistics.median(results['filter only']['times'])
    racks = -(-args.hosts // args.rack_size)
    print('select_destinations for one more member of a group spread one '
          'per rack, %d compute providers in %d racks of %d, %d racks full, '
          '%d requests each, debug logging %s' % (
              args.hosts, racks, args.rack_size,
              int(racks * args.full_fraction), args.requests,
              'on' if args.debug_logging else 'off'))
    row = '%-31s %9s %8s %8s %10s %10s %11s %6s %7s'
    print(row % ('configuration', 'median ms', 'p90 ms', 'vs. f_o',
                 'candidates', 'reachable', 'pre-filter', 'failed',
                 'setup s'))
    for name, r in results.items():
        times = sorted(r['times'])
        median = statistics.median(times)
        print(row % (
            name, '%.1f' % median,
            '%.1f' % times[int(0.9 * (len(times) - 1))],
            '%.2fx' % (median / baseline), r['candidates'],
            '%d/%d' % (r['reachable'], r['eligible']),
            '-' if r['pre_filter_ms'] is None
            else '%.1f ms' % r['pre_filter_ms'], r['failed'],
            '%.0f' % r['setup_s']))
    write_json(args, results, baseline)
    print('candidates: hosts placement returned to the first request; '
          'reachable: eligible hosts (racks with room) among them; '
          'placement cap: [placement] max_allocation_candidates = %d; run '
          'took %.0f s' % (max(1, args.hosts // 2),
                           time.perf_counter() - started))
    return 0


def write_json(args, results, baseline):
    """``--json``: the table's figures, one row per configuration."""
    if not args.json:
        return
    rows = []
    for name, r in results.items():
        times = sorted(r['times'])
        row = {'configuration': name,
               'median_ms': statistics.median(times),
               'p90_ms': times[int(0.9 * (len(times) - 1))],
               'ratio': statistics.median(times) / baseline,
               'reachable': r['reachable'], 'eligible': r['eligible'],
               'setup_s': r['setup_s']}
        for key in ('candidates', 'pre_filter_ms', 'failed',
                    'all_chosen_eligible'):
            if key in r:
                row[key] = r[key]
        rows.append(row)
    bench_json.write(args.json, {
        'scenario': args.scenario, 'hosts': args.hosts,
        'requests': args.requests, 'debug_logging': args.debug_logging,
        'results': rows})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--scenario', choices=('host_class',
                                               'failure_domain'),
                        default='host_class')
    parser.add_argument('--hosts', type=int, default=N_DEFAULT)
    parser.add_argument('--eligible-fraction', type=float, default=0.1)
    parser.add_argument('--rack-size', type=int, default=20,
                        help='failure_domain: hosts per rack')
    parser.add_argument('--full-fraction', type=float, default=0.5,
                        help='failure_domain: racks already holding a '
                        'member')
    parser.add_argument('--requests', type=int, default=20)
    parser.add_argument('--profile', action='store_true',
                        help='print the 40 most expensive calls (cProfile, '
                        'cumulative) of each configuration')
    parser.add_argument('--debug-logging', action='store_true',
                        help="keep Nova's test fixture formatting every "
                        'DEBUG message (as with debug = True)')
    parser.add_argument('--json', metavar='FILE',
                        help="also write the table as JSON to FILE ('-' "
                        "for stdout)")
    args = parser.parse_args(argv)
    warnings.simplefilter('ignore')
    if args.scenario == 'failure_domain':
        return main_failure_domain(args)
    results = {}
    started = time.perf_counter()
    for name in CONFIGS:
        measure(name, args.hosts, args.eligible_fraction, args.requests,
                results, profile=args.profile,
                debug_logging=args.debug_logging)
    baseline = statistics.median(results['host_class']['times'])
    print('select_destinations, %d compute providers, %d eligible '
          '(%.0f %%), %d requests each, debug logging %s' % (
              args.hosts, results['host_class']['eligible'],
              args.eligible_fraction * 100, args.requests,
              'on' if args.debug_logging else 'off'))
    row = '%-45s %9s %9s %9s %10s %8s'
    print(row % ('configuration', 'median ms', 'p90 ms', 'vs. h_c',
                 'reachable', 'setup s'))
    for name, r in results.items():
        times = sorted(r['times'])
        p90 = times[int(0.9 * (len(times) - 1))]
        median = statistics.median(times)
        print(row % (
            name, '%.1f' % median, '%.1f' % p90,
            '%.1fx' % (median / baseline),
            '%d/%d' % (r['reachable'], r['eligible']),
            '%.0f' % r['setup_s']))
        if not r['all_chosen_eligible']:
            print('  !! %s chose a host outside the aggregate' % name)
    write_json(args, results, baseline)
    print('reachable: eligible hosts among the providers placement returns '
          'to the scheduler; run took %.0f s'
          % (time.perf_counter() - started))
    return 0


if __name__ == '__main__':
    sys.exit(main())
