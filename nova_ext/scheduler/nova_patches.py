# SPDX-License-Identifier: Apache-2.0
"""Where nova-ext wraps Nova's scheduler, and nowhere else.

Nova has no hook around one scheduling request (filters and weighers see
one host list, request filters run before placement is asked), none
around its filter, weigh and claim pass, and none at a claim. So
:func:`install`, run once per nova-scheduler process by
:func:`nova_ext.scheduler.activate`, wraps three of Nova's internals
(each registered with its reason and checked in :mod:`nova_ext.upstream`):

* ``SchedulerManager.select_destinations``: the request, opened with the
  live cloud (:func:`nova_ext.scheduler.spread_requests.
  scheduled_in_request`); each new process first re-reads the aggregates
  (:func:`_aggregate_view_of_this_process`);
* ``SchedulerManager._schedule``: the filter, weigh and claim pass, in a
  spread group's turn (:func:`~nova_ext.scheduler.spread_requests.
  schedule`);
* ``nova.scheduler.utils.claim_resources``, which ``_schedule`` calls for
  each claim: the turn's reservation first (:func:`~nova_ext.scheduler.
  spread_requests.claim`); a call outside a request nova-ext opened goes
  to Nova's untouched.

State: the originals (:data:`_originals`, for the life of the process)
and the process whose aggregate view is known to be its own
(:data:`_view_checked_in`).
"""

import functools
import os
import threading

from oslo_log import log as logging
import oslo_messaging as messaging

from nova import context as nova_context
from nova import exception
from nova import objects

from nova_ext import cache
from nova_ext.scheduler import cloud
from nova_ext.scheduler import spread_requests
from nova_ext import upstream

LOG = logging.getLogger(__name__)

SELECT_DESTINATIONS = ('nova.scheduler.manager.SchedulerManager.'
                       'select_destinations')
SCHEDULE = 'nova.scheduler.manager.SchedulerManager._schedule'
SENTINEL = 'nova.scheduler.manager.SchedulerManager._sentinel'
CLAIM_RESOURCES = 'nova.scheduler.utils.claim_resources'

# {path: Nova's own function}, once install() wrapped it
_originals = {}
_install_lock = threading.Lock()


def install():
    """Wrap Nova's ``select_destinations``, ``_schedule`` and
    ``claim_resources`` once per process.
    """
    with _install_lock:
        if _originals:
            return
        _originals[SCHEDULE] = upstream.patch(SCHEDULE, _wrapped_schedule(
            upstream.get(SCHEDULE)))
        _originals[CLAIM_RESOURCES] = upstream.patch(
            CLAIM_RESOURCES, _wrapped_claim(upstream.get(CLAIM_RESOURCES)))
        _originals[SELECT_DESTINATIONS] = upstream.patch(
            SELECT_DESTINATIONS, _wrapped_select_destinations(
                upstream.get(SELECT_DESTINATIONS),
                # the default Nova's RPC signature uses for "spec_obj not
                # given"
                upstream.get(SENTINEL)))


def _wrapped_select_destinations(original, sentinel):

    @messaging.expected_exceptions(exception.NoValidHost)
    def in_request(self, context, request_spec=None, filter_properties=None,
                   spec_obj=sentinel, instance_uuids=None,
                   return_objects=False, return_alternates=False):
        def call():
            try:
                return original(
                    self, context, request_spec=request_spec,
                    filter_properties=filter_properties, spec_obj=spec_obj,
                    instance_uuids=instance_uuids,
                    return_objects=return_objects,
                    return_alternates=return_alternates)
            except messaging.ExpectedException as wrapped:
                # Nova's own decorator wrapped a NoValidHost for the RPC
                # server; ours wraps it again on the way out.
                raise wrapped.exc_info[1].with_traceback(wrapped.exc_info[2])
        if spec_obj is sentinel:
            return call()
        _aggregate_view_of_this_process(self.host_manager)
        return spread_requests.scheduled_in_request(
            self, spec_obj, instance_uuids, cloud.LiveCloud(), call)

    in_request.__wrapped__ = original
    return in_request


def _wrapped_schedule(original):

    def in_turn(self, context, spec_obj, instance_uuids,
                alloc_reqs_by_rp_uuid, provider_summaries,
                allocation_request_version=None, return_alternates=False):
        return spread_requests.schedule(
            context, spec_obj, instance_uuids, functools.partial(
                original, self, context, spec_obj, instance_uuids,
                alloc_reqs_by_rp_uuid, provider_summaries,
                allocation_request_version, return_alternates))

    in_turn.__wrapped__ = original
    return in_turn


def _wrapped_claim(original):

    def reserved_first(ctx, client, spec_obj, instance_uuid, alloc_req,
                       allocation_request_version=None):
        return spread_requests.claim(
            original, ctx, client, spec_obj, instance_uuid, alloc_req,
            allocation_request_version=allocation_request_version)

    reserved_first.__wrapped__ = original
    return reserved_first


# The process whose HostManager's aggregate view is known to be its own: a
# nova-scheduler worker forked by its parent inherits the parent's view as
# the scheduler's start read it, and Nova sends aggregate changes to the
# workers only, so a worker forked later (after a crash) would never see
# the changes made meanwhile. Each process re-reads the aggregates once,
# before its first request. Reset with nova-ext's other memory.
_view_checked_in = None
_view_lock = threading.Lock()


def _forget_view():
    global _view_checked_in
    _view_checked_in = None


cache.register_reset(_forget_view)


def _aggregate_view_of_this_process(host_manager):
    global _view_checked_in
    if _view_checked_in == os.getpid():
        return
    with _view_lock:
        if _view_checked_in == os.getpid():
            return
        try:
            aggregates = objects.AggregateList.get_all(
                nova_context.get_admin_context())
        except Exception as error:
            # the next request tries again; meanwhile the view Nova has
            LOG.warning("nova-ext: could not re-read the aggregates in "
                        "this scheduler process (%s); failure domains come "
                        "from the aggregates as this process inherited "
                        "them until a request succeeds in reading them",
                        error)
            return
        upstream.reload_aggregate_view(host_manager, list(aggregates))
        _view_checked_in = os.getpid()
        LOG.debug("nova-ext: aggregates re-read in process %d (%d)",
                  os.getpid(), len(aggregates))
