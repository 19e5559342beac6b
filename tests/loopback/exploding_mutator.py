# SPDX-License-Identifier: Apache-2.0
"""A third-party guest mutator with a bug, installed on the loopback
cloud's QEMU compute only (``tests/loopback/mutator_plugins`` holds its
distribution metadata; :mod:`tests.loopback.hypervisor` puts it on
nova-compute's path and in ``[nova_ext] guest_mutators``).

It raises for a server whose metadata has ``nova_ext_test_explode``, and
leaves every other guest alone.
"""

from nova_ext.virt.libvirt import mutators

TRIGGER = 'nova_ext_test_explode'


class ExplodingMutator(mutators.GuestMutator):

    def mutate(self, guest, instance, image_meta, driver):
        if TRIGGER in (instance.metadata or {}):
            raise KeyError('bug in a third-party mutator')
