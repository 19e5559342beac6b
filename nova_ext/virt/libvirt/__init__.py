# SPDX-License-Identifier: Apache-2.0
"""nova-ext's libvirt driver: Nova's LibvirtDriver plus guest-config
mutators and compute-reported failure domains.

nova.conf of nova-compute::

    [DEFAULT]
    compute_driver = nova_ext_libvirt.LibvirtDriver
    [nova_ext]
    guest_mutators = domain_metadata,oem_strings,memory_sharing
    failure_domain = rack:r12,row:b

``nova-ext-manage driver install`` puts the one-line module Nova imports for
that ``compute_driver`` value into Nova's ``nova/virt`` (see :mod:`.shim`).
"""
