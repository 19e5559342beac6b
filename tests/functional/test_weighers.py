# SPDX-License-Identifier: Apache-2.0
"""nova-ext weighers inside a real Nova, with Nova's own weighers enabled.

Each test sets up a cloud where Nova's upstream weighers alone would choose
differently, so it fails if the nova-ext weigher is not doing its job.
"""

import time

from nova.tests.fixtures import glance

from nova_ext.scheduler import cloud
from tests.functional import base

IMAGE_A = glance.GlanceFixture.image1['id']
IMAGE_B = glance.GlanceFixture.image2['id']


class BinPackingWeigherTest(base.NovaExtTestCase):
    # Upstream RAMWeigher/CPUWeigher spread at multiplier 1.0; packing at a
    # larger multiplier must win.
    NOVA_EXT_FLAGS = {'bin_packing_weight_multiplier': 10.0}

    def setUp(self):
        super().setUp()
        self.flavor = self.create_flavor('m1', vcpu=2, memory_mb=2048)

    def test_servers_pack_onto_one_host(self):
        hosts = [self.host_of(self.boot('s%d' % i, self.flavor))
                 for i in range(3)]
        self.assertEqual(1, len(set(hosts)), hosts)

    def test_negative_aggregate_multiplier_spreads(self):
        # Nova's own weighers pack here (negative multipliers), so only
        # nova-ext's weigher, turned round by the aggregate, spreads.
        for weigher in ('ram', 'cpu', 'disk'):
            self.flags(group='filter_scheduler',
                       **{weigher + '_weight_multiplier': -1.0})
        self.create_aggregate('spread-zone', self.HOSTS, {
            'nova_ext:bin_packing_weight_multiplier': '-10'})
        hosts = [self.host_of(self.boot('s%d' % i, self.flavor))
                 for i in range(3)]
        self.assertEqual(3, len(set(hosts)), hosts)


class ImageLocalityWeigherTest(base.NovaExtTestCase):
    NOVA_EXT_FLAGS = {'image_locality_weight_multiplier': 3.0,
                      'image_locality_cache_seconds': 0,
                      'bin_packing_weight_multiplier': 0.0}

    def setUp(self):
        super().setUp()
        self.flavor = self.create_flavor('m1', vcpu=1, memory_mb=1024)
        # An operator pins a first server of image A to host3 (admin-only
        # "zone:host" syntax), so host3 now has A in its image cache.
        self.boot('seed', self.flavor, image=IMAGE_A, zone='nova:host3')

    def test_same_image_lands_where_it_is_cached(self):
        # RAMWeigher alone would avoid host3, the only host with less free
        # RAM.
        server = self.boot('a2', self.flavor, image=IMAGE_A)
        self.assertEqual('host3', self.host_of(server))

    def test_other_image_is_not_drawn_to_that_host(self):
        server = self.boot('b1', self.flavor, image=IMAGE_B)
        self.assertNotEqual('host3', self.host_of(server))


class ImageLocalityRefreshAheadTest(base.NovaExtTestCase):
    """Past ``image_locality_cache_seconds`` a request is placed by the
    remembered answer while nova-scheduler asks the cells again in the
    background; an answer twice the TTL old is not used (unit-tested).
    """

    CACHE_SECONDS = 5
    NOVA_EXT_FLAGS = {'image_locality_weight_multiplier': 3.0,
                      'image_locality_cache_seconds': CACHE_SECONDS,
                      'bin_packing_weight_multiplier': 0.0}

    def test_a_request_past_the_ttl_does_not_wait_for_the_cells(self):
        flavor = self.create_flavor('m1', vcpu=1, memory_mb=1024)
        # Given host3 ran image A when the scheduler asked which hosts do
        seed = self.boot('seed', flavor, image=IMAGE_A, zone='nova:host3')
        asked_from = time.monotonic()
        first = self.boot('a1', flavor, image=IMAGE_A)
        asked_by = time.monotonic()
        self.assertEqual('host3', self.host_of(first))
        # ... and image A then moved to host1
        self._delete_server(seed)
        self._delete_server(first)
        self.boot('moved', flavor, image=IMAGE_A, zone='nova:host1')
        # When a request for image A comes past the answer's TTL (and
        # before twice the TTL, when it would ask itself)
        time.sleep(max(0.0, asked_by + self.CACHE_SECONDS + 0.2
                       - time.monotonic()))
        self.assertLess(time.monotonic(),
                        asked_from + 2 * self.CACHE_SECONDS - 1.0,
                        'the setup outlasted twice the TTL: nothing to test')
        served = self.boot('a2', flavor, image=IMAGE_A)
        # Then it was placed by the remembered answer, not kept waiting
        # for the cells: on host3, which no longer runs A
        self.assertEqual('host3', self.host_of(served))
        # ... and the scheduler asked again meanwhile: the next requests
        # are told host1 runs A
        cloud.hosts_by_image.wait_for_refreshes(timeout=30)
        self.assertIn('host1',
                      cloud.LiveCloud().hosts_running_image(IMAGE_A))


class FailureDomainSpreadWeigherTest(base.NovaExtTestCase):
    NOVA_EXT_FLAGS = {'failure_domain_spread_weight_multiplier': 10.0,
                      'bin_packing_weight_multiplier': 0.0}

    def setUp(self):
        super().setUp()
        self.set_failure_domains('rack', {'r1': ['host1', 'host2'],
                                          'r2': ['host3', 'host4']})
        self.flavor = self.create_flavor('m1', vcpu=1, memory_mb=1024)
        big = self.create_flavor('filler', vcpu=1, memory_mb=4096)
        # Fill rack r2 so Nova's RAMWeigher prefers the hosts of rack r1.
        for host in ('host3', 'host4'):
            self.boot('fill-' + host, big, zone='nova:' + host)
        self.rack_of = {'host1': 'r1', 'host2': 'r1',
                        'host3': 'r2', 'host4': 'r2'}

    def test_second_member_goes_to_the_emptier_rack(self):
        group = self.create_server_group('g')
        hints = {'nova_ext:spread_level': 'rack'}
        first = self.boot('m0', self.flavor, group, hints)
        second = self.boot('m1', self.flavor, group, hints)
        self.assertEqual('r1', self.rack_of[self.host_of(first)])
        self.assertEqual('r2', self.rack_of[self.host_of(second)])

    def test_default_level_spreads_groups_that_name_none(self):
        self.flags(default_spread_level='rack', group='nova_ext')
        group = self.create_server_group('g', policy='soft-anti-affinity')
        first = self.boot('m0', self.flavor, group)
        second = self.boot('m1', self.flavor, group)
        self.assertNotEqual(self.rack_of[self.host_of(first)],
                            self.rack_of[self.host_of(second)])

    def test_soft_weigher_does_not_refuse_when_domains_are_full(self):
        group = self.create_server_group('g', policy='soft-anti-affinity')
        hints = {'nova_ext:spread_level': 'rack'}
        servers = [self.boot('m%d' % i, self.flavor, group, hints)
                   for i in range(3)]
        racks = [self.rack_of[self.host_of(s)] for s in servers]
        # The second member goes to the other rack, which only this weigher
        # asks for (Nova's soft-anti-affinity weigher spreads over hosts,
        # its RAM weigher prefers rack r1); the third still boots (boot()
        # waits for ACTIVE) although every rack already holds a member.
        self.assertEqual(['r1', 'r2'], racks[:2])
        self.assertEqual(3, len(servers))
