# SPDX-License-Identifier: Apache-2.0
"""Quota driver plug point: ``[nova_ext] quota_driver``.

Nova only accepts its three in-tree ``[quota] driver`` classes and asks the
driver nothing about flavors. nova-ext installs the driver named by
``[nova_ext] quota_driver`` (an entry point in ``nova_ext.quota.drivers``)
as the driver of Nova's quota engine ``nova.quota.QUOTAS``, and hands it the
flavor at the two places Nova checks instance quota:

* ``nova.compute.utils.check_num_instances_quota``: server create and
  restore in nova-api, and the recheck nova-conductor runs after creating
  the instances (``[quota] recheck_quota``);
* ``nova.compute.api.API._check_quota_for_upsize``: resize and resize
  revert in nova-api.

A driver may define ``check_flavor_instances(context, flavor, min_count,
max_count, project_id, orig_num_req)`` (returns how many of max_count may be
created, or raises ``nova.exception.TooManyInstances``) and
``check_flavor_resize(context, project_id, current_flavor, new_flavor)``,
and ``prepare_flavor_check(context, project_id, flavor)``, called before
Nova's check with the flavor the request asks for (the new flavor of a
resize).

A driver may also define ``count_instances_cores_ram(context, project_id,
user_id=None)``: it replaces Nova's own count of instances, cores and RAM in
the cells (``nova.quota._instances_cores_ram_count_legacy``, what Nova's
check runs unless ``[quota] count_usage_from_placement``) and must return
what Nova's returns. Nova's check and the driver's flavor check run inside
one :func:`check_memo` scope, so what the driver prepares (the per_flavor
driver: the limits on the flavor and the flavors they cover) tells the
count what else to count, and what the count learns on the way (their
usage) serves the flavor check without a second pass over the same rows.

:func:`activate` runs in every process that opens a database through a URL
with ``?plugin=nova_ext`` (see :mod:`nova_ext.activation`): nova-api and
nova-conductor both do. It is idempotent and logs one line.
"""

import contextlib
import contextvars
import functools
import os
import socket
import sys

from oslo_config import cfg
from oslo_db import exception as db_exception
from oslo_log import log as logging
from sqlalchemy import exc as sqlalchemy_exc
from stevedore import driver as stevedore_driver

from nova import exception

from nova_ext import conf as ext_conf
from nova_ext import upstream

CONF = cfg.CONF
ext_conf.register_opts(CONF)
LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_ext.quota.drivers'
NOVA_DB_DRIVER = 'nova.quota.DbQuotaDriver'
# The engine's test-only override slot (QuotaEngine.__init__ quota_driver).
_ENGINE_DRIVER = 'nova.quota.QUOTAS._QuotaEngine__driver_override'
_INSTANCES_CHECK = 'nova.compute.utils.check_num_instances_quota'
_UPSIZE_CHECK = 'nova.compute.api.API._check_quota_for_upsize'
_NOVA_COUNT = 'nova.quota._instances_cores_ram_count_legacy'

_active = {}  # name, driver, originals ({path: what Nova had there})

# What Nova's count and the driver's flavor check of one quota check share
# (see check_memo); None outside a check. A context variable: the count and
# the check run in the request's thread (or greenthread), and a thread that
# serves the next request must not see this one's numbers.
_memo = contextvars.ContextVar('nova_ext_quota_check', default=None)


class ActivationError(Exception):
    pass


