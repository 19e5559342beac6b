# SPDX-License-Identifier: Apache-2.0
"""The module that lets an unmodified nova-compute load our driver.

Nova imports ``'nova.virt.' + compute_driver`` (``nova/virt/driver.py
load_compute_driver``), so a driver outside Nova needs a module inside
Nova's ``nova/virt`` package: the path nova-powervm, nova-lxd and nova-zvm
took. ``nova-ext-manage driver install`` writes
``nova/virt/nova_ext_libvirt.py``, one import long; ``compute_driver =
nova_ext_libvirt.LibvirtDriver`` then loads
:class:`nova_ext.virt.libvirt.driver.LibvirtDriver`.

The file belongs to Nova's installation, not ours: reinstalling or upgrading
Nova (pip, distribution package, a git pull of an editable checkout that
cleans untracked files) can remove it. Re-run ``install`` after upgrading
Nova; ``check`` says whether it is in place.
"""

import importlib.util
import os
import tempfile

from nova_ext import errors
from nova_ext import files

MODULE = 'nova_ext_libvirt'
COMPUTE_DRIVER = MODULE + '.LibvirtDriver'
MARKER = '# Installed by nova-ext-manage driver install.'
CONTENT = '''\
%s Removed by nova-ext-manage driver remove;
# re-run install after upgrading Nova (this file is not Nova's).
# nova.conf: [DEFAULT] compute_driver = %s
from nova_ext.virt.libvirt.driver import LibvirtDriver  # noqa: F401
''' % (MARKER, COMPUTE_DRIVER)


class ShimError(errors.OperatorError):
    pass


def nova_virt_dir():
    """Nova's ``nova/virt`` directory, wherever this Python finds it
    (site-packages or an editable checkout such as DevStack's /opt/stack/nova).
    """
    spec = importlib.util.find_spec('nova.virt')
    if spec is None or not spec.submodule_search_locations:
        raise ShimError('Nova (the nova.virt package) is not importable by '
                        'this Python; install nova-ext into the environment '
                        'nova-compute runs from')
    return list(spec.submodule_search_locations)[0]


def _path(virt_dir):
    return os.path.join(virt_dir, MODULE + '.py')


def _state(virt_dir):
    """'absent', 'installed' (exactly our text) or 'foreign'.

    Only a file that is byte for byte what :data:`CONTENT` says is ours: a
    copy someone edited (even one that kept our marker line) is theirs,
    and install/remove leave it alone.
    """
    path = _path(virt_dir)
    if not os.path.lexists(path):
        return 'absent'
    if os.path.islink(path) or not os.path.isfile(path):
        return 'foreign'
    try:
        with open(path, 'rb') as shim:
            data = shim.read(len(CONTENT) + 1)
    except OSError as error:
        raise ShimError('cannot read %s: %s' % (path, error.strerror))
    return 'installed' if data == CONTENT.encode() else 'foreign'


def _refuse_unless_writable(virt_dir):
    # os.access says yes to root even on a read-only file system; only
    # creating a file tells.
    try:
        probe = tempfile.NamedTemporaryFile(dir=virt_dir, prefix='.nova-ext-')
    except OSError as error:
        raise ShimError(
            "cannot write to Nova's package directory %s (%s); run as the "
            "user that owns Nova's installation (often root), or ask who "
            "packages Nova to ship %s" % (virt_dir, error.strerror,
                                          MODULE + '.py'))
    probe.close()


def install(virt_dir=None):
    """Write the module; returns what was done. Idempotent."""
    virt_dir = virt_dir or nova_virt_dir()
    state = _state(virt_dir)
    if state == 'installed':
        return 'already installed: %s' % _path(virt_dir)
    if state == 'foreign':
        raise ShimError('%s exists and is not the file nova-ext writes '
                        '(other content); not overwriting it: move it '
                        'away, then install again' % _path(virt_dir))
    _refuse_unless_writable(virt_dir)
    # atomic: a nova-compute starting meanwhile sees the old or new file;
    # a failed write (disk full, ulimit -f) leaves nothing in Nova's package
    try:
        files.write_atomically(_path(virt_dir), CONTENT)
    except OSError as error:
        raise ShimError('cannot write %s: %s' % (_path(virt_dir),
                                                 error.strerror))
    return 'installed: %s' % _path(virt_dir)


def remove(virt_dir=None):
    """Delete the module (and its bytecode) if we wrote it. Idempotent."""
    virt_dir = virt_dir or nova_virt_dir()
    state = _state(virt_dir)
    if state == 'absent':
        return 'not installed: %s' % _path(virt_dir)
    if state == 'foreign':
        raise ShimError('%s is not the file nova-ext writes (other '
                        'content); not removing it' % _path(virt_dir))
    _refuse_unless_writable(virt_dir)
    os.remove(_path(virt_dir))
    cache = os.path.join(virt_dir, '__pycache__')
    if os.path.isdir(cache):
        for name in os.listdir(cache):
            if name.startswith(MODULE + '.'):
                os.remove(os.path.join(cache, name))
    return 'removed: %s' % _path(virt_dir)


def check(virt_dir=None):
    """(ok, lines): whether nova-compute can load our driver, and how."""
    virt_dir = virt_dir or nova_virt_dir()
    state = _state(virt_dir)
    lines = ['shim module: %s (%s)' % (_path(virt_dir), state)]
    ok = state == 'installed'
    if ok:
        try:
            importlib.import_module('nova.virt.' + MODULE)
        except Exception as error:
            ok = False
            lines.append('importing nova.virt.%s fails: %s' % (MODULE, error))
    if ok:
        lines.append('nova.conf of nova-compute: [DEFAULT] compute_driver = '
                     + COMPUTE_DRIVER)
    else:
        lines.append('run: nova-ext-manage driver install')
    return ok, lines
