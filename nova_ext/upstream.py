# SPDX-License-Identifier: Apache-2.0
"""Every private part of Nova (and of oslo.config) that nova-ext relies on.

nova-ext plugs into an unmodified Nova through its public plug points
(filters, weighers, extra-spec validators, SQLAlchemy engine plugins,
``compute_driver``) wherever one exists. Where none exists, it reaches into a
private name, listed here with the reason. :func:`problems` checks each
against the running Nova: it must exist, and callables must keep the
signature nova-ext was written against. ``tests/unit/test_upstream.py`` runs
it on every supported release (2026.1 / Nova 33, 2026.2 / Nova 34), and
``nova-ext-status upgrade check`` runs it on the operator's installation, so
a Nova upgrade that moves one of them fails in CI or in the upgrade check
with the name of what changed, not at the first request in production.

The rest of nova-ext reaches them only through this module: :func:`get` and
:func:`patch` accept registered paths alone, and the helpers below wrap the
calls whose shape is an internal too. ``tests/unit/test_upstream.py`` fails
on a module that names one directly.
"""

import collections
import importlib
import inspect
import itertools

SUPPORTED_NOVA_MAJORS = (33, 34)

Internal = collections.namedtuple('Internal', 'path signature why')

INTERNALS = (
    Internal('nova.quota.QUOTAS._QuotaEngine__driver_override', None,
             '[quota] driver accepts only in-tree classes: the per_flavor '
             'driver goes into the quota engine\'s private driver override'),
    Internal('nova.compute.utils.check_num_instances_quota',
             '(context, flavor, min_count, max_count, project_id=None, '
             'user_id=None, orig_num_req=None)',
             'the quota driver interface has no per-flavor check: the '
             'per_flavor driver wraps the create-time instance check'),
    Internal('nova.compute.api.API._check_quota_for_upsize',
             '(context, instance, current_flavor, new_flavor, is_bfv, '
             'is_revert)',
             'the resize-time quota check has no hook either; wrapped'),
    Internal('nova.quota._instances_cores_ram_count_legacy',
             '(context, project_id, user_id=None)',
             'Nova\'s instance count reads the project\'s rows in every '
             'cell and keeps only the totals: the per_flavor driver counts '
             'in its place (the same totals, from the same rows, in one '
             'statement per cell) and keeps the per-flavor breakdown, so '
             'its own check needs no second pass over those rows'),
    Internal('nova.scheduler.request_filter.ALL_REQUEST_FILTERS', None,
             'request pre-filters are a hard-coded list with no entry '
             'point; nova-ext appends its own to it in nova-scheduler'),
    Internal('nova.scheduler.manager.SchedulerManager.select_destinations',
             None,
             'no hook spans one scheduling request from the pre-filters to '
             'the claims: nova-ext opens its SchedulingRequest around it '
             '(nova_ext.scheduler.nova_patches; Nova\'s RPC decorator '
             'hides the signature)'),
    Internal('nova.scheduler.host_manager.HostManager.update_aggregates',
             '(self, aggregates)',
             'nova-ext reads the failure domains of every host from the '
             'HostManager\'s view of the aggregates (aggs_by_id, which '
             'this keeps current as aggregates change; checked by '
             'KEEPS_AGGREGATE_VIEW below), so that candidates and members '
             'are placed from one source'),
    Internal('nova.scheduler.manager.SchedulerManager._sentinel', None,
             'select_destinations\' default spec_obj, which marks a call '
             'without a RequestSpec: the spread wrapper keeps that default '
             'and passes such calls to Nova untouched'),
    Internal('nova.scheduler.manager.SchedulerManager._schedule',
             '(self, context, spec_obj, instance_uuids, '
             'alloc_reqs_by_rp_uuid, provider_summaries, '
             'allocation_request_version=None, return_alternates=False)',
             'a spread group\'s turn holds its lock from the members\' '
             'count to the claims, not around placement\'s query: this is '
             'Nova\'s filter, weigh and claim loop, wrapped '
             '(nova_ext.scheduler.nova_patches); the property tests run '
             'it on model clusters'),
    Internal('nova.scheduler.utils.claim_resources',
             '(ctx, client, spec_obj, instance_uuid, alloc_req, '
             'allocation_request_version=None)',
             'what _schedule calls for each claim: in a spread group\'s '
             'turn, the host is reserved for the server first, so that the '
             'turn\'s next decision counts it, and refused when the turn\'s '
             'later reservations made it illegal (nova_ext.scheduler.'
             'spread_requests.claim); Nova then tries its next host'),
    Internal('nova.scheduler.manager.SchedulerManager._get_sorted_hosts',
             '(self, spec_obj, host_states, index)',
             'the simulator and "nova-ext-manage explain" run Nova\'s real '
             'filter+weigher pass on their hosts without placement or RPC'),
    Internal('nova.scheduler.manager.SchedulerManager._consume_selected_host',
             '(selected_host, spec_obj, instance_uuid=None)',
             'the simulator consumes the chosen host as Nova does'),
    # Overridden, not patched, by host_manager_without_databases below.
    Internal('nova.scheduler.host_manager.HostManager.refresh_cells_caches',
             '(self)',
             'the simulator\'s HostManager reads the model, not databases'),
    Internal('nova.scheduler.host_manager.HostManager._init_aggregates',
             '(self)', 'as above: aggregates come from the model'),
    Internal('nova.scheduler.host_manager.HostManager._init_instance_info',
             '(self, computes_by_cell=None)',
             'as above: instances come from the model'),
    # Overridden by nova-ext's LibvirtDriver (nova_ext.virt.libvirt.driver):
    # nova-compute instantiates that subclass, so the override cannot move
    # here; the test keeps its name out of every other module.
    Internal('nova.virt.libvirt.driver.LibvirtDriver._get_guest_config',
             '(self, instance, network_info, image_meta, disk_info, '
             'rescue=None, block_device_info=None, context=None, mdevs=None, '
             'accel_info=None, share_info=None, old_guest=None)',
             'Nova has no guest-config hook: the libvirt subclass runs the '
             'guest mutators on the config this builds'),
    Internal('nova.virt.driver.load_compute_driver',
             '(virtapi, compute_driver=None)',
             'it imports only nova.virt.<compute_driver>: '
             '"nova-ext-manage driver install" puts a one-line module there'),
    Internal('nova.policy._ENFORCER', None,
             'Nova\'s enforcer registers only Nova\'s rules and enforcing '
             'an unregistered rule fails; nova-ext registers '
             'nova_ext:ignore_maintenance on it (nova.policy.get_enforcer '
             're-parses nova.conf, meant for the oslopolicy tools only)'),
    Internal('oslo_config.cfg.ConfigOpts._get_opt_info', None,
             'the sandbox and the simulator type-check nova.conf fragments '
             'with the registered option, and explain --set restores an '
             'earlier override: oslo.config has no public getter of either'),
    Internal('nova.conf.CONF._args', None,
             'oslo.config cannot tell publicly whether it parsed a command '
             'line, and parsing again drops every override: the simulator\'s '
             'commands parse Nova\'s defaults only when nothing did'),
)

