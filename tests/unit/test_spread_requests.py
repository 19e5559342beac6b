# SPDX-License-Identifier: Apache-2.0
"""A spread request in its group's turn (nova_ext.scheduler.spread_requests):
against a stalled backend, without the spread filter, when the backend
loses the lock, and its claims checked against the turn's reservations.
Nova's own pass is stood in for by the callable it is handed; the turns,
the coordination and the judgement are the real ones.
"""

import time
import types

import fixtures
from oslo_utils.fixture import uuidsentinel as uuids

from nova import exception
from nova import objects
from nova import test

from nova_ext import cache
from nova_ext.scheduler import cloud
from nova_ext.scheduler.filters import failure_domain
from nova_ext.scheduler import group_turns
from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import spread_requests
from tests.unit import test_coordination


class Host(object):
    """A host state: its name and its compute node provider's uuid
    (hashed by identity, as Nova's).
    """

    def __init__(self, host):
        self.host = self.nodename = host
        self.uuid = getattr(uuids, 'rp_' + host)


class Cloud(cloud.Cloud):
    """The group's members where the test says, one answer per count."""

    def __init__(self, *counts):
        self.counts = list(counts)

    def group_members(self, context, group_uuid):
        return self.counts.pop(0)

    def failure_domain_traits(self, level):
        return {}


RACKS = {'r1': ['h1', 'h2'], 'r2': ['h3']}


def host_manager(filters=True):
    aggregates = {index: objects.Aggregate(
        id=index, hosts=hosts, metadata={
            'nova_ext:failure_domain:rack': rack})
        for index, (rack, hosts) in enumerate(sorted(RACKS.items()))}
    return types.SimpleNamespace(
        enabled_filters=[failure_domain.FailureDomainAntiAffinityFilter()]
        if filters else [], aggs_by_id=aggregates, host_state_map={})


def spec(server=uuids.server, members=()):
    return objects.RequestSpec(
        scheduler_hints={'nova_ext:spread_constraints': ['rack:max=1']},
        flavor=objects.Flavor(extra_specs={}),
        instance_group=objects.InstanceGroup(
            uuid=uuids.group, name='web', policy='anti-affinity', hosts=[],
            members=list(members) + [server]),
        instance_uuid=server)


class SpreadRequestTestCase(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        cache.forget_all()
        self.addCleanup(cache.forget_all)
        self.flags(coordination_backend_url='file://' + self.useFixture(
            fixtures.TempDir()).path, group='nova_ext')

    def use_backend(self, lock):
        backend = test_coordination.FakeBackend(lock)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.scheduler.coordination._coordination', backend))
        return backend


class StalledBackendTest(SpreadRequestTestCase):

    def test_request_fails_as_unreachable_and_leaves_no_turn(self):
        self.flags(spread_lock_timeout=2, group='nova_ext')
        lock = test_coordination.StalledLock()
        self.use_backend(lock)
        request_spec = spec()
        scheduled = []
        with scheduling_request.opened(request_spec, [uuids.server],
                                       host_manager(), Cloud({})):
            started = time.monotonic()
            error = self.assertRaises(
                exception.NoValidHost, spread_requests.schedule, None,
                request_spec, [uuids.server], lambda: scheduled.append(1))
        self.assertLess(time.monotonic() - started,
                        2 + test_coordination.coordination.ACQUIRE_MARGIN)
        # whole seconds (what is left of 2 s): tooz's SQL drivers wait
        # longer than asked for a fraction
        self.assertEqual([1], lock.asked)
        self.assertIn('is unreachable', str(error))
        self.assertIn('server group web', str(error))
        self.assertEqual([], scheduled)
        self.assertEqual({}, group_turns._turns)
        lock.answer.set()
        self.assertTrue(lock.released.wait(10))

    def test_no_turn_when_the_spread_filter_is_not_enabled(self):
        # nova-ext's hooks active (a cell mapping's ?plugin=nova_ext) but
        # its filter not in enabled_filters: nothing to serialise for
        lock = test_coordination.StalledLock()
        self.use_backend(lock)
        request_spec = spec()
        with scheduling_request.opened(request_spec, [uuids.server],
                                       host_manager(filters=False),
                                       Cloud()):
            self.assertEqual('scheduled', spread_requests.schedule(
                None, request_spec, [uuids.server], lambda: 'scheduled'))
        self.assertEqual([], lock.asked)


class LostLockTest(SpreadRequestTestCase):
    """Given the backend lost the group's lock while a turn held it, when
    the request ends, then its group is counted again: the request's
    servers are kept only if every hard constraint still holds.
    """

    def setUp(self):
        super().setUp()
        self.backend = self.use_backend(test_coordination.LostLock())
        self.deleted = []
        client = types.SimpleNamespace(
            delete_allocation_for_instance=lambda ctxt, uuid, force:
                self.deleted.append(uuid))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.scheduler.client.report.report_client_singleton',
            lambda: client))

    def schedule(self, *counts):
        request_spec = spec(members=[uuids.other])
        selection = types.SimpleNamespace(service_host='h1')
        with scheduling_request.opened(request_spec, [uuids.server],
                                       host_manager(), Cloud(*counts)):
            return spread_requests.schedule(
                None, request_spec, [uuids.server], lambda: [[selection]])

    def test_another_member_placed_meanwhile_undoes_the_request(self):
        # counted empty in the turn; after it, another scheduler's member
        # is in r1 too
        error = self.assertRaises(
            exception.NoValidHost, self.schedule, {},
            {uuids.other: frozenset(['h2']),
             uuids.server: frozenset(['h1'])})
        self.assertIn('spread lock of server group web', str(error))
        self.assertIn('rack:max=1 (rack r1: 2)', str(error))
        self.assertEqual([uuids.server], self.deleted)
        # the lost lock object is not reused: the group gets a fresh one
        self.assertEqual({}, dict(self.backend._backend_locks))

    def test_nothing_placed_meanwhile_keeps_the_request(self):
        kept = self.schedule({}, {uuids.server: frozenset(['h1'])})
        self.assertEqual([['h1']], [[s.service_host for s in per_server]
                                    for per_server in kept])
        self.assertEqual([], self.deleted)
        self.assertIn('counted again, the group shows every constraint held',
                      self.stdlog.logger.output)


