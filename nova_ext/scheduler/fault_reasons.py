# SPDX-License-Identifier: Apache-2.0
"""A scheduling failure's reason, as the server's fault will keep it.

What the user sees of a request nova-scheduler refused is the server's
fault message (``openstack server show``): Nova formats the NoValidHost
(``"No valid host was found. <reason>"``; a failed request pre-filter's
reason comes wrapped once more, ``"... Scheduling failed: <reason>"``) and
keeps :data:`FAULT_MESSAGE_BYTES` bytes of it, UTF-8 encoded
(``nova.compute.utils.exception_to_dict``, ``nova.utils.safe_truncate``;
the ``instance_faults.message`` column). So the room a reason has is what
Nova's own text leaves, in bytes, measured from Nova's exceptions in this
process (translated or not) rather than assumed.

Every NoValidHost and RequestFilterFailed nova-ext raises carries a reason
that went through :func:`fitted` (tests/unit/test_fault_reasons.py checks
each one in the code): what is cut is cut here, with an ellipsis, never by
Nova in the middle of a name; whoever needs the whole logs it.
"""

from nova import exception

# what Nova keeps of a fault's message (nova.compute.utils)
FAULT_MESSAGE_BYTES = 255
ELLIPSIS = '...'


def room(failure=exception.NoValidHost):
    """How many bytes of a reason the server's fault keeps when the reason
    is ``failure``'s (NoValidHost, or RequestFilterFailed, which Nova's
    scheduler turns into a NoValidHost).
    """
    text = '%(reason)s'
    if failure is exception.RequestFilterFailed:
        text = exception.RequestFilterFailed(reason=text).format_message()
    message = exception.NoValidHost(reason=text).format_message()
    return FAULT_MESSAGE_BYTES - len(
        message.replace('%(reason)s', '', 1).encode('utf-8'))


def fits(reason, failure=exception.NoValidHost):
    """True when the fault keeps ``reason`` whole."""
    return len(reason.encode('utf-8')) <= room(failure)


def fitted(reason, failure=exception.NoValidHost):
    """``reason`` whole when it fits, else cut to fit, ending with an
    ellipsis (on a character, not a byte, boundary).
    """
    reason = str(reason)
    if fits(reason, failure):
        return reason
    most = room(failure) - len(ELLIPSIS)
    cut = reason.encode('utf-8')[:most].decode('utf-8', 'ignore')
    return cut + ELLIPSIS
