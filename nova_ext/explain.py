# SPDX-License-Identifier: Apache-2.0
"""Why a server would land where it does, or why there is no valid host.

``nova-ext-manage explain`` dry-runs one scheduling request against the live
cloud with the scheduler's own configuration (nova.conf's
``[filter_scheduler]`` filters, weighers and multipliers, ``[scheduler]``
request filters, ``[nova_ext] request_filters``), with Nova's own code:

* the ``objects.RequestSpec`` Nova's API and conductor build (flavor, image,
  hints, server group with its members' hosts), or a server's stored one;
* ``nova.scheduler.request_filter.ALL_REQUEST_FILTERS`` one at a time, and
  what each added to placement's query (``ResourceRequest.to_querystring``);
* placement's allocation candidates, through Nova's report client (a GET);
* ``HostManager.get_filtered_hosts`` one enabled filter at a time, then each
  weigher as ``BaseWeightHandler`` applies it, and
  ``SchedulerManager._get_sorted_hosts`` for the host Nova would pick.

With ``--num N`` it places the N servers one after the other as
``SchedulerManager._schedule`` does a multi-create: each selected host is
claimed (in a model of placement's provider summaries) and consumed
(``SchedulerManager._consume_selected_host``) before the next pick. With
``--set SECTION.OPTION=VALUE`` it explains the request twice, the second
time with those options overridden (oslo.config ``set_override``) and a
HostManager built under them.

It only reads: no claim, no allocation, nothing saved.
"""

import collections
import contextlib
import copy
import json
import types
import urllib.parse

from keystoneauth1.identity import base as ks_identity
from keystoneauth1 import loading as ks_loading
import nova.conf
from nova import context as nova_context
from nova import exception
from nova.image import glance
from nova import objects
from nova.pci import request as pci_request
from nova.scheduler.client import report
from nova.scheduler import host_manager as nova_host_manager
from nova.scheduler import utils as scheduler_utils
from nova.virt import hardware
from oslo_config import cfg
from oslo_db import exception as db_exception
import oslo_messaging
from oslo_utils import uuidutils
import prettytable

from nova_ext import configure
from nova_ext import errors
from nova_ext.quota import commands as quota_commands
from nova_ext.scheduler import aggregate_keys
from nova_ext.scheduler import cloud
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler.filters import failure_domain as ext_filter
from nova_ext.scheduler import group_members
from nova_ext.scheduler import request_filters as ext_request_filters
from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import weights as ext_weights
from nova_ext import upstream

CONF = nova.conf.CONF
TOP_HOSTS = 10
# --num: explain places each server in turn; more than placement returns
# candidates for by default ([scheduler] max_placement_results) is no
# question an operator asks
MAX_NUM = 1000


class ExplainError(errors.OperatorError):
    """A request that cannot be explained (unknown flavor, group, image,
    server; database unreachable): one line for the operator.
    """

    def __str__(self):
        return 'explain: ' + super().__str__()


# -- the request --------------------------------------------------------------

def _flavor(ctxt, name_or_id):
    try:
        return objects.Flavor.get_by_flavor_id(ctxt, name_or_id)
    except exception.FlavorNotFound:
        pass
    try:
        return objects.Flavor.get_by_name(ctxt, name_or_id)
    except exception.FlavorNotFound:
        raise ExplainError('no flavor %s' % name_or_id)


def _v2_catalog(catalog):
    """A keystone v3 service catalog in the v2 form Nova's contexts carry
    (what keystonemiddleware hands nova-api in ``X-Service-Catalog``).
    """
    services = []
    for service in catalog:
        by_region = {}
        for endpoint in service.get('endpoints', []):
            region = endpoint.get('region_id') or endpoint.get('region')
            entry = by_region.setdefault(region, {'region': region})
            entry['%sURL' % endpoint['interface']] = endpoint['url']
        services.append({'type': service.get('type'),
                         'name': service.get('name'),
                         'endpoints': list(by_region.values())})
    return services


def _with_service_token(ctxt):
    """``ctxt`` with a token and service catalog from nova.conf's
    ``[placement]`` credentials: this command runs without a user's request,
    and Nova's glance client authenticates and finds glance with the
    context's token and catalog, which an admin context does not have.
    """
    auth = ks_loading.load_auth_from_conf_options(CONF, 'placement')
    if auth is None:
        # no credentials to add: glance answers the context as it is
        return ctxt
    if not isinstance(auth, ks_identity.BaseIdentityPlugin):
        # admin_token, none, noauth: a fixed token, no service catalog
        raise ExplainError(
            '[placement] auth_type = %s: explain needs credentials keystone '
            'issues a token and a service catalog for (password, '
            'v3applicationcredential, ... as nova-compute uses); this one '
            'gives neither' % CONF.placement.auth_type)
    session = ks_loading.load_session_from_conf_options(CONF, 'placement',
                                                        auth=auth)
    access = auth.get_access(session)
    authed = copy.copy(ctxt)
    authed.auth_token = access.auth_token
    authed.service_catalog = _v2_catalog(access.service_catalog.catalog)
    return authed


