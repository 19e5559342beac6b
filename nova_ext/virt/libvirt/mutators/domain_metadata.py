# SPDX-License-Identifier: Apache-2.0
"""domain_metadata: nova-ext's view of a guest in the domain's <metadata>.

Enabled by ``[nova_ext] guest_mutators = domain_metadata`` on nova-compute;
needs no extra spec. A host admin sees, next to Nova's own ``<nova:instance>``
block, what nova-ext scheduled the guest by::

    $ virsh metadata instance-0000002a --uri urn:nova-ext:guest:1
    <guest>
      <failureDomain level="rack">r12</failureDomain>
      <failureDomain level="row">b</failureDomain>
      <hostClass>gpu</hostClass>
      <flavorClass>gpu</flavorClass>
      <spreadLevel>rack</spreadLevel>
    </guest>

The failure domains are this compute's ``[nova_ext] failure_domain``; host
class, flavor class and spread level are the flavor's ``nova_ext:host_class``,
``nova_ext:quota_class`` and ``nova_ext:spread_level`` (elements are left out
when unset).
"""

from nova.virt.libvirt import config as vconfig

from nova_ext.virt.libvirt import mutators

NAMESPACE_URI = 'urn:nova-ext:guest:1'
FLAVOR_ELEMENTS = (
    ('hostClass', 'nova_ext:host_class'),
    ('flavorClass', 'nova_ext:quota_class'),
    ('spreadLevel', 'nova_ext:spread_level'),
)


class NovaExtGuestMetadata(vconfig.LibvirtConfigObject):

    def __init__(self):
        super().__init__(root_name='guest', ns_prefix='nova-ext',
                         ns_uri=NAMESPACE_URI)
        self.failure_domains = {}
        self.values = []  # (element, text)

    def format_dom(self):
        root = super().format_dom()
        for level, domain in sorted(self.failure_domains.items()):
            root.append(self._text_node('failureDomain', domain,
                                        level=level))
        for element, text in self.values:
            root.append(self._text_node(element, text))
        return root


class DomainMetadata(mutators.GuestMutator):

    def mutate(self, guest, instance, image_meta, driver):
        metadata = NovaExtGuestMetadata()
        metadata.failure_domains = driver.failure_domain
        extra_specs = instance.flavor.extra_specs or {}
        metadata.values = [(element, extra_specs[key])
                           for element, key in FLAVOR_ELEMENTS
                           if extra_specs.get(key)]
        guest.metadata.append(metadata)