def activate(conf=CONF, binary=None):
    """Install ``[nova_ext] quota_driver`` in this process; idempotent.

    Returns the driver name that is active afterwards (None: none).
    """
    name = conf.nova_ext.quota_driver
    if not name:
        return None
    if _active.get('name') == name:
        return name
    if _active:
        deactivate()
    if conf.quota.driver != NOVA_DB_DRIVER:
        raise ActivationError(
            '[nova_ext] quota_driver = %s needs [quota] driver = %s; it is '
            '%s' % (name, NOVA_DB_DRIVER, conf.quota.driver))

    manager = stevedore_driver.DriverManager(
        NAMESPACE, name, invoke_on_load=True)
    quota_driver = manager.driver

    originals = {_ENGINE_DRIVER: upstream.patch(_ENGINE_DRIVER, quota_driver)}
    if hasattr(quota_driver, 'check_flavor_instances'):
        originals[_INSTANCES_CHECK] = upstream.patch(
            _INSTANCES_CHECK, _with_flavor_check(
                upstream.get(_INSTANCES_CHECK), quota_driver))
    if hasattr(quota_driver, 'check_flavor_resize'):
        originals[_UPSIZE_CHECK] = upstream.patch(
            _UPSIZE_CHECK, staticmethod(_with_resize_check(
                upstream.get(_UPSIZE_CHECK), quota_driver)))
    if hasattr(quota_driver, 'count_instances_cores_ram'):
        originals[_NOVA_COUNT] = upstream.patch(
            _NOVA_COUNT, quota_driver.count_instances_cores_ram)
    _active.update(name=name, driver=quota_driver, originals=originals)
    LOG.info('nova-ext: quota driver active: %(name)s (%(cls)s) in '
             '%(binary)s pid %(pid)d',
             {'name': name, 'cls': type(quota_driver).__name__,
              'binary': binary or process_binary(), 'pid': os.getpid()})
    return name


def deactivate():
    """Give Nova its own quota code back (tests and the sandbox)."""
    if not _active:
        return
    for path, original in _active['originals'].items():
        upstream.patch(path, original)
    _active.clear()


def process_binary():
    """Nova's service binary name for this process, as in its services
    table: nova-api's WSGI application registers as nova-osapi_compute.
    """
    program = os.path.basename(sys.argv[0]) if sys.argv else ''
    if program.startswith('nova-') and not program.startswith('nova-api'):
        return program  # nova-conductor, nova-scheduler, nova-manage ...
    if 'nova.api.openstack.wsgi_app' in sys.modules:
        return 'nova-osapi_compute'
    return program or 'python'


def process_host(conf=CONF):
    try:
        return conf.host
    except cfg.NoSuchOptError:
        return socket.gethostname()


class QuotaUnavailable(exception.TooManyInstances):
    """A quota check that could not read its database: the request is
    refused as over quota would be (HTTP 403 from nova-api, the server in
    ERROR with this fault after nova-conductor's recheck), never let past
    a limit nobody could read.
    """
    msg_fmt = ('Quota could not be checked, so the request is refused: '
               '%(error)s')


@contextlib.contextmanager
def _one_check():
    token = _memo.set({})
    try:
        yield
    except (db_exception.DBError, sqlalchemy_exc.SQLAlchemyError) as error:
        LOG.error('nova-ext: quota check failed on its database, request '
                  'refused: %s', error)
        raise QuotaUnavailable(error='%s: %s' % (
            type(error).__name__, str(error).splitlines()[0][:200]))
    finally:
        _memo.reset(token)


def check_memo():
    """The dict Nova's count and the driver's flavor check of the quota
    check running in this thread share: empty when the check starts,
    forgotten when it ends. None outside a check (Nova counting for another
    reason, e.g. the quota-sets API showing usage).
    """
    return _memo.get()


def _prepare(quota_driver, context, project_id, flavor):
    prepare = getattr(quota_driver, 'prepare_flavor_check', None)
    if prepare is not None:
        prepare(context, project_id, flavor)


def _with_flavor_check(nova_check, quota_driver):
    @functools.wraps(nova_check)
    def checked(context, flavor, min_count, max_count, project_id=None,
                user_id=None, orig_num_req=None):
        with _one_check():
            _prepare(quota_driver, context, project_id or context.project_id,
                     flavor)
            allowed = nova_check(context, flavor, min_count, max_count,
                                 project_id=project_id, user_id=user_id,
                                 orig_num_req=orig_num_req)
            return quota_driver.check_flavor_instances(
                context, flavor, min_count, allowed,
                project_id or context.project_id, orig_num_req)
    return checked


def _with_resize_check(nova_check, quota_driver):
    @functools.wraps(nova_check)
    def checked(context, instance, current_flavor, new_flavor, is_bfv,
                is_revert):
        with _one_check():
            _prepare(quota_driver, context, instance.project_id, new_flavor)
            nova_check(context, instance, current_flavor, new_flavor,
                       is_bfv, is_revert)
            # A revert moves the instance back into its old flavor's
            # scope, which others may have filled meanwhile: checked the
            # same way.
            quota_driver.check_flavor_resize(
                context, instance.project_id, current_flavor, new_flavor)
    return checked