def _image(ctxt, image_id):
    try:
        return glance.API().get(ctxt, image_id)
    except (exception.ImageNotFound, exception.ImageNotAuthorized):
        raise ExplainError('no image %s' % image_id)
    except exception.NovaException as error:
        raise ExplainError('image %s: %s' % (image_id, error))


def check_request_args(args):
    """What explain is asked about, checked before anyone is asked: an
    image is named by its ID, as nova-api takes it (a path or a name would
    be sent to glance, which answers a lookup error that blames keystone),
    and a project ID the way ``quota`` checks one.
    """
    image = getattr(args, 'image', None)
    if image is not None and not uuidutils.is_uuid_like(image):
        raise ExplainError(
            "--image %r: not an image ID (a UUID; 'openstack image show "
            "NAME -f value -c id' gives it)" % errors.one_line(image)[:100])
    project = getattr(args, 'project', None)
    if project is not None:
        if project == '*':
            raise ExplainError("--project '*': name one project ID")
        try:
            quota_commands.check_project_id(project)
        except quota_commands.CommandError as error:
            raise ExplainError(str(error))


def _group(ctxt, name_or_uuid):
    try:
        if uuidutils.is_uuid_like(name_or_uuid):
            return objects.InstanceGroup.get_by_uuid(ctxt, name_or_uuid)
        return objects.InstanceGroup.get_by_name(ctxt, name_or_uuid)
    except exception.InstanceGroupNotFound:
        raise ExplainError('no server group %s' % name_or_uuid)


def _parse_hints(hints):
    parsed = {}
    for hint in hints or ():
        key, sep, value = hint.partition('=')
        if not sep or not key:
            raise ExplainError('--hint %r: expected KEY=VALUE' % hint)
        parsed.setdefault(key, []).append(value)
    return parsed


def build_request_spec(ctxt, flavor, image=None, hints=(), group=None,
                       project=None, az=None, num=1):
    """The RequestSpec nova-api would build for this boot request."""
    flavor = _flavor(ctxt, flavor)
    image_meta = _image(ctxt, image) if image else {}
    scheduler_hints = _parse_hints(hints)
    if group is None and 'group' in scheduler_hints:
        group = scheduler_hints['group'][0]
    instance_group = _group(ctxt, group) if group else None
    if instance_group is not None:
        scheduler_hints['group'] = [instance_group.uuid]
    numa = hardware.numa_get_constraints(
        flavor, objects.ImageMeta.from_dict(image_meta or {}))
    spec = objects.RequestSpec.from_components(
        ctxt, uuidutils.generate_uuid(), image_meta, flavor, numa,
        pci_request.get_pci_requests_from_flavor(flavor),
        {'scheduler_hints': scheduler_hints}, instance_group, az,
        project_id=project or ctxt.project_id, user_id=ctxt.user_id,
        request_level_params=objects.RequestLevelParams())
    spec.num_instances = num
    spec.is_bfv = False
    spec.requested_resources = []
    return spec


def stored_request_spec(ctxt, server_uuid):
    """A server's stored RequestSpec, its group reloaded as it is now."""
    try:
        spec = objects.RequestSpec.get_by_instance_uuid(ctxt, server_uuid)
    except exception.RequestSpecNotFound:
        raise ExplainError('no server %s' % server_uuid)
    if 'instance_group' in spec and spec.instance_group:
        spec.instance_group = objects.InstanceGroup.get_by_uuid(
            ctxt, spec.instance_group.uuid)
    spec.reset_forced_destinations()
    return spec


def describe_request(spec):
    flavor = spec.flavor
    group = spec.instance_group if 'instance_group' in spec else None
    image = spec.image if 'image' in spec else None
    properties = {}
    if image is not None and 'properties' in image:
        properties = {name: str(image.properties.get(name))
                      for name in image.properties.obj_fields
                      if image.properties.obj_attr_is_set(name)}
    return {
        'flavor': {'name': flavor.name, 'vcpus': flavor.vcpus,
                   'memory_mb': flavor.memory_mb, 'disk_gb': flavor.root_gb,
                   'extra_specs': dict(flavor.extra_specs)},
        'image': {'id': image.id if image is not None and 'id' in image
                  else None, 'properties': properties},
        'hints': {key: value for key, value
                  in (spec.scheduler_hints or {}).items()},
        'group': None if not group else {
            'uuid': group.uuid, 'name': group.name, 'policy': group.policy,
            'members': list(group.members or []),
            'hosts': sorted(set(group.hosts or []))},
        'project_id': spec.project_id,
        'availability_zone': spec.availability_zone,
        'num_instances': spec.num_instances,
    }


# -- placement ----------------------------------------------------------------

def _query(ctxt, spec, host_manager):
    resources = scheduler_utils.resources_from_request_spec(
        ctxt, spec, host_manager, enable_pinning_translate=True)
    # one item per trait, resource or aggregate list: a pre-filter that
    # adds a trait shows that trait, not the whole parameter again
    return resources, [
        (key, part)
        for key, value in urllib.parse.parse_qsl(resources.to_querystring())
        for part in value.split(',')]


