# SPDX-License-Identifier: Apache-2.0
"""maintenance: hosts marked for maintenance never come back from placement.

Enable with ``[nova_ext] request_filters = maintenance``. A host is in
maintenance when its compute node resource provider carries the trait
``[nova_ext] maintenance_trait`` (default ``CUSTOM_NOVA_EXT_MAINTENANCE``),
set with ``nova-ext-manage host maintenance on HOST``; the pre-filter adds
the trait to the request's forbidden traits. nova-compute keeps traits set
through the placement API when it updates its provider.

An administrator can still target such a host on purpose with the scheduler
hint ``nova_ext:ignore_maintenance=true`` (typically with ``--host``); from
anyone else that hint fails the request with a clear reason.
"""

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import strutils

from nova import exception
from nova.scheduler.client import report
from nova.scheduler import request_filter

from nova_ext import cache

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

IGNORE_MAINTENANCE_HINT = 'nova_ext:ignore_maintenance'

# Traits this process made sure exist: placement refuses (400) a query that
# forbids an unknown trait, and no host carries it before the first
# "nova-ext-manage host maintenance on".
_traits_created = set()
cache.register_reset(_traits_created.clear)


def _ensure_trait_exists(trait):
    if trait in _traits_created:
        return
    resp = report.report_client_singleton().put(
        '/traits/%s' % trait, None, version='1.6')
    if resp.status_code not in (201, 204):
        raise exception.RequestFilterFailed(
            reason='placement refused to create trait %s: %s %s'
            % (trait, resp.status_code, resp.text))
    _traits_created.add(trait)


@request_filter.trace_request_filter
def exclude_hosts_in_maintenance(ctxt, request_spec):
    override = request_spec.get_scheduler_hint(IGNORE_MAINTENANCE_HINT)
    if override is not None and strutils.bool_from_string(override):
        if not ctxt.is_admin:
            raise exception.RequestFilterFailed(
                reason='scheduler hint %s=%s is for administrators only'
                % (IGNORE_MAINTENANCE_HINT, override))
        LOG.info("maintenance request filter: administrator request for "
                 "instance %s may land on hosts in maintenance",
                 request_spec.instance_uuid)
        return False
    trait = CONF.nova_ext.maintenance_trait
    _ensure_trait_exists(trait)
    request_spec.root_forbidden.add(trait)
    return True