# How some of Nova's public objects behave, which nova-ext's per-request
# memos rely on: checked by problems() like the internals above.
Assumption = collections.namedtuple('Assumption', 'path behaviour why')

HASHED_BY_IDENTITY = 'hashes and compares by identity'
KEEPS_AGGREGATE_VIEW = ('keeps every aggregate in aggs_by_id and each '
                        'host\'s aggregate ids in host_aggregates_map')
KEEPS_PLUGINS = ('keeps the filters and weighers nova.conf names, loaded and '
                 'in order, in enabled_filters and weighers')

ASSUMPTIONS = (
    Assumption('nova.scheduler.host_manager.HostState', HASHED_BY_IDENTITY,
               'a request\'s failure-domain judgement keeps each candidate '
               'host state\'s domains keyed by the object '
               '(nova_ext.scheduler.failure_domains.Judgement): host states '
               'equal by value would share domains, unhashable ones would '
               'fail every spread request'),
    Assumption('nova.objects.aggregate.Aggregate', HASHED_BY_IDENTITY,
               'the weighers gather the candidates\' aggregates in a set, '
               'one read per aggregate object (nova_ext.scheduler.weights)'),
    Assumption('nova.objects.request_spec.RequestSpec', HASHED_BY_IDENTITY,
               'the scheduler plugins find the request being scheduled by '
               'its RequestSpec (nova_ext.scheduler.scheduling_request)'),
    Assumption('nova.scheduler.host_manager.HostManager',
               KEEPS_AGGREGATE_VIEW,
               'the failure domains come from the HostManager\'s aggregates '
               '(aggregate_view); a worker forked after they were read '
               're-reads them (reload_aggregate_view)'),
    Assumption('nova.scheduler.host_manager.HostManager', KEEPS_PLUGINS,
               'a request reads which filters run after nova-ext\'s and '
               'which weighers after NovaExtWeighers (how far a broken soft '
               'constraint must outrank the others) from the HostManager\'s '
               'enabled_filters and weighers (SchedulingRequest); explain '
               'and the simulator run them one by one'),
)