def apply_request_filters(ctxt, spec, host_manager):
    """Nova's process_reqspec, one pre-filter at a time.

    Returns (steps, failure reason or None).
    """
    steps = []
    _, before = _query(ctxt, spec, host_manager)
    for pre_filter in upstream.request_filters():
        name = getattr(pre_filter, 'nova_ext_name', pre_filter.__name__)
        try:
            applied = pre_filter(ctxt, spec)
        except exception.RequestFilterFailed as error:
            return steps + [{'name': name, 'applied': True, 'added': [],
                             'failed': error.message}], error.message
        _, after = _query(ctxt, spec, host_manager)
        remaining = collections.Counter(before)
        added = []
        for item in after:
            if remaining[item]:
                remaining[item] -= 1
            else:
                added.append('%s=%s' % item)
        steps.append({'name': name, 'applied': bool(applied),
                      'added': added})
        before = after
    return steps, None


def allocation_candidates(ctxt, resources, placement):
    result = placement.get_allocation_candidates(ctxt, resources)
    if result is None or result[0] is None:
        raise ExplainError('placement: cannot get allocation candidates '
                           '(unreachable, or it refused the query; see '
                           'the log)')
    alloc_reqs, summaries, version = result
    return alloc_reqs, summaries, version


# -- filters and weighers -----------------------------------------------------

def _filter_reasons(host_filter, spec, hosts_before, removed):
    """{host: why} for the hosts ``host_filter`` removed of
    ``hosts_before``: FailureDomainAntiAffinityFilter's reason per host
    (the first hard constraint it breaks, with its domain's count); None
    for other filters.
    """
    if type(host_filter).__name__ != ext_filter.NAME or not removed:
        return {}
    try:
        request = scheduling_request.of(spec)
        spread = request.spread()
    except (failure_domains.InvalidSpreadRequest,
            scheduling_request.NotActivated) as error:
        return {host: str(error) for host in removed}
    if spread is None or not spread.hard:
        return {}
    judgement = failure_domains.Judgement(request, spread.hard, hosts_before)
    reasons = {}
    for host in removed:
        refusal = judgement.refusal(host)
        if refusal is not None:
            reasons[host] = ext_filter.describe(judgement, refusal)
    return reasons


def run_filters(host_manager, hosts, spec, index=0):
    """Nova's get_filtered_hosts with one enabled filter at a time, for the
    request's ``index``-th instance (filters with
    ``run_filter_once_per_request`` run for the first only).

    Returns (passed hosts, [(filter name, [(host, reason)], error)]).
    """
    enabled = host_manager.enabled_filters
    steps = []
    try:
        # requested destination, ignore_hosts, force_hosts: no filter
        host_manager.enabled_filters = []
        passed = list(host_manager.get_filtered_hosts(hosts, spec, index)
                      or [])
        removed = [host for host in hosts if host not in passed]
        if removed:
            steps.append(('requested destination / forced hosts',
                          [(host, None) for host in removed], None))
        for host_filter in enabled:
            if not passed:
                break
            if not host_filter.run_filter_for_index(index):
                continue
            host_manager.enabled_filters = [host_filter]
            error = None
            try:
                remaining = list(host_manager.get_filtered_hosts(
                    passed, spec, index) or [])
            except exception.NoValidHost as no_valid_host:
                remaining, error = [], no_valid_host.kwargs.get(
                    'reason') or str(no_valid_host)
            gone = [host for host in passed if host not in remaining]
            reasons = _filter_reasons(host_filter, spec, passed, gone)
            removed = [(host, error or reasons.get(host)) for host in gone]
            steps.append((type(host_filter).__name__, removed, error))
            passed = remaining
    finally:
        host_manager.enabled_filters = enabled
    return passed, steps


def weigh(host_manager, hosts, spec):
    """Each weigher's raw, normalised, multiplier and contribution per host,
    computed as nova.weights.BaseWeightHandler does; the weighers nova-ext
    runs in its one slot (``NovaExtWeighers``) are shown one by one.
    """
    handler = host_manager.weight_handler
    weighed = [handler.object_class(host, 0.0) for host in hosts]
    breakdown = {host_name(host): [] for host in hosts}
    if len(weighed) <= 1:
        return breakdown
    broken = [0.0] * len(weighed)
    for weigher in ext_weights.expand(host_manager.weighers):
        raw, normalised, multipliers = ext_weights.scores(weigher, weighed,
                                                          spec)
        for obj, raw_value, value, multiplier in zip(weighed, raw, normalised,
                                                     multipliers):
            breakdown[host_name(obj.obj)].append({
                'weigher': type(weigher).__name__, 'raw': raw_value,
                'normalised': value, 'multiplier': multiplier,
                'contribution': multiplier * value})
        if isinstance(weigher, ext_weights.PerRequestWeigher):
            promises = weigher.weights_and_promises(
                spec, [obj.obj for obj in weighed])[1]
            for index, (kept, multiplier) in enumerate(zip(
                    promises or (), multipliers)):
                broken[index] += kept if multiplier > 0 else 0
    if max(broken) > min(broken):
        # NovaExtWeighers ranks by the soft constraints broken first
        # (nova_ext.scheduler.weights.outranked): one more row, worth more
        # than every other row together can swing
        sums = [sum(row['contribution'] for row in rows)
                for rows in breakdown.values()]
        swing = 1.0 + max(sums) - min(sums)
        for obj, count in zip(weighed, broken):
            breakdown[host_name(obj.obj)].append({
                'weigher': 'soft constraints broken', 'raw': count,
                'normalised': count, 'multiplier': -swing,
                'contribution': -swing * count})
    return breakdown