class ClaimInTurnTest(SpreadRequestTestCase):
    """Given a request of a rack:max=1 group deciding in its turn, when it
    claims, then the host is reserved in the turn first; a claim that
    fails gives it back; a host the turn's later reservations made illegal
    is refused without asking placement, and a legal one is claimed.
    """

    def setUp(self):
        super().setUp()
        self.hosts = {name: Host(name) for name in ('h1', 'h2', 'h3')}
        self.placement_asked = []
        self.placement_grants = True

    def claim_resources(self, ctx, client, spec_obj, instance_uuid,
                        alloc_req, allocation_request_version=None):
        self.placement_asked.append(instance_uuid)
        return self.placement_grants

    def claim(self, request_spec, host):
        return spread_requests.claim(
            self.claim_resources, None, None, request_spec, uuids.server,
            {'allocations': {self.hosts[host].uuid: {}}})

    def test_claims_are_reserved_and_judged_against_the_turn(self):
        request_spec = spec()
        hosts = list(self.hosts.values())
        with scheduling_request.opened(request_spec, [uuids.server],
                                       host_manager(), Cloud({})) as request:
            turn, _ = group_turns.take(uuids.group, 10, dict,
                                       lambda error: None,
                                       lambda claimed, counted: None)
            request.turn = turn
            request.candidates = request.judged_hosts = hosts
            # its decision: the members as the turn has them
            self.assertEqual({}, dict(request.members()))
            # placement refuses its first choice: the turn forgets it
            self.placement_grants = False
            self.assertFalse(self.claim(request_spec, 'h1'))
            self.assertEqual({}, turn.reserved)
            self.assertEqual(0, request.refused_claims)
            # meanwhile another request of the turn took rack r1
            turn.reserve(uuids.neighbour, 'h1', lambda version: True)
            # its next host, in r1 too, is refused by the turn
            self.placement_grants = True
            self.assertFalse(self.claim(request_spec, 'h2'))
            self.assertEqual(1, request.refused_claims)
            self.assertEqual([uuids.server], self.placement_asked)
            # and one in r2 is claimed, reserved for it
            self.assertTrue(self.claim(request_spec, 'h3'))
            self.assertEqual({uuids.neighbour: 'h1', uuids.server: 'h3'},
                             turn.reserved)
            self.assertTrue(turn.done(10))

    def test_a_request_outside_a_turn_claims_as_nova_does(self):
        request_spec = spec()
        with scheduling_request.opened(request_spec, [uuids.server],
                                       host_manager(), Cloud()):
            self.assertTrue(self.claim(request_spec, 'h1'))
        # and one nova-ext did not open (the conductor's claims)
        self.assertTrue(self.claim(spec(), 'h1'))
        self.assertEqual([uuids.server] * 2, self.placement_asked)


class StaleClaimsTest(SpreadRequestTestCase):
    """A request whose claims the turn refused is filtered and weighed
    again, with its servers placed so far forgotten, a bounded number of
    times; then it fails with a reason.
    """

    def test_refused_claims_retry_then_give_a_reason(self):
        request_spec = spec()
        attempts = []
        with scheduling_request.opened(request_spec, [uuids.server],
                                       host_manager(), Cloud({})) as request:

            def nova_pass():
                attempts.append(list(request.group.hosts))
                request.group.hosts.append('h1')
                request.refused_claims = 1
                raise exception.NoValidHost(reason='')

            error = self.assertRaises(
                exception.NoValidHost, spread_requests.schedule, None,
                request_spec, [uuids.server], nova_pass)
            self.assertEqual([[]] * (spread_requests.STALE_RETRIES + 1),
                             attempts)
            self.assertIn('taken by other members of server group web',
                          request.why_no_host)
        self.assertIn('No valid host', str(error))
        self.assertEqual({}, group_turns._turns)

    def test_a_pass_without_refused_claims_is_not_repeated(self):
        request_spec = spec()
        attempts = []

        def nova_pass():
            attempts.append(1)
            raise exception.NoValidHost(reason='')

        with scheduling_request.opened(request_spec, [uuids.server],
                                       host_manager(), Cloud({})):
            self.assertRaises(exception.NoValidHost, spread_requests.schedule,
                              None, request_spec, [uuids.server], nova_pass)
        self.assertEqual([1], attempts)
