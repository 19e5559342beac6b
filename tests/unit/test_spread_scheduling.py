# SPDX-License-Identifier: Apache-2.0
"""The spread lock: which backend it uses, and how it behaves when the
backend fails (the lock itself on MariaDB and Redis: tests/system).
"""

import os
import threading

import fixtures
from oslo_config import fixture as config_fixture
import testtools

from nova_ext.scheduler import spread_scheduling

LOCKS = '/var/lib/nova/locks'


class BackendUrlTest(testtools.TestCase):

    def test_mysql_and_mariadb_give_advisory_locks_on_that_server(self):
        for url in ('mysql+pymysql://nova:pw@db:3307/nova_api?charset=utf8',
                    'mariadb+pymysql://nova:pw@db:3307/nova_api'):
            self.assertEqual(
                'mysql://nova:pw@db:3307/nova_api',
                spread_scheduling.derived_backend_url(url, LOCKS))

    def test_postgresql_gives_its_advisory_locks(self):
        self.assertEqual(
            'postgresql://nova:pw@pg/nova_api',
            spread_scheduling.derived_backend_url(
                'postgresql+psycopg2://nova:pw@pg/nova_api', LOCKS))

    def test_anything_else_gives_a_lock_directory(self):
        for url in ('sqlite:////var/lib/nova/api.sqlite', 'sqlite://', '',
                    None):
            self.assertEqual(
                'file://' + LOCKS,
                spread_scheduling.derived_backend_url(url, LOCKS))

    def test_password_is_hidden_in_messages(self):
        self.assertEqual('mysql://nova:***@db/nova_api',
                         spread_scheduling.redacted(
                             'mysql://nova:secret@db/nova_api'))
        self.assertEqual('redis://127.0.0.1:6379',
                         spread_scheduling.redacted('redis://127.0.0.1:6379'))

    def test_explicit_url_wins(self):
        conf = self.useFixture(config_fixture.Config())
        spread_scheduling.CONF.import_group('api_database', 'nova.conf')
        conf.config(group='api_database',
                    connection='mysql+pymysql://nova@db/nova_api')
        self.assertEqual('mysql://nova@db/nova_api',
                         spread_scheduling.backend_url())
        conf.config(group='nova_ext',
                    coordination_backend_url='redis://r:6379')
        self.assertEqual('redis://r:6379', spread_scheduling.backend_url())


class CoordinationTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.useFixture(config_fixture.Config())
        self.coordination = spread_scheduling.Coordination()

    def test_file_lock_excludes_a_second_holder_and_frees_on_release(self):
        lock_dir = self.useFixture(fixtures.TempDir()).path
        self.conf.config(group='nova_ext',
                         coordination_backend_url='file://' + lock_dir)
        lock = self.coordination.acquire('g1', 1)
        self.assertIsNotNone(lock)
        other = spread_scheduling.Coordination()
        self.assertIsNone(other.acquire('g1', 1))
        # another group never waits
        self.assertIsNotNone(other.acquire('g2', 1))
        self.coordination.release(lock)
        self.assertIsNotNone(other.acquire('g1', 1))
        self.assertTrue(os.listdir(lock_dir))

    def test_unreachable_backend_is_not_retried_within_the_window(self):
        self.conf.config(group='nova_ext',
                         coordination_backend_url='redis://127.0.0.1:1',
                         spread_coordination_retry_seconds=60)
        first = self.assertRaises(spread_scheduling.CoordinationUnavailable,
                                  self.coordination.acquire, 'g', 1)
        self.assertIn('redis://127.0.0.1:1 is unreachable', str(first))
        # the second request fails at once with the same reason, without
        # a connection attempt: the URL now points somewhere else entirely
        self.conf.config(group='nova_ext',
                         coordination_backend_url='file:///nonexistent')
        second = self.assertRaises(spread_scheduling.CoordinationUnavailable,
                                   self.coordination.acquire, 'g', 1)
        self.assertEqual(str(first), str(second))

    def test_local_lock_is_one_per_group(self):
        self.assertIs(self.coordination.local_lock('a'),
                      self.coordination.local_lock('a'))
        self.assertIsNot(self.coordination.local_lock('a'),
                         self.coordination.local_lock('b'))
        self.assertIsInstance(self.coordination.local_lock('a'),
                              type(threading.Lock()))
