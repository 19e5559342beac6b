# SPDX-License-Identifier: Apache-2.0
"""One way nova-ext writes a whole file (the libvirt driver shim in Nova's
package, maintenance's Prometheus text file, ``simulate --json``): a
temporary file in the same directory, written, flushed to disk and
renamed over the target, so a reader sees the old file or the new one,
never half of one. When writing fails (disk full, ``ulimit -f``, a
read-only or immutable directory) the temporary file is removed and the
``OSError`` goes on, carrying the target's path for the one error line
(:func:`describe_os_error`).

nova.conf edits keep the old file's owner, mode and extended attributes
and take a lock: ``nova_ext.configure`` does that.
"""

import contextlib
import os
import tempfile


def write_atomically(path, data, mode=0o644):
    """``data`` (str or bytes) into ``path``, all or nothing."""
    directory = os.path.dirname(os.path.abspath(path))
    if isinstance(data, str):
        data = data.encode('utf-8')
    try:
        fd, temporary = tempfile.mkstemp(dir=directory, prefix='.nova-ext-',
                                         suffix='.tmp')
    except OSError as error:
        raise OSError(error.errno, error.strerror, directory)
    try:
        try:
            with os.fdopen(fd, 'wb') as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
            os.chmod(temporary, mode)
            os.replace(temporary, path)
        except OSError as error:
            # the error of a write names no file: name the one asked for
            raise OSError(error.errno, error.strerror, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def describe_os_error(error):
    """One line for an ``OSError`` an operator can act on: the path and
    the system's reason (``No space left on device``, ``File too large``,
    ``Read-only file system``, ``Operation not permitted``), or None for
    one without a reason.
    """
    if not isinstance(error, OSError) or not error.strerror:
        return None
    if error.filename:
        return '%s: %s' % (error.filename, error.strerror)
    return error.strerror
