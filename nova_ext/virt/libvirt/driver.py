# SPDX-License-Identifier: Apache-2.0
"""LibvirtDriver with guest-config mutators and failure-domain traits.

Driven by nova-compute's nova.conf: ``compute_driver =
nova_ext_libvirt.LibvirtDriver`` loads it, ``[nova_ext] guest_mutators``
names the mutators applied to every domain it builds, ``[nova_ext]
failure_domain`` the failure-domain traits it reports on its resource
provider.
"""

import copy

from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import cfg
from oslo_log import log as logging

from nova_ext import conf as ext_conf
from nova_ext.scheduler import failure_domains
from nova_ext.virt.libvirt import mutators

CONF = cfg.CONF
ext_conf.register_opts(CONF)
LOG = logging.getLogger(__name__)


class InvalidFailureDomain(ValueError):
    pass


def failure_domain_traits(configured, levels):
    """Traits for ``[nova_ext] failure_domain`` ({level: domain})."""
    traits = set()
    for level, domain in configured.items():
        if level not in levels:
            raise InvalidFailureDomain(
                "[nova_ext] failure_domain names level %r, which is not in "
                "[nova_ext] failure_domain_levels (%s)"
                % (level, ', '.join(levels)))
        if not domain:
            raise InvalidFailureDomain(
                "[nova_ext] failure_domain gives level %r no domain "
                "(expected level:domain)" % level)
        traits.add(failure_domains.domain_trait(level, domain))
    return traits


class LibvirtDriver(libvirt_driver.LibvirtDriver):
    """Nova's libvirt driver; every domain it builds goes through the
    configured guest mutators, and its provider carries its failure domains.
    """

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only=read_only)
        # Config errors stop nova-compute at start, as an unknown
        # compute_driver does, instead of failing every boot later.
        self.guest_mutators = mutators.load(CONF.nova_ext.guest_mutators)
        self.failure_domain = dict(CONF.nova_ext.failure_domain)
        self.failure_domain_traits = failure_domain_traits(
            self.failure_domain, CONF.nova_ext.failure_domain_levels)
        LOG.info("nova-ext: libvirt driver active: guest mutators: %s; "
                 "failure-domain traits: %s",
                 ', '.join(m.name for m in self.guest_mutators) or 'none',
                 ', '.join(sorted(self.failure_domain_traits)) or 'none')

    # A private method (registered in nova_ext.upstream.INTERNALS): Nova has
    # no guest-config hook, and an override cannot go through upstream.patch
    # without changing every LibvirtDriver in the process, so it stays here.
    def _get_guest_config(self, instance, network_info, image_meta,
                          disk_info, *args, **kwargs):
        guest = super()._get_guest_config(
            instance, network_info, image_meta, disk_info, *args, **kwargs)
        mutators.apply(self.guest_mutators, guest, instance, image_meta,
                       self)
        return guest

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        super().update_provider_tree(provider_tree, nodename,
                                     allocations=allocations)
        if not self.failure_domain:
            return
        reported = provider_tree.data(nodename).traits
        stale = {trait for trait in reported
                 if trait.startswith(failure_domains.TRAIT_PREFIX)
                 and trait not in self.failure_domain_traits}
        provider_tree.remove_traits(nodename, *stale)
        provider_tree.add_traits(nodename, *self.failure_domain_traits)
        # Nova keeps a copy for spawn(); it must match what placement gets
        self.provider_tree = copy.deepcopy(provider_tree)
