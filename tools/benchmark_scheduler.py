#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Per-request cost of Nova's scheduler pipeline, upstream vs. +nova-ext.

What is measured
----------------
The work nova-scheduler does in Python for one request once Placement has
returned its candidates: ``HostFilterHandler().get_filtered_objects()`` over
every candidate ``HostState`` and ``HostWeightHandler().get_weighed_objects()``
over the hosts that passed, with Nova's own (unmodified) handlers, filters and
weighers. Two configurations are compared:

* upstream: Nova's five default ``enabled_filters`` (ComputeFilter,
  ComputeCapabilitiesFilter, ImagePropertiesFilter,
  ServerGroupAntiAffinityFilter, ServerGroupAffinityFilter) and every
  upstream weigher (``nova.scheduler.weights.all_weighers``), all with their
  default options;
* +nova-ext: the same, plus FailureDomainAntiAffinityFilter (last) and
  ``nova_ext.scheduler.weights.all_weighers`` (after Nova's): one weigher,
  NovaExtWeighers, running every nova-ext weigher, all with their default
  ``[nova_ext]`` options.

Filter and weigher classes are loaded as ``HostManager`` loads them: through
``get_matching_classes()`` on the ``all_filters``/``all_weighers`` paths an
operator puts in nova.conf, filters then picked by name, one instance of each
shared by every request.

The fleet
---------
N hosts, built the way ``HostManager._get_host_states()`` builds them, by
the fleet builder ``nova-ext-manage simulate`` uses too
(``nova_ext.simulator.fleet``): ``HostState(host, node, cell)`` then
``update(compute, dict(service), aggregates, instances)`` from
``objects.ComputeNode`` records (64 vCPU at
cpu_allocation_ratio 4.0, 256 GiB RAM, 2 TB disk, randomly varied usage, a
service heard from moments ago). Hosts are grouped in racks of 20; each rack
is an ``objects.Aggregate`` with metadata ``nova_ext:failure_domain:rack=rNNN``
shared by its hosts, as ``HostManager`` shares its aggregate objects. Each
host runs 16-24 instances (``objects.Instance`` with a uuid and one of 10
image ids).

Each request is a fresh ``objects.RequestSpec``: flavor 2 vCPU / 4 GiB /
20 GB, an image without properties, an anti-affinity server group with four
members on three hosts in three different racks (plus the instance being
scheduled, as the API adds it), and the scheduler hint
``nova_ext:spread_level=rack``. By default the members are not in their
hosts' instance lists, so ServerGroupAntiAffinityFilter keeps every host and
FailureDomainAntiAffinityFilter sees the members' hosts among its
candidates. ``--members-on-hosts`` puts them there, as in production:
ServerGroupAntiAffinityFilter then drops those hosts first.
``--no-group`` sends requests in no group and with no hint instead. Nova
caps only those at ``[scheduler] max_placement_results`` (it lifts the cap
for a ``group``, ``same_host`` or ``different_host`` hint), so they are
the requests to measure with ``--max-placement-results 1000``.

No database
-----------
The filters and weighers run unmodified; only the database reads that
nova-ext's code makes are answered in memory, from the benchmark's own fleet
(``InMemoryDatabase``):

* ``objects.AggregateList.get_by_metadata_key`` (API database):
  ``failure_domains._domains_of_unlisted_hosts`` asks it for the failure
  domains of group members' hosts that are not among the hosts it is given.
  FailureDomainSpreadWeigher only sees hosts that passed the filters, and
  FailureDomainAntiAffinityFilter has just removed the racks holding a
  member, so the weigher asks on every request here (the filter too with
  ``--members-on-hosts``).
* ``objects.CellMappingList.get_all`` (API database, once per process) and
  ``cloud._hosts_running_image_in_cell`` (one SELECT DISTINCT on a
  cell database's ``instances``): ImageLocalityWeigher asks each cell which
  hosts run the image, and caches the answer per image for ``[nova_ext]
  image_locality_cache_seconds``. Nova's cell fan-out around the query
  (``scatter_gather_skip_cell0``: context copy, cell targeting, a worker
  thread per cell) and nova-ext's cache stay real and are measured. Past
  the TTL the cache asks again in a background thread while the request
  goes on with the answer it has: the benchmark waits for that ask after
  the request, untimed, and reports apart how often it ran and how long it
  took (wall), since it is CPU the scheduler spends outside any request.

The ``DB q/req`` column counts these queries per +nova-ext request; the
line under the table breaks them down. What the real queries cost (database
round trips; the aggregate query reads every aggregate carrying the key, with
all their hosts, the image query scans ``instances``, which has no index on
``image_ref``) is NOT in the numbers. ``--sqlite-api-db`` runs Nova's real
aggregate query against a temporary SQLite API database holding the fleet's
aggregates, which puts its ORM cost (not a server's round trip) in them.

Method
------
For each size: build the fleet, run one untimed warm-up request per
configuration, then ``--rounds`` rounds of ``--requests`` requests. Within a
round the two configurations alternate request by request (upstream first on
even requests, +nova-ext first on odd ones) on the same request spec, so
drift and noise hit both alike. Services get a fresh heartbeat
(``last_seen_up``) every 20 s, between requests, as computes report every
10 s, so ComputeFilter passes every host however long the run takes. Any
WARNING or ERROR logged while scheduling (a host seen as down, a weigher
that failed and stood aside) aborts the run: the numbers would not measure
what they claim to.

Logging is at WARNING, so Nova's debug logging is not measured. A real
scheduler logs at INFO, which both configurations pay alike: Nova's filters
and weighers log nothing at INFO per host on this path, and nova-ext only for
a host in no failure domain (every host here has one). Arguments of
``LOG.debug`` calls that Nova builds eagerly (the per-weigher dicts of raw
and normalized weights and scores in ``get_weighed_objects``, the list of
remaining hosts after each filter) are still built, as in production, and
are part of the cost of every filter and weigher.

Before each timed request the garbage collector runs, untimed: a full
collection of the fleet's heap costs ~600 ms at 10,000 hosts, a quarter
of a request, and would otherwise land on whichever configuration happens
to trip it (each request still pays the young collections its own
allocations cause).

Reading the results
-------------------
``ms/req`` is the median over rounds of the mean wall time of one request
(filtering plus weighing) in that round. ``ratio`` is the median over rounds
of the per-round ratio +nova-ext / upstream (paired, so it may differ a
little from the quotient of the two medians); ``overhead %`` is
``(ratio - 1) * 100``. ``cpu ratio`` is the same ratio of the CPU time
this process spent (``time.process_time``): time other processes take
from it is not in it, so on a shared machine it varies less than the
wall-clock ratio. ``DB q/req`` is how many database queries a
+nova-ext request would have made (see above). The lines under the table give
the ratio of each round, how many hosts each configuration passed to the
weighers and the queries by kind, then the p50 and p99 of single requests
over every round. "Request by request" is the ratio of each request's
+nova-ext time to its upstream time (the same request spec, back to back),
its median over every request of every round, and a 95 % confidence
interval of that median from the sign test's order statistics: whatever
the shape of the timings, the interval misses the true median in 5 % of
runs at most. With rounds of a few requests on a machine whose speed
moves, it is the figure to compare with a target. Results are for this
machine and Python only: compare ratios, not absolute milliseconds, across
machines.

"Where the overhead goes", measured after the timed rounds and apart from
them, splits +nova-ext's extra time in two: nova-ext's own code (the CPU
time of its filters' ``filter_all`` and its weighers' ``weigh_objects``
over the hosts Nova's default filters keep), and what Nova's handlers
charge for one more filter and for NovaExtWeighers' slot whatever they do
(a pass-through filter; a weigher handing its weights over as
NovaExtWeighers does). A weigher that returns weights pays the weight
handler's debug-log dicts, formatted string and multiplier call per host;
NovaExtWeighers adds its scores to the hosts itself and returns none, so
its slot costs next to nothing and the adding is in its own code.

``--max-placement-results N`` hands the filters the first N hosts only, as
placement returns at most ``[scheduler] max_placement_results`` (Nova's
default 1,000) allocation candidates: what a cloud larger than N pays per
request with Nova's default. Without it every host is a candidate (the cap
raised to the host count). ``tools/scheduler_curve.py`` runs both and plots
them.

Run ``python tools/benchmark_scheduler.py --help`` for the options.
"""

import argparse
import collections
import contextlib
import cProfile
import fractions
import gc
import logging
import math
import os
import platform
import pstats
import random
import statistics
import sys
import tempfile
import threading
import time
import types
import uuid

import nova.conf
from nova.db.api import api as api_db
from nova.db.api import models as api_models
from nova import objects
from nova.scheduler.client import report
from nova.scheduler import filters as scheduler_filters
from nova.scheduler import host_manager
from nova.scheduler import weights as scheduler_weights

from nova_ext.scheduler import cloud
from nova_ext.scheduler import scheduling_request
from nova_ext.simulator import fleet

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_json  # noqa: E402  (a sibling script, not a package)

CONF = nova.conf.CONF

NOVA_DEFAULT_FILTERS = [
    'ComputeFilter', 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
    'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter',
]
NOVA_EXT_FILTERS = ['FailureDomainAntiAffinityFilter']

UPSTREAM_FILTER_PATHS = ['nova.scheduler.filters.all_filters']
NOVA_EXT_FILTER_PATHS = ['nova_ext.scheduler.filters.all_filters']
UPSTREAM_WEIGHER_PATHS = ['nova.scheduler.weights.all_weighers']
NOVA_EXT_WEIGHER_PATHS = ['nova_ext.scheduler.weights.all_weighers']

RACK_KEY = 'nova_ext:failure_domain:rack'
RACK_SIZE = 20
NUM_IMAGES = 10
MIB_PER_GIB = 1024

# Per-size default for --requests: about the same time per size.
DEFAULT_REQUESTS = {100: 30, 1000: 30, 10000: 5}

CONFIG_NAMES = ('upstream', 'nova-ext')


class InMemoryDatabase(object):
    """Stand-in for the databases, answering from the benchmark's fleet.

    Infrastructure, not code under test: it replaces exactly the database
    reads that the measured code makes, and answers them as the databases
    would for this fleet, in memory:

    * ``objects.AggregateList.get_by_metadata_key`` (API database), which
      ``failure_domains._domains_of_unlisted_hosts`` calls;
    * ``objects.CellMappingList.get_all`` (API database), which
      ``nova.context.load_cells`` calls once for
      ``scatter_gather_skip_cell0``: one cell besides cell0, never connected
      to;
    * ``cloud._hosts_running_image_in_cell``, the body of which is
      a single SELECT DISTINCT on the cell database's ``instances`` table.
      Nova's cell fan-out around it (``scatter_gather_skip_cell0``: context
      copy, cell targeting, a worker thread per cell) and nova-ext's cache
      stay real and are measured.

    It counts the queries so the report can say how many a request makes.
    The real queries' cost (a database round trip; the aggregate query reads
    every aggregate carrying the key, the image query scans ``instances``)
    is not in the numbers.
    """

    def __init__(self):
        self.queries = collections.Counter()
        # wall ms of each ask of the cells made by the image cache's
        # background thread, off the request path
        self.background_asks = []
        self._aggregates_by_host = {}
        self._hosts_by_image = {}
        self._cells = None

    def load(self, host_states, aggregates):
        self._aggregates_by_host = collections.defaultdict(list)
        for aggregate in aggregates:
            for host in aggregate.hosts:
                self._aggregates_by_host[host].append(aggregate)
        self._hosts_by_image = collections.defaultdict(set)
        for host_state in host_states:
            for instance in host_state.instances.values():
                self._hosts_by_image[instance.image_ref].add(host_state.host)

    def aggregates_by_metadata_key(self, context, key, hosts=None):
        self.queries['aggregates by metadata key'] += 1
        if hosts is None:
            found = {id(agg): agg
                     for aggs in self._aggregates_by_host.values()
                     for agg in aggs}
        else:
            found = {id(agg): agg for host in hosts
                     for agg in self._aggregates_by_host.get(host, ())}
        return objects.AggregateList(
            objects=[agg for agg in found.values() if key in agg.metadata])

    def cell_mappings(self, context):
        self.queries['cell mappings'] += 1
        if self._cells is None:
            self._cells = objects.CellMappingList(objects=[
                objects.CellMapping(
                    uuid=objects.CellMapping.CELL0_UUID, name='cell0',
                    transport_url='none:///',
                    database_connection='sqlite://'),
                objects.CellMapping(
                    uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, 'cell1')),
                    name='cell1', transport_url='none:///',
                    database_connection='sqlite://', disabled=False),
            ])
        return self._cells

    def hosts_running_image_in_cell(self, context, image_id):
        self.queries['hosts running image'] += 1
        return set(self._hosts_by_image.get(image_id, ()))

    def _timing_background_asks(self, ask_cells):
        def ask(image_id):
            start = time.perf_counter()
            try:
                return ask_cells(image_id)
            finally:
                if threading.current_thread() is not threading.main_thread():
                    self.background_asks.append(
                        (time.perf_counter() - start) * 1000.0)
        return ask

    def placement_get(self, url, version=None, **kwargs):
        """Placement's answer for the failure-domain trait lookup
        (``cloud._domains_from_traits``): this fleet declares its
        racks in aggregates only, so no provider has a domain trait.
        """
        self.queries['placement round trips'] += 1
        if url.startswith('/traits'):
            return _JsonResponse({'traits': []})
        if url.startswith('/resource_providers'):
            return _JsonResponse({'resource_providers': []})
        raise AssertionError('unexpected placement call %s' % url)

    def install(self, real_aggregate_query=False):
        database = self
        real_query = objects.AggregateList.get_by_metadata_key

        def get_by_metadata_key(cls, context, key, hosts=None):
            if real_aggregate_query:
                database.queries['aggregates by metadata key'] += 1
                return real_query(context, key, hosts=hosts)
            return database.aggregates_by_metadata_key(
                context, key, hosts=hosts)

        def get_all(cls, context):
            return database.cell_mappings(context)

        objects.AggregateList.get_by_metadata_key = classmethod(
            get_by_metadata_key)
        objects.CellMappingList.get_all = classmethod(get_all)
        cloud._hosts_running_image_in_cell = (
            self.hosts_running_image_in_cell)
        cloud._ask_cells_for_image = self._timing_background_asks(
            cloud._ask_cells_for_image)
        placement = _Placement(self.placement_get)
        report.report_client_singleton = lambda: placement


class _JsonResponse(object):
    status_code = 200

    def __init__(self, body):
        self._body = body

    def json(self):
        return self._body

    def raise_for_status(self):
        pass


class _Placement(object):
    """The scheduler report client, as nova-ext's trait lookup uses it."""

    def __init__(self, get):
        self.get = get


class SQLiteApiDatabase(object):
    """``--sqlite-api-db``: aggregates in a real (SQLite) API database.

    Nova's own ``AggregateList.get_by_metadata_key`` then runs against it,
    so the table includes what that query costs in Nova's ORM code (a
    database server's round trip would come on top).
    """

    def __init__(self, directory):
        CONF.set_override(
            'connection', 'sqlite:///%s/nova_api.sqlite' % directory,
            group='api_database')
        api_db.configure(CONF)
        self.engine = api_db.get_engine()
        api_models.BASE.metadata.create_all(self.engine)

    def load(self, aggregates):
        with self.engine.begin() as conn:
            for model in (api_models.AggregateMetadata,
                          api_models.AggregateHost, api_models.Aggregate):
                conn.execute(model.__table__.delete())
            conn.execute(api_models.Aggregate.__table__.insert(), [
                {'id': agg.id, 'uuid': agg.uuid, 'name': agg.name}
                for agg in aggregates])
            conn.execute(api_models.AggregateHost.__table__.insert(), [
                {'aggregate_id': agg.id, 'host': host}
                for agg in aggregates for host in agg.hosts])
            conn.execute(api_models.AggregateMetadata.__table__.insert(), [
                {'aggregate_id': agg.id, 'key': key, 'value': value}
                for agg in aggregates
                for key, value in agg.metadata.items()])


class ProblemCounter(logging.Handler):
    """Counts WARNING and ERROR records.

    A host seen as down, or a weigher that failed (nova-ext's weighers log
    and stand aside), would make the numbers meaningless.
    """

    def __init__(self):
        super(ProblemCounter, self).__init__(level=logging.WARNING)
        self.count = 0

    def emit(self, record):
        self.count += 1


DATABASE = InMemoryDatabase()
PROBLEMS = ProblemCounter()


def _uuid(rng):
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def setup_nova(real_aggregate_query=False):
    """Register Nova's objects and config, as nova-scheduler does."""
    objects.register_all()
    # No config files: the benchmark must not depend on /etc/nova.
    CONF([], project='nova', default_config_files=[],
         default_config_dirs=[])
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr,
        format='%(levelname)s %(name)s: %(message)s')
    logging.getLogger().addHandler(PROBLEMS)
    DATABASE.install(real_aggregate_query)


