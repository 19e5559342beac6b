# SPDX-License-Identifier: Apache-2.0
"""One scheduling request in nova-scheduler, from nova-ext's side: opened,
scheduled in its group's turn when it asks for a spread, its claims
checked against the turn, its hosts kept in their failure domains.

Driven by ``[nova_ext] spread_serialize_groups``, ``spread_lock_timeout``
and ``spread_coordination_unavailable``; the three functions here are what
:mod:`nova_ext.scheduler.nova_patches` puts around Nova's
``select_destinations``, its ``_schedule`` and the claims ``_schedule``
makes.

The request flow, top-down (Nova's ``SchedulerManager.select_destinations``
and ``_schedule`` are the models):

* :func:`scheduled_in_request` -- the whole request: its
  :class:`~nova_ext.scheduler.scheduling_request.SchedulingRequest` opened
  with the cloud its plugins read; Nova's pre-filters, placement's query,
  filters, weighers and claims run inside; a NoValidHost carries the
  reason a nova-ext plugin gave; each server's alternates are kept in the
  failure domains of its host;
* :func:`schedule` -- Nova's filter, weigh and claim pass, once placement
  answered: a request of a spread group takes its group's turn
  (:mod:`nova_ext.scheduler.group_turns`) first, so that it decides with
  every member of the group counted, and hands its hosts back once the
  turn's lock is released (checked again if the backend lost it);
* :func:`claim` -- each claim Nova's pass makes: in a turn, the host is
  reserved for the server before placement is asked, so the next decision
  of the turn counts it; a host the turn's later reservations made illegal
  is refused and Nova tries its next host.
"""

import time

from oslo_config import cfg
from oslo_log import log as logging

from nova import exception
from nova.scheduler.client import report
from nova.scheduler import utils as scheduler_utils

from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import fault_reasons
from nova_ext.scheduler import group_members
from nova_ext.scheduler import group_turns
from nova_ext.scheduler import scheduling_request

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

SPREAD_FILTER = 'FailureDomainAntiAffinityFilter'

# How many more times a request whose claims its turn refused (other
# requests of the turn reserved those hosts' domains after it decided) is
# filtered and weighed again, with the reservations as they are now. A
# request that then finds no host gets the filter's reason.
STALE_RETRIES = 2


def scheduled_in_request(scheduler, spec_obj, instance_uuids, cloud, call,
                         members=None):
    """``call()`` (Nova's ``select_destinations``, or ``_schedule``)
    inside the request's SchedulingRequest, opened with ``cloud`` (and
    ``members``, when the caller counted them); its NoValidHost carries
    nova-ext's reason, if a plugin gave one.
    """
    with scheduling_request.opened(spec_obj, instance_uuids,
                                   scheduler.host_manager, cloud,
                                   members=members) as request:
        try:
            selections = call()
        except exception.NoValidHost:
            if request.why_no_host:
                raise exception.NoValidHost(reason=request.why_no_host)
            raise
        return request.alternates_kept_in_domains(selections)


def schedule(context, spec_obj, instance_uuids, call):
    """Nova's ``_schedule`` (``call()``: filter, weigh and claim, once
    placement answered), in the group's turn when the request asks for a
    spread that needs one (:func:`needs_turn`).
    """
    request = scheduling_request.find(spec_obj)
    group = needs_turn(request, spec_obj)
    if group is None:
        return call()
    timeout = CONF.nova_ext.spread_lock_timeout
    try:
        turn, waited = group_turns.take(
            group.uuid, timeout,
            lambda: _counted(context, request.cloud, group),
            lambda error: _unavailable(error, group),
            lambda claimed, counted: request.cloud.record_claims(
                context, group.uuid, claimed, counted))
    except group_turns.TimedOut:
        _refuse('timed out after %ds waiting for the spread lock of server '
                'group %s (%s)' % (timeout, group.name, group.uuid))
    LOG.debug("nova-ext: server group %s: waited %.0f ms for its turn",
              group.uuid, waited * 1000)
    request.turn = turn
    selections = None
    try:
        selections = _scheduled_in_turn(request, turn, call)
    finally:
        turn.decided(request)
        if selections is None:
            # failed: Nova gave its claims back, and so does the turn
            turn.give_back(_servers(request))
        clean = turn.done(timeout)
    if turn.unrecorded is not None:
        # the group's next turns, in any scheduler, would not count them
        _give_back_and_refuse(
            context, request, instance_uuids,
            'the claims of server group %s (%s) could not be written to the '
            'spread ledger: %s; nothing was kept, try again' % (
                group.name, group.uuid, turn.unrecorded))
    if clean is not True:
        # the lock was lost (False), or the turn outlasted the wait and its
        # release is not known yet (None): another scheduler may have
        # placed members meanwhile
        _verified(context, request, group, instance_uuids, selections,
                  'was lost while this request was scheduled'
                  if clean is False else 'was held by a turn that did not '
                  'end within %ds' % timeout)
    return selections


def needs_turn(request, spec_obj):
    """The request's server group when it is scheduled in a turn: a spread
    asked (a malformed ask counts: the filter refuses it in the turn), not
    a rebuild, the group spread lock on, and FailureDomainAntiAffinityFilter
    enabled (nothing judges the spread without it: nova-ext's hooks may be
    active through a cell mapping's ``?plugin=nova_ext`` while its filter
    is not, and the group is then scheduled as Nova alone would).
    """
    if request is None or not CONF.nova_ext.spread_serialize_groups:
        return None
    if scheduler_utils.request_is_rebuild(spec_obj):
        return None
    group = request.group
    if not group or group.policy not in failure_domains.SPREADABLE_POLICIES:
        return None
    try:
        if not failure_domains.requested_level(spec_obj):
            return None
    except Exception:
        return None
    if not any(type(enabled).__name__ == SPREAD_FILTER
               for enabled in request.enabled_filters):
        return None
    return group


