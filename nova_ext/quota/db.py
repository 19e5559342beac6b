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
* ``nova_ext_spread_claims``: the spread ledger, where each turn of a
  server group claimed hosts (:mod:`nova_ext.scheduler.spread_ledger`,
  which defines it).

The connection is ``[nova_ext_database] connection``, or Nova's
``[api_database] connection`` when that is unset.
"""

import datetime
import functools
import threading

from alembic import command
from alembic import config as alembic_config
from alembic import migration
from alembic import script
from nova.compute import vm_states
from nova import context as nova_context
from nova.db.api import api as api_db
from nova.db.api import models as api_models
from nova.db.main import api as main_db
from nova.db.main import models as main_models
from nova import objects
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

def limits_for(conf, context, project_id, flavorid, quota_class):
    """Limits that apply to one flavor for one project, and the flavors
    each covers.

    Returns ``(limits, members)``: limits is {(scope, name): {resource:
    limit}}, the project's own row winning over the ``*`` default; members
    is {(scope, name): [internal flavor ids]} for every scope in limits.

    One statement when nova-ext's tables are in Nova's API database (the
    default): the limits joined with the API database's flavors and flavor
    extra specs. With ``[nova_ext_database] connection`` elsewhere no join
    across the two databases is possible, and members is None: the caller
    asks :func:`flavors_in_scope` (one more statement).
    """
    scopes = [('flavor', flavorid)]
    if quota_class:
        scopes.append(('class', quota_class))
    if not shares_api_database(conf):
        return _limits(conf, project_id, scopes), None
    return _limits_and_members(conf, project_id, scopes)


def shares_api_database(conf):
    """Whether nova-ext's tables are in Nova's API database: ``[nova_ext_
    database] connection`` unset, or naming the same database (engine
    plugins and other URL options aside).
    """
    ours, nova = connection_url(conf), conf.api_database.connection
    if not ours or not nova:
        return False
    return _database(ours) == _database(nova)


@functools.lru_cache(maxsize=16)
def _database(url):
    url = sa.engine.make_url(url)
    return (url.get_backend_name(), url.username, url.password, url.host,
            url.port, url.database)


def _targets(table, scopes):
    return sa.or_(*[sa.and_(table.c.scope == scope, table.c.name == name)
                    for scope, name in scopes])


# The limits statement of limits_for, by number of scopes (1 or 2): built
# once, its values bound at each execution, so that neither building it nor
# computing its compiled-cache key costs a check anything.
_LIMITS_AND_MEMBERS = {}


def _limits_and_members_statement(scope_count):
    statement = _LIMITS_AND_MEMBERS.get(scope_count)
    if statement is not None:
        return statement

    limit = FlavorQuota.__table__
    flavors = api_models.Flavors.__table__
    specs = api_models.FlavorExtraSpecs.__table__
    statement = sa.select(
        limit.c.project_id, limit.c.scope, limit.c.name, limit.c.resource,
        limit.c.hard_limit, flavors.c.id, specs.c.flavor_id,
    ).select_from(
        limit.outerjoin(flavors, sa.and_(
            limit.c.scope == 'flavor', flavors.c.flavorid == limit.c.name,
        )).outerjoin(specs, sa.and_(
            limit.c.scope == 'class', specs.c.key == QUOTA_CLASS_SPEC,
            specs.c.value == limit.c.name,
        ))
    ).where(
        limit.c.project_id.in_(sa.bindparam('projects', expanding=True)),
        sa.or_(*[sa.and_(limit.c.scope == sa.bindparam('target_scope_%d' % i),
                         limit.c.name == sa.bindparam('target_name_%d' % i))
                 for i in range(scope_count)]))
    _LIMITS_AND_MEMBERS[scope_count] = statement
    return statement


def _limits_and_members(conf, project_id, scopes):
    params = {'projects': [project_id, DEFAULT_PROJECT]}
    for i, (scope, name) in enumerate(scopes):
        params['target_scope_%d' % i] = scope
        params['target_name_%d' % i] = name
    statement = _limits_and_members_statement(len(scopes))
    # A Core connection of the reader engine, not an ORM session: nothing
    # here is an object, and the session's begin/close costs the check
    # more Python than the statement does. The connection begins a
    # transaction at the statement and rolls it back once when closed
    # (a session, or enginefacade's reader.connection, rolls back twice:
    # its transaction, then the pool's reset on return).
    engine = context_manager(conf).reader.get_engine()
    with engine.connect() as connection:
        rows = connection.execute(statement, params).all()
    members = {}
    for row in rows:
        ids = members.setdefault((row.scope, row.name), [])
        member = row[5] if row.scope == 'flavor' else row[6]
        if member is not None and member not in ids:
            ids.append(member)
    return _merge(rows), members


def scope_limits(conf, project_id, scope, name):
    """{resource: limit} for one scope, as :func:`limits_for` applies them."""
    return _limits(conf, project_id, [(scope, name)]).get((scope, name), {})


def _limits(conf, project_id, scopes):
    with context_manager(conf).reader.using(_Ctx()) as session:
        rows = session.query(FlavorQuota).filter(
            FlavorQuota.project_id.in_([project_id, DEFAULT_PROJECT]),
            _targets(FlavorQuota.__table__, scopes)).all()
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


def reading(conf):
    """A session reading nova-ext's tables, for a ``with`` block."""
    return context_manager(conf).reader.using(_Ctx())


