# SPDX-License-Identifier: Apache-2.0
"""Validators for the ``nova_ext:`` flavor extra specs.

Each key here is documented with the plugin that reads it. Levels allowed in
``nova_ext:spread_level`` come from ``[nova_ext] failure_domain_levels``, and
classes allowed in ``nova_ext:quota_class`` from ``[nova_ext] quota_classes``,
in nova-api's nova.conf.
"""

from oslo_config import cfg

from nova_ext.api import validators
from nova_ext import conf as ext_conf
from nova_ext.quota import db as quota_db
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler.request_filters import host_class
from nova_ext.scheduler import spread_constraints
from nova_ext.virt.libvirt.mutators import memory_sharing
from nova_ext.virt.libvirt.mutators import oem_strings

CONF = cfg.CONF
ext_conf.register_opts(CONF)


class _Configured:
    """A ``[nova_ext]`` list option, read when a flavor is validated: Nova
    loads validators when its API module is imported, before nova.conf is
    parsed.
    """

    def __init__(self, option):
        self.option = option

    def __contains__(self, value):
        return value in CONF.nova_ext[self.option]

    def __iter__(self):
        return iter(CONF.nova_ext[self.option])


def _parse_constraints(value):
    return spread_constraints.parse(
        value, CONF.nova_ext.failure_domain_levels,
        failure_domains.SPREAD_CONSTRAINTS)


def register():
    return [
        validators.NamedExtraSpecValidator(
            name=failure_domains.SPREAD_LEVEL,
            description=(
                'Spread the members of a server group across failure '
                'domains at this level (FailureDomainAntiAffinityFilter, '
                'FailureDomainSpreadWeigher).'),
            value={
                'type': str,
                'enum': _Configured('failure_domain_levels'),
            },
        ),
        validators.NamedExtraSpecValidator(
            name=failure_domains.SPREAD_MAX_PER_DOMAIN,
            description=(
                'At most this many members of the server group in one '
                'failure domain.'),
            value={'type': int, 'min': 1},
        ),
        validators.NamedExtraSpecValidator(
            name=failure_domains.SPREAD_CONSTRAINTS,
            description=(
                'Spread the members of a server group under several '
                'constraints, ' + spread_constraints.FORM + ' '
                '(FailureDomainAntiAffinityFilter for hard ones, '
                'FailureDomainSpreadWeigher for all). Not together with '
                'nova_ext:spread_level or nova_ext:spread_max_per_domain.'),
            value={
                'type': str,
                'parser': _parse_constraints,
            },
        ),
        validators.NamedExtraSpecValidator(
            name=host_class.EXTRA_SPEC,
            description=(
                'Route the request to the host aggregates tagged with this '
                'nova_ext:host_class (host_class request filter).'),
            value={'type': str, 'pattern': r'[A-Za-z0-9_.-]{1,64}'},
        ),
        validators.NamedExtraSpecValidator(
            name=quota_db.QUOTA_CLASS_SPEC,
            description=(
                'Count instances of this flavor against the per-flavor-class '
                'quotas of this class (per_flavor quota driver); one of '
                '[nova_ext] quota_classes.'),
            value={
                'type': str,
                'enum': _Configured('quota_classes'),
            },
        ),
        validators.NamedExtraSpecValidator(
            name=oem_strings.EXTRA_SPEC,
            description=(
                "SMBIOS OEM strings for the guest, separated by ';': at most "
                "%d entries of 1-255 printable characters (oem_strings "
                "guest mutator of the nova-ext libvirt driver)."
                % oem_strings.MAX_ENTRIES),
            value={'type': str, 'pattern': oem_strings.VALUE_PATTERN},
        ),
        validators.NamedExtraSpecValidator(
            name=memory_sharing.EXTRA_SPEC,
            description=(
                'false: the host never merges this guest\'s memory pages '
                '(KSM); memory_sharing guest mutator of the nova-ext '
                'libvirt driver.'),
            value={'type': bool},
        ),
    ]