def load_configs():
    """Load both configurations the way nova's HostManager does."""
    filter_handler = scheduler_filters.HostFilterHandler()
    filter_classes = filter_handler.get_matching_classes(
        UPSTREAM_FILTER_PATHS + NOVA_EXT_FILTER_PATHS)
    filter_cls_map = {cls.__name__: cls for cls in filter_classes}
    filter_objs = {name: filter_cls_map[name]()
                   for name in NOVA_DEFAULT_FILTERS + NOVA_EXT_FILTERS}

    weight_handler = scheduler_weights.HostWeightHandler()
    upstream_weighers = [
        cls() for cls in
        weight_handler.get_matching_classes(UPSTREAM_WEIGHER_PATHS)]
    all_weighers = [
        cls() for cls in weight_handler.get_matching_classes(
            UPSTREAM_WEIGHER_PATHS + NOVA_EXT_WEIGHER_PATHS)]
    return {
        'upstream': {
            'filters': [filter_objs[n] for n in NOVA_DEFAULT_FILTERS],
            'weighers': upstream_weighers,
        },
        'nova-ext': {
            'filters': [filter_objs[n]
                        for n in NOVA_DEFAULT_FILTERS + NOVA_EXT_FILTERS],
            'weighers': all_weighers,
        },
    }, filter_handler, weight_handler


