# SPDX-License-Identifier: Apache-2.0
"""Which aggregate metadata keys nova-ext reads, and what it says about the
ones that look like them.
"""

from oslo_config import cfg

from nova import objects
from nova import test

from nova_ext import cache
from nova_ext import loader
from nova_ext.scheduler import aggregate_keys
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler.request_filters import host_class
from nova_ext.scheduler import weights

CONF = cfg.CONF
RACK = 'nova_ext:failure_domain:rack'


def aggregate(name, metadata):
    return objects.Aggregate(id=1, name=name, metadata=metadata)


class KeysReadTest(test.NoDBTestCase):

    def test_every_key_a_reader_uses(self):
        self.flags(failure_domain_levels=['rack', 'pod'], group='nova_ext')
        self.assertEqual(
            ['nova_ext:failure_domain:rack', 'nova_ext:failure_domain:pod',
             'nova_ext:failure_domain_spread_weight_multiplier',
             'nova_ext:bin_packing_weight_multiplier',
             'nova_ext:image_locality_weight_multiplier',
             'nova_ext:host_class'],
            aggregate_keys.keys_read(CONF))

    def test_readers_take_their_keys_from_here(self):
        self.assertEqual(failure_domains.AGGREGATE_KEY_PREFIX + 'rack',
                         aggregate_keys.failure_domain_key('rack'))
        self.assertEqual(host_class.AGGREGATE_KEY, aggregate_keys.HOST_CLASS)
        # every weigher nova-ext ships has its multiplier key listed
        classes = loader.load_plugin_classes(
            weights.NAMESPACE, weights.PerRequestWeigher)
        self.assertEqual(
            sorted(aggregate_keys.multiplier_key(cls.multiplier_option)
                   for cls in classes),
            sorted(key for key in aggregate_keys.keys_read(CONF)
                   if key.endswith('_weight_multiplier')))
        for cls in classes:
            self.assertEqual(
                aggregate_keys.multiplier_key(cls.multiplier_option),
                cls()._aggregate_key)


