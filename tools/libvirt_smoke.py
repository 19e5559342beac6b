# SPDX-License-Identifier: Apache-2.0
"""Smoke run of nova-ext's libvirt driver against a real libvirtd and QEMU.

Optional (not part of ./run-tests.sh): the functional tests use Nova's
fakelibvirt, which does not validate domain XML. This loads the driver the
way nova-compute does (``load_compute_driver`` with
``nova_ext_libvirt.LibvirtDriver``, through the shim), runs its
``init_host``, builds a tiny guest (64 MiB, an empty 16 MiB disk, no
network) with every mutator enabled, lets the driver define and start it in
libvirt (QEMU TCG: no KVM needed), then reads the domain back from libvirt
and checks the mutators' changes are in the live definition. Everything it
defines is destroyed and undefined at the end.

Needs, on Debian::

    apt-get install libvirt-daemon libvirt-daemon-driver-qemu \\
        qemu-system-x86 qemu-utils libvirt-clients libvirt-dev pkg-config
    libvirtd -d        # and virtlogd -d; or systemctl start libvirtd
    .venv/bin/pip install libvirt-python
    .venv/bin/nova-ext-manage driver install
    .venv/bin/python tools/libvirt_smoke.py [--uri qemu:///system]

Exit code 0 when the domain ran with every change, 1 otherwise, 2 when the
machine lacks what it needs (said on standard error).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from oslo_utils import uuidutils

NS = 'urn:nova-ext:guest:1'


def missing_prerequisites(uri):
    problems = []
    try:
        import libvirt
    except ImportError:
        return ['libvirt-python is not installed in this Python '
                '(pip install libvirt-python)']
    for tool in ('qemu-img', 'qemu-system-x86_64'):
        if not shutil.which(tool):
            problems.append('%s not found (apt-get install qemu-utils '
                            'qemu-system-x86)' % tool)
    try:
        libvirt.open(uri).close()
    except libvirt.libvirtError as error:
        problems.append('cannot connect to libvirtd at %s: %s' % (uri, error))
    return problems


def configure(uri, instances_path):
    import nova.conf
    from nova import config
    from nova import objects

    from nova_ext import conf as ext_conf

    conf = nova.conf.CONF
    ext_conf.register_opts(conf)
    config.parse_args(['libvirt-smoke'], default_config_files=[],
                      configure_db=False, init_rpc=False)
    objects.register_all()
    nova.conf.neutron.register_dynamic_opts(conf)  # as nova-compute does
    conf.set_override('compute_driver', 'nova_ext_libvirt.LibvirtDriver')
    conf.set_override('instances_path', instances_path)
    conf.set_override('virt_type', 'qemu', group='libvirt')
    conf.set_override('connection_uri', uri, group='libvirt')
    conf.set_override('cpu_mode', 'none', group='libvirt')
    conf.set_override('guest_mutators', ['domain_metadata', 'oem_strings',
                                         'memory_sharing'], group='nova_ext')
    conf.set_override('failure_domain', {'rack': 'r12', 'row': 'b'},
                      group='nova_ext')
    conf.set_override('quota_classes', ['licensed'], group='nova_ext')
    return conf


def tiny_instance(context):
    from nova import objects

    flavor = objects.Flavor(
        id=1, flavorid='smoke', name='smoke.tiny', memory_mb=64, vcpus=1,
        root_gb=0, ephemeral_gb=0, swap=0, rxtx_factor=1.0, is_public=True,
        extra_specs={'nova_ext:oem_strings': 'asset=A-1234;licence=demo',
                     'nova_ext:memory_sharing': 'false',
                     'nova_ext:quota_class': 'licensed'})
    return objects.Instance(
        context=context, id=4242, uuid=uuidutils.generate_uuid(),
        project_id='smoke', user_id='smoke', display_name='nova-ext-smoke',
        hostname='nova-ext-smoke', host='smoke', node='smoke',
        image_ref=uuidutils.generate_uuid(), flavor=flavor,
        memory_mb=64, vcpus=1, root_gb=0, ephemeral_gb=0,
        instance_type_id=1, system_metadata={
            'image_nova_ext_oem_strings':
                'io.systemd.credential:hostname=smoke'},
        config_drive='', kernel_id='', ramdisk_id='', os_type=None,
        numa_topology=None, pci_requests=None, pci_devices=None,
        vcpu_model=None, device_metadata=None, trusted_certs=None,
        resources=None, ephemeral_key_uuid=None, metadata={},
        launched_at=None, created_at=None, power_state=0, vm_state='building',
        task_state=None, key_data=None, availability_zone=None,
        migration_context=None, vm_mode=None)


def run(uri, keep):
    instances_path = tempfile.mkdtemp(prefix='nova-ext-smoke-')
    # QEMU runs as its own user (libvirt-qemu on Debian): it must be able to
    # reach the disk; mkdtemp's 0700 would stop it.
    os.chmod(instances_path, 0o755)
    conf = configure(uri, instances_path)

    import libvirt
    from nova import context as nova_context
    from nova import objects
    from nova.virt import driver as virt_driver
    from nova.virt.libvirt import blockinfo
    from nova.virt.libvirt import utils as libvirt_utils
    from nova.virt import virtapi

    from nova_ext.virt.libvirt import driver as ext_driver

    context = nova_context.get_admin_context()
    driver = virt_driver.load_compute_driver(virtapi.VirtAPI(),
                                             conf.compute_driver)
    assert isinstance(driver, ext_driver.LibvirtDriver), type(driver)
    print('loaded %s through compute_driver = %s'
          % (type(driver).__module__, conf.compute_driver))
    driver.init_host('smoke')

    instance = tiny_instance(context)
    image_meta = objects.ImageMeta.from_dict(
        {'disk_format': 'qcow2', 'container_format': 'bare',
         'properties': {}})
    disk_info = blockinfo.get_disk_info(conf.libvirt.virt_type, instance,
                                        image_meta)
    instance_dir = libvirt_utils.get_instance_path(instance)
    os.makedirs(instance_dir)
    # what the image backend would have created: an empty bootable-less
    # disk; the guest sits in its firmware, which is enough to run
    subprocess.run(['qemu-img', 'create', '-q', '-f', 'qcow2',
                    os.path.join(instance_dir, 'disk'), '16M'], check=True)
    from nova.network import model as network_model
    xml = driver._get_guest_xml(context, instance,
                                network_model.NetworkInfo([]), disk_info,
                                image_meta)
    connection = libvirt.open(uri)
    started = time.monotonic()
    try:
        driver._create_guest(context, xml, instance)
        return check(connection.lookupByName(instance.name),
                     time.monotonic() - started, libvirt)
    except Exception as error:
        print('FAILED: %s' % error, file=sys.stderr)
        return 1
    finally:
        if not keep:
            remove(connection, instance.name, libvirt)
            shutil.rmtree(instances_path, ignore_errors=True)


def remove(connection, name, libvirt):
    try:
        domain = connection.lookupByName(name)
    except libvirt.libvirtError:
        return  # never defined
    if domain.isActive():
        domain.destroy()
    domain.undefineFlags(getattr(libvirt, 'VIR_DOMAIN_UNDEFINE_NVRAM', 0))
    print('destroyed and undefined %s' % name)


def check(domain, seconds, libvirt):
    from lxml import etree

    time.sleep(2)  # let QEMU come up past its firmware
    live = etree.fromstring(domain.XMLDesc(0))
    results = {
        'running': domain.isActive() == 1,
        'oem strings': [e.text for e in live.findall(
            './sysinfo/oemStrings/entry')] == [
            'asset=A-1234', 'licence=demo',
            'io.systemd.credential:hostname=smoke'],
        'nosharepages': live.find('./memoryBacking/nosharepages')
        is not None,
    }
    # as `virsh metadata DOMAIN --uri urn:nova-ext:guest:1` shows it
    metadata = etree.fromstring(domain.metadata(
        libvirt.VIR_DOMAIN_METADATA_ELEMENT, NS, 0))
    results['nova-ext metadata'] = (
        {e.get('level'): e.text for e in metadata.findall(
            'failureDomain')} == {'rack': 'r12', 'row': 'b'}
        and metadata.findtext('flavorClass') == 'licensed')
    print('domain %s defined and started by nova-ext\'s driver in %.1f s '
          '(QEMU TCG)' % (domain.name(), seconds))
    for name, ok in results.items():
        print('  %-18s %s' % (name, 'ok' if ok else 'MISSING'))
    return 0 if all(results.values()) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--uri', default='qemu:///system')
    parser.add_argument('--keep', action='store_true',
                        help='leave the domain defined and running')
    args = parser.parse_args()
    problems = missing_prerequisites(args.uri)
    if problems:
        for problem in problems:
            print('libvirt smoke: %s' % problem, file=sys.stderr)
        return 2
    return run(args.uri, args.keep)


if __name__ == '__main__':
    code = main()
    sys.stdout.flush()
    # Nova's libvirt event thread never returns; nova-compute exits the
    # same way.
    os._exit(code)