def writing(conf):
    """A session writing nova-ext's tables, one transaction, for a
    ``with`` block.
    """
    return context_manager(conf).writer.using(_Ctx())


# -- usage, counted in Nova's databases ---------------------------------------

def flavors_in_scope(context, scope, name):
    """Internal ids of the flavors a limit covers: one API-database query."""
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
    """Instances, cores and RAM of ``flavor_ids`` in ``project_id``: one
    statement per cell (:func:`count_instances`).
    """
    return count_instances(context, project_id, groups=[flavor_ids])[1][0]


def _zero(resources=RESOURCES):
    return {resource: 0 for resource in resources}


def count_instances(context, project_id, user_id=None, groups=(),
                    resources=RESOURCES):
    """Nova's instance counts and nova-ext's per-flavor ones, in one pass.

    Returns ``(totals, usages)``. ``totals`` is exactly what Nova's
    ``nova.quota._instances_cores_ram_count_legacy`` returns:
    {'project': {'instances': N, 'cores': N, 'ram': MB}} and, with
    ``user_id``, the same under 'user'; counted as Nova counts (not deleted,
    not soft-deleted, not the hidden copy of a cross-cell resize), in the
    cells Nova counts in. ``usages`` has one {resource: used} per entry of
    ``groups`` (each a collection of internal flavor ids, the flavors one
    limit covers), for ``resources`` only: the project's instances of those
    flavors as per-flavor quotas count them, i.e. the same, except
    instances in ERROR that never reached a host.

    One statement per cell, Nova's own (same WHERE, same ``LIMIT 1``) with
    conditional sums added for the user and for each group, where Nova runs
    one statement for the project and one more for the user. Each sum costs
    the database work on every row of the project: only ``resources`` are
    summed per group (those a limit caps).
    """
    groups = [tuple(sorted(set(group))) for group in groups]
    # The cells Nova itself counts instances in.
    if CONF.api.instance_list_per_project_cells:
        cells = objects.CellMappingList.get_by_project_id(context, project_id)
    else:
        nova_context.load_cells()
        cells = nova_context.CELLS
    # Each set of flavors once (a flavor limit and a class limit may cover
    # the same); a class without flavors has nothing to count.
    counted = list(dict.fromkeys(group for group in groups if group))
    results = nova_context.scatter_gather_cells(
        context, cells, nova_context.CELL_TIMEOUT, _count_in_cell,
        project_id, user_id, counted, resources)

    totals = {'project': _zero()}
    if user_id:
        totals['user'] = _zero()
    usages = {group: _zero(resources) for group in groups}
    for cell_uuid, row in results.items():
        if nova_context.is_cell_failure_sentinel(row):
            # As Nova's own counting does: a cell that does not answer
            # counts as empty rather than failing every create.
            LOG.warning('nova-ext: cell %s did not answer (%s); its '
                        'instances are not counted in quota usage',
                        cell_uuid, row)
            continue
        scopes = [totals['project']]
        if user_id:
            scopes.append(totals['user'])
        scopes.extend(usages[group] for group in counted)
        values = iter(row)
        for scope in scopes:
            for resource in scope:
                scope[resource] += int(next(values) or 0)
    return totals, [dict(usages[group]) for group in groups]


