# SPDX-License-Identifier: Apache-2.0
"""memory_sharing: let a guest opt out of KSM page sharing.

Enabled by ``[nova_ext] guest_mutators = memory_sharing`` on nova-compute.
Driven by the flavor extra spec ``nova_ext:memory_sharing`` (boolean) and,
where the flavor does not set it, the image property
``nova_ext_memory_sharing``. ``false`` adds ``<memoryBacking><nosharepages/>``:
the host's KSM never merges this guest's pages.

Why: operators run KSM to pack more guests per host, but page deduplication
is a timing side channel between guests and costs latency-sensitive
workloads (databases, SAP HANA); Nova only turns sharing off for real-time
guests (``hw:cpu_realtime``). With this, a "dedicated" or "secure" flavor
opts out while the rest of the host keeps sharing. ``true`` (the default)
changes nothing.
"""

from nova.virt.libvirt import config as vconfig
from oslo_utils import strutils

from nova_ext.virt.libvirt import mutators

EXTRA_SPEC = 'nova_ext:memory_sharing'
IMAGE_PROPERTY = 'nova_ext_memory_sharing'


class MemorySharing(mutators.GuestMutator):

    def mutate(self, guest, instance, image_meta, driver):
        value = (instance.flavor.extra_specs or {}).get(EXTRA_SPEC)
        source = 'flavor extra spec ' + EXTRA_SPEC
        if value is None:
            value = mutators.image_property(instance, IMAGE_PROPERTY)
            source = 'image property ' + IMAGE_PROPERTY
        if value is None:
            return
        try:
            sharing = strutils.bool_from_string(value, strict=True)
        except ValueError:
            raise self.invalid("%s=%r is not a boolean (true/false)"
                               % (source, value))
        if sharing:
            return
        if guest.membacking is None:
            guest.membacking = vconfig.LibvirtConfigGuestMemoryBacking()
        guest.membacking.sharedpages = False