def host_name(host_state):
    if host_state.nodename and host_state.nodename != host_state.host:
        return '%s (%s)' % (host_state.host, host_state.nodename)
    return host_state.host


def _last_filter_reason(filter_steps):
    last = filter_steps[-1] if filter_steps else None
    if last is None:
        return 'no host left'
    return 'filter %s removed the last host(s): %s%s' % (
        last[0], ', '.join(host_name(h) for h, _ in last[1]),
        ' (%s)' % last[2] if last[2] else '')


# -- a multi-create -----------------------------------------------------------

def _sorted_hosts(host_manager, spec, hosts, index):
    scheduler = types.SimpleNamespace(host_manager=host_manager)
    return upstream.sorted_hosts(scheduler, spec, hosts, index)


def placement_room(summaries):
    """{(provider, resource class): free} from placement's provider
    summaries (capacity is (total - reserved) x allocation_ratio).
    """
    return {(rp_uuid, rc): amounts['capacity'] - amounts['used']
            for rp_uuid, summary in summaries.items()
            for rc, amounts in summary.get('resources', {}).items()}


def claim(room, hosts):
    """The first of ``hosts`` whose first allocation request still fits in
    ``room``, which it then takes, and that request: placement's answer to
    the claim ``SchedulerManager._schedule`` makes, host by host, in
    ``claim_resources``. (None, None) when none fits.
    """
    for host in hosts:
        if not host.allocation_candidates:
            continue
        alloc_req = host.allocation_candidates[0]
        wanted = [((rp_uuid, rc), amount)
                  for rp_uuid, allocation in alloc_req['allocations'].items()
                  for rc, amount in allocation['resources'].items()]
        if all(room.get(key, amount) >= amount for key, amount in wanted):
            for key, amount in wanted:
                if key in room:
                    room[key] -= amount
            return host, alloc_req
    return None, None


def _consume(host, spec, alloc_req, instance_uuid):
    # the provider mapping first: consuming PCI devices tracked in
    # placement reads it
    for request_group in spec.requested_resources or ():
        request_group.provider_uuids = alloc_req['mappings'][
            request_group.requester_id]
    upstream.consume_selected_host(host, spec, instance_uuid=instance_uuid)


def place_instances(host_manager, spec, sorted_hosts, summaries, servers):
    """Where each of ``spec.num_instances`` (``--num``) goes, as
    ``SchedulerManager._schedule`` places a multi-create: filter and weigh
    the hosts left for instance ``index``, claim the first that still has
    room, consume it, and go on with the next instance.

    ``sorted_hosts``: the first instance's sorted hosts. The HostStates and
    the request's group are changed in memory only.
    Returns (placed HostStates, the last sorted hosts, failure or None).
    """
    uuids = servers
    group = spec.instance_group if 'instance_group' in spec else None
    if group:
        # nova-api adds every server of the request to its group before
        # scheduling; the anti-affinity filter counts members per host
        group.members = list(group.members or []) + [
            uuid for uuid in uuids if uuid not in (group.members or [])]
    room = placement_room(summaries)
    hosts, placed = sorted_hosts, []
    for index, instance_uuid in enumerate(uuids):
        spec.instance_uuid = instance_uuid
        before = hosts
        if index:
            hosts = _sorted_hosts(host_manager, spec, hosts, index)
        if not hosts:
            _, steps = run_filters(host_manager, before, spec, index)
            return placed, hosts, _last_filter_reason(steps)
        host, alloc_req = claim(room, hosts)
        if host is None:
            return placed, hosts, (
                'placement has no room left on %s (the earlier instances '
                'of this request claimed it)' % ', '.join(
                    host_name(h) for h in hosts))
        _consume(host, spec, alloc_req, instance_uuid)
        placed.append(host)
    return placed, hosts, None


def alternates_of(host_manager, spec, placed, hosts, num_alts):
    """Each placed instance's alternates as ``SchedulerManager.
    _get_alternate_hosts`` picks them (``[scheduler] max_attempts - 1``,
    same cell, not a selected host, hosts sorted again once all are
    consumed).
    """
    if len(placed) > 1 and num_alts > 0:
        hosts = _sorted_hosts(host_manager, spec, hosts, len(placed) - 1)
    return [[host_name(host) for host in hosts
             if host.cell_uuid == selected.cell_uuid
             and host not in placed and host.allocation_candidates][
                 :num_alts]
            for selected in placed]


