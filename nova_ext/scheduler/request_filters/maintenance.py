# SPDX-License-Identifier: Apache-2.0
"""maintenance: hosts marked for maintenance never come back from placement.

Enable with ``[nova_ext] request_filters = maintenance``. A host is in
maintenance when its compute node resource provider carries the trait
``[nova_ext] maintenance_trait`` (default ``CUSTOM_NOVA_EXT_MAINTENANCE``),
set with ``nova-ext-manage host maintenance on HOST``, which creates the
trait in placement the first time; the pre-filter adds the trait to the
request's forbidden traits. It never writes to placement: while the trait
does not exist no host is in maintenance and it forbids nothing (placement
refuses a query forbidding a trait it does not know), which it asks the
request's cloud (``trait_exists``).
nova-compute keeps traits set through the placement API when it updates its
provider.

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
from nova.scheduler import request_filter

from nova_ext import policies
from nova_ext.scheduler import fault_reasons
from nova_ext.scheduler import scheduling_request

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

IGNORE_MAINTENANCE_HINT = 'nova_ext:ignore_maintenance'


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
                reason=fault_reasons.fitted(
                    'scheduler hint %s=%s is not allowed by policy %s '
                    '(default: administrators only)'
                    % (IGNORE_MAINTENANCE_HINT, override,
                       policies.IGNORE_MAINTENANCE),
                    exception.RequestFilterFailed))
        else:
            LOG.info("maintenance request filter: instance %s may land on "
                     "hosts in maintenance (policy %s allows its %s hint)",
                     request_spec.instance_uuid, policies.IGNORE_MAINTENANCE,
                     IGNORE_MAINTENANCE_HINT)
            return False
    trait = CONF.nova_ext.maintenance_trait
    exists = scheduling_request.of(request_spec).cloud.trait_exists(trait)
    if exists is True:
        request_spec.root_forbidden.add(trait)
        return True
    if exists is not False:
        LOG.warning("maintenance request filter: could not ask placement "
                    "whether trait %s exists (%s); hosts in maintenance are "
                    "not excluded from this request of instance %s",
                    trait, exists, request_spec.instance_uuid)
    # No such trait: no host is in maintenance (it is created by the first
    # "nova-ext-manage host maintenance on"), nothing to forbid.
    return False
