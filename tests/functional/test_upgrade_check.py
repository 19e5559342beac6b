# SPDX-License-Identifier: Apache-2.0
"""``nova-ext-status upgrade check``'s "Aggregate metadata" check against
the aggregates of an embedded cloud, created through the REST API, and its
"nova-ext database" check for the spread ledger (the whole command runs
against real databases in tests/system/test_upgrade_check.py).
"""

import contextlib
import io
import os

import fixtures
from oslo_upgradecheck import upgradecheck

from nova_ext.cmd import status
from nova_ext.quota import db as quota_db
from tests.functional import base


class AggregateMetadataCheckTest(base.NovaExtTestCase):
    HOSTS = ['host1']

    def check(self):
        return status.Checks(base.cloud.CONF)._check_aggregate_metadata()

    def test_near_misses_are_a_warning_naming_each(self):
        self.create_aggregate('rack-r1', ['host1'],
                              {'nova_ext:failure_domain:rack': 'r1',
                               'nova_ext:host_class': 'gpu'})
        result = self.check()
        self.assertEqual(upgradecheck.Code.SUCCESS, result.code)
        self.assertEqual("1 aggregate(s), no key nova-ext would ignore",
                         result.details)

        self.create_aggregate('rack-r2', [],
                              {'Nova_Ext:failure_domain:rack': 'r2'})
        self.create_aggregate('rack-r3', [],
                              {'nova_ext:failure_domian:rack': 'r3',
                               'nova_ext:failure_domain:row': 'b '})
        result = self.check()
        self.assertEqual(upgradecheck.Code.WARNING, result.code)
        self.assertEqual([
            "aggregate rack-r2: key 'Nova_Ext:failure_domain:rack' is not "
            "'nova_ext:failure_domain:rack' (case or spaces differ); it is "
            "ignored",
            "aggregate rack-r3: nova_ext:failure_domain:row='b ' has "
            "surrounding whitespace: a domain of its own, not 'b'",
            "aggregate rack-r3: key 'nova_ext:failure_domian:rack' is not "
            "read by nova-ext; it is ignored (did you mean "
            "'nova_ext:failure_domain:rack'?)"],
            result.details.splitlines())

    def test_many_problems_are_counted_and_keep_their_lines(self):
        self.create_aggregate('noisy', [], {
            'nova_ext:unknown_%02d' % i: 'x' for i in range(25)})
        result = self.check()
        lines = result.details.splitlines()
        self.assertEqual(21, len(lines))
        self.assertIn("'nova_ext:unknown_19'", lines[19])
        self.assertEqual('and 5 more', lines[20])

        # The table oslo.upgradecheck prints, every check run (Checks.check
        # would point Nova's database layer at nova.conf's databases, not
        # at this cloud's): one problem per line, wrapped. The embedded
        # cloud activates nova-ext's scheduler plugins itself, without the
        # engine plugin the 'Scheduler hooks' check asks for: here nova.conf
        # loads Nova's own only, so the aggregates' warning is the worst.
        self.flags(available_filters=['nova.scheduler.filters.all_filters'],
                   weight_classes=['nova.scheduler.weights.all_weighers'],
                   group='filter_scheduler')
        self.flags(request_filters=[], group='nova_ext')
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = upgradecheck.UpgradeCommands.check(
                status.Checks(base.cloud.CONF))
        self.assertEqual(upgradecheck.Code.WARNING, code)
        table = [line.strip('| ') for line in out.getvalue().splitlines()]
        self.assertEqual(table.index('Check: Aggregate metadata') + 1,
                         table.index('Result: Warning'))
        self.assertIn("Details: aggregate noisy: key 'nova_ext:unknown_00' "
                      "is not read by", table)
        self.assertIn('nova-ext; it is ignored', table)
        self.assertEqual('and 5 more', table[-2])


class FlavorsAndDomainNamesCheckTest(base.NovaExtTestCase):
    """Stored flavors against the extra-spec validators, and failure-domain
    names that placement reads as one trait (one embedded cloud, ~5 s).
    """
    HOSTS = ['host1']

    def test_bad_flavors_and_colliding_domains_are_warnings(self):
        checks = status.Checks(base.cloud.CONF)
        self.create_flavor('good', extra_specs={
            'nova_ext:spread_level': 'rack'})
        result = checks._check_flavor_extra_specs()
        self.assertEqual(upgradecheck.Code.SUCCESS, result.code,
                         result.details)
        # before microversion 2.86 nova-api stored extra specs unchecked
        self.admin_api.microversion = '2.85'
        flavor = self.create_flavor('legacy', extra_specs={
            'nova_ext:spread_level': 'rak',
            'nova_ext:spread_max_per_domain': '1_000',
            'nova_ext:colour': 'blue', 'hw:cpu_policy': 'whatever'})
        result = checks._check_flavor_extra_specs()
        self.assertEqual(upgradecheck.Code.WARNING, result.code)
        lines = result.details.splitlines()
        where = 'flavor legacy (%s): ' % flavor
        self.assertTrue(lines[0].startswith(where + 'nova_ext:colour is '
                                            'not a nova-ext extra spec'),
                        lines)
        self.assertIn("'nova_ext:spread_level'", result.details)
        self.assertIn("'nova_ext:spread_max_per_domain'", result.details)
        self.assertNotIn('hw:cpu_policy', result.details)

        self.create_aggregate('rack-a', [], {
            'nova_ext:failure_domain:rack': 'r-1'})
        self.create_aggregate('rack-b', [], {
            'nova_ext:failure_domain:rack': 'r_1'})
        result = checks._check_aggregate_metadata()
        self.assertEqual(upgradecheck.Code.WARNING, result.code)
        self.assertIn('aggregate rack-a, rack-b: rack domains r-1 and r_1 '
                      'are one placement trait (CUSTOM_R_1)', result.details)


class SpreadLedgerTableCheckTest(base.RackedTestCase):
    """With the spread filter on and per-flavor quotas off, the "nova-ext
    database" check wants the spread ledger's table: a Warning naming ``db
    sync`` when it is missing (the schedulers then read placement instead),
    a Success once synced, as the embedded cloud's own tables are.
    """

    def check(self):
        return status.Checks(base.cloud.CONF)._check_database()

    def test_missing_ledger_table_is_a_warning_naming_db_sync(self):
        self.assertEqual(upgradecheck.Code.SUCCESS, self.check().code)
        self.flags(connection='sqlite:///%s' % os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'never-synced.sqlite'),
            group='nova_ext_database')
        quota_db.reset()
        self.addCleanup(quota_db.reset)
        result = self.check()
        self.assertEqual(upgradecheck.Code.WARNING, result.code)
        self.assertIn('run "nova-ext-manage db sync"', result.details)
        self.assertIn('from placement', result.details)