class ProblemsInAggregatesTest(test.NoDBTestCase):

    def problems(self, metadata, name='agg1'):
        return aggregate_keys.problems_in_aggregates(
            [aggregate(name, metadata)], aggregate_keys.keys_read(CONF))

    def test_exact_keys_and_other_namespaces_are_quiet(self):
        self.assertEqual([], self.problems({
            RACK: 'r1', 'nova_ext:failure_domain:row': 'b',
            'nova_ext:bin_packing_weight_multiplier': ' 2',
            'nova_ext:host_class': 'gpu',
            'cpu_weight_multiplier': '1', 'availability_zone': 'az1',
            'trait:CUSTOM_X': 'required', 'Rack': 'R1 '}))

    def test_case_or_whitespace_near_misses_name_the_key_read(self):
        for key, meant in (
                ('Nova_Ext:failure_domain:rack', RACK),
                (RACK + ' ', RACK),
                ('nova_ext: failure_domain:rack', RACK),
                ('NOVA_EXT:HOST_CLASS', 'nova_ext:host_class'),
                ('nova_ext:Bin_Packing_Weight_Multiplier',
                 'nova_ext:bin_packing_weight_multiplier')):
            self.assertEqual(
                [('agg1', "key %r is not %r (case or spaces differ); it is "
                          "ignored" % (key, meant))],
                self.problems({key: 'r1'}), key)

    def test_names_with_surrounding_whitespace(self):
        self.assertEqual(
            [('agg1', "%s=' r1' has surrounding whitespace: a domain of its "
                      "own, not 'r1'" % RACK)],
            self.problems({RACK: ' r1'}))
        self.assertEqual(
            [('agg1', "nova_ext:host_class='gpu\\t' has surrounding "
                      "whitespace: a class of its own, not 'gpu'")],
            self.problems({'nova_ext:host_class': 'gpu\t'}))

    def test_unread_keys_in_the_namespace_with_what_was_meant(self):
        self.assertEqual(
            [('agg1', "key 'nova_ext:failure_domian:rack' is not read by "
                      "nova-ext; it is ignored (did you mean %r?)" % RACK)],
            self.problems({'nova_ext:failure_domian:rack': 'r1'}))
        self.assertEqual(
            [('agg1', "key 'Nova_Ext:bin_packing_weight_multipler' is not "
                      "read by nova-ext; it is ignored (did you mean "
                      "'nova_ext:bin_packing_weight_multiplier'?)")],
            self.problems({'Nova_Ext:bin_packing_weight_multipler': '2'}))
        self.assertEqual(
            [('agg1', "key 'nova_ext:failure_domain:racks' is not read by "
                      "nova-ext; it is ignored (did you mean %r?)" % RACK)],
            self.problems({'nova_ext:failure_domain:racks': 'r1'}))

    def test_unread_keys_without_a_close_one(self):
        # the shared prefix alone does not make a level close to another
        self.assertEqual(
            [('agg1', "key 'nova_ext:failure_domain:datacenter' is not read "
                      "by nova-ext; it is ignored (failure-domain levels, "
                      "[nova_ext] failure_domain_levels: power, rack, row)")],
            self.problems({'nova_ext:failure_domain:datacenter': 'dc1'}))
        self.assertEqual(
            [('agg1', "key 'nova_ext:colour' is not read by nova-ext; it is "
                      "ignored")],
            self.problems({'nova_ext:colour': 'blue'}))

    def test_levels_follow_the_configuration(self):
        self.flags(failure_domain_levels=['pod'], group='nova_ext')
        self.assertEqual(
            [('agg1', "key %r is not read by nova-ext; it is ignored "
                      "(failure-domain levels, [nova_ext] "
                      "failure_domain_levels: pod)" % RACK)],
            self.problems({RACK: 'r1'}))
        self.assertEqual([], self.problems({
            'nova_ext:failure_domain:pod': 'p1'}))

    def test_every_aggregate_and_problem_in_order(self):
        found = aggregate_keys.problems_in_aggregates(
            [aggregate('a', {'nova_ext:x': '1', RACK.upper(): 'r1'}),
             aggregate('b', {RACK: 'r1'}),
             aggregate('c', {RACK: 'r2 '})],
            aggregate_keys.keys_read(CONF))
        self.assertEqual(['a', 'a', 'c'], [name for name, _ in found])
        self.assertIn('NOVA_EXT:FAILURE_DOMAIN:RACK', found[0][1])
        self.assertIn("'nova_ext:x'", found[1][1])

    def test_an_aggregate_without_a_name_is_named_by_its_uuid(self):
        agg = objects.Aggregate(uuid='c0ffee00-0000-4000-8000-000000000000',
                                metadata={'nova_ext:x': '1'})
        self.assertEqual(
            'c0ffee00-0000-4000-8000-000000000000',
            aggregate_keys.problems_in_aggregates(
                [agg], aggregate_keys.keys_read(CONF))[0][0])


class WarnNearMissesTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        cache.forget_all()

    def test_every_problem_logged_once_until_forgotten(self):
        agg = aggregate('rack-r1', {'nova_ext:failure_domian:rack': 'r1',
                                    'nova_ext:host_class': 'gpu '})
        for _ in range(3):
            aggregate_keys.warn_near_misses(agg)
        output = self.stdlog.logger.output
        self.assertEqual(2, output.count('nova-ext: aggregate rack-r1: '))
        self.assertIn("did you mean %r?" % RACK, output)
        self.assertIn("a class of its own, not 'gpu'", output)

        cache.forget_all()
        aggregate_keys.warn_near_misses(agg)
        self.assertEqual(4, self.stdlog.logger.output.count(
            'nova-ext: aggregate rack-r1: '))
