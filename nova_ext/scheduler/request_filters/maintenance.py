# SPDX-License-Identifier: Apache-2.0
"""maintenance: hosts marked for maintenance never come back from placement.

Enable with ``[nova_ext] request_filters = maintenance``. A host is in
maintenance when its compute node resource provider carries the trait
``[nova_ext] maintenance_trait`` (default ``CUSTOM_NOVA_EXT_MAINTENANCE``),
set with ``nova-ext-manage host maintenance on HOST``; the pre-filter adds
the trait to the request's forbidden traits. nova-compute keeps traits set
through the placement API when it updates its provider.

Whoever policy ``nova_ext:ignore_maintenance`` allows (default: administrators,
:mod:`nova_ext.policies`) can still create a server on such a host on purpose
with the scheduler hint ``nova_ext:ignore_maintenance=true`` (typically with
``--host``); from anyone else that hint fails the request with a clear
reason. The hint stays in the server's request spec, but it applies to the
create that carried it only: a later move of the server (migration, resize,
evacuation, unshelve, a reschedule) never lands on a host in maintenance.
"""

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import strutils

from nova import exception
from nova import objects
from nova.scheduler.client import report
from nova.scheduler import request_filter

from nova_ext import cache
from nova_ext import policies

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

IGNORE_MAINTENANCE_HINT = 'nova_ext:ignore_maintenance'

# Traits this process made sure exist: placement refuses (400) a query that
# forbids an unknown trait, and no host carries it before the first
# "nova-ext-manage host maintenance on".
_traits_created = set()
cache.register_reset(_traits_created.clear)


def _ensure_trait_exists(trait):
    model = cache.model()
    if model is not None:
        # the model's placement; what this process made sure of in the
        # cloud's stays as it was
        model.ensure_trait(trait)
        return
    if trait in _traits_created:
        return
    resp = report.report_client_singleton().put(
        '/traits/%s' % trait, None, version='1.6')
    if resp.status_code not in (201, 204):
        raise exception.RequestFilterFailed(
            reason='placement refused to create trait %s: %s %s'
            % (trait, resp.status_code, resp.text))
    _traits_created.add(trait)


def _is_the_create(ctxt, request_spec):
    """Whether this is the first scheduling of a new server: its instance
    mapping gets a cell only once the conductor has placed it, so moves and
    reschedules find one. No mapping at all: not a server yet (``nova-ext-
    manage explain`` asks about a hypothetical create).
    """
    try:
        mapping = objects.InstanceMapping.get_by_instance_uuid(
            ctxt, request_spec.instance_uuid)
    except exception.InstanceMappingNotFound:
        return True
    return mapping.cell_mapping is None


@request_filter.trace_request_filter
def exclude_hosts_in_maintenance(ctxt, request_spec):
    override = request_spec.get_scheduler_hint(IGNORE_MAINTENANCE_HINT)
    if override is not None and strutils.bool_from_string(override):
        if not _is_the_create(ctxt, request_spec):
            LOG.info("maintenance request filter: instance %s was created "
                     "with %s; it applies to that create only, not to this "
                     "move", request_spec.instance_uuid,
                     IGNORE_MAINTENANCE_HINT)
        elif not policies.authorize(ctxt, policies.IGNORE_MAINTENANCE):
            raise exception.RequestFilterFailed(
                reason='scheduler hint %s=%s is not allowed by policy %s '
                '(default: administrators only)'
                % (IGNORE_MAINTENANCE_HINT, override,
                   policies.IGNORE_MAINTENANCE))
        else:
            LOG.info("maintenance request filter: instance %s may land on "
                     "hosts in maintenance (policy %s allows its %s hint)",
                     request_spec.instance_uuid, policies.IGNORE_MAINTENANCE,
                     IGNORE_MAINTENANCE_HINT)
            return False
    trait = CONF.nova_ext.maintenance_trait
    _ensure_trait_exists(trait)
    request_spec.root_forbidden.add(trait)
    return True
