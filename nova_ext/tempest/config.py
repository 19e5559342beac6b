# SPDX-License-Identifier: Apache-2.0
"""tempest.conf options of nova-ext's tempest plugin."""

from oslo_config import cfg

feature_group = cfg.OptGroup(
    'nova_ext_feature_enabled',
    title='nova-ext features the cloud under test runs')

feature_opts = [
    cfg.BoolOpt('extra_spec_validators', default=True,
                help="nova-api validates nova_ext: flavor extra specs "
                     "(nova-ext installed where nova-api runs)."),
    cfg.BoolOpt('failure_domain_filter', default=False,
                help='FailureDomainAntiAffinityFilter is in nova-scheduler\'s '
                     'enabled_filters.'),
    cfg.BoolOpt('bin_packing_weigher', default=False,
                help='BinPackingWeigher decides placement: enabled with a '
                     'multiplier that outweighs the spreading weighers.'),
    cfg.BoolOpt('host_class', default=False,
                help='The host_class request filter is enabled.'),
    cfg.BoolOpt('maintenance', default=False,
                help='The maintenance request filter is enabled.'),
    cfg.BoolOpt('per_flavor_quota', default=False,
                help='nova-api and nova-conductor run the per_flavor quota '
                     'driver.'),
    cfg.BoolOpt('libvirt_driver', default=False,
                help="nova-compute runs nova-ext's libvirt driver with "
                     "[nova_ext] failure_domain set."),
]

group = cfg.OptGroup('nova_ext', title='nova-ext test parameters')

opts = [
    cfg.StrOpt('spread_level', default='rack',
               help='Failure-domain level the spread tests use; the cloud '
                    'declares domains at it (aggregate metadata '
                    'nova_ext:failure_domain:<level> or compute traits).'),
    cfg.ListOpt('failure_domain_levels', default=['rack', 'row', 'power'],
                help="nova-api's [nova_ext] failure_domain_levels."),
    cfg.ListOpt('quota_classes', default=[],
                help="nova-api's [nova_ext] quota_classes."),
    cfg.StrOpt('quota_limited_flavor',
               help='A flavor (ID) with a per-flavor instance limit for '
                    'every project (nova-ext-manage quota set --project '
                    "'*' --flavor ...)."),
    cfg.IntOpt('quota_limited_instances', default=1,
               help='That limit.'),
    cfg.StrOpt('libvirt_uri',
               help="libvirt URI of a compute running nova-ext's libvirt "
                    "driver, reachable from tempest (read-only is enough; "
                    "libvirt-python installed next to tempest), e.g. "
                    "qemu:///system. Unset: the live domain test skips."),
    cfg.StrOpt('maintenance_trait', default='CUSTOM_NOVA_EXT_MAINTENANCE',
               help="nova-scheduler's [nova_ext] maintenance_trait."),
]


def list_opts():
    return [(feature_group, feature_opts), (group, opts)]
