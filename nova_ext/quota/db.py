# SPDX-License-Identifier: Apache-2.0
"""nova-ext's own tables, through oslo.db, and usage counting in Nova's cells.

Tables (created by ``nova-ext-manage db sync``, alembic migrations in
``nova_ext/quota/migrations``):

* ``nova_ext_flavor_quotas``: one row per (project, scope, name, resource)
  limit. ``project_id`` ``*`` is the default for every project; ``scope`` is
  ``flavor`` (``name`` = flavor ID) or ``class`` (``name`` = the flavor
  extra spec ``nova_ext:quota_class``); ``resource`` is ``instances``,
  ``cores`` or ``ram``. A project's own row wins over the default.
* ``nova_ext_activations``: which process on which host activated which
  quota driver, and when (``nova-ext-manage quota check`` reads it).

The connection is ``[nova_ext_database] connection``, or Nova's
``[api_database] connection`` when that is unset.
"""

import datetime
import threading

from oslo_config import cfg
from oslo_db.sqlalchemy import enginefacade
from oslo_db.sqlalchemy import models
from oslo_log import log as logging
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy import sql

from nova_ext import errors

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

DEFAULT_PROJECT = '*'
SCOPES = ('flavor', 'class')
RESOURCES = ('instances', 'cores', 'ram')
QUOTA_CLASS_SPEC = 'nova_ext:quota_class'

BASE = orm.declarative_base()


