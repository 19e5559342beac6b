# SPDX-License-Identifier: Apache-2.0
"""One reset for everything nova-ext remembers in a process."""

import threading

from nova import test

from nova_ext import cache
from nova_ext.scheduler import cloud
from nova_ext.scheduler import coordination
from nova_ext.scheduler import group_members
from nova_ext.scheduler import group_turns
from nova_ext.scheduler import nova_patches


class PutTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.lookup = cache.TTLLookup('quota_flavor_cache_seconds')
        self.addCleanup(cache._resets.remove, self.lookup.clear)

    def test_a_value_put_is_what_get_answers_within_the_ttl(self):
        self.flags(quota_flavor_cache_seconds=30, group='nova_ext')
        self.lookup.get('gpu', lambda key: ['stale'])
        self.lookup.put('gpu', ['fresh'])
        self.assertEqual(['fresh'], self.lookup.get('gpu', self.fail))

    def test_nothing_is_remembered_with_a_ttl_of_0(self):
        self.flags(quota_flavor_cache_seconds=0, group='nova_ext')
        self.lookup.put('gpu', ['fresh'])
        self.assertEqual(['read'], self.lookup.get('gpu', lambda k: ['read']))


class Clock:
    """What the lookup reads as the time: moved by the test."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class RefreshAheadTest(test.NoDBTestCase):
    """Given an answer remembered for [nova_ext] image_locality_cache_seconds
    (10 s here), what a request gets as it ages.
    """

    def setUp(self):
        super().setUp()
        self.flags(image_locality_cache_seconds=10, group='nova_ext')
        self.clock = Clock()
        self.lookup = cache.RefreshAheadLookup(
            'image_locality_cache_seconds', timer=self.clock)
        self.addCleanup(cache._resets.remove, self.lookup.clear)
        # (key, thread that asked)
        self.asked = []
        # the database answers once the test opens the gate
        self.gate = threading.Event()
        self.gate.set()

    def ask(self, key):
        self.assertTrue(self.gate.wait(10))
        self.asked.append((key, threading.current_thread()))
        return 'asked at %d' % self.clock.now

    def get(self):
        return self.lookup.get('img', self.ask)

    def test_within_the_ttl_the_answer_is_remembered(self):
        self.assertEqual('asked at 1000', self.get())
        self.clock.now += 9
        self.assertEqual('asked at 1000', self.get())
        self.assertEqual([('img', threading.current_thread())], self.asked)

    def test_past_the_ttl_the_answer_serves_while_a_thread_asks_again(self):
        self.get()
        # When the answer is 10 s old and the database is slow
        self.clock.now += 10
        self.gate.clear()
        # Then the request gets the remembered answer without waiting
        self.assertEqual('asked at 1000', self.get())
        self.gate.set()
        self.lookup.wait_for_refreshes(10)
        # and another thread asked; the next request gets its answer
        self.assertEqual(2, len(self.asked))
        self.assertIsNot(threading.current_thread(), self.asked[1][1])
        self.assertEqual('asked at 1010', self.get())
        self.assertEqual(2, len(self.asked))

    def test_one_background_ask_however_many_requests_come(self):
        self.get()
        self.clock.now += 15
        self.gate.clear()
        answers = []
        requests = [threading.Thread(target=lambda: answers.append(
            self.get())) for _ in range(8)]
        for request in requests:
            request.start()
        for request in requests:
            request.join(10)
        self.assertEqual(['asked at 1000'] * 8, answers)
        self.gate.set()
        self.lookup.wait_for_refreshes(10)
        self.assertEqual(2, len(self.asked))

    def test_an_answer_twice_the_ttl_old_is_not_used(self):
        self.get()
        self.clock.now += 20
        self.assertEqual('asked at 1020', self.get())
        # asked by the request itself
        self.assertEqual(threading.current_thread(), self.asked[1][1])

    def test_a_failed_ask_is_logged_and_the_old_answer_serves(self):
        self.get()
        self.clock.now += 12

        def fail(key):
            raise RuntimeError('cell database gone')

        self.assertEqual('asked at 1000', self.lookup.get('img', fail))
        self.lookup.wait_for_refreshes(10)
        self.assertIn('asking again for \'img\' failed',
                      self.stdlog.logger.output)
        self.assertIn('cell database gone', self.stdlog.logger.output)
        # still served, and asked again in the background
        self.assertEqual('asked at 1000', self.get())
        self.lookup.wait_for_refreshes(10)
        self.assertEqual('asked at 1012', self.get())

    def test_an_answer_asked_before_a_reset_is_not_kept(self):
        self.get()
        self.clock.now += 10
        self.gate.clear()
        self.get()
        # When the process "restarts" while the thread waits for the
        # database
        cache.forget_all()
        self.gate.set()
        self.lookup.wait_for_refreshes(10)
        # Then the next request asks itself, as a fresh process would
        self.clock.now += 1
        self.assertEqual('asked at 1011', self.get())
        self.assertEqual(3, len(self.asked))

    def test_nothing_is_remembered_with_a_ttl_of_0(self):
        self.flags(image_locality_cache_seconds=0, group='nova_ext')
        self.get()
        self.get()
        self.assertEqual(2, len(self.asked))


class ForgetAllTest(test.NoDBTestCase):

    def test_lookups_and_module_memory_are_forgotten(self):
        # Given a lookup that remembers, and module-level memory of the
        # plugins a scheduler loaded
        self.flags(image_locality_cache_seconds=600, group='nova_ext')
        calls = []

        def compute(image):
            calls.append(image)
            return frozenset(['host1'])

        cloud.hosts_by_image.get('img', compute)
        cloud.hosts_by_image.get('img', compute)
        self.assertEqual(['img'], calls)
        cloud._traits_known['CUSTOM_NOVA_EXT_MAINTENANCE'] = True
        group_members._provider_names['rp'] = 'host1'
        group_members._in_flight['member'] = frozenset(['host1'])
        group_turns._turns['group'] = object()
        nova_patches._view_checked_in = 1
        backend = coordination.process_coordination()

        # When the process "restarts"
        cache.forget_all()

        # Then each of them answers as a fresh process would
        cloud.hosts_by_image.get('img', compute)
        self.assertEqual(['img', 'img'], calls)
        self.assertEqual({}, dict(cloud._traits_known))
        self.assertEqual({}, dict(group_members._provider_names))
        self.assertEqual({}, dict(group_members._in_flight))
        self.assertEqual({}, group_turns._turns)
        self.assertIsNone(nova_patches._view_checked_in)
        self.assertIsNot(backend, coordination.process_coordination())

    def test_a_registered_reset_runs_once_per_forget_all(self):
        resets = []
        reset = cache.register_reset(lambda: resets.append(1))
        self.addCleanup(cache._resets.remove, reset)

        cache.forget_all()

        self.assertEqual([1], resets)