def explain_instances(result, host_manager, spec, sorted_hosts, summaries,
                      conf, servers):
    """``result['instances']`` for ``--num`` above 1; a request whose
    later instances find no host is a NoValidHost as a whole, as in Nova.
    """
    placed, hosts, failure = place_instances(host_manager, spec,
                                             sorted_hosts, summaries,
                                             servers)
    alternates = alternates_of(host_manager, spec, placed, hosts,
                               max(0, conf.scheduler.max_attempts - 1))
    result['instances'] = [
        {'instance': index, 'host': host_name(host), 'alternates': alts}
        for index, (host, alts) in enumerate(zip(placed, alternates), 1)]
    if failure:
        result['no_valid_host'] = (
            'instance %d of %d: %s; Nova fails the whole request (There are '
            'not enough hosts available.)' % (
                len(placed) + 1, spec.num_instances, failure))
        result['selected'], result['alternates'] = None, []
    else:
        result['alternates'] = alternates[0]


# -- the whole explanation ----------------------------------------------------

def aggregate_problems(host_manager, conf):
    """The near misses of nova-ext's aggregate metadata keys (``nova_ext:
    failure_domain:<level>`` for ``[nova_ext] failure_domain_levels``, the
    weigher multipliers, ``nova_ext:host_class``) in the aggregates
    ``host_manager`` read, as ``[{"aggregate": ..., "problem": ...}]``.
    """
    aggregates = sorted(getattr(host_manager, 'aggs_by_id', {}).items())
    return [{'aggregate': name, 'problem': problem}
            for name, problem in aggregate_keys.problems_in_aggregates(
                [aggregate for _id, aggregate in aggregates],
                aggregate_keys.keys_read(conf))]


def new_result(spec, host_manager, conf, stored=False):
    """An explanation of ``spec`` with nothing decided yet."""
    return {'stored_request_spec': stored,
            'request': describe_request(spec),
            'request_filters': [], 'placement_query': None,
            'candidates': [], 'filters': [], 'hosts': [],
            'selected': None, 'alternates': [], 'instances': [],
            'no_valid_host': None,
            # before any early return: a misspelled key can be why a
            # request filter refused the request
            'aggregate_problems': aggregate_problems(host_manager, conf)}


def filter_and_weigh(result, host_manager, hosts, spec, conf):
    """Fill ``result``'s filters, ranked hosts, selected host and
    alternates for the candidate HostStates ``hosts``, as Nova decides for
    the request's first instance; return Nova's sorted hosts ([] for no
    valid host).
    """
    passed, filter_steps = run_filters(host_manager, hosts, spec)
    for name, removed, error in filter_steps:
        result['filters'].append({
            'filter': name, 'error': error,
            'removed': [{'host': host_name(host), 'reason': reason}
                        for host, reason in removed]})
    if not passed:
        result['no_valid_host'] = _last_filter_reason(filter_steps)
        return []

    breakdown = weigh(host_manager, passed, spec)
    weighed = host_manager.get_weighed_hosts(passed, spec)
    for rank, obj in enumerate(weighed, 1):
        result['hosts'].append({'rank': rank, 'host': host_name(obj.obj),
                                'weight': obj.weight,
                                'weighers': breakdown[host_name(obj.obj)]})
    sorted_hosts = _sorted_hosts(host_manager, spec, passed, 0)
    chosen = sorted_hosts[0]
    result['selected'] = host_name(chosen)
    result['random_choice'] = (conf.filter_scheduler.host_subset_size > 1
                               or conf.filter_scheduler
                               .shuffle_best_same_weighed_hosts)
    result['alternates'] = [
        host_name(host) for host in sorted_hosts[1:]
        if host.cell_uuid == chosen.cell_uuid][
            :max(0, conf.scheduler.max_attempts - 1)]
    return sorted_hosts


def explain(ctxt, spec, host_manager=None, placement=None, stored=False):
    """Everything the scheduler would do with ``spec`` now, as a dict.
    A stored request (``explain --server``) is evaluated as a move of that
    server: it is not counted as a member of its group, and its current
    host is named.
    """
    conf = cfg.CONF
    host_manager = host_manager or nova_host_manager.HostManager()
    placement = placement or report.report_client_singleton()
    if 'instance_group' in spec and spec.instance_group:
        scheduler_utils.setup_instance_group(ctxt, spec)
    result = new_result(spec, host_manager, conf, stored)
    if stored:
        result['current_host'] = _current_host(ctxt, spec.instance_uuid)
    servers = [spec.instance_uuid] + [
        uuidutils.generate_uuid() for _ in range(spec.num_instances - 1)]
    live = cloud.LiveCloud()
    with scheduling_request.opened(
            spec, servers, host_manager, live,
            members=_members(ctxt, live, spec, servers)) as request:
        _explain(ctxt, spec, host_manager, placement, conf, result, servers)
        if result['no_valid_host'] and request.why_no_host:
            # nova-ext's reason whole here; the server's fault would keep
            # the short one
            if request.why_no_host_in_full not in result['no_valid_host']:
                result['no_valid_host'] += '; ' + request.why_no_host_in_full
            result['no_valid_host_fault'] = request.why_no_host
    return result


