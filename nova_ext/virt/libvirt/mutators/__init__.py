# SPDX-License-Identifier: Apache-2.0
"""Guest-config mutators: small plugins that change the domain the nova-ext
libvirt driver builds, where Nova offers no knob.

A mutator is a :class:`GuestMutator` subclass registered in the
``nova_ext.virt.libvirt.guest_mutators`` entry-point namespace and enabled,
in order, by ``[nova_ext] guest_mutators`` in nova-compute's nova.conf. It
gets Nova's structured ``LibvirtConfigGuest`` (never XML text), after Nova
built it, on every path that defines a domain: spawn, hard reboot, rescue,
resize and migration finish.

A mutator that raises fails that build, and only that build: Nova aborts it
without rescheduling (the same flavor and image would fail the same way on
the next host), the server goes to ERROR with a fault naming the mutator,
the driver's cleanup leaves nothing defined in libvirt, and the compute
service carries on with the next request. Raise :class:`InvalidGuestRequest`
(``self.invalid(reason)``) for a request the mutator cannot honour, such as a
bad image property; anything else is wrapped the same way and logged with
its traceback. A mutator named in nova.conf that is not installed or does
not load is logged at start, and every build on this host fails with a
fault naming it, rather than building guests without it.
"""

from nova import exception
from oslo_log import log as logging
from stevedore import extension
from stevedore import named

LOG = logging.getLogger(__name__)

NAMESPACE = 'nova_ext.virt.libvirt.guest_mutators'


class GuestMutatorFailed(exception.InvalidInput):
    # Nova aborts a build on InvalidInput (no reschedule) and puts this
    # message in the server's fault.
    msg_fmt = "nova-ext guest mutator %(mutator)s failed: %(reason)s"


class InvalidGuestRequest(GuestMutatorFailed):
    """What the flavor or image asks cannot be built."""

    msg_fmt = "nova-ext guest mutator %(mutator)s: %(reason)s"


class GuestMutator:
    """Change ``guest`` in place for ``instance``."""

    name = None  # the entry-point name, set by load()

    def mutate(self, guest, instance, image_meta, driver):
        raise NotImplementedError()

    def invalid(self, reason):
        return InvalidGuestRequest(mutator=self.name, reason=reason)


class _Unavailable(GuestMutator):
    def __init__(self, name, reason):
        self.name = name
        self.reason = reason

    def mutate(self, guest, instance, image_meta, driver):
        raise GuestMutatorFailed(
            mutator=self.name,
            reason='not available on this host (%s)' % self.reason)


def load(names):
    """The mutators named in ``names``, in that order."""
    failed = {}

    def _missing(missing):
        for name in missing:
            failed[name] = 'no such entry point in %s' % NAMESPACE

    def _load_failure(manager, entry_point, error):
        failed[entry_point.name] = 'failed to load: %s' % error

    manager = named.NamedExtensionManager(
        NAMESPACE, names, name_order=True, invoke_on_load=True,
        on_missing_entrypoints_callback=_missing,
        on_load_failure_callback=_load_failure)
    loaded = {ext.name: ext.obj for ext in manager}
    mutators = []
    for name in names:
        if name in loaded and isinstance(loaded[name], GuestMutator):
            loaded[name].name = name
            mutators.append(loaded[name])
            continue
        reason = failed.get(name, 'not a GuestMutator')
        LOG.error("nova-ext: guest mutator %s named in [nova_ext] "
                  "guest_mutators is unusable (%s): every build on this "
                  "host fails until it is fixed", name, reason)
        mutators.append(_Unavailable(name, reason))
    return mutators


def apply(mutators, guest, instance, image_meta, driver):
    for mutator in mutators:
        try:
            mutator.mutate(guest, instance, image_meta, driver)
        except GuestMutatorFailed:
            raise
        except Exception as error:
            LOG.exception("nova-ext: guest mutator %s failed",
                          mutator.name, instance=instance)
            raise GuestMutatorFailed(mutator=mutator.name, reason=error)


def image_property(instance, name):
    """An image property of the instance's image, custom ones included:
    Nova's ``image_meta.properties`` drops properties it does not know,
    the instance's system metadata keeps them all.
    """
    return (instance.system_metadata or {}).get('image_' + name)


def installed():
    """Names of every mutator installed in the entry-point namespace."""
    return sorted(ext.name for ext in extension.ExtensionManager(
        NAMESPACE, invoke_on_load=False))
