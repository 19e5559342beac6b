# SPDX-License-Identifier: Apache-2.0
"""Numbers and aggregate metadata as users and operators type them: strict
parsing names the key; near misses are reported, not guessed; a placement
client that cannot be built costs the trait source only.
"""

from unittest import mock

import fixtures

from nova import objects
from nova import test

from nova_ext import cache
from nova_ext.scheduler import aggregate_keys
from nova_ext.scheduler import cloud
from nova_ext.scheduler import failure_domains
from tests.unit.test_failure_domains import group
from tests.unit.test_failure_domains import opened
from tests.unit.test_failure_domains import RACK
from tests.unit.test_failure_domains import request


class AggregateNearMissTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        cache.forget_all()

    def aggregate(self, metadata, agg_id=7, name='rack-r1'):
        return objects.Aggregate(id=agg_id, name=name, metadata=metadata,
                                 hosts=['h1'])

    def domain(self, metadata):
        """h1's rack, as a spread request's filter and weigher read it."""
        return self.domains([self.aggregate(metadata)]).of('h1', 'rack')

    def domains(self, aggregates):
        spec = request({'nova_ext:spread_level': 'rack'}, group=group())
        return opened(self, spec, aggregates).domains()

    def test_checked_once_per_request_not_per_host(self):
        shared = self.aggregate({RACK.upper(): 'r1'})
        with mock.patch.object(aggregate_keys, 'warn_near_misses') as warn:
            domains = self.domains([shared])
            for name in ('h1', 'h2', 'h3'):
                domains.of(name, 'rack')
        warn.assert_called_once_with(shared, aggregate_keys.keys_read(
            failure_domains.CONF))

    def test_aggregates_walked_once_per_failure_domain_cache_period(self):
        clock = self.useFixture(fixtures.MockPatchObject(
            failure_domains.time, 'monotonic', return_value=1000.0)).mock
        self.domain({RACK.upper(): 'r1'})
        self.assertEqual(1, self.stdlog.logger.output.count('rack-r1'))
        # a new aggregate within the period waits for the next walk
        later = [self.aggregate({RACK + ' ': 'r2'}, 8, 'rack-r2')]
        self.domains(later)
        self.assertNotIn('rack-r2', self.stdlog.logger.output)
        clock.return_value = 1010.0
        self.domains(later)
        self.assertIn("aggregate rack-r2: key %r is not %r" % (
            RACK + ' ', RACK), self.stdlog.logger.output)

    def test_not_checked_when_aggregates_are_not_a_source(self):
        self.flags(failure_domain_sources=['traits'], group='nova_ext')
        self.domain({RACK.upper(): 'r1'})
        self.assertNotIn('rack-r1', self.stdlog.logger.output)

    def test_key_differing_by_case_or_spaces_is_reported(self):
        self.flags(failure_domain_cache_seconds=0, group='nova_ext')
        for key in ('Nova_Ext:failure_domain:rack', RACK + ' ',
                    ' NOVA_EXT:FAILURE_DOMAIN:RACK'):
            self.assertIs(failure_domains.NO_DOMAIN,
                          self.domain({key: 'r1'}))
            self.assertIn("aggregate rack-r1: key %r is not %r" % (key, RACK),
                          self.stdlog.logger.output)

    def test_domain_with_surrounding_whitespace_is_reported(self):
        self.assertEqual('r1 ', self.domain({RACK: 'r1 '}))
        self.assertIn("aggregate rack-r1: %s='r1 ' has surrounding "
                      "whitespace" % RACK, self.stdlog.logger.output)

    def test_each_problem_is_reported_once(self):
        for _ in range(3):
            self.domain({RACK.upper(): 'r1'})
        self.assertEqual(1, self.stdlog.logger.output.count('rack-r1'))

    def test_exact_keys_are_quiet(self):
        self.assertEqual('r1', self.domain({RACK: 'r1',
                                            'nova_ext:host_class': 'gpu'}))
        self.assertEqual([], aggregate_keys.problems_in_aggregates(
            [self.aggregate({RACK: 'r1'})], [RACK]))
        self.assertNotIn('rack-r1', self.stdlog.logger.output)


class TraitSourceFallbackTest(test.NoDBTestCase):

    def test_client_that_cannot_be_built_falls_back_to_aggregates(self):
        def no_client():
            raise RuntimeError('no [placement] auth_type')

        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.report_client_singleton',
            no_client))
        self.assertEqual({}, cloud._domains_from_traits('rack'))
        self.assertIn('could not read the CUSTOM_NOVA_EXT_FD_RACK_* traits '
                      'from placement (no [placement] auth_type)',
                      self.stdlog.logger.output)