def _members(ctxt, live, spec, servers):
    """Where the request's group's members are, as the scheduler counts
    them in the group's turn (the request's servers left out); None (the
    conductor's view) without a group or with ``[nova_ext]
    spread_serialize_groups = False``.
    """
    group = spec.instance_group if 'instance_group' in spec else None
    if group is None or not CONF.nova_ext.spread_serialize_groups:
        return None
    return group_members.per_host(live.group_members(ctxt, group.uuid),
                                  set(servers))


def _current_host(ctxt, server_uuid):
    try:
        return objects.Instance.get_by_uuid(ctxt, server_uuid).host
    except exception.InstanceNotFound:
        return None


def _explain(ctxt, spec, host_manager, placement, conf, result, servers):
    steps, failure = apply_request_filters(ctxt, spec, host_manager)
    result['request_filters'] = steps
    if failure:
        result['no_valid_host'] = 'request filter: %s' % failure
        return
    resources, _ = _query(ctxt, spec, host_manager)
    result['placement_query'] = urllib.parse.unquote(
        resources.to_querystring())
    alloc_reqs, summaries, _ = allocation_candidates(ctxt, resources,
                                                     placement)
    by_provider = collections.defaultdict(list)
    for alloc_req in alloc_reqs:
        for rp_uuid in alloc_req['allocations']:
            by_provider[rp_uuid].append(alloc_req)
    hosts = list(host_manager.get_host_states_by_uuids(
        ctxt, list(summaries), spec))
    for host in hosts:
        host.allocation_candidates = copy.deepcopy(by_provider[host.uuid])
    result['candidates'] = sorted(host_name(host) for host in hosts)
    if not alloc_reqs:
        result['no_valid_host'] = ('placement returned no allocation '
                                   'candidates for the query')
        return

    sorted_hosts = filter_and_weigh(result, host_manager, hosts, spec,
                                    conf)
    if not sorted_hosts:
        return
    if spec.num_instances > 1:
        explain_instances(result, host_manager, spec, sorted_hosts,
                          summaries, conf, servers)
    else:
        result['instances'] = [{'instance': 1, 'host': result['selected'],
                                'alternates': result['alternates']}]


# -- what-if ------------------------------------------------------------------

def _registered_opt(conf, group, name, shown):
    try:
        # oslo.config has no public lookup of an Opt (multi-valued?) or of
        # its current override
        return upstream.opt_info(conf, name, group)
    except cfg.NoSuchGroupError:
        raise ExplainError('--set %s: Nova and nova-ext have no section '
                           '[%s]' % (shown, group))
    except cfg.NoSuchOptError:
        raise ExplainError('--set %s: Nova and nova-ext have no option %s '
                           'in [%s]' % (shown, name, group or 'DEFAULT'))


def parse_overrides(conf, assignments):
    """``--set SECTION.OPTION=VALUE`` (repeatable) as ``[(group, option,
    value)]``: names and value checked as ``configure --set`` checks them,
    the option looked up among the registered ones and the value
    type-checked by it. Repeating a multi-valued option
    (``[filter_scheduler] available_filters``) gives it several values, as
    repeated lines in nova.conf do; any other option keeps the last.
    """
    merged = {}
    for assignment in assignments:
        section, key, value = configure.parse_assignment(assignment,
                                                         ExplainError)
        group = None if section == 'DEFAULT' else section
        name = key.replace('-', '_')
        info = _registered_opt(conf, group, name, '%s.%s' % (section, key))
        if info['opt'].multi:
            merged.setdefault((group, name), []).append(value)
        else:
            merged[(group, name)] = value
    overrides = [(group, name, value)
                 for (group, name), value in merged.items()]
    with overridden(conf, overrides):
        pass  # set_override converts each value with the option's type
    return overrides


_NO_OVERRIDE = object()


@contextlib.contextmanager
def overridden(conf, overrides):
    """``overrides`` applied with oslo.config's ``set_override`` for the
    duration; afterwards each option has its earlier override again (a
    test's, for one) or none.
    """
    earlier = []
    try:
        for group, name, value in overrides:
            # no public getter of an override: get_location() still says
            # set_override after clear_override
            info = upstream.opt_info(conf, name, group)
            earlier.append((group, name,
                            info.get('override', _NO_OVERRIDE)))
            try:
                conf.set_override(name, value, group=group)
            except (ValueError, cfg.Error) as error:
                raise ExplainError('--set %s.%s=%s: %s' % (
                    group or 'DEFAULT', name,
                    errors.mask_secrets(str(value)), errors.one_line(error)))
        yield
    finally:
        for group, name, value in reversed(earlier):
            if value is _NO_OVERRIDE:
                conf.clear_override(name, group=group)
            else:
                conf.set_override(name, value, group=group)


def shown_overrides(overrides):
    return [errors.mask_secrets('%s.%s=%s' % (
        group or 'DEFAULT', name,
        ','.join(value) if isinstance(value, list) else value))
        for group, name, value in overrides]


def explain_what_if(ctxt, spec, overrides, stored=False):
    """The explanation with ``overrides`` in force: a new HostManager loads
    the filters, weighers and request filters they name, as a
    nova-scheduler restarted with them would.
    """
    with overridden(CONF, overrides), \
            ext_request_filters.as_configured():
        host_manager = nova_host_manager.HostManager()
        return explain(ctxt, spec, host_manager=host_manager, stored=stored)


