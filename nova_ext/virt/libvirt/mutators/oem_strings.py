# SPDX-License-Identifier: Apache-2.0
"""oem_strings: SMBIOS OEM strings (type 11) from the flavor and the image.

Enabled by ``[nova_ext] guest_mutators = oem_strings`` on nova-compute.
Driven by the flavor extra spec ``nova_ext:oem_strings`` (the operator's:
licence keys, asset tags, the cost centre) and the image property
``nova_ext_oem_strings`` (the image owner's: systemd credentials such as
``io.systemd.credential:hostname=web1``, Ignition hints), entries separated by
``;``. Flavor entries come first. The guest reads them with ``dmidecode -t 11``
or from ``/sys/firmware/dmi/entries/11-*``.

At most 16 entries of 1-255 printable characters in all; the API refuses a
bad flavor value (400), a bad image value fails the build with a fault
naming this mutator. Only x86 guests have SMBIOS; elsewhere the build fails
the same way rather than silently dropping the strings.
"""

import re

from nova.virt.libvirt import config as vconfig

from nova_ext.virt.libvirt import mutators

EXTRA_SPEC = 'nova_ext:oem_strings'
IMAGE_PROPERTY = 'nova_ext_oem_strings'
MAX_ENTRIES = 16
# printable, no ';' (the separator), 1-255 characters
ENTRY = r'[^;\x00-\x1f\x7f]{1,255}'
VALUE_PATTERN = r'%s(;%s){0,%d}' % (ENTRY, ENTRY, MAX_ENTRIES - 1)


class SysinfoWithOEMStrings(vconfig.LibvirtConfigGuestSysinfo):
    """Nova's <sysinfo type='smbios'> plus <oemStrings>."""

    def __init__(self, base=None, **kwargs):
        super().__init__(**kwargs)
        if base is not None:
            self.__dict__.update(base.__dict__)
        self.oem_strings = []

    def format_dom(self):
        sysinfo = super().format_dom()
        if self.oem_strings:
            oem = self._new_node('oemStrings')
            for entry in self.oem_strings:
                oem.append(self._text_node('entry', entry))
            sysinfo.append(oem)
        return sysinfo


def entries(value):
    return value.split(';') if value else []


class OEMStrings(mutators.GuestMutator):

    def mutate(self, guest, instance, image_meta, driver):
        from_flavor = (instance.flavor.extra_specs or {}).get(EXTRA_SPEC)
        from_image = mutators.image_property(instance, IMAGE_PROPERTY)
        if from_image is not None and not re.fullmatch(VALUE_PATTERN,
                                                       from_image):
            raise self.invalid(
                "image property %s=%r: expected at most %d entries of "
                "1-255 printable characters separated by ';'"
                % (IMAGE_PROPERTY, from_image, MAX_ENTRIES))
        wanted = entries(from_flavor) + entries(from_image)
        if not wanted:
            return
        if len(wanted) > MAX_ENTRIES:
            raise self.invalid(
                "%d OEM strings from flavor %s and image property %s; at "
                "most %d" % (len(wanted), EXTRA_SPEC, IMAGE_PROPERTY,
                             MAX_ENTRIES))
        if guest.sysinfo is None or guest.os_smbios is None:
            raise self.invalid(
                "this guest has no SMBIOS (architecture %s, virt type %s); "
                "remove %s / %s" % (guest.os_arch, guest.virt_type,
                                    EXTRA_SPEC, IMAGE_PROPERTY))
        sysinfo = SysinfoWithOEMStrings(guest.sysinfo)
        sysinfo.oem_strings = wanted
        guest.sysinfo = sysinfo
