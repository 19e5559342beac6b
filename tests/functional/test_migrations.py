# SPDX-License-Identifier: Apache-2.0
"""nova-ext's own schema history (``nova_ext/quota/migrations``), walked as
oslo.db's and Nova's migration tests walk theirs.

For every revision before head: a fresh database is upgraded to it with
``nova-ext-manage db sync``'s code (:func:`nova_ext.quota.db.sync`), every
table that exists there gets rows (made from the reflected columns, so a
table added by a later migration gets rows too when the walk starts after
it), and the database is upgraded one revision at a time to head. After each
step every row put in is still there, column for column, unless
:data:`DATA_CHANGES` says the step changes it. Run on the machine's MariaDB
(a database of its own, created and dropped here) and on sqlite.

And the models (:data:`nova_ext.quota.db.BASE`, the tables
``nova_ext.quota.db`` and ``nova_ext.scheduler.spread_ledger`` define) match
the head revision: a model changed without a migration fails
(oslo.db's ``ModelsMigrationsSync``).
"""

import datetime
import os

from alembic import script
import fixtures
from oslo_config import cfg
from oslo_config import fixture as config_fixture
from oslo_db.sqlalchemy import test_migrations
import sqlalchemy as sa
import testtools

from nova_ext import conf as ext_conf
from nova_ext.quota import db as ext_db
from nova_ext.scheduler import spread_ledger
from tests.system import processes

CONF = cfg.CONF
ROWS_PER_TABLE = 3
WHEN = datetime.datetime(2026, 3, 1, 12, 30, 15)

# {revision: function(table name, rows before) -> rows expected after}, for
# a migration that changes data on purpose (a column split, a unit
# change...). The walk checks every other step keeps every row unchanged.
DATA_CHANGES = {}


def revisions():
    """Every revision of nova-ext's history, oldest first."""
    directory = script.ScriptDirectory.from_config(ext_db._alembic_config())
    return [r.revision for r in reversed(list(directory.walk_revisions()))]


def _value(column, row):
    """A value of ``column``'s type for row number ``row`` (distinct per
    row, so unique constraints hold).
    """
    kind = column.type
    if isinstance(kind, sa.DateTime):
        return WHEN + datetime.timedelta(minutes=row)
    if isinstance(kind, (sa.Integer, sa.Numeric)):
        return 1000 + row
    if isinstance(kind, sa.Boolean):
        return bool(row % 2)
    if isinstance(kind, sa.String):
        text = '%s-%d' % (column.name, row)
        return text[:kind.length] if kind.length else text
    raise AssertionError('no test value for %s.%s (%r): teach _value this '
                         'type' % (column.table.name, column.name, kind))


class MigrationWalk(object):
    """The walk, for a database the subclass names."""

    def database_url(self):
        raise NotImplementedError

    def setUp(self):
        super().setUp()
        ext_conf.register_opts(CONF)
        self.conf = self.useFixture(config_fixture.Config(CONF))
        ext_db.reset()
        self.addCleanup(ext_db.reset)

    def fresh_database(self):
        """A new empty database; nova-ext's tables synced into it."""
        url = self.database_url()
        self.conf.config(connection=url, group='nova_ext_database')
        ext_db.reset()
        return url

    def tables(self, url):
        engine = sa.create_engine(url)
        self.addCleanup(engine.dispose)
        metadata = sa.MetaData()
        metadata.reflect(engine)
        return engine, {name: table for name, table in metadata.tables.items()
                        if name != ext_db.VERSION_TABLE}

    def seed(self, url):
        """Rows in every table there is; {table: [row dicts]}."""
        engine, tables = self.tables(url)
        self.assertNotEqual({}, tables)
        seeded = {}
        with engine.begin() as connection:
            for name, table in tables.items():
                rows = [{c.name: _value(c, n) for c in table.columns}
                        for n in range(ROWS_PER_TABLE)]
                connection.execute(table.insert(), rows)
                seeded[name] = rows
        return seeded

    def read(self, url, names):
        engine, tables = self.tables(url)
        found = {}
        with engine.connect() as connection:
            for name in names:
                self.assertIn(name, tables, 'table %s is gone' % name)
                table = tables[name]
                rows = connection.execute(sa.select(table).order_by(
                    *table.primary_key.columns))
                found[name] = [dict(row._mapping) for row in rows]
        return found

    def test_every_revision_upgrades_to_head_keeping_its_rows(self):
        history = revisions()
        self.assertEqual(ext_db.head_revision(), history[-1])
        self.assertGreater(len(history), 1)
        for start in history[:-1]:
            url = self.fresh_database()
            self.assertEqual(start, ext_db.sync(CONF, start))
            expected = self.seed(url)
            for step in history[history.index(start) + 1:]:
                self.assertEqual(step, ext_db.sync(CONF, step))
                change = DATA_CHANGES.get(step)
                if change:
                    expected = {name: change(name, rows)
                                for name, rows in expected.items()}
                self.assertEqual(
                    expected, self.read(url, expected),
                    'rows put in at revision %s differ after the upgrade to '
                    '%s' % (start, step))
            self.assertEqual(ext_db.head_revision(),
                             ext_db.current_revision(CONF))

    def test_sync_twice_changes_nothing(self):
        url = self.fresh_database()
        ext_db.sync(CONF)
        expected = self.seed(url)
        self.assertEqual(ext_db.head_revision(), ext_db.sync(CONF))
        self.assertEqual(expected, self.read(url, expected))