def _sums(instance, condition, resources=RESOURCES, unless=None):
    """``resources`` (instances, vCPUs, RAM) of the rows meeting
    ``condition`` and not ``unless``.
    """
    values = {'instances': 1, 'cores': instance.vcpus,
              'ram': instance.memory_mb}
    sums = []
    for resource in resources:
        value = values[resource]
        if unless is not None:
            # Tested only on the rows meeting ``condition`` (a few of the
            # project's, usually), and its own CASE: a NULL in it (vm_state
            # is nullable) then means "not unless", as in Python.
            value = sa.case((unless, 0), else_=value)
        sums.append(sa.func.sum(sa.case((condition, value), else_=0)))
    return sums


# The count statement of _count_in_cell, by (with a user, number of
# groups, resources summed per group): built once, the project, the user
# and each group's flavors bound at each execution, so that neither
# building it nor computing its compiled-cache key costs a check anything.
_COUNTS = {}


def _count_statement(with_user, group_count, resources):
    key = (with_user, group_count, resources)
    statement = _COUNTS.get(key)
    if statement is not None:
        return statement

    instance = main_models.Instance.__table__.c
    columns = [sa.func.count(instance.id), sa.func.sum(instance.vcpus),
               sa.func.sum(instance.memory_mb)]
    if with_user:
        columns += _sums(instance, instance.user_id == sa.bindparam('user'))
    # Never reached a host (e.g. lost the conductor's recheck): holds no
    # hardware. Counting them would let one burst of racing creates lock a
    # class for good. Nova counts them.
    lost = sa.and_(instance.vm_state == vm_states.ERROR,
                   instance.host == sql.null())
    for i in range(group_count):
        group = sa.bindparam('group_%d' % i, expanding=True)
        columns += _sums(instance, instance.instance_type_id.in_(group),
                         resources, unless=lost)
    # Nova's filters (nova.objects.instance.InstanceList.get_counts) and
    # its LIMIT 1 (its .first()): with the limit MariaDB reads the
    # project's rows through instances_project_id_idx, without it (or with
    # GROUP BY) it often scans the whole table. The same statement gets the
    # same plan, whatever the cell's mix of projects. (The project's
    # parameter is named as in Nova's statement.)
    statement = sa.select(*columns).where(
        instance.deleted == 0,
        sa.or_(instance.vm_state != vm_states.SOFT_DELETED,
               instance.vm_state == sql.null()),
        instance.project_id == sa.bindparam('project_id_1'),
        sa.or_(instance.hidden == sql.false(),
               instance.hidden == sql.null()),
    ).limit(1)
    _COUNTS[key] = statement
    return statement


def _count_in_cell(cctxt, project_id, user_id, groups, resources):
    """One row of one cell: the project's instances, cores and RAM (Nova's
    count), then the same for ``user_id`` if given, then ``resources`` for
    each group.
    """
    statement = _count_statement(bool(user_id), len(groups),
                                 tuple(resources))
    params = {'project_id_1': project_id}
    if user_id:
        params['user'] = user_id
    for i, group in enumerate(groups):
        params['group_%d' % i] = list(group)
    # The cell's own database (target_cell put it on the context), through
    # a Core connection: the row is three or more numbers, no objects, and
    # an ORM session's begin/close costs more Python than the statement.
    with main_db.get_context_manager(cctxt).reader.connection.using(
            cctxt) as connection:
        return tuple(connection.execute(statement, params).first())


VERSION_TABLE = 'nova_ext_alembic_version'


def _alembic_config():
    config = alembic_config.Config()
    config.set_main_option('script_location', 'nova_ext.quota:migrations')
    return config


def current_revision(conf):
    """The revision nova-ext's tables are at (None: never synced)."""
    engine = context_manager(conf).writer.get_engine()
    with engine.connect() as connection:
        return migration.MigrationContext.configure(
            connection, opts={'version_table': VERSION_TABLE}
        ).get_current_revision()


def head_revision():
    """The revision this nova-ext's migrations lead to."""
    return script.ScriptDirectory.from_config(
        _alembic_config()).get_current_head()


def sync(conf, revision='head'):
    """Create or upgrade nova-ext's tables (alembic); returns the revision."""
    config = _alembic_config()
    engine = context_manager(conf).writer.get_engine()
    with engine.begin() as connection:
        config.attributes['connection'] = connection
        command.upgrade(config, revision)
    return current_revision(conf)
