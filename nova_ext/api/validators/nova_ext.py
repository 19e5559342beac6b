"""Validators for the ``nova_ext:`` flavor extra specs.

Each key here is documented with the plugin that reads it. Levels allowed in
``nova_ext:spread_level`` come from ``[nova_ext] failure_domain_levels`` in
nova-api's nova.conf.
"""

from oslo_config import cfg

from nova_ext.api import validators
from nova_ext import conf as ext_conf
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler.request_filters import host_class

CONF = cfg.CONF
ext_conf.register_opts(CONF)


class _ConfiguredLevels:
    """The levels in nova.conf, read when a flavor is validated: Nova loads
    validators when its API module is imported, before nova.conf is parsed.
    """

    def __contains__(self, level):
        return level in CONF.nova_ext.failure_domain_levels

    def __iter__(self):
        return iter(CONF.nova_ext.failure_domain_levels)


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
                'enum': _ConfiguredLevels(),
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
            name=host_class.EXTRA_SPEC,
            description=(
                'Route the request to the host aggregates tagged with this '
                'nova_ext:host_class (host_class request filter).'),
            value={'type': str, 'pattern': r'[A-Za-z0-9_.-]{1,64}'},
        ),
    ]