class ModelsMatchHead(test_migrations.ModelsMigrationsSync):
    """``nova-ext-manage db sync`` to head gives the tables the models
    describe: a model changed without a migration differs.
    """

    def get_metadata(self):
        # spread_ledger defines its table on the same BASE: imported at the
        # top so that the metadata holds it
        self.assertIn(spread_ledger.SpreadClaim.__tablename__,
                      ext_db.BASE.metadata.tables)
        return ext_db.BASE.metadata

    def setUp(self):
        super().setUp()
        ext_conf.register_opts(CONF)
        url = self.database_url()
        self.useFixture(config_fixture.Config(CONF)).config(
            connection=url, group='nova_ext_database')
        ext_db.reset()
        self.addCleanup(ext_db.reset)
        self.engine = sa.create_engine(url)
        self.addCleanup(self.engine.dispose)

    def get_engine(self):
        return self.engine

    def db_sync(self, engine):
        self.assertEqual(ext_db.head_revision(), ext_db.sync(CONF))

    def include_object(self, object_, name, type_, reflected, compare_to):
        # Nova's own tables share the API database in a deployment; here
        # only ours and the version table exist
        return not (type_ == 'table' and name == ext_db.VERSION_TABLE)


class SqliteWalk(MigrationWalk, testtools.TestCase):

    def database_url(self):
        directory = self.useFixture(fixtures.TempDir()).path
        return 'sqlite:///%s' % os.path.join(
            directory, 'walk-%d.sqlite' % len(os.listdir(directory)))


class MariaDBWalk(MigrationWalk, testtools.TestCase):

    def database_url(self):
        processes.require_services()
        return self.useFixture(processes.Databases('ext')).url(
            'ext', plugin=False)


class SqliteModels(ModelsMatchHead, testtools.TestCase):

    def database_url(self):
        return 'sqlite:///%s' % os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'models.sqlite')


class MariaDBModels(ModelsMatchHead, testtools.TestCase):

    def database_url(self):
        processes.require_services()
        return self.useFixture(processes.Databases('models')).url(
            'models', plugin=False)


class LedgerWithoutItsTable(object):
    """Given nova-ext's database before ``db sync`` created the spread
    ledger's table, when a count reads the ledger or a turn writes it,
    then the ledger says it is Unavailable (the count reads placement
    instead), whatever the database says "no such table" with: oslo.db
    turns sqlite's into DBNonExistentTable but raises MySQL's as it is.
    """

    def database_url(self):
        raise NotImplementedError

    def setUp(self):
        super().setUp()
        ext_conf.register_opts(CONF)
        self.conf = self.useFixture(config_fixture.Config(CONF))
        self.conf.config(connection=self.database_url(),
                         group='nova_ext_database')
        ext_db.reset()
        self.addCleanup(ext_db.reset)

    def test_reading_and_writing_say_unavailable(self):
        group = '11111111-2222-3333-4444-555555555555'
        self.assertRaises(spread_ledger.Unavailable,
                          spread_ledger.claims, group)
        self.assertRaises(spread_ledger.Unavailable, spread_ledger.record,
                          group, {'66666666-7777-8888-9999-000000000000':
                                  'h1'}, ())


class SqliteLedgerWithoutItsTable(LedgerWithoutItsTable, testtools.TestCase):

    def database_url(self):
        return 'sqlite:///%s' % os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'empty.sqlite')


class MariaDBLedgerWithoutItsTable(LedgerWithoutItsTable, testtools.TestCase):

    def database_url(self):
        processes.require_services()
        return self.useFixture(processes.Databases('ledger')).url(
            'ledger', plugin=False)