def _request_spec(ctxt, args):
    if args.server:
        spec = stored_request_spec(ctxt, args.server)
        # the stored num_instances is the original boot's; Nova moves one
        # server at a time
        spec.num_instances = args.num
        return spec
    if not args.flavor:
        raise ExplainError('explain needs --flavor or --server')
    return build_request_spec(
        ctxt, args.flavor, args.image, args.hint, args.group,
        args.project, args.az, args.num)


def _check_az(ctxt, az):
    """An unknown zone is refused, as nova-api refuses it (HTTP 400),
    instead of explaining a request Nova would never schedule. ``AZ:HOST``
    is checked by its zone.
    """
    zone = az.partition(':')[0]
    zones = {CONF.default_availability_zone} | {
        aggregate.metadata['availability_zone'] for aggregate in
        objects.AggregateList.get_by_metadata_key(ctxt,
                                                  'availability_zone')}
    if zone not in zones:
        raise ExplainError('--az %s: no such availability zone (zones: %s)'
                           % (az, ', '.join(sorted(zones))))


def explain_request(args):
    """``nova-ext-manage explain``: the explanation for parsed ``args``;
    with ``--set`` (``args.assignments``) ``{"set": [...], "current":
    explanation, "what_if": explanation}``.
    """
    if not 1 <= args.num <= MAX_NUM:
        raise ExplainError('--num %d: from 1 to %d' % (args.num, MAX_NUM))
    check_request_args(args)
    overrides = parse_overrides(CONF, args.assignments)
    # the scheduler's request filters ask glance (host_class) with the
    # request's context: here, one with the service's token
    ctxt = _with_service_token(nova_context.get_admin_context())
    if args.az is not None:
        _check_az(ctxt, args.az)
    try:
        spec = _request_spec(ctxt, args)
        stored = bool(args.server)
        # each run changes its spec (request filters, group, instances)
        current = explain(ctxt, spec.obj_clone(), stored=stored)
        if not overrides:
            return current
        return {'set': shown_overrides(overrides), 'current': current,
                'what_if': explain_what_if(ctxt, spec.obj_clone(),
                                           overrides, stored)}
    except exception.CellMappingNotFound as error:
        raise ExplainError(str(error))
    except exception.SchedulerHostFilterNotFound as error:
        raise ExplainError(
            '[filter_scheduler] enabled_filters%s names %s, which no '
            '[filter_scheduler] available_filters provides (nova-scheduler '
            'would not start)' % (
                ' (with --set)' if overrides else '',
                error.kwargs.get('filter_name', error)))
    except Exception as error:
        # oslo.db wraps connection failures in DBConnectionError; keep one
        # line for an unreachable database.
        if isinstance(error, db_exception.DBError):
            raise ExplainError('database: %s' % str(error).splitlines()[0])
        raise


# -- output -------------------------------------------------------------------

def _fmt(number):
    return '%.3f' % number if isinstance(number, float) else str(number)


def write_table(result, out, top=TOP_HOSTS):
    request = result['request']
    # first, where a long table cannot scroll them away
    for item in result.get('aggregate_problems', ()):
        print('WARNING: aggregate %s: %s' % (
            item['aggregate'], item['problem']), file=out)
    if result['stored_request_spec']:
        print("stored RequestSpec, evaluated against the cloud's current "
              "state as a move of the server (not counted as a member of "
              "its group); its current host %s is marked *"
              % (result.get('current_host') or 'none'), file=out)
    flavor = request['flavor']
    print('flavor %s: %d VCPU, %d MB RAM, %d GB disk%s' % (
        flavor['name'], flavor['vcpus'], flavor['memory_mb'],
        flavor['disk_gb'], ', extra specs %s' % flavor['extra_specs']
        if flavor['extra_specs'] else ''), file=out)
    if request['image']['id']:
        print('image %s %s' % (request['image']['id'],
                               request['image']['properties']), file=out)
    if request['hints']:
        print('hints %s' % request['hints'], file=out)
    if request['group']:
        group = request['group']
        print('group %s (%s): %d member(s) on %s' % (
            group['name'], group['policy'], len(group['members']),
            ', '.join(group['hosts']) or 'no host'), file=out)
    if result['request_filters']:
        # the simulator models the pre-filters: it runs none of them
        print('request filters:', file=out)
    for step in result['request_filters']:
        print('  %-40s %s%s' % (
            step['name'], 'applied' if step['applied'] else 'skipped',
            ': ' + ' '.join(step['added']) if step['added'] else '')
            + (' FAILED: %s' % step['failed'] if step.get('failed') else ''),
            file=out)
    if result['placement_query'] is not None:
        print('placement query: %s' % result['placement_query'], file=out)
        print('allocation candidates: %d host(s)%s' % (
            len(result['candidates']), ': ' + ', '.join(
                result['candidates'][:top]) + (
                    ' ...' if len(result['candidates']) > top else '')
            if result['candidates'] else ''), file=out)
    for step in result['filters']:
        removed = step['removed']
        if not removed:
            continue
        shown = ['%s%s' % (r['host'], ' (%s)' % r['reason']
                           if r['reason'] else '') for r in removed[:top]]
        print('filter %s removed %d host(s): %s%s' % (
            step['filter'], len(removed), '; '.join(shown),
            ' ...' if len(removed) > top else ''), file=out)
    if result['hosts']:
        # a column per weigher that moved some host's weight; the others
        # are in --json
        shown = [index for index, weigher
                 in enumerate(result['hosts'][0]['weighers'])
                 if any(host['weighers'][index]['contribution']
                        for host in result['hosts'])]
        table = prettytable.PrettyTable(
            ['rank', 'host', 'weight'] + [
                result['hosts'][0]['weighers'][index]['weigher']
                for index in shown])
        for host in result['hosts'][:top]:
            table.add_row([host['rank'], _marked(result, host['host']),
                           _fmt(host['weight'])]
                          + ['%s / %s x %s' % (
                              _fmt(w['raw']), _fmt(w['normalised']),
                              _fmt(w['multiplier']))
                             for w in (host['weighers'][index]
                                       for index in shown)])
        print('weighers: raw / normalised x multiplier; weight = sum of '
              'normalised x multiplier', file=out)
        print(table, file=out)
        hidden = len(result['hosts'][0]['weighers']) - len(shown)
        if hidden:
            print('(%d weigher(s) added nothing to any host: see --json)'
                  % hidden, file=out)
        if len(result['hosts']) > top:
            print('... and %d more host(s)' % (len(result['hosts']) - top),
                  file=out)
    num = result['request']['num_instances']
    if num > 1:
        write_instances(result, out)
    if result['no_valid_host']:
        print('NO VALID HOST: %s' % result['no_valid_host'], file=out)
    elif num == 1:
        print('selected: %s%s' % (
            _marked(result, result['selected']), ' ' + RANDOM_NOTE
            if result.get('random_choice') else ''), file=out)
        print('alternates: %s' % (', '.join(result['alternates']) or 'none'),
              file=out)