def build_fleet(num_hosts, rng, images):
    """Return (host_states, aggregates) for ``num_hosts`` computes, built by
    the simulator's fleet builder (:mod:`nova_ext.simulator.fleet`).
    """
    cell_uuid = _uuid(rng)
    names = ['compute%05d' % i for i in range(num_hosts)]

    aggregates = []
    for rack, start in enumerate(range(0, num_hosts, RACK_SIZE)):
        aggregates.append(fleet.aggregate(
            rack + 1, 'rack-r%03d' % rack, names[start:start + RACK_SIZE],
            {RACK_KEY: 'r%03d' % rack}, aggregate_uuid=_uuid(rng)))

    nodes = []
    for name in names:
        num_instances = rng.randint(16, 24)
        vcpus_used = num_instances * rng.choice((1, 2, 4, 8))
        memory_mb_used = min(num_instances * rng.choice((2, 4, 8, 16)),
                             240) * MIB_PER_GIB
        local_gb_used = min(num_instances * rng.choice((20, 40, 80)), 1900)
        node = fleet.Node(
            host=name, vcpus=64, memory_mb=256 * MIB_PER_GIB, local_gb=2000,
            cpu_allocation_ratio=4.0, uuid=_uuid(rng),
            vcpus_used=vcpus_used, memory_mb_used=memory_mb_used,
            local_gb_used=local_gb_used, running_vms=num_instances,
            current_workload=rng.randint(0, 3), io_workload=rng.randint(0, 3))
        for _ in range(num_instances):
            instance_uuid = _uuid(rng)
            node.instances[instance_uuid] = objects.Instance(
                uuid=instance_uuid, host=name, node=name,
                image_ref=rng.choice(images))
        nodes.append(node)
    built = fleet.Fleet(nodes, aggregates, host_manager.HostState, cell_uuid)
    return built.states, aggregates