class FlavorQuota(BASE, models.ModelBase, models.TimestampMixin):
    __tablename__ = 'nova_ext_flavor_quotas'
    __table_args__ = (
        sa.UniqueConstraint('project_id', 'scope', 'name', 'resource',
                            name='uniq_nova_ext_flavor_quotas0limit'),
        sa.Index('nova_ext_flavor_quotas_scope_name_idx', 'scope', 'name'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    project_id = sa.Column(sa.String(255), nullable=False)
    scope = sa.Column(sa.String(16), nullable=False)
    name = sa.Column(sa.String(255), nullable=False)
    resource = sa.Column(sa.String(16), nullable=False)
    hard_limit = sa.Column(sa.Integer, nullable=False)


class Activation(BASE, models.ModelBase, models.TimestampMixin):
    __tablename__ = 'nova_ext_activations'
    __table_args__ = (
        sa.UniqueConstraint('host', 'binary',
                            name='uniq_nova_ext_activations0host0binary'),
    )

    id = sa.Column(sa.Integer, primary_key=True, autoincrement=True)
    host = sa.Column(sa.String(255), nullable=False)
    binary = sa.Column(sa.String(255), nullable=False)
    pid = sa.Column(sa.Integer, nullable=False)
    quota_driver = sa.Column(sa.String(255), nullable=True)


_LOCK = threading.Lock()
_CONTEXT = None
_CONTEXT_URL = None


class NoDatabase(errors.OperatorError):
    """nova.conf names no database for nova-ext's tables."""


def connection_url(conf):
    return (conf.nova_ext_database.connection
            or conf.api_database.connection)


def context_manager(conf):
    """The enginefacade for our tables; rebuilt if the connection changes."""
    global _CONTEXT, _CONTEXT_URL
    url = connection_url(conf)
    if not url:
        raise NoDatabase('no database in nova.conf: set [nova_ext_database] '
                         'connection or [api_database] connection')
    with _LOCK:
        if _CONTEXT is None or _CONTEXT_URL != url:
            ctxt = enginefacade.transaction_context()
            options = dict(conf.nova_ext_database.items())
            options['connection'] = url
            options.pop('slave_connection', None)
            ctxt.configure(**options)
            _CONTEXT, _CONTEXT_URL = ctxt, url
        return _CONTEXT


def reset():
    """Forget the engine (tests and the sandbox start many clouds)."""
    global _CONTEXT, _CONTEXT_URL
    with _LOCK:
        if _CONTEXT is not None:
            _CONTEXT.dispose_pool()
        _CONTEXT = _CONTEXT_URL = None


# -- limits -------------------------------------------------------------------

def limits_for(conf, project_id, flavorid, quota_class):
    """Limits that apply to one flavor for one project: one query.

    Returns {(scope, name): {resource: limit}}, the project's own row
    winning over the ``*`` default.
    """
    scopes = [('flavor', flavorid)]
    if quota_class:
        scopes.append(('class', quota_class))
    return _limits(conf, project_id, scopes)


def scope_limits(conf, project_id, scope, name):
    """{resource: limit} for one scope, as :func:`limits_for` applies them."""
    return _limits(conf, project_id, [(scope, name)]).get((scope, name), {})


def _limits(conf, project_id, scopes):
    targets = [sa.and_(FlavorQuota.scope == scope, FlavorQuota.name == name)
               for scope, name in scopes]
    with context_manager(conf).reader.using(_Ctx()) as session:
        rows = session.query(FlavorQuota).filter(
            FlavorQuota.project_id.in_([project_id, DEFAULT_PROJECT]),
            sa.or_(*targets)).all()
    return _merge(rows)


def _merge(rows):
    limits = {}
    # Defaults first, so the project's own rows overwrite them.
    for row in sorted(rows, key=lambda r: r.project_id != DEFAULT_PROJECT):
        limits.setdefault((row.scope, row.name), {})[row.resource] = (
            row.hard_limit)
    return limits


def list_limits(conf, project_id=None, scope=None, name=None):
    with context_manager(conf).reader.using(_Ctx()) as session:
        query = session.query(FlavorQuota)
        if project_id:
            query = query.filter(FlavorQuota.project_id == project_id)
        if scope:
            query = query.filter(FlavorQuota.scope == scope)
        if name:
            query = query.filter(FlavorQuota.name == name)
        return [(r.project_id, r.scope, r.name, r.resource, r.hard_limit)
                for r in query.order_by(FlavorQuota.project_id,
                                        FlavorQuota.scope, FlavorQuota.name,
                                        FlavorQuota.resource)]


def set_limits(conf, project_id, scope, name, limits):
    """Create or update limits: ``limits`` is {resource: int}."""
    with context_manager(conf).writer.using(_Ctx()) as session:
        for resource, value in limits.items():
            row = session.query(FlavorQuota).filter_by(
                project_id=project_id, scope=scope, name=name,
                resource=resource).first()
            if row is None:
                session.add(FlavorQuota(
                    project_id=project_id, scope=scope, name=name,
                    resource=resource, hard_limit=value))
            else:
                row.hard_limit = value


def delete_limits(conf, project_id, scope, name, resources=RESOURCES):
    with context_manager(conf).writer.using(_Ctx()) as session:
        return session.query(FlavorQuota).filter(
            FlavorQuota.project_id == project_id,
            FlavorQuota.scope == scope, FlavorQuota.name == name,
            FlavorQuota.resource.in_(list(resources))).delete(
                synchronize_session=False)


# -- activations --------------------------------------------------------------

def record_activation(conf, host, binary, pid, quota_driver):
    with context_manager(conf).writer.using(_Ctx()) as session:
        row = session.query(Activation).filter_by(
            host=host, binary=binary).first()
        if row is None:
            session.add(Activation(host=host, binary=binary, pid=pid,
                                   quota_driver=quota_driver))
        else:
            row.pid = pid
            row.quota_driver = quota_driver
            # An unchanged row would keep its old updated_at.
            row.updated_at = datetime.datetime.utcnow()


def list_activations(conf):
    with context_manager(conf).reader.using(_Ctx()) as session:
        return [(r.host, r.binary, r.pid, r.quota_driver,
                 r.updated_at or r.created_at)
                for r in session.query(Activation).order_by(
                    Activation.binary, Activation.host)]


@enginefacade.transaction_context_provider
class _Ctx:
    """What enginefacade hangs a transaction on, outside Nova's contexts."""


# -- usage, counted in Nova's databases ---------------------------------------

def flavors_in_scope(context, scope, name):
    """Internal ids of the flavors a limit covers: one API-database query."""
    from nova.db.api import api as api_db
    from nova.db.api import models as api_models

    with api_db.context_manager.reader.using(context):
        if scope == 'flavor':
            rows = context.session.query(api_models.Flavors.id).filter(
                api_models.Flavors.flavorid == name)
        else:
            rows = context.session.query(
                api_models.FlavorExtraSpecs.flavor_id).filter(
                    api_models.FlavorExtraSpecs.key == QUOTA_CLASS_SPEC,
                    api_models.FlavorExtraSpecs.value == name)
        return [row[0] for row in rows]


def count_usage(context, project_id, flavor_ids):
    """Instances, cores and RAM of ``flavor_ids`` in ``project_id``.

    One indexed query per cell (instances_project_id_deleted_idx), counted
    the way Nova counts its own instances/cores/ram (not deleted, not
    soft-deleted, not the hidden copy of a cross-cell resize), except that
    instances in ERROR without a host are not counted.
    """
    from nova.compute import vm_states
    from nova import context as nova_context
    from nova.db.main import api as main_db
    from nova.db.main import models as main_models

    usage = {'instances': 0, 'cores': 0, 'ram': 0}
    if not flavor_ids:
        return usage
    instance = main_models.Instance

    def count_in_cell(cctxt):
        # The cell's own database: target_cell put it on the context.
        with main_db.get_context_manager(cctxt).reader.using(cctxt):
            return cctxt.session.query(
                sa.func.count(instance.id), sa.func.sum(instance.vcpus),
                sa.func.sum(instance.memory_mb)).filter(
                    instance.deleted == 0,
                    instance.project_id == project_id,
                    instance.instance_type_id.in_(list(flavor_ids)),
                    sa.or_(instance.vm_state != vm_states.SOFT_DELETED,
                           instance.vm_state == sql.null()),
                    sa.or_(instance.hidden == sql.false(),
                           instance.hidden == sql.null()),
                    # Never reached a host (e.g. lost the conductor's
                    # recheck): holds no hardware. Counting them would let
                    # one burst of racing creates lock the class for good.
                    sa.not_(sa.and_(instance.vm_state == vm_states.ERROR,
                                    instance.host == sql.null()))).first()

    # The cells Nova itself counts for instances quota.
    from nova import objects
    if CONF.api.instance_list_per_project_cells:
        cells = objects.CellMappingList.get_by_project_id(context, project_id)
    else:
        nova_context.load_cells()
        cells = nova_context.CELLS
    results = nova_context.scatter_gather_cells(
        context, cells, nova_context.CELL_TIMEOUT, count_in_cell)
    for cell_uuid, result in results.items():
        if nova_context.is_cell_failure_sentinel(result):
            # As Nova's own counting does: a cell that does not answer
            # counts as empty rather than failing every create.
            LOG.warning('nova-ext: cell %s did not answer (%s); its '
                        'instances are not counted in per-flavor quota '
                        'usage', cell_uuid, result)
            continue
        usage['instances'] += int(result[0] or 0)
        usage['cores'] += int(result[1] or 0)
        usage['ram'] += int(result[2] or 0)
    return usage


VERSION_TABLE = 'nova_ext_alembic_version'


def _alembic_config():
    from alembic import config as alembic_config

    config = alembic_config.Config()
    config.set_main_option('script_location', 'nova_ext.quota:migrations')
    return config


def current_revision(conf):
    """The revision nova-ext's tables are at (None: never synced)."""
    from alembic import migration

    engine = context_manager(conf).writer.get_engine()
    with engine.connect() as connection:
        return migration.MigrationContext.configure(
            connection, opts={'version_table': VERSION_TABLE}
        ).get_current_revision()


def head_revision():
    """The revision this nova-ext's migrations lead to."""
    from alembic import script

    return script.ScriptDirectory.from_config(
        _alembic_config()).get_current_head()


def sync(conf, revision='head'):
    """Create or upgrade nova-ext's tables (alembic); returns the revision."""
    from alembic import command

    config = _alembic_config()
    engine = context_manager(conf).writer.get_engine()
    with engine.begin() as connection:
        config.attributes['connection'] = connection
        command.upgrade(config, revision)
    return current_revision(conf)
