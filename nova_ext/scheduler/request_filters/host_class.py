# SPDX-License-Identifier: Apache-2.0
"""host_class: route a request to the hosts of its class inside placement.

Enable with ``[nova_ext] request_filters = host_class``. Operators tag host
aggregates with ``nova_ext:host_class=<class>`` (e.g. ``gpu``); a flavor
extra spec ``nova_ext:host_class=<class>`` (validated by nova-api) or an
image property ``nova_ext_host_class=<class>`` asks for that class (the
flavor wins). The pre-filter adds those aggregates as a ``member_of`` to the
placement query, so placement returns only hosts of the class: the
placement-side replacement for AggregateInstanceExtraSpecsFilter, which
filters in Python after placement returned up to 1,000 candidates.

A class no aggregate carries fails the request with a NoValidHost reason
naming it. With ``[nova_ext] host_class_isolation = true``, requests naming
no class are also kept off every classed aggregate (``!member_of``).
"""

from oslo_config import cfg
from oslo_log import log as logging

from nova import exception
from nova.scheduler import request_filter

from nova_ext.scheduler import aggregate_keys
from nova_ext.scheduler import fault_reasons
from nova_ext.scheduler import request_filters
from nova_ext.scheduler import scheduling_request

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

AGGREGATE_KEY = aggregate_keys.HOST_CLASS
EXTRA_SPEC = 'nova_ext:host_class'
IMAGE_PROPERTY = 'nova_ext_host_class'


def _image_class(ctxt, cloud, image):
    """The image's nova_ext_host_class property, as glance has it.

    Nova's ImageMetaProps keeps only the properties Nova knows, so the
    request spec does not carry this one.
    """
    if image is None or 'id' not in image:
        return None
    return cloud.image_properties(ctxt, image.id).get(IMAGE_PROPERTY)


def requested_class(ctxt, cloud, request_spec):
    flavor = request_spec.flavor if 'flavor' in request_spec else None
    host_class = (flavor.extra_specs or {}).get(EXTRA_SPEC) if flavor else None
    if host_class:
        return host_class
    if 'is_bfv' in request_spec and request_spec.is_bfv:
        return None
    image = request_spec.image if 'image' in request_spec else None
    return _image_class(ctxt, cloud, image)


@request_filter.trace_request_filter
def route_to_host_class(ctxt, request_spec):
    cloud = scheduling_request.of(request_spec).cloud
    host_class = requested_class(ctxt, cloud, request_spec)
    if not host_class and not CONF.nova_ext.host_class_isolation:
        return False
    aggregates = cloud.aggregates_with_key(ctxt, AGGREGATE_KEY)
    if not host_class:
        classed = {agg.uuid for agg in aggregates}
        if classed:
            request_filters.destination(
                request_spec).append_forbidden_aggregates(classed)
        return True
    matching = [agg.uuid for agg in aggregates
                if agg.metadata.get(AGGREGATE_KEY) == host_class]
    if not matching:
        known = sorted({agg.metadata[AGGREGATE_KEY] for agg in aggregates})
        raise exception.RequestFilterFailed(reason=fault_reasons.fitted(
            'no host aggregate has %s=%s (classes: %s)'
            % (AGGREGATE_KEY, host_class, ', '.join(known) or 'none'),
            exception.RequestFilterFailed))
    request_filters.destination(request_spec).require_aggregates(matching)
    LOG.debug('host_class request filter: class %s -> aggregates %s',
              host_class, ','.join(matching))
    return True