def _scheduled_in_turn(request, turn, call):
    """``call()``, filtered and weighed again (at most STALE_RETRIES times)
    when it found no host only because the turn refused claims it made on
    an older view of the reservations.
    """
    for attempt in range(STALE_RETRIES + 1):
        request.refused_claims = 0
        try:
            return call()
        except exception.NoValidHost:
            if not request.refused_claims:
                raise
            if attempt == STALE_RETRIES:
                if not request.why_no_host:
                    request.refuse(
                        'every host this request chose was taken by other '
                        'members of server group %s (%s) scheduled at the '
                        'same moment; try again' % (request.group.name,
                                                    request.group.uuid))
                raise
            # Nova gave the claims of this attempt back; so does the turn,
            # and the request starts again with none of its servers placed
            turn.decided(request)
            turn.give_back(_servers(request))
            del request.group.hosts[request.hosts_at_start:]
            LOG.debug("nova-ext: instance %s: %d claims refused by the "
                      "turn of server group %s; filtered and weighed again",
                      request.spec_obj.instance_uuid, request.refused_claims,
                      turn.group_uuid)


def claim(nova_claim, ctx, client, spec_obj, instance_uuid, alloc_req,
          allocation_request_version=None):
    """``nova_claim`` (Nova's claim of placement resources) for
    ``instance_uuid`` on the host of ``alloc_req``; in a turn, the host
    reserved for it first, if the request's constraints still allow it
    there.
    """
    request = scheduling_request.find(spec_obj)
    turn = request.turn if request is not None else None
    host_state = None
    if turn is not None:
        host_state = request.host_state_of(alloc_req['allocations'])
    if host_state is None:
        return nova_claim(
            ctx, client, spec_obj, instance_uuid, alloc_req,
            allocation_request_version=allocation_request_version)
    if not turn.reserve(instance_uuid, host_state.host,
                        lambda version: request.allows(host_state, version)):
        request.refused_claims += 1
        LOG.debug("nova-ext: host %s refused for instance %s: other "
                  "requests of server group %s were placed in its domains "
                  "after this one decided", host_state.host, instance_uuid,
                  turn.group_uuid)
        return False
    # the next request of the turn may decide while this one claims
    turn.decided(request)
    started = time.monotonic()
    try:
        claimed = nova_claim(
            ctx, client, spec_obj, instance_uuid, alloc_req,
            allocation_request_version=allocation_request_version)
    finally:
        turn.claimed(time.monotonic() - started)
    if claimed:
        group_members.claimed(instance_uuid, host_state.host)
    else:
        turn.give_back([instance_uuid])
    return claimed


def _servers(request):
    return set(request.instance_uuids) | {request.spec_obj.instance_uuid}


def _counted(context, cloud, group):
    """The group's members, counted for a turn: {member: hosts}."""
    try:
        return cloud.group_members(context, group.uuid)
    except Exception as error:
        _refuse('could not read where the members of server group %s (%s) '
                'are: %s' % (group.name, group.uuid, error))


def _unavailable(error, group):
    """The group's backend cannot be reached: refuse, or let the turn run
    without the lock, as ``spread_coordination_unavailable`` says.
    """
    if CONF.nova_ext.spread_coordination_unavailable == 'refuse':
        _refuse('%s; server group %s (%s) is not scheduled without it '
                '([nova_ext] spread_coordination_unavailable = refuse)'
                % (error, group.name, group.uuid))
    LOG.warning("nova-ext: scheduling server group %s without the spread "
                "lock: %s", group.uuid, error)


def _refuse(reason):
    LOG.warning("nova-ext: refusing spread request: %s", reason)
    raise exception.NoValidHost(reason=fault_reasons.fitted(reason))


def _verified(context, request, group, instance_uuids, selections, why):
    """The request's hosts are not known to have been decided under the
    group's lock (``why``: the backend lost it, or the turn has not ended):
    another scheduler may have placed members of the group meanwhile. Count
    the group again, this request's servers included, and keep the
    placements only if every hard constraint still holds; else give the
    claims back and refuse.
    """
    counted = request.cloud.group_members(context, group.uuid)
    placed = [selection[0].service_host for selection in selections]
    broken = request.broken_by(group_members.per_host(counted), placed)
    if not broken:
        LOG.warning("nova-ext: the spread lock of server group %s %s; "
                    "counted again, the group shows every constraint held: "
                    "%s kept", group.uuid, why, ', '.join(placed))
        return
    _give_back_and_refuse(
        context, request, instance_uuids,
        'the spread lock of server group %s (%s) %s and the group changed '
        'meanwhile: %s; nothing was kept, try again' % (
            group.name, group.uuid, why, '; '.join(broken)))


def _give_back_and_refuse(context, request, instance_uuids, reason):
    """Give a create's claims back to placement (a move's are Nova's to put
    back when the move fails) and refuse the request with ``reason``.
    """
    if not _moves(request):
        client = report.report_client_singleton()
        for uuid in instance_uuids or [request.spec_obj.instance_uuid]:
            client.delete_allocation_for_instance(context, uuid, force=True)
    _refuse(reason)


def _moves(request):
    """Whether the request moves servers that held resources before it (a
    move's allocations are Nova's to put back; only a create's claims are
    given back here).
    """
    return any(server in request.turn.counted for server in
               _servers(request))
