# SPDX-License-Identifier: Apache-2.0
"""A server group's requests in turns (nova_ext.scheduler.group_turns), on
real threads and a real tooz backend (file locks): another process's hold
of the lock is a second Coordination.
"""

import logging
import threading
import time

import fixtures
from oslo_config import fixture as config_fixture
from oslo_utils.fixture import uuidsentinel as uuids
import testtools

from nova_ext import cache
from nova_ext import conf as ext_conf
from nova_ext.scheduler import coordination
from nova_ext.scheduler import group_turns
from tests import tool_scripts


def unavailable_refused(error):
    raise error


class TurnsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        conf = self.useFixture(config_fixture.Config())
        ext_conf.register_opts(conf.conf)
        lock_dir = self.useFixture(fixtures.TempDir()).path
        conf.config(group='nova_ext',
                    coordination_backend_url='file://' + lock_dir)
        cache.forget_all()
        self.addCleanup(cache.forget_all)
        self.counts = []
        self.recorded = []
        # another scheduler process
        self.other = coordination.Coordination()

    def count(self):
        self.counts.append(time.monotonic())
        return {uuids.built: frozenset(['h1'])}

    def record(self, claimed, counted):
        self.recorded.append((claimed, counted))

    def take(self, timeout=10, group=uuids.group):
        return group_turns.take(group, timeout, self.count,
                                unavailable_refused, self.record)[0]

    def in_thread(self, function, *args):
        result = {}

        def run():
            try:
                result['value'] = function(*args)
            except Exception as error:
                result['error'] = error

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.addCleanup(thread.join, 10)
        return thread, result

    def wait_for(self, condition, timeout=10):
        deadline = time.monotonic() + timeout
        while not condition():
            self.assertLess(time.monotonic(), deadline, 'never happened')
            time.sleep(0.01)

    def arrive_while_the_lock_is_held_elsewhere(self, count):
        """The turns ``count`` requests of the group take, arriving while
        another scheduler holds the group's lock, once it lets go.
        """
        held = self.other.acquire(uuids.group, 1)
        takers = [self.in_thread(self.take) for _ in range(count)]
        self.wait_for(lambda: group_turns._turns.get(uuids.group) is not None
                      and group_turns._turns[uuids.group].admitted == count)
        self.other.release(held)
        for thread, _result in takers:
            thread.join(10)
        return [result['value'] for _thread, result in takers]

    def test_requests_arriving_while_the_lock_is_awaited_share_one_turn(self):
        # Given another scheduler holds the group's lock, when five
        # requests of the group arrive meanwhile
        turns = self.arrive_while_the_lock_is_held_elsewhere(5)
        # Then they run in one turn, counted once
        self.assertEqual(1, len(set(map(id, turns))))
        self.assertEqual(1, len(self.counts))
        turn = turns[0]
        self.assertEqual(5, turn.requests)
        # and the lock is the turn's until the last of them is done
        for _ in range(4):
            self.in_thread(turn.done, 10)
        self.wait_for(lambda: turn.requests == 1)
        self.assertIsNone(self.other.acquire(uuids.group, 1))
        self.assertTrue(turn.done(10))
        held = self.other.acquire(uuids.group, 1)
        self.assertIsNotNone(held)
        self.other.release(held)
        self.assertEqual({}, group_turns._turns)

    def test_requests_arriving_while_a_turn_runs_wait_for_the_next(self):
        first = self.take()
        thread, result = self.in_thread(self.take)
        self.wait_for(lambda: group_turns._turns[uuids.group] is not first)
        self.assertEqual(1, len(self.counts))
        self.assertNotIn('value', result)
        first.done(10)
        thread.join(10)
        second = result['value']
        self.assertIsNot(first, second)
        # counted again, after the first turn let go
        self.assertEqual(2, len(self.counts))
        self.assertTrue(first.ended.is_set())
        second.done(10)
        self.assertEqual({}, group_turns._turns)

    def test_decisions_are_one_at_a_time_and_see_earlier_reservations(self):
        turn = self.arrive_while_the_lock_is_held_elsewhere(2)[0]
        first, second = object(), object()
        self.assertTrue(turn.decide(first, 1))
        # the second request waits while the first decides
        self.assertFalse(turn.decide(second, 0.05))
        members, version = turn.members({uuids.first_server})
        self.assertEqual({'h1': 1}, dict(members))
        self.assertTrue(turn.reserve(uuids.first_server, 'h2',
                                     lambda at: at == version))
        turn.decided(first)
        self.assertTrue(turn.decide(second, 1))
        members, later = turn.members({uuids.second_server})
        self.assertEqual({'h1': 1, 'h2': 1}, dict(members))
        self.assertGreater(later, version)
        # a reservation judged on an older view is refused
        self.assertFalse(turn.reserve(uuids.second_server, 'h2',
                                      lambda at: at == version))
        # the first server's claim failed: given back
        turn.give_back([uuids.first_server])
        self.assertEqual({'h1': 1},
                         dict(turn.members({uuids.second_server})[0]))
        turn.decided(second)
        for _ in range(2):
            self.in_thread(turn.done, 10)
        self.assertTrue(turn.ended.wait(10))

    def test_a_request_timing_out_leaves_the_others_their_turn(self):
        held = self.other.acquire(uuids.group, 1)
        patient_thread, patient = self.in_thread(self.take, 30)
        self.wait_for(lambda: uuids.group in group_turns._turns)
        self.assertRaises(group_turns.TimedOut, self.take, 0.2)
        self.other.release(held)
        patient_thread.join(10)
        turn = patient['value']
        self.assertEqual(1, turn.requests)
        self.assertTrue(turn.done(10))
        self.assertEqual({}, group_turns._turns)

    def test_an_opener_giving_up_leaves_the_wait_to_the_others(self):
        held = self.other.acquire(uuids.group, 1)
        # the opener may wait 1 s; the request joining it, 30 s
        opener_thread, opener = self.in_thread(self.take, 1)
        self.wait_for(lambda: uuids.group in group_turns._turns)
        joiner_thread, joiner = self.in_thread(self.take, 30)
        opener_thread.join(10)
        self.assertIsInstance(opener['error'], group_turns.TimedOut)
        self.other.release(held)
        joiner_thread.join(10)
        self.assertTrue(joiner['value'].done(10))
        self.assertEqual({}, group_turns._turns)

    def test_a_failed_count_fails_the_turn_and_frees_the_lock(self):
        def broken_count():
            raise RuntimeError('database gone')

        error = self.assertRaises(
            RuntimeError, group_turns.take, uuids.group, 10, broken_count,
            unavailable_refused, self.record)
        self.assertIn('database gone', str(error))
        held = self.other.acquire(uuids.group, 1)
        self.assertIsNotNone(held)
        self.other.release(held)
        self.assertEqual({}, group_turns._turns)

    def test_a_backend_that_cannot_be_reached_runs_the_turn_unlocked_if_told(
            self):
        self.useFixture(config_fixture.Config()).config(
            group='nova_ext', coordination_backend_url='redis://127.0.0.1:1')
        coordination.reset()
        told = []
        turn, _waited = group_turns.take(uuids.group, 10, self.count,
                                         told.append, self.record)
        self.assertIsNone(turn.locked)
        self.assertIn('is unreachable', str(told[0]))
        self.assertTrue(turn.done(10))

    def test_a_turn_records_its_claims_before_it_lets_go_of_the_lock(self):
        lock_held_at_record = []

        def record(claimed, counted):
            held = self.other.acquire(uuids.group, 1)
            lock_held_at_record.append(held is None)
            if held is not None:
                self.other.release(held)
            self.recorded.append((claimed, counted))

        turn = group_turns.take(uuids.group, 10, self.count,
                                unavailable_refused, record)[0]
        turn.reserve(uuids.given_back, 'h1', lambda version: True)
        turn.reserve(uuids.kept, 'h2', lambda version: True)
        turn.give_back([uuids.given_back])
        self.assertTrue(turn.done(10))
        self.assertEqual([True], lock_held_at_record)
        self.assertEqual([({uuids.kept: 'h2'},
                           {uuids.built: frozenset(['h1'])})], self.recorded)
        self.assertIsNone(turn.unrecorded)

    def test_the_turn_line_is_read_back_by_the_burst_benchmark(self):
        # Given a turn whose count and claims take time
        log = self.useFixture(fixtures.FakeLogger(
            name='nova_ext.scheduler.group_turns', level=logging.DEBUG))

        def slow_count():
            time.sleep(0.03)
            return self.count()

        turn = group_turns.take(uuids.group, 10, slow_count,
                                unavailable_refused, self.record)[0]
        started = time.monotonic()
        time.sleep(0.05)
        turn.claimed(time.monotonic() - started)
        # When it ends
        self.assertTrue(turn.done(10))
        # Then the benchmark reads its line back, every part in it, and
        # the parts fit in the hold
        [line] = [line for line in log.output.splitlines()
                  if 'a turn of' in line]
        match = tool_scripts.load('benchmark_burst').TURN_LINE.search(line)
        self.assertIsNotNone(match, line)
        requests, hold, count, claims, ledger, release = map(
            int, match.groups())
        self.assertEqual(1, requests)
        self.assertGreaterEqual(count, 30)
        self.assertGreaterEqual(claims, 50)
        # each part is rounded on its own
        self.assertLessEqual(count + claims + ledger + release, hold + 3)

    def test_a_turn_whose_claims_cannot_be_recorded_says_so(self):
        def record(claimed, counted):
            raise RuntimeError('ledger gone')

        turn = group_turns.take(uuids.group, 10, self.count,
                                unavailable_refused, record)[0]
        self.assertTrue(turn.done(10))
        self.assertIn('ledger gone', str(turn.unrecorded))
        # and the lock is released all the same
        held = self.other.acquire(uuids.group, 1)
        self.assertIsNotNone(held)
        self.other.release(held)

    def test_many_groups_over_time_leave_nothing(self):
        done = []

        def groups(offset):
            for index in range(300):
                turn = self.take(group='group-%d-%d' % (offset, index % 7))
                done.append(turn.done(10))

        threads = [self.in_thread(groups, n)[0] for n in range(4)]
        for thread in threads:
            thread.join(60)
        self.assertEqual([True] * 1200, done)
        self.assertEqual({}, group_turns._turns)
