# SPDX-License-Identifier: Apache-2.0
"""Activation of nova-ext in nova-api, nova-conductor and nova-scheduler,
from nova.conf.

Upstream Nova has no hook that loads third-party code in its processes
(beyond filters, weighers and extra-spec validators). They all open Nova's
databases through SQLAlchemy, and SQLAlchemy loads *engine plugins* named
in the connection URL from the ``sqlalchemy.plugins`` entry points. So the
operator writes, in nova.conf::

    [api_database]
    connection = mysql+pymysql://nova:secret@db/nova_api?plugin=nova_ext

    [nova_ext]
    quota_driver = per_flavor

(``nova-ext-manage configure nova`` writes it) and every Nova process that
opens the API database (nova-api under its WSGI server, every
nova-conductor worker, nova-scheduler) runs :class:`Plugin` when it creates
the engine: after oslo.log is set up, before the first request. In
nova-scheduler the plugin activates nova-ext's scheduler hooks
(:func:`nova_ext.scheduler.activate`: the request pre-filters and the
per-request wrapper); in nova-api and nova-conductor it activates the quota
driver ``[nova_ext]`` asks for, logs one line, records the activation in
``nova_ext_activations``, and logs an error when another Nova API or
conductor process that must activate it has not. A failure here is logged,
never raised: a broken nova-ext must not stop Nova's database from opening.
"""

import os
import threading

from oslo_config import cfg
from oslo_log import log as logging
from sqlalchemy.engine import CreateEnginePlugin

from nova_ext import conf as ext_conf

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

# The embedded cloud (one process playing every service) turns this off.
RECORD_ACTIVATIONS = True
SCHEDULER_BINARY = 'nova-scheduler'
# Nova binaries that must agree on the quota driver.
QUOTA_BINARIES = ('nova-osapi_compute', 'nova-conductor')


class Plugin(CreateEnginePlugin):
    """``?plugin=nova_ext`` in a Nova database connection URL."""

    def __init__(self, url, kwargs):
        super().__init__(url, kwargs)
        self.activated = activate_process()

    def update_url(self, url):
        return url  # SQLAlchemy already removed plugin=nova_ext

    def engine_created(self, engine):
        if self.activated and RECORD_ACTIVATIONS:
            # Not inline: oslo.db is still starting this engine under its
            # lock, and the comparison reads Nova's databases through it.
            threading.Thread(target=record_and_compare,
                             args=(self.activated,), daemon=True,
                             name='nova-ext-activation').start()


# (host, binary, pid) activations this process has recorded in the API
# database: each once per process (a handful: the process's binaries);
# forgotten by forget_recorded()
_recorded = set()
_record_lock = threading.Lock()


def activate_process(conf=CONF, binary=None):
    """Activate nova-ext's process-wide plug points; return what is active.

    Idempotent: Nova opens several engines per process.
    """
    ext_conf.register_opts(conf)
    # here: every Nova process loads this plugin; each imports its own hooks
    from nova_ext import quota
    if (binary or quota.process_binary()) == SCHEDULER_BINARY:
        # nova-scheduler checks no quota: its hooks are the scheduler's
        activate_scheduler()
        return None
    try:
        name = quota.activate(conf, binary=binary)
    except Exception as error:  # noqa: a plugin must not break Nova's DB
        LOG.error('nova-ext: quota driver %(name)s NOT activated in '
                  '%(binary)s pid %(pid)d: %(error)s',
                  {'name': conf.nova_ext.quota_driver,
                   'binary': binary or quota.process_binary(),
                   'pid': os.getpid(), 'error': error})
        return None
    if not name:
        return None
    return {'quota_driver': name,
            'binary': binary or quota.process_binary(),
            'host': quota.process_host(conf)}


def activate_scheduler():
    """nova-ext's scheduler hooks (:func:`nova_ext.scheduler.activate`);
    a failure is logged, never raised.
    """
    # here: every Nova process loads this plugin; each imports its own hooks
    from nova_ext import scheduler
    try:
        active = scheduler.activate()
    except Exception as error:  # noqa: a plugin must not break Nova's DB
        LOG.error('nova-ext: scheduler hooks NOT activated in pid %(pid)d: '
                  '%(error)s; spread requests will be refused',
                  {'pid': os.getpid(), 'error': error})
        return
    LOG.info('nova-ext: scheduler hooks active in pid %(pid)d (request '
             'filters: %(filters)s)', {'pid': os.getpid(),
                                       'filters': ', '.join(active) or
                                       'none'})


def forget_recorded():
    """Tests and the sandbox start many clouds in one process."""
    with _record_lock:
        _recorded.clear()