def _keeps_aggregate_view(host_manager_class):
    """Whether Nova's own ``update_aggregates`` and
    ``_get_aggregates_info`` keep and read a host's aggregates in
    ``aggs_by_id`` and ``host_aggregates_map``.
    """
    from nova import objects  # here: upstream.py loads without Nova

    view = host_manager_class.__new__(host_manager_class)
    view.aggs_by_id = {}
    view.host_aggregates_map = collections.defaultdict(set)
    try:
        objects.register_all()
        probe = objects.Aggregate(id=7, uuid='00000000-0000-4000-8000-'
                                  '000000000007', name='probe',
                                  hosts=['probe-host'], metadata={})
        host_manager_class.update_aggregates(view, [probe])
        return (list(aggregate_view(view)) == [probe]
                and host_manager_class._get_aggregates_info(
                    view, 'probe-host') == [probe])
    except Exception:
        return False


# What the probe HostManager of _keeps_plugins is made with: Nova's own
# filters and weighers, whatever this node's nova.conf names, so that a
# filter it cannot load is not taken for a change in Nova
_PROBE_PLUGINS = {
    'available_filters': ['nova.scheduler.filters.all_filters'],
    'enabled_filters': ['ComputeFilter', 'ImagePropertiesFilter'],
    'weight_classes': ['nova.scheduler.weights.ram.RAMWeigher',
                       'nova.scheduler.weights.cpu.CPUWeigher'],
}


def _keeps_plugins(host_manager_class):
    """Whether a ``host_manager_class`` made with ``_PROBE_PLUGINS`` as its
    ``[filter_scheduler]`` holds those filters in ``enabled_filters`` and
    one instance of each weigher in ``weighers``, in that order.

    The options are overridden for the probe and put back as they were:
    only ``problems()`` calls this (the unit test, nova-ext-status), never
    a service answering requests.
    """
    # here: upstream.py loads without Nova
    from nova import conf as nova_conf

    conf = nova_conf.CONF
    group = 'filter_scheduler'
    earlier = {name: opt_info(conf, name, group).get('override')
               for name in _PROBE_PLUGINS}
    try:
        for name, value in _PROBE_PLUGINS.items():
            conf.set_override(name, value, group=group)
        manager = _database_free(host_manager_class, [])
        return ([type(host_filter).__name__
                 for host_filter in manager.enabled_filters]
                == _PROBE_PLUGINS['enabled_filters']
                and ['%s.%s' % (type(weigher).__module__,
                                type(weigher).__name__)
                     for weigher in manager.weighers]
                == _PROBE_PLUGINS['weight_classes'])
    except Exception:
        return False
    finally:
        for name, override in earlier.items():
            if override is None:
                conf.clear_override(name, group=group)
            else:
                conf.set_override(name, override, group=group)


_BEHAVIOUR_HOLDS = {
    HASHED_BY_IDENTITY: lambda cls: (cls.__hash__ is object.__hash__
                                     and cls.__eq__ is object.__eq__),
    KEEPS_AGGREGATE_VIEW: _keeps_aggregate_view,
    KEEPS_PLUGINS: _keeps_plugins,
}

_BY_PATH = {internal.path: internal for internal in INTERNALS}