class Group(object):
    """An anti-affinity server group with members on three racks."""

    def __init__(self, host_states, rng, members_on_hosts):
        racks = (len(host_states) + RACK_SIZE - 1) // RACK_SIZE
        picked = sorted({0, racks // 2, racks - 1})
        if len(picked) < 3:
            picked = [0, 0, 0]
        # a host in each of three racks (all in the first rack when there
        # are fewer than three)
        self.hosts = [host_states[min(rack * RACK_SIZE + 7 + n,
                                      len(host_states) - 1)]
                      for n, rack in enumerate(picked)]
        self.uuid = _uuid(rng)
        self.members = [_uuid(rng) for _ in range(4)]
        if members_on_hosts:
            placement = [0, 0, 1, 2]  # two members on the first host
            for member, index in zip(self.members, placement):
                self.hosts[index].instances[member] = objects.Instance(
                    uuid=member, host=self.hosts[index].host,
                    node=self.hosts[index].nodename,
                    image_ref=next(iter(
                        self.hosts[index].instances.values())).image_ref)

    def counted(self):
        """{host: members there}, as placement tells nova-ext."""
        return collections.Counter(self.hosts[index].host
                                   for index in (0, 0, 1, 2))

    def instance_group(self, instance_uuid):
        # As loaded by the conductor: the API has already added the
        # instance being scheduled to the members.
        return objects.InstanceGroup(
            id=1, uuid=self.uuid, name='bench-group',
            project_id='bench-project', user_id='bench-user',
            policy='anti-affinity', policies=['anti-affinity'], rules={},
            members=self.members + [instance_uuid],
            hosts=[hs.host for hs in self.hosts])


def make_request_spec(rng, images, group):
    """A request for one server: in ``group`` with the hint
    ``nova_ext:spread_level=rack``, or, where ``group`` is None, in no group
    and with no hint (the requests Nova caps at ``max_placement_results``).
    """
    instance_uuid = _uuid(rng)
    flavor = objects.Flavor(
        id=1, flavorid='bench.2c4g', name='bench.2c4g', vcpus=2,
        memory_mb=4 * MIB_PER_GIB, root_gb=20, ephemeral_gb=0, swap=0,
        rxtx_factor=1.0, vcpu_weight=0, disabled=False, is_public=True,
        extra_specs={}, description=None)
    return objects.RequestSpec(
        instance_uuid=instance_uuid, project_id='bench-project',
        user_id='bench-user', availability_zone=None, num_instances=1,
        flavor=flavor,
        image=objects.ImageMeta.from_dict(
            {'id': rng.choice(images), 'properties': {}}),
        numa_topology=None,
        pci_requests=objects.InstancePCIRequests(requests=[]),
        instance_group=(None if group is None
                        else group.instance_group(instance_uuid)),
        scheduler_hints=({} if group is None else
                         {'group': [group.uuid],
                          'nova_ext:spread_level': ['rack']}),
        ignore_hosts=None, force_hosts=None, force_nodes=None,
        requested_destination=None, retry=None, limits=None,
        is_bfv=False, requested_resources=[])


def schedule(config, filter_handler, weight_handler, host_states, spec,
             profiler=None):
    """Run one request through Nova's filters, then its weighers.

    Returns (seconds taken, CPU seconds taken by this process, number of
    hosts weighed, best host's name).
    """
    if profiler is not None:
        profiler.enable()
    start = time.perf_counter()
    cpu_start = time.process_time()
    # +nova-ext: inside the request's SchedulingRequest, as nova-ext's
    # select_destinations wrapper runs Nova's pass (its cost is timed)
    with (scheduling_request.opened(spec, [spec.instance_uuid],
                                    config['view'], cloud.LiveCloud(),
                                    config['members'])
          if 'view' in config else contextlib.nullcontext()):
        passed = filter_handler.get_filtered_objects(
            config['filters'], host_states, spec, 0)
        weighed = weight_handler.get_weighed_objects(
            config['weighers'], passed, spec)
    cpu = time.process_time() - cpu_start
    elapsed = time.perf_counter() - start
    if profiler is not None:
        profiler.disable()
    return (elapsed, cpu, len(passed),
            weighed[0].obj.host if weighed else None)


# Where the time of a request goes, by the file a function is in (first
# match wins); "debug comprehensions" are the dicts Nova's weight handler
# builds for LOG.debug whatever the log level.
PROFILE_CATEGORIES = (
    ('Nova weight handler: debug comprehensions',
     lambda path, name: path.endswith('nova/weights.py')
     and name in ('<dictcomp>', '<genexpr>')),
    ('Nova weight handler', lambda path, name: path.endswith(
        'nova/weights.py')),
    ('Nova filter handler', lambda path, name: path.endswith(
        ('nova/filters.py', 'nova/scheduler/filters/__init__.py'))),
    ('Nova filters', lambda path, name: '/nova/scheduler/filters/' in path),
    ('Nova weighers', lambda path, name: '/nova/scheduler/weights/' in path
     or path.endswith('nova/scheduler/utils.py')),
    ('nova-ext', lambda path, name: '/nova_ext/' in path),
    ('oslo.versionedobjects (object fields)',
     lambda path, name: '/oslo_versionedobjects/' in path),
    ('oslo.config (options)', lambda path, name: '/oslo_config/' in path),
)


def profile_summary(profiler):
    """[(category, share of the profiled time)], largest first."""
    stats = pstats.Stats(profiler)
    totals = collections.Counter()
    for (path, _line, name), row in stats.stats.items():
        own_time = row[2]
        for category, matches in PROFILE_CATEGORIES:
            if matches(path, name):
                totals[category] += own_time
                break
        else:
            totals['other (Python, Nova objects, logging)'] += own_time
    whole = sum(totals.values()) or 1.0
    return [(category, seconds / whole)
            for category, seconds in totals.most_common()]


def set_request_view(configs, aggregates, group):
    """What +nova-ext's requests read (schedule() opens a request with
    them): nova-scheduler's HostManager (its filters, its aggregates), and
    the members as placement counts them inside the group's lock.
    """
    configs['nova-ext']['view'] = types.SimpleNamespace(
        enabled_filters=configs['nova-ext']['filters'],
        aggs_by_id={aggregate.id: aggregate for aggregate in aggregates})
    configs['nova-ext']['members'] = None if group is None else (
        group.counted())


def run_size(num_hosts, args, configs, filter_handler, weight_handler,
             api_database=None):
    rng = random.Random(args.seed + num_hosts)
    images = [_uuid(rng) for _ in range(NUM_IMAGES)]
    build_start = time.perf_counter()
    host_states, aggregates = build_fleet(num_hosts, rng, images)
    group = None if args.no_group else Group(host_states, rng,
                                             args.members_on_hosts)
    set_request_view(configs, aggregates, group)
    DATABASE.load(host_states, aggregates)
    if api_database is not None:
        api_database.load(aggregates)
    build_s = time.perf_counter() - build_start
    heartbeat = fleet.Heartbeat(host_states)
    # What placement hands the scheduler: at most max_placement_results
    # candidates, in its own (provider) order.
    candidates = host_states[:args.max_placement_results or None]
    # as many requests as the candidates make affordable
    requests = args.requests or DEFAULT_REQUESTS.get(
        len(candidates), max(5, min(30, 30000 // len(candidates))))

    # Warm-up, untimed; also what each configuration selects.
    heartbeat(force=True)
    passed = {}
    chosen = {}
    spec = make_request_spec(rng, images, group)
    for name in CONFIG_NAMES:
        _, _, passed[name], chosen[name] = schedule(
            configs[name], filter_handler, weight_handler, candidates,
            spec)

    per_round = {name: [] for name in CONFIG_NAMES}
    samples = {name: [] for name in CONFIG_NAMES}
    profilers = {name: cProfile.Profile() if args.profile else None
                 for name in CONFIG_NAMES}
    ratios = []
    cpu_ratios = []
    queries = {name: collections.Counter() for name in CONFIG_NAMES}
    cloud.hosts_by_image.wait_for_refreshes()
    asks_before = len(DATABASE.background_asks)
    for _ in range(args.rounds):
        gc.collect()
        totals = dict.fromkeys(CONFIG_NAMES, 0.0)
        cpu_totals = dict.fromkeys(CONFIG_NAMES, 0.0)
        for i in range(requests):
            heartbeat()
            spec = make_request_spec(rng, images, group)
            order = CONFIG_NAMES if i % 2 == 0 else CONFIG_NAMES[::-1]
            for name in order:
                # untimed: a full collection costs ~600 ms at 10,000 hosts
                # and would land on whichever configuration trips it
                gc.collect()
                before = collections.Counter(DATABASE.queries)
                elapsed, cpu, _, _ = schedule(
                    configs[name], filter_handler, weight_handler,
                    candidates, spec, profilers[name])
                # untimed: the image cache's background ask started by
                # this request, counted with it, reported apart
                cloud.hosts_by_image.wait_for_refreshes()
                totals[name] += elapsed
                cpu_totals[name] += cpu
                samples[name].append(elapsed * 1000.0)
                queries[name].update(DATABASE.queries - before)
        for name in CONFIG_NAMES:
            per_round[name].append(totals[name] / requests * 1000.0)
        ratios.append(totals['nova-ext'] / totals['upstream'])
        cpu_ratios.append(cpu_totals['nova-ext'] / cpu_totals['upstream'])

    background_asks = DATABASE.background_asks[asks_before:]
    # each request's +nova-ext time over its upstream time: the two ran
    # back to back on the same request spec
    pair_ratios = [ext / up for up, ext in zip(samples['upstream'],
                                               samples['nova-ext'])]
    timed_requests = float(requests * args.rounds)
    # untimed for the ratios: the parts of the overhead, apart
    overhead_parts = where_overhead_goes(
        configs, filter_handler, weight_handler, candidates,
        [make_request_spec(rng, images, group) for _ in range(requests)],
        heartbeat)
    result = {
        'hosts': num_hosts,
        'candidates': len(candidates),
        'p50_ms': {name: percentile(samples[name], 50)
                   for name in CONFIG_NAMES},
        'p99_ms': {name: percentile(samples[name], 99)
                   for name in CONFIG_NAMES},
        'requests_per_round': requests,
        'rounds': args.rounds,
        'build_seconds': round(build_s, 2),
        'group_hosts': [] if group is None else [hs.host
                                                 for hs in group.hosts],
        'hosts_weighed': passed,
        'chosen_host': chosen,
        'ms_per_request': {name: statistics.median(per_round[name])
                           for name in CONFIG_NAMES},
        'ms_per_request_rounds': per_round,
        'overhead_parts_ms': overhead_parts,
        'ratio': statistics.median(ratios),
        'ratio_rounds': ratios,
        'request_ratios': pair_ratios,
        'request_ratio_interval': median_interval(pair_ratios),
        # CPU time of this process: what other processes on the machine
        # take from it is not counted (wall-clock ratios are, and vary
        # more on a shared machine)
        'cpu_ratio': statistics.median(cpu_ratios),
        'cpu_ratio_rounds': cpu_ratios,
        'image_cache_background_asks': {
            'per_request': len(background_asks) / timed_requests,
            'median_ms': (statistics.median(background_asks)
                          if background_asks else 0.0)},
        'stub_db_queries_per_request': {
            name: {query: count / timed_requests
                   for query, count in sorted(queries[name].items())}
            for name in CONFIG_NAMES},
    }
    result['overhead_percent'] = (result['ratio'] - 1.0) * 100.0
    if args.profile:
        result['profile'] = {name: profile_summary(profilers[name])
                             for name in CONFIG_NAMES}
    if PROBLEMS.count:
        raise SystemExit('%d warning(s) or error(s) were logged while '
                         'scheduling (see above), so these numbers would '
                         'not measure what they claim to' % PROBLEMS.count)
    return result


class PassThroughFilter(scheduler_filters.BaseHostFilter):
    """Keeps every host: what Nova's filter handler charges for a slot."""

    def filter_all(self, filter_obj_list, spec_obj):
        return list(filter_obj_list)


class SlotProbeWeigher(scheduler_weights.BaseHostWeigher):
    """Weighs nothing: what Nova's weight handler charges for
    NovaExtWeighers' slot. It hands its weights over as NovaExtWeighers
    does: none when the handler keeps scores added in place (adding them is
    nova-ext's own code), else weights worked out before the handler is
    timed, with as many digits as real weighers' (the handler formats each
    into a debug string, and a 17-digit float formats in twice the time 0.5
    does).
    """

    minval = 0.0
    maxval = 1.0

    def __init__(self, count, adds_in_place):
        super().__init__()
        # fractional parts of multiples of the golden ratio: spread over
        # [0, 1), none of them short
        self.weights = [] if adds_in_place else [
            (index * 0.6180339887498949) % 1.0
            for index in range(1, count + 1)]

    def weigh_objects(self, weighed_obj_list, spec_obj):
        return self.weights[:len(weighed_obj_list)]

    def weight_multiplier(self, host_state):
        return 1.0

    def _weigh_object(self, host_state, spec_obj):
        return self.weights[0]


def _cpu_ms(function):
    gc.collect()
    start = time.thread_time()
    function()
    return (time.thread_time() - start) * 1000.0


def where_overhead_goes(configs, filter_handler, weight_handler, candidates,
                        specs, heartbeat):
    """{part: median CPU ms of this thread over ``specs``} for the parts of
    +nova-ext's overhead: nova-ext's own code (its filters' ``filter_all``
    and its weighers' ``weigh_objects``, called as the handlers call them),
    and the price Nova's handlers charge for one more filter and one more
    weigher whatever they do (a pass-through filter, a weigher whose
    weights are worked out beforehand).
    """
    upstream = configs['upstream']
    # each configuration has its own weigher instances: told apart by class
    upstream_classes = {type(plugin) for plugin in
                        upstream['filters'] + upstream['weighers']}
    own_filters = [f for f in configs['nova-ext']['filters']
                   if type(f) not in upstream_classes]
    own_weighers = [w for w in configs['nova-ext']['weighers']
                    if type(w) not in upstream_classes]
    adds_in_place = all(getattr(w, 'adds_in_place', False)
                        for w in own_weighers)
    samples = collections.defaultdict(list)
    for spec in specs:
        # the services stay up, as between timed requests
        heartbeat()
        passed = filter_handler.get_filtered_objects(
            upstream['filters'], candidates, spec, 0)

        kept = passed

        def own_filters_pass():
            nonlocal kept
            for own_filter in own_filters:
                kept = list(own_filter.filter_all(kept, spec))

        ours = configs['nova-ext']
        with scheduling_request.opened(spec, [spec.instance_uuid],
                                       ours['view'], cloud.LiveCloud(),
                                       ours['members']):
            filters_ms = _cpu_ms(own_filters_pass)
            # Nova's weight handler wraps the hosts once whatever the
            # weighers: not nova-ext's cost, so built untimed
            weighed = [weight_handler.object_class(host_state, 0.0)
                       for host_state in kept]
            weighers_ms = _cpu_ms(lambda: [
                weigher.weigh_objects(weighed, spec)
                for weigher in own_weighers])
        cloud.hosts_by_image.wait_for_refreshes()
        samples['own code'].append(filters_ms + weighers_ms)
        samples['filter slot'].append(
            _cpu_ms(lambda: filter_handler.get_filtered_objects(
                [PassThroughFilter()], passed, spec, 0))
            - _cpu_ms(lambda: filter_handler.get_filtered_objects(
                [], passed, spec, 0)))
        probe = SlotProbeWeigher(len(passed), adds_in_place)
        samples['weigher slot'].append(
            _cpu_ms(lambda: weight_handler.get_weighed_objects(
                [probe], passed, spec))
            - _cpu_ms(lambda: weight_handler.get_weighed_objects(
                [], passed, spec)))
    return {part: statistics.median(values)
            for part, values in samples.items()}


def percentile(values, percent):
    """The ``percent`` th percentile of ``values`` (linear interpolation
    between the closest ranks, as numpy's default).
    """
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * percent / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median_interval(values, confidence=0.95):
    """(median, low, high) of ``values``: [low, high] holds the median of
    the distribution they are drawn from with probability ``confidence`` at
    least (order statistics of the sign test: no assumption on the
    distribution's shape). low and high are None with too few values for
    that confidence (fewer than 6 at 95 %).
    """
    ordered = sorted(values)
    n = len(ordered)
    # the largest k with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2:
    # the median lies below the k-th smallest value with that probability
    # at most, and above the k-th largest likewise
    # in exact fractions: 2 ** n overflows a float from 1,024 requests on
    tail = (1 - fractions.Fraction(confidence)) / 2
    below, k = fractions.Fraction(0), 0
    while k < n:
        below += fractions.Fraction(math.comb(n, k), 2 ** n)
        if below > tail:
            break
        k += 1
    if k == 0:
        return statistics.median(ordered), None, None
    return statistics.median(ordered), ordered[k - 1], ordered[n - k]


def _weigher_name(weigher):
    parts = getattr(weigher, 'parts', None)
    if parts is None:
        return type(weigher).__name__
    return '%s (%s)' % (type(weigher).__name__,
                        ', '.join(type(part).__name__ for part in parts))


def describe(configs):
    lines = []
    for name in CONFIG_NAMES:
        config = configs[name]
        lines.append('%s filters: %s' % (name, ', '.join(
            type(f).__name__ for f in config['filters'])))
        lines.append('%s weighers: %s' % (name, ', '.join(
            _weigher_name(w) for w in config['weighers'])))
    return lines


def format_table(results, sqlite_api_db=False):
    header = ('%7s | %16s | %16s | %6s | %10s | %9s | %13s'
              % ('hosts', 'upstream ms/req', '+nova-ext ms/req', 'ratio',
                 'overhead %', 'cpu ratio', 'DB q/req'))
    lines = [header, '-' * len(header)]
    for r in results:
        lines.append(
            '%7d | %16.2f | %16.2f | %6.3f | %+10.1f | %9.3f | %13.2f' % (
                r['hosts'], r['ms_per_request']['upstream'],
                r['ms_per_request']['nova-ext'], r['ratio'],
                r['overhead_percent'], r['cpu_ratio'],
                sum(r['stub_db_queries_per_request']['nova-ext'].values())))
    lines.append('')
    for r in results:
        lines.append(
            '%d hosts, %d candidates: p50/p99 ms per request: upstream '
            '%.2f/%.2f, +nova-ext %.2f/%.2f' % (
                r['hosts'], r['candidates'], r['p50_ms']['upstream'],
                r['p99_ms']['upstream'], r['p50_ms']['nova-ext'],
                r['p99_ms']['nova-ext']))
    for r in results:
        for name in CONFIG_NAMES if 'profile' in r else ():
            lines.append('%d hosts, %s, where the time goes (cProfile, own '
                         'time): %s' % (r['hosts'], name, ', '.join(
                             '%s %.0f %%' % (category, share * 100)
                             for category, share in r['profile'][name])))
    lines.append('')
    for r in results:
        parts = r['overhead_parts_ms']
        upstream_ms = r['ms_per_request']['upstream']
        slots = parts['filter slot'] + parts['weigher slot']
        lines.append(
            '%d hosts, where the overhead goes (CPU ms per request, median; '
            '%% of upstream ms/req): nova-ext\'s own code %.1f (%.1f %%); '
            'Nova\'s handlers, for one more filter %.1f and for '
            'NovaExtWeighers\' slot %.1f whatever they do (%.1f %%)' % (
                r['hosts'], parts['own code'],
                parts['own code'] / upstream_ms * 100,
                parts['filter slot'], parts['weigher slot'],
                slots / upstream_ms * 100))
    lines.append('')
    for r in results:
        median, low, high = r['request_ratio_interval']
        lines.append(
            '%d hosts, request by request (+nova-ext time / upstream time of '
            'the same request, back to back), over %d requests: median %.3f '
            '(%+.1f %%), 95 %% confidence interval of the median %s' % (
                r['hosts'], len(r['request_ratios']), median,
                (median - 1.0) * 100.0,
                'n/a (fewer than 6 requests)' if low is None else
                '%.3f-%.3f (%+.1f to %+.1f %%)' % (
                    low, high, (low - 1.0) * 100.0, (high - 1.0) * 100.0)))
    lines.append('')
    for r in results:
        queries = r['stub_db_queries_per_request']['nova-ext']
        lines.append(
            '%d hosts: %d requests x %d rounds, ratio per round %s (CPU '
            'time: %s); hosts passing filters: upstream %d, +nova-ext %d; '
            'database queries per +nova-ext request: %s' % (
                r['hosts'], r['requests_per_round'], r['rounds'],
                '/'.join('%.3f' % x for x in r['ratio_rounds']),
                '/'.join('%.3f' % x for x in r['cpu_ratio_rounds']),
                r['hosts_weighed']['upstream'],
                r['hosts_weighed']['nova-ext'],
                ', '.join('%s %.2f' % item for item in queries.items())
                or 'none'))
    for r in results:
        asks = r['image_cache_background_asks']
        lines.append(
            '%d hosts: the image cache asked the cells again in its '
            'background thread %.2f times per +nova-ext request, %.2f ms '
            'each (median, wall): off the request path, so not in the '
            'ratios; the requests waited for %.2f asks each' % (
                r['hosts'], asks['per_request'], asks['median_ms'],
                r['stub_db_queries_per_request']['nova-ext'].get(
                    'hosts running image', 0.0) - asks['per_request']))
    lines.append('')
    lines.append(
        'Aggregate queries ran against %s; the other queries were answered '
        'in memory. No database round trip is in these numbers.' % (
            'a SQLite API database, with Nova\'s ORM code'
            if sqlite_api_db else 'an in-memory stub'))
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Measure the per-request cost of Nova's scheduler "
                    "filter and weigher pipeline with upstream defaults "
                    "and with nova-ext's filter and weighers added. See "
                    "the module docstring for the method and how to read "
                    "the results.")
    parser.add_argument(
        '--hosts', type=int, nargs='+', default=[100, 1000, 10000],
        metavar='N', help='fleet sizes to measure (default: %(default)s)')
    parser.add_argument(
        '--rounds', type=int, default=3,
        help='rounds per size; the median round is reported '
             '(default: %(default)s)')
    parser.add_argument(
        '--requests', type=int, default=None, metavar='N',
        help='requests per round and configuration (default: 30 at 100 '
             'and 1,000 hosts, 5 at 10,000)')
    parser.add_argument(
        '--members-on-hosts', action='store_true',
        help="put the server group's members in their hosts' instance "
             "lists, as in production: ServerGroupAntiAffinityFilter then "
             "removes those hosts before nova-ext sees them")
    parser.add_argument(
        '--no-group', action='store_true',
        help="requests in no server group and with no scheduler hint: "
             "the requests Nova caps at max_placement_results (it lifts "
             "the cap for a group, same_host or different_host hint)")
    parser.add_argument(
        '--sqlite-api-db', action='store_true',
        help="run Nova's AggregateList.get_by_metadata_key against a "
             "temporary SQLite API database holding the fleet's "
             "aggregates, instead of answering it in memory")
    parser.add_argument(
        '--max-placement-results', type=int, default=None, metavar='N',
        help="hand the filters at most N candidates, as placement does "
             "with [scheduler] max_placement_results (Nova's default: "
             "1000); default: every host")
    parser.add_argument(
        '--profile', action='store_true',
        help="also say where each configuration's time goes (cProfile "
             "over the timed requests, own time by category); the timings "
             "then include the profiler's overhead")
    parser.add_argument(
        '--seed', type=int, default=42,
        help='random seed of the fleet (default: %(default)s)')
    parser.add_argument(
        '--json', metavar='FILE',
        help="also write the results as JSON to FILE ('-' for stdout)")
    args = parser.parse_args(argv)
    check_sizes(parser, args)
    if args.no_group and args.members_on_hosts:
        parser.error('--members-on-hosts places the members of the group '
                     'that --no-group leaves out: give one of them')
    return args


def check_sizes(parser, args):
    """The sizes ``--rounds``, ``--requests``, ``--hosts`` and
    ``--max-placement-results`` can take; one usage error otherwise.
    """
    if args.rounds < 1 or (args.requests is not None and args.requests < 1):
        parser.error('--rounds and --requests must be at least 1')
    if any(n < 2 for n in args.hosts):
        parser.error('--hosts must be at least 2')
    if args.max_placement_results is not None and (
            args.max_placement_results < 2):
        parser.error('--max-placement-results must be at least 2')


def main(argv=None):
    args = parse_args(argv)
    setup_nova(real_aggregate_query=args.sqlite_api_db)
    configs, filter_handler, weight_handler = load_configs()
    with tempfile.TemporaryDirectory(prefix='nova-ext-bench-') as tmp:
        api_database = SQLiteApiDatabase(tmp) if args.sqlite_api_db else None
        return run(args, configs, filter_handler, weight_handler,
                   api_database)


def run(args, configs, filter_handler, weight_handler, api_database):

    print('nova-ext scheduler benchmark: python %s on %s, %s' % (
        platform.python_version(), platform.machine(),
        platform.platform(terse=True)))
    print('scenario: %s; aggregate queries answered by %s' % (
        'no server group, no scheduler hint' if args.no_group else
        'anti-affinity group, hint nova_ext:spread_level=rack, members %s '
        'their hosts\' instance lists' % (
            'in' if args.members_on_hosts else 'not in'),
        'a SQLite API database' if args.sqlite_api_db
        else 'an in-memory stub'))
    print('candidates handed to the filters: %s' % (
        'at most %d, the first in provider order (--max-placement-results)'
        % args.max_placement_results if args.max_placement_results
        else 'every host (max_placement_results at the host count)'))
    for line in describe(configs):
        print(line)
    print('')

    results = []
    for num_hosts in args.hosts:
        results.append(run_size(num_hosts, args, configs, filter_handler,
                                weight_handler, api_database))
        print('  done: %d hosts (fleet built in %.1f s)'
              % (num_hosts, results[-1]['build_seconds']),
              file=sys.stderr)

    for line in format_table(results, args.sqlite_api_db):
        print(line)

    if args.json:
        document = {
            'python': platform.python_version(),
            'platform': platform.platform(terse=True),
            'members_on_hosts': args.members_on_hosts,
            'no_group': args.no_group,
            'sqlite_api_db': args.sqlite_api_db,
            'seed': args.seed,
            'configs': {
                name: {'filters': [type(f).__name__
                                   for f in configs[name]['filters']],
                       'weighers': [type(w).__name__
                                    for w in configs[name]['weighers']]}
                for name in CONFIG_NAMES},
            'results': results,
        }
        write_json(args.json, document)
    return 0


def write_json(path, document):
    """``document`` and its ``measured`` block (tools/bench_json.py) to
    standard output (``-``) or to ``path``, written whole or not at all.
    """
    bench_json.write(path, document)


if __name__ == '__main__':
    sys.exit(main())
