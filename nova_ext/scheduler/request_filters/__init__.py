# SPDX-License-Identifier: Apache-2.0
"""Placement request pre-filters: a plug point upstream Nova does not have.

Nova edits each request before asking placement for allocation candidates
with a hard-coded list of functions (``nova.scheduler.request_filter.
ALL_REQUEST_FILTERS``, run by ``process_reqspec`` in nova-scheduler). What a
pre-filter excludes never leaves placement's database, so it never reaches
the Python filters: that is what scales.

nova-ext adds functions ``f(context, request_spec) -> bool`` registered in
the ``nova_ext.scheduler.request_filters`` entry-point namespace. An
operator lists the ones to run, in order, after Nova's own::

    [nova_ext]
    request_filters = maintenance,host_class

Activation: :func:`activate` appends the configured pre-filters to Nova's
list, once per process, at nova-scheduler's start
(:func:`nova_ext.scheduler.activate`, run by the SQLAlchemy engine plugin
``?plugin=nova_ext`` on ``[api_database] connection``). It is idempotent
and logs one line saying what it activated. Nothing else in Nova is
touched, and no other process is affected.

A pre-filter that raises fails that request alone: its error becomes the
reason of a NoValidHost fault.
"""

import contextlib
import functools
import threading

from oslo_config import cfg
from oslo_log import log as logging
from stevedore import named

from nova import exception
from nova import objects

from nova_ext import conf as ext_conf
from nova_ext.scheduler import fault_reasons
from nova_ext import upstream

CONF = cfg.CONF
ext_conf.register_opts(CONF)
LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_ext.scheduler.request_filters'

_lock = threading.Lock()


def destination(request_spec):
    """The request spec's ``requested_destination``, made if it has none:
    where a pre-filter adds required or forbidden aggregates.
    """
    if ('requested_destination' not in request_spec or
            request_spec.requested_destination is None):
        request_spec.requested_destination = objects.Destination()
    return request_spec.requested_destination


def _guarded(name, function):
    """Turn any error of a pre-filter into a failure of this request."""

    @functools.wraps(function)
    def pre_filter(ctxt, request_spec):
        try:
            return function(ctxt, request_spec)
        except exception.RequestFilterFailed:
            raise
        except Exception as error:
            LOG.exception("nova-ext request filter %s failed for instance "
                          "%s", name, request_spec.instance_uuid)
            raise exception.RequestFilterFailed(
                reason=fault_reasons.fitted(
                    'nova-ext request filter %s failed: %s' % (name, error),
                    exception.RequestFilterFailed))

    pre_filter.nova_ext_name = name
    return pre_filter


def _load(names):
    def _log_missing(missing):
        LOG.error("nova-ext: [nova_ext] request_filters names %s, but no "
                  "such entry point is installed in %s; skipping",
                  ', '.join(missing), NAMESPACE)

    def _log_failure(manager, entry_point, error):
        LOG.error("nova-ext: skipping request filter %s = %s: it failed to "
                  "load: %s", entry_point.name, entry_point.value, error)

    manager = named.NamedExtensionManager(
        NAMESPACE, names, invoke_on_load=False, name_order=True,
        on_missing_entrypoints_callback=_log_missing,
        on_load_failure_callback=_log_failure)
    return [(ext.name, ext.plugin) for ext in manager]


def activate():
    """Append the pre-filters named in ``[nova_ext] request_filters`` to
    Nova's list, once; return their names.
    """
    with _lock:
        active = upstream.request_filters()
        already = [getattr(f, 'nova_ext_name', None) for f in active]
        names = [n for n in CONF.nova_ext.request_filters
                 if n not in already]
        for name, function in _load(names):
            active.append(_guarded(name, function))
        ours = [getattr(f, 'nova_ext_name') for f in active
                if hasattr(f, 'nova_ext_name')]
        if names:
            LOG.info("nova-ext: request filters active: %s",
                     ', '.join(ours) or 'none')
        return ours


@contextlib.contextmanager
def as_configured():
    """Nova's own pre-filters plus those ``[nova_ext] request_filters``
    names now, for the duration, as a nova-scheduler restarted with this
    configuration would run them; then the list as it was.

    For a process that does not schedule meanwhile (``nova-ext-manage
    explain --set``): the list is Nova's, shared by the whole process.
    """
    with _lock:
        active = upstream.request_filters()
        saved = list(active)
        active[:] = [f for f in saved if not hasattr(f, 'nova_ext_name')]
    try:
        activate()
        yield
    finally:
        with _lock:
            active[:] = saved
