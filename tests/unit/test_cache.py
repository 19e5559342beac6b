# SPDX-License-Identifier: Apache-2.0
"""One reset for everything nova-ext remembers in a process."""

from nova import test

from nova_ext import cache
from nova_ext.scheduler.request_filters import maintenance
from nova_ext.scheduler import spread_scheduling
from nova_ext.scheduler.weights import image_locality


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


class ForgetAllTest(test.NoDBTestCase):

    def test_lookups_and_module_memory_are_forgotten(self):
        # Given a lookup that remembers, and module-level memory of the
        # plugins a scheduler loaded
        self.flags(image_locality_cache_seconds=600, group='nova_ext')
        calls = []

        def compute(image):
            calls.append(image)
            return frozenset(['host1'])

        image_locality.hosts_by_image.get('img', compute)
        image_locality.hosts_by_image.get('img', compute)
        self.assertEqual(['img'], calls)
        maintenance._traits_created.add('CUSTOM_NOVA_EXT_MAINTENANCE')
        spread_scheduling._provider_names['rp'] = 'host1'
        coordination = spread_scheduling._coordination

        # When the process "restarts"
        cache.forget_all()

        # Then each of them answers as a fresh process would
        image_locality.hosts_by_image.get('img', compute)
        self.assertEqual(['img', 'img'], calls)
        self.assertEqual(set(), maintenance._traits_created)
        self.assertEqual({}, dict(spread_scheduling._provider_names))
        self.assertIsNot(coordination, spread_scheduling._coordination)

    def test_a_registered_reset_runs_once_per_forget_all(self):
        resets = []
        reset = cache.register_reset(lambda: resets.append(1))
        self.addCleanup(cache._resets.remove, reset)

        cache.forget_all()

        self.assertEqual([1], resets)


class AnsweredByTest(test.NoDBTestCase):

    class Model(cache.Model):

        def hosts_running_image(self, image_id):
            return ['sim-host']

    def test_a_model_answers_unremembered_then_the_cloud_again(self):
        self.flags(image_locality_cache_seconds=600, group='nova_ext')
        calls = []

        def compute(image):
            calls.append(image)
            return frozenset(['host1'])

        with cache.answered_by(self.Model()) as model:
            self.assertIs(model, cache.model())
            # the plugin asks the model, not the cell databases
            self.assertEqual(frozenset(['sim-host']),
                             image_locality.hosts_running_image('img'))
            # and nothing is remembered meanwhile
            image_locality.hosts_by_image.get('img', compute)
            image_locality.hosts_by_image.get('img', compute)
        self.assertEqual(['img', 'img'], calls)
        self.assertIsNone(cache.model())

    def test_forget_all_takes_the_model_away(self):
        with cache.answered_by(self.Model()):
            cache.forget_all()
            self.assertIsNone(cache.model())