def record_and_compare(active, conf=CONF):
    """Write this process's activation; log processes that disagree."""
    if active['binary'] not in QUOTA_BINARIES:
        return  # nova-scheduler, nova-manage ...: quota is not checked there
    key = (active['host'], active['binary'], os.getpid())
    with _record_lock:
        if key in _recorded:
            return
        _recorded.add(key)
    # here: every Nova process loads this plugin; each imports its own hooks
    from nova_ext.quota import db
    try:
        db.record_activation(conf, active['host'], active['binary'],
                             os.getpid(), active['quota_driver'])
        problems = list(_problems(conf, active['quota_driver']))
    except Exception as error:  # noqa: see the module docstring
        LOG.error('nova-ext: could not record the quota driver activation '
                  '(did you run "nova-ext-manage db sync"?): %s', error)
        return
    for problem, recorded in problems:
        if recorded:
            LOG.error('nova-ext: %s; per-flavor quotas are only as strong '
                      'as the weakest process: run "nova-ext-manage quota '
                      'check"', problem)
        else:
            # It may be starting now, registered but not yet activated (a
            # cloud's services start in any order): quota check, run once
            # they all run, is the one to say for sure.
            LOG.warning('nova-ext: %s, or it is still starting; per-flavor '
                        'quotas are only as strong as the weakest process: '
                        'run "nova-ext-manage quota check" once every '
                        'service runs', problem)


# What ``quota check`` shows for a cell conductor that recorded nothing.
CELL_CONDUCTOR = 'not needed (cell conductor)'


def activation_states(conf, expected_driver):
    """Every Nova API and conductor service, and every recorded activation:
    (binary, host, recorded driver or None, when or None, agrees).

    The one place that decides which processes must activate nova-ext: the
    log line a process writes at start (:func:`record_and_compare`),
    ``nova-ext-manage quota check`` and ``nova-ext-status upgrade check``
    all read it.

    With a superconductor (DevStack's and the docs' multi-cell layout) the
    conductors of the cells check no quota and cannot reach the API
    database: one that recorded nothing agrees, its ``when`` is
    :data:`CELL_CONDUCTOR`. In a single-conductor deployment that conductor
    is the one nova-api casts to, and must agree. A superconductor is known
    by a nova-conductor registered in cell0, or -- while it starts, before
    its service record exists -- by its own recorded activation: a
    nova-conductor that reached the API database and is registered as no
    cell's conductor.
    """
    # here: every Nova process loads this plugin; each imports its own hooks
    from nova_ext.quota import db
    recorded = {(host, binary): (driver, when) for host, binary, _pid,
                driver, when in db.list_activations(conf)
                if binary in QUOTA_BINARIES}
    services = nova_services_by_cell(conf)
    in_cells = {host for host, binary, is_cell0 in services
                if binary == 'nova-conductor' and not is_cell0}
    superconductor = any(
        binary == 'nova-conductor' and is_cell0
        for _host, binary, is_cell0 in services) or any(
        binary == 'nova-conductor' and host not in in_cells
        for host, binary in recorded)
    cell_conductors = {(host, 'nova-conductor') for host in in_cells
                       if superconductor}
    states = []
    for host, binary in sorted({(host, binary) for host, binary, _ in
                                services} | set(recorded)):
        driver, when = recorded.get((host, binary), (None, None))
        if when is None and (host, binary) in cell_conductors:
            states.append((binary, host, None, CELL_CONDUCTOR, True))
            continue
        states.append((binary, host, driver, when,
                       (driver or None) == (expected_driver or None)))
    return states


def consistency_problems(conf, expected_driver):
    """Processes that recorded a different quota driver, and Nova API and
    conductor services that never recorded any.
    """
    return [problem for problem, _recorded in _problems(conf,
                                                        expected_driver)]


def _problems(conf, expected_driver):
    """(problem, whether the process recorded an activation) of each that
    disagrees.
    """
    for binary, host, driver, when, agrees in activation_states(
            conf, expected_driver):
        if agrees:
            continue
        if when is None:
            yield ('%s on %s has not activated nova-ext (no '
                   '?plugin=nova_ext in its [api_database] connection, or '
                   'not restarted)' % (binary, host)), False
        else:
            yield ('%s on %s runs quota driver %s, not %s' % (
                binary, host, driver or 'none', expected_driver)), True


def nova_services_by_cell(conf):
    """(host, binary, registered in cell0) of Nova's API and conductor
    services in all cells.
    """
    # here: every Nova process loads this plugin; each imports its own hooks
    from nova import context as nova_context
    from nova import objects

    objects.register_all()
    ctxt = nova_context.get_admin_context()
    found = set()

    def services_in_cell(cctxt):
        return [(s.host, s.binary) for binary in QUOTA_BINARIES
                for s in objects.ServiceList.get_by_binary(cctxt, binary)]

    results = nova_context.scatter_gather_all_cells(ctxt, services_in_cell)
    for cell_uuid, result in results.items():
        if not nova_context.is_cell_failure_sentinel(result):
            found.update((host, binary,
                          cell_uuid == objects.CellMapping.CELL0_UUID)
                         for host, binary in result)
    return sorted(found)
