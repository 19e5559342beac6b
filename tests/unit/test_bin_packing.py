# SPDX-License-Identifier: Apache-2.0
"""BinPackingWeigher's score: leftover, stranded capacity and the request's
share of the host."""

from oslo_utils.fixture import uuidsentinel as uuids

from nova import objects
from nova import test
from nova.tests.unit.scheduler import fakes

from nova_ext.scheduler.weights import bin_packing


def host(name, vcpus_used, ram_used_mb, vcpus=10, ram_mb=10240):
    return fakes.FakeHostState(name, name, {
        'vcpus_total': vcpus, 'vcpus_used': vcpus_used,
        'cpu_allocation_ratio': 1.0,
        'total_usable_ram_mb': ram_mb, 'free_ram_mb': ram_mb - ram_used_mb,
        'ram_allocation_ratio': 1.0,
        'total_usable_disk_gb': 100, 'free_disk_mb': 100 * 1024,
        'disk_allocation_ratio': 1.0, 'aggregates': []})


def spec(vcpus=1, memory_mb=1024):
    return objects.RequestSpec(
        flavor=objects.Flavor(vcpus=vcpus, memory_mb=memory_mb, root_gb=0,
                              ephemeral_gb=0, swap=0, extra_specs={}),
        is_bfv=False, instance_uuid=uuids.new)


class BinPackingWeigherTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(bin_packing_resource_weights={'vcpu': 1, 'ram': 1},
                   group='nova_ext')
        self.weigher = bin_packing.BinPackingWeigher()

    def weigh(self, *hosts, request=None):
        weighed = [
            type('W', (), {'obj': h})() for h in hosts]
        return self.weigher.weigh_objects(weighed, request or spec())

    def test_fuller_host_scores_higher(self):
        empty, half = self.weigh(host('a', 0, 0), host('b', 5, 5120))
        self.assertGreater(half, empty)
        # after a 1 vCPU / 1 GiB request: a leaves 90% of both, b 40%; the
        # request takes 10 % of either host (share), times 20 (default)
        self.assertAlmostEqual(-0.9 - 20 * 0.1, empty)
        self.assertAlmostEqual(-0.4 - 20 * 0.1, half)

    def test_stranded_capacity_is_penalised(self):
        # Same total use; b would be left with RAM but no vCPUs to sell.
        balanced, lopsided = self.weigh(host('a', 5, 5120),
                                        host('b', 9, 1024))
        self.assertGreater(balanced, lopsided)

    def test_stranded_weight_zero_scores_utilisation_only(self):
        self.flags(bin_packing_stranded_weight=0.0, group='nova_ext')
        balanced, lopsided = self.weigh(host('a', 5, 5120),
                                        host('b', 9, 1024))
        self.assertAlmostEqual(balanced, lopsided)

    def test_a_resource_the_request_does_not_ask_for_is_not_stranded(self):
        # Boot from volume (no root disk): both hosts keep all their disk.
        # Counted as imbalance, that free disk would make the emptier host
        # look more balanced and the weigher spread.
        self.flags(bin_packing_resource_weights={
            'vcpu': 1, 'ram': 1, 'disk': 1}, group='nova_ext')
        empty, half = self.weigh(host('a', 0, 0), host('b', 5, 5120))
        self.assertGreater(half, empty)
        # vCPU and RAM only in the stranded and share terms; disk (100 %
        # free) still in the leftover mean
        self.assertAlmostEqual(-(0.9 + 0.9 + 1.0) / 3 - 20 * 0.1, empty)
        self.assertAlmostEqual(-(0.4 + 0.4 + 1.0) / 3 - 20 * 0.1, half)

    def test_resource_weights_make_it_memory_centric(self):
        self.flags(bin_packing_resource_weights={'ram': 1},
                   group='nova_ext')
        cpu_full, ram_full = self.weigh(host('a', 9, 0), host('b', 0, 9216))
        self.assertGreater(ram_full, cpu_full)

    # Two host shapes as in the simulator's clusters: general purpose (2 GiB
    # per vCPU, allocation ratio applied) and memory-heavy (8 GiB per vCPU).

    def general(self, vcpus_used=0, ram_used_mb=0):
        return host('gp', vcpus_used, ram_used_mb, vcpus=128,
                    ram_mb=256 * 1024)

    def memory_heavy(self, vcpus_used=0, ram_used_mb=0):
        return host('mem', vcpus_used, ram_used_mb, vcpus=64,
                    ram_mb=512 * 1024)

    def test_a_request_goes_to_the_host_of_its_shape(self):
        # The general host has RAM to spare after compute-heavy servers, so
        # a memory-heavy server would rebalance it (leftover plus stranded
        # prefer it); but there it takes 6.25 % of the host (its RAM), on
        # the empty memory-heavy host 3.1 % (its vCPUs). Filling the
        # general host's RAM with it strands that host's vCPUs later, and
        # the memory-heavy host's RAM only a server this memory-heavy can
        # use.
        memory_server = spec(vcpus=2, memory_mb=16 * 1024)
        general, memory_heavy = self.weigh(
            self.general(34, 52 * 1024), self.memory_heavy(),
            request=memory_server)
        self.assertGreater(memory_heavy, general)
        # leftover + 10 * stranded + 20 * share
        self.assertAlmostEqual(
            -((92 / 128 + 188 / 256) / 2 + 10 * (188 / 256 - 92 / 128)
              + 20 * 16 / 256), general)
        self.assertAlmostEqual(-(62 / 64 + 20 * 2 / 64), memory_heavy)

        # and a compute-heavy server prefers the general host
        compute_server = spec(vcpus=8, memory_mb=8 * 1024)
        general, memory_heavy = self.weigh(
            self.general(34, 52 * 1024), self.memory_heavy(),
            request=compute_server)
        self.assertGreater(general, memory_heavy)

    def test_shape_weight_zero_scores_leftover_and_stranded_only(self):
        self.flags(bin_packing_shape_weight=0.0, group='nova_ext')
        general, memory_heavy = self.weigh(
            self.general(34, 52 * 1024), self.memory_heavy(),
            request=spec(vcpus=2, memory_mb=16 * 1024))
        # what the weigher did before the share term: the general host
        self.assertGreater(general, memory_heavy)

    def test_the_share_term_does_not_rank_hosts_of_one_shape(self):
        hosts = (host('a', 0, 0), host('b', 5, 5120), host('c', 9, 1024))
        with_share = self.weigh(*hosts)
        self.flags(bin_packing_shape_weight=0.0, group='nova_ext')
        without = self.weigh(*hosts)
        # the same 10 % share on every host: the same offset for each
        for a, b in zip(with_share, without):
            self.assertAlmostEqual(a - b, -20 * 0.1)

    def test_hosts_without_capacity_or_room_weighed_with_the_others(self):
        # one call, every case: the weights of each host are what it gets
        # weighed alone
        hosts = (host('a', 0, 0), host('no-vcpus', 0, 0, vcpus=0),
                 host('overcommitted', 12, 12288), host('b', 5, 5120))
        together = self.weigh(*hosts)
        self.assertEqual([self.weigh(h)[0] for h in hosts], together)
        # no vCPU capacity: nothing free there (stranded: RAM 90 % free,
        # vCPU 0), and the request takes the whole of it (share 1)
        self.assertAlmostEqual(-(0.9 / 2 + 10 * 0.9 + 20 * 1.0),
                               together[1])
        # beyond capacity: clamped to nothing free, nothing stranded
        self.assertAlmostEqual(-(0.0 + 20 * 0.1), together[2])

    def test_hosts_read_in_batches_keep_their_own_numbers(self):
        # Given more hosts than one batch reads, each of another size and
        # usage, so a host weighed with another's numbers shows
        batch = bin_packing._HOSTS_PER_BATCH
        hosts = [host('h%d' % i, i % 7, (i % 11) * 512, vcpus=8 + i % 5,
                      ram_mb=8192 + (i % 3) * 1024)
                 for i in range(2 * batch + 3)]
        # When they are weighed together
        together = self.weigh(*hosts)
        # Then each gets the weight it gets alone
        self.assertEqual([self.weigh(h)[0] for h in hosts], together)
