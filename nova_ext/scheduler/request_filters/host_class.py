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
from nova.image import glance
from nova.scheduler import request_filter

from nova_ext import cache
from nova_ext.scheduler import aggregate_keys
from nova_ext.scheduler import request_filters

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

AGGREGATE_KEY = aggregate_keys.HOST_CLASS
EXTRA_SPEC = 'nova_ext:host_class'
IMAGE_PROPERTY = 'nova_ext_host_class'
image_classes = cache.TTLLookup('host_class_image_cache_seconds')


def _image_class(ctxt, image):
    """The image's nova_ext_host_class property, from glance.

    Nova's ImageMetaProps keeps only the properties Nova knows, so the
    request spec does not carry this one.
    """
    if image is None or 'id' not in image:
        return None

    def _ask_glance(image_id):
        model = cache.model()
        if model is not None:
            return model.image_properties(image_id).get(IMAGE_PROPERTY)
        meta = glance.API().get(ctxt, image_id)
        return (meta.get('properties') or {}).get(IMAGE_PROPERTY)

    return image_classes.get(image.id, _ask_glance)


def requested_class(ctxt, request_spec):
    flavor = request_spec.flavor if 'flavor' in request_spec else None
    host_class = (flavor.extra_specs or {}).get(EXTRA_SPEC) if flavor else None
    if host_class:
        return host_class
    if 'is_bfv' in request_spec and request_spec.is_bfv:
        return None
    image = request_spec.image if 'image' in request_spec else None
    return _image_class(ctxt, image)


@request_filter.trace_request_filter
def route_to_host_class(ctxt, request_spec):
    host_class = requested_class(ctxt, request_spec)
    if not host_class and not CONF.nova_ext.host_class_isolation:
        return False
    aggregates = request_filters.aggregates_with_key(ctxt, AGGREGATE_KEY)
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
        raise exception.RequestFilterFailed(
            reason='no host aggregate has %s=%s (classes: %s)'
            % (AGGREGATE_KEY, host_class, ', '.join(known) or 'none'))
    request_filters.destination(request_spec).require_aggregates(matching)
    LOG.debug('host_class request filter: class %s -> aggregates %s',
              host_class, ','.join(matching))
    return True