def resolve(path):
    """The object named by the dotted ``path`` (module, then attributes)."""
    parts = path.split('.')
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module('.'.join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            target = getattr(target, name)
        return target
    raise ImportError(path)


def problems(internals=INTERNALS, assumptions=ASSUMPTIONS):
    """One line per internal that is gone or changed and per assumption
    that no longer holds; empty when all hold.
    """
    found = []
    for entry in itertools.chain(internals, assumptions):
        try:
            target = resolve(entry.path)
        except (ImportError, AttributeError) as error:
            found.append('%s: missing (%s)' % (entry.path, error))
            continue
        if isinstance(entry, Assumption):
            if not _BEHAVIOUR_HOLDS[entry.behaviour](target):
                found.append('%s: no longer %s, as nova-ext expects: %s' % (
                    entry.path, entry.behaviour, entry.why))
            continue
        if entry.signature is None:
            continue
        actual = str(inspect.signature(target))
        if actual != entry.signature:
            found.append('%s: signature changed: nova-ext expects %s, '
                         'Nova has %s' % (entry.path, entry.signature,
                                          actual))
    return found


def nova_major():
    # here: upstream.py loads without Nova
    from nova import version
    return int(version.version_string().split('.')[0])


def _registered(path):
    if path not in _BY_PATH:
        raise KeyError('%s is not in nova_ext.upstream.INTERNALS: register '
                       'it there, with why no public hook exists' % path)
    return path


def get(path):
    """The Nova internal at the registered ``path``."""
    return resolve(_registered(path))


def patch(path, replacement):
    """Put ``replacement`` at the registered ``path``; return what was
    there, which ``patch(path, original)`` puts back.
    """
    owner_path, name = _registered(path).rsplit('.', 1)
    owner = resolve(owner_path)
    # A class holds a staticmethod wrapped: restoring the unwrapped function
    # would turn it into an instance method.
    if isinstance(owner, type) and name in vars(owner):
        original = vars(owner)[name]
    else:
        original = getattr(owner, name)
    setattr(owner, name, replacement)
    return original


def request_filters():
    """Nova's list of placement request pre-filters itself (not a copy)."""
    return get('nova.scheduler.request_filter.ALL_REQUEST_FILTERS')


def sorted_hosts(scheduler, spec_obj, host_states, index):
    """Nova's filter, weigh and pick pass: ``scheduler`` needs only a
    ``host_manager``, so no placement or RPC is involved.
    """
    return get('nova.scheduler.manager.SchedulerManager._get_sorted_hosts')(
        scheduler, spec_obj, host_states, index)


def consume_selected_host(selected_host, spec_obj, instance_uuid=None):
    """Nova's claim of ``selected_host``'s resources in its HostState."""
    return get(
        'nova.scheduler.manager.SchedulerManager._consume_selected_host')(
            selected_host, spec_obj, instance_uuid=instance_uuid)


def aggregate_view(host_manager):
    """Every aggregate object of ``host_manager``'s view (a list: Nova's
    RPC handlers change the view while requests read it).
    """
    return list(host_manager.aggs_by_id.values())


def reload_aggregate_view(host_manager, aggregates):
    """Make ``aggregates`` (objects.Aggregate, all of them, read now) the
    view of ``host_manager``, as its ``_init_aggregates`` would have read
    them, such that a request reading it meanwhile never finds an aggregate
    id it does not know: the new ones added first, the hosts' ids swapped,
    the gone ones dropped last.
    """
    by_id = host_manager.aggs_by_id
    by_id.update((aggregate.id, aggregate) for aggregate in aggregates)
    hosts = collections.defaultdict(set)
    for aggregate in aggregates:
        for host in aggregate.hosts or ():
            hosts[host].add(aggregate.id)
    host_manager.host_aggregates_map = hosts
    current = {aggregate.id for aggregate in aggregates}
    for gone in [agg_id for agg_id in list(by_id) if agg_id not in current]:
        by_id.pop(gone, None)


def opt_info(conf, name, group=None):
    """oslo.config's record of ``[group] name``: ``opt`` (the registered
    Opt) and ``override`` when one is set; raises ``NoSuchOptError`` or
    ``NoSuchGroupError``.
    """
    return get('oslo_config.cfg.ConfigOpts._get_opt_info')(conf, name, group)


def registered_opt(conf, name, group=None):
    """The Opt registered as ``[group] name`` in ``conf``."""
    return opt_info(conf, name, group)['opt']


def host_manager_without_databases(aggregates):
    """Nova's HostManager (filters and weighers loaded from nova.conf, its
    ``get_filtered_hosts`` / ``get_weighed_hosts``) whose start-up reads no
    database: no cells, no instances, ``aggregates`` as the aggregates.
    """
    # Imported when used: nova-ext-status imports this module to name what
    # moved in Nova, which a failing import at the top would hide.
    from nova.scheduler import host_manager

    return _database_free(host_manager.HostManager, aggregates)


def _database_free(host_manager_class, aggregates):
    """A ``host_manager_class`` (Nova's HostManager or a subclass) made
    without reading a database: no cells, no instances, ``aggregates`` as
    the aggregates.
    """

    class SimulatedHostManager(host_manager_class):
        # Overrides, not patches: only this instance reads the model.

        def refresh_cells_caches(self):
            self.cells = {}
            self.enabled_cells = {}

        def _init_aggregates(self):
            for aggregate in aggregates:
                self.aggs_by_id[aggregate.id] = aggregate
                for host in aggregate.hosts:
                    self.host_aggregates_map[host].add(aggregate.id)

        def _init_instance_info(self, computes_by_cell=None):
            self._instance_info = {}

    return SimulatedHostManager()