RANDOM_NOTE = ('(one of the best, chosen at random: host_subset_size / '
               'shuffle_best_same_weighed_hosts)')


def _marked(result, name):
    current = result.get('current_host')
    if current and (name == current or name.startswith(current + ' (')):
        return name + ' *'
    return name


def write_instances(result, out):
    num = result['request']['num_instances']
    for instance in result['instances']:
        print('instance %d of %d: %s%s (alternates: %s)' % (
            instance['instance'], num, instance['host'],
            ' ' + RANDOM_NOTE if result.get('random_choice') else '',
            ', '.join(instance['alternates']) or 'none'), file=out)


def _standing(result, name):
    """Where host ``name`` stands in one explanation: rank / weight, or
    what removed it.
    """
    for host in result['hosts']:
        if host['host'] == name:
            return '%d / %s' % (host['rank'], _fmt(host['weight']))
    for step in result['filters']:
        if any(removed['host'] == name for removed in step['removed']):
            return 'removed by %s' % step['filter']
    if name not in result['candidates']:
        return 'not a placement candidate'
    return '-'


def _picks(result):
    if result['no_valid_host']:
        return 'NO VALID HOST (%s)' % result['no_valid_host']
    if result['request']['num_instances'] > 1:
        return ', '.join(i['host'] for i in result['instances'])
    return result['selected']


def write_what_if(both, out, top=TOP_HOSTS):
    """The current explanation, then how the ranking and the pick change
    with ``--set``.
    """
    current, what_if = both['current'], both['what_if']
    write_table(current, out, top)
    print('\nwhat if %s:' % ', '.join(both['set']), file=out)
    if what_if['placement_query'] != current['placement_query']:
        print('placement query: %s' % what_if['placement_query'], file=out)
    rank = {}
    for result in (current, what_if):
        for host in result['hosts']:
            rank[host['host']] = min(rank.get(host['host'], host['rank']),
                                     host['rank'])
    names = sorted(set(current['candidates']) | set(what_if['candidates']),
                   key=lambda name: (rank.get(name, len(rank) + 1), name))
    table = prettytable.PrettyTable(['host', 'now: rank / weight',
                                     'with the change: rank / weight'])
    for name in names[:top]:
        table.add_row([name, _standing(current, name),
                       _standing(what_if, name)])
    print(table, file=out)
    if len(names) > top:
        print('... and %d more host(s)' % (len(names) - top), file=out)
    print('selected now: %s' % _picks(current), file=out)
    print('selected with the change: %s' % _picks(what_if), file=out)


def write_json(result, out):
    json.dump(result, out, indent=2, sort_keys=True, default=str)
    out.write('\n')


def run(args, conf, out):
    """``nova-ext-manage explain`` once nova.conf is parsed: writes the
    explanation to ``out`` and returns 0; raises :class:`ExplainError`.
    """
    objects.register_all()
    # cell mappings refer to [DEFAULT] transport_url
    oslo_messaging.TransportURL.parse(conf)
    result = explain_request(args)
    if args.json:
        write_json(result, out)
    elif 'what_if' in result:
        write_what_if(result, out)
    else:
        write_table(result, out)
    return 0
