# SPDX-License-Identifier: Apache-2.0
"""Every nova.conf option nova-ext reads, in the ``[nova_ext]`` group.

Plugins call :func:`register_opts` on import, so the options exist in any Nova
process that loads them (nova-api for validators, nova-scheduler for filters
and weighers) without the operator doing anything beyond enabling the plugin.
``oslo-config-generator --namespace nova_ext`` reads :func:`list_opts`.
"""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'nova_ext',
    title='nova-ext options',
    help='Options of the nova-ext extension pack.')

failure_domain_opts = [
    cfg.ListOpt(
        'failure_domain_levels',
        default=['rack', 'row', 'power'],
        help="""
Failure-domain levels a request may ask to spread across.

A host belongs to domain ``<name>`` at level ``<level>`` when one of its host
aggregates has the metadata key ``nova_ext:failure_domain:<level>=<name>``.
The ``nova_ext:spread_level`` scheduler hint and flavor extra spec must name
one of these levels; anything else is refused with a clear error.
"""),
    cfg.IntOpt(
        'default_max_per_domain',
        default=1,
        min=1,
        help="""
How many members of one server group may share a failure domain when the
request does not say (``nova_ext:spread_max_per_domain``).
"""),
    cfg.StrOpt(
        'hosts_without_failure_domain',
        default='reject',
        choices=[
            ('reject', 'The host is not a candidate for a spread request; '
                       'the scheduler logs why.'),
            ('host', 'The host is a failure domain of its own.'),
        ],
        help="""
What FailureDomainAntiAffinityFilter and FailureDomainSpreadWeigher do with a
host that belongs to no domain at the level a request asks to spread across.
"""),
    cfg.StrOpt(
        'default_spread_level',
        help="""
Failure-domain level FailureDomainSpreadWeigher spreads server groups across
when a request names none. Unset (the default): only requests that name a
level through ``nova_ext:spread_level`` are spread.
"""),
    cfg.IntOpt(
        'failure_domain_cache_seconds',
        default=10,
        min=0,
        help="""
How long the failure-domain filter and weigher remember which domain each
host is in for hosts that are no longer among a request's candidates (those
holding group members, which ServerGroupAntiAffinityFilter removes), and
how long the ``failure_domain`` request filter remembers which aggregates
declare each domain: one API-database query per level per period each.
Candidates' domains are always current. 0 asks on every request.
"""),
    cfg.FloatOpt(
        'failure_domain_spread_weight_multiplier',
        default=1.0,
        help="""
Multiplier of FailureDomainSpreadWeigher. Positive prefers the failure domains
holding the fewest members of the request's server group; negative prefers the
most; 0 turns the weigher off. Overridden per host aggregate by the metadata
key ``nova_ext:failure_domain_spread_weight_multiplier``.
"""),
]

bin_packing_opts = [
    cfg.FloatOpt(
        'bin_packing_weight_multiplier',
        default=1.0,
        help="""
Multiplier of BinPackingWeigher. Positive packs (prefers the host left with
the least free and least stranded capacity after the request lands), negative
spreads. Overridden per host aggregate by the metadata key
``nova_ext:bin_packing_weight_multiplier``.
"""),
    cfg.DictOpt(
        'bin_packing_resource_weights',
        default={'vcpu': 1.0, 'ram': 1.0, 'disk': 1.0},
        help="""
Relative importance of each resource in BinPackingWeigher, as
``vcpu:W,ram:W,disk:W``. A resource left out or weighted 0 is ignored; for
memory-centric packing use e.g. ``vcpu:1,ram:3,disk:0``.
"""),
    cfg.FloatOpt(
        'bin_packing_stranded_weight',
        default=10.0,
        min=0.0,
        help="""
How much BinPackingWeigher penalises stranded capacity: the gap between the
most- and least-free resource the request asks for, after placement (free RAM
on a host with no vCPU left cannot be sold). The default keeps every host
balanced before it packs: 97 % of the volume bound in the simulator's mixed
workload, against 88 % with 1. A resource your flavors barely use (large
local disks, small root disks) looks free on every host and makes the
weigher spread: leave it out with ``bin_packing_resource_weights``. 0 packs
on total utilisation alone.
"""),
    cfg.FloatOpt(
        'bin_packing_shape_weight',
        default=20.0,
        min=0.0,
        help="""
How much BinPackingWeigher prefers the hosts on which the request is
smallest: the request's largest share of a host's capacity (vCPU, RAM or
disk, allocation ratios applied), times this weight, is taken off its score.
In a cloud with hosts of several shapes (general-purpose and memory-heavy)
this sends memory-heavy servers to the memory-heavy hosts and the others to
the general-purpose ones, so neither kind is left with RAM or vCPUs only the
other kind of server could use. Among hosts of the same capacity it changes
nothing; between hosts of one shape but different sizes it leans towards the
larger.
The default took the worst of 5 simulator seeds from 95.6 % to 98 % of the
volume bound on 100 hosts and from 94.9 % to 97 % on 500. 0 scores leftover
and stranded capacity only (the behaviour before this option).
"""),
]

image_locality_opts = [
    cfg.FloatOpt(
        'image_locality_weight_multiplier',
        default=1.0,
        help="""
Multiplier of ImageLocalityWeigher. Positive prefers hosts already running an
instance of the requested image (its base file is in the host's image cache,
so the boot skips the download); negative avoids them. Overridden per host
aggregate by the metadata key ``nova_ext:image_locality_weight_multiplier``.
"""),
    cfg.IntOpt(
        'image_locality_cache_seconds',
        default=10,
        min=0,
        help="""
How long ImageLocalityWeigher's answer to which hosts run an image is fresh.
Past it, the answer still serves while a background thread asks the cell
databases again (one small query per cell, one image at a time), so requests
do not wait for them; an answer twice this old is not used (the request asks
itself). 0 asks on every request, in the request.
"""),
]

request_filter_opts = [
    cfg.ListOpt(
        'request_filters',
        default=[],
        help="""
Placement request pre-filters to run in nova-scheduler, in order, after
Nova's own: names of entry points in the ``nova_ext.scheduler.request_filters``
namespace (``maintenance``, ``host_class``, ``failure_domain``, or a third
party's). They are activated when nova-scheduler loads
``nova_ext.scheduler.filters.all_filters`` or
``nova_ext.scheduler.weights.all_weighers``, so one of those must be in
``[filter_scheduler] available_filters`` or ``weight_classes``.
"""),
    cfg.StrOpt(
        'maintenance_trait',
        default='CUSTOM_NOVA_EXT_MAINTENANCE',
        regex=r'^CUSTOM_[A-Z0-9_]+$',
        help="""
Trait that marks a compute node resource provider as in maintenance. The
``maintenance`` request filter forbids it in every placement query;
``nova-ext-manage host maintenance on|off`` sets and clears it.
"""),
    cfg.IntOpt(
        'host_class_image_cache_seconds',
        default=60,
        min=0,
        help="""
How long the ``host_class`` request filter remembers an image's
``nova_ext_host_class`` property before asking glance again. 0 asks on
every request that names no class in its flavor.
"""),
    cfg.BoolOpt(
        'host_class_isolation',
        default=False,
        help="""
When true, the ``host_class`` request filter also keeps requests that name no
host class off every host aggregate tagged with ``nova_ext:host_class``.
"""),
]

quota_opts = [
    cfg.StrOpt(
        'quota_driver',
        help="""
Quota driver to install in nova-api and nova-conductor: the name of an entry
point in the ``nova_ext.quota.drivers`` namespace (``per_flavor``, or a third
party's). Unset: Nova's own ``[quota] driver`` works alone. The driver is
activated when the process opens its database through a connection URL
carrying ``?plugin=nova_ext`` (``[api_database] connection``); see the quota
documentation. Requires ``[quota] driver = nova.quota.DbQuotaDriver``.
"""),
    cfg.IntOpt(
        'quota_flavor_cache_seconds',
        default=30,
        min=0,
        help="""
How long nova-api and nova-conductor remember which flavors belong to a
flavor class (extra spec ``nova_ext:quota_class``) before asking the API
database again. A flavor moved into or out of a class is counted accordingly
after at most this long. When nova-ext's tables are in Nova's API database
(``[nova_ext_database] connection`` unset, the default), every limits read
brings the flavors along in the same statement, so this matters only with
``quota_limits_cache_seconds`` set; with nova-ext's tables elsewhere, 0 asks
on every limited create (one more statement).
"""),
    cfg.IntOpt(
        'quota_limits_cache_seconds',
        default=0,
        min=0,
        help="""
How long nova-api and nova-conductor remember the per-flavor limits of a
project for a flavor before reading them again. 0 (the default): read on
every check, so ``nova-ext-manage quota set`` applies at once. A few seconds
saves one database query per create on busy clouds (with the flavors of a
class remembered too, a limited create then costs no statement more than
Nova's own check); a changed limit then applies after at most this long.
Usage is always counted fresh, so racing creates are settled by the
conductor recheck either way.
"""),
    cfg.ListOpt(
        'quota_classes',
        default=[],
        help="""
Flavor classes that per-flavor quotas may limit. A flavor joins a class with
the extra spec ``nova_ext:quota_class=<class>``; the API refuses any other
value, and ``nova-ext-manage quota set --class`` refuses unknown classes.
"""),
]

libvirt_opts = [
    cfg.ListOpt(
        'guest_mutators',
        default=[],
        help="""
Guest-config mutators the nova-ext libvirt driver applies, in this order, to
every domain it builds (spawn, hard reboot, rescue, resize and migration
finish). Names from the ``nova_ext.virt.libvirt.guest_mutators`` entry-point
namespace; nova-ext ships ``domain_metadata``, ``oem_strings`` and
``memory_sharing``. An unknown name stops nova-compute at start with an error
naming it. Read by nova-compute with ``compute_driver =
nova_ext_libvirt.LibvirtDriver`` (``nova-ext-manage driver install``).
"""),
    cfg.DictOpt(
        'failure_domain',
        default={},
        help="""
This compute host's failure domains, ``level:domain`` pairs, for example
``rack:r12,row:b,power:pdu-3``. The nova-ext libvirt driver reports them as
traits ``CUSTOM_NOVA_EXT_FD_<LEVEL>_<DOMAIN>`` on the host's resource
provider (keeping every other trait), replacing the ``CUSTOM_NOVA_EXT_FD_``
traits it reported before; FailureDomainAntiAffinityFilter and
FailureDomainSpreadWeigher read them when ``failure_domain_sources`` includes
``traits``. Levels must be in ``failure_domain_levels``. Empty: the driver
leaves ``CUSTOM_NOVA_EXT_FD_`` traits alone (an operator may set them with
``openstack resource provider trait set``).
"""),
]

failure_domain_source_opts = [
    cfg.ListOpt(
        'failure_domain_sources',
        default=['aggregates', 'traits'],
        item_type=cfg.types.String(choices=['aggregates', 'traits']),
        help="""
Where FailureDomainAntiAffinityFilter and FailureDomainSpreadWeigher learn a
host's failure domains, in order of precedence: ``aggregates`` (metadata
``nova_ext:failure_domain:<level>=<domain>``) and ``traits`` (placement traits
``CUSTOM_NOVA_EXT_FD_<LEVEL>_<DOMAIN>`` on the host's compute-node resource
provider, reported by the nova-ext libvirt driver from ``[nova_ext]
failure_domain`` or set by an operator). A domain from traits is named by the
trait's normalised suffix (``rack:r-12`` becomes ``R_12``). Traits are read
from placement at most once per ``failure_domain_cache_seconds`` per level.
"""),
]

spread_coordination_opts = [
    cfg.StrOpt(
        'coordination_backend_url',
        secret=True,
        help="""
tooz URL of the lock that serialises the scheduling of one server group with
a failure-domain spread across every nova-scheduler process and worker, for
example ``redis://127.0.0.1:6379`` or ``mysql://nova:secret@db/nova_api``.
Unset (the default): derived from ``[api_database] connection``, which every
nova-scheduler already has: MySQL/MariaDB advisory locks (``GET_LOCK``) or
PostgreSQL advisory locks on that server; any other database (sqlite) gives
file locks under ``[oslo_concurrency] lock_path``, which hold on one host only.
"""),
    cfg.IntOpt(
        'spread_lock_timeout',
        default=120,
        min=1,
        help="""
Seconds one scheduling request waits for its server group's spread lock
before failing with NoValidHost that says so. Requests of one group queue
behind each other (a burst of N creates of one group waits N times the
time one request holds the lock, often 0.1 to 1 s); unrelated groups never
wait on each other. Nova's conductor waits for the scheduler up to
``[DEFAULT] long_rpc_timeout`` (1800 s), not ``rpc_response_timeout``.
"""),
    cfg.StrOpt(
        'spread_coordination_unavailable',
        default='refuse',
        choices=[
            ('refuse', 'Fail the request with NoValidHost saying the '
                       'coordination backend is unreachable: the spread '
                       'limit is never broken.'),
            ('schedule', 'Schedule without the lock and log a warning: '
                         'servers keep being created, and members of one '
                         'group created at the same moment may share a '
                         'failure domain.'),
        ],
        help="""
What a spread request does while the coordination backend cannot be reached.
After a failure the backend is not tried again for
``spread_coordination_retry_seconds``.
"""),
    cfg.IntOpt(
        'spread_coordination_retry_seconds',
        default=5,
        min=0,
        help="""
After the coordination backend failed, how long spread requests skip it (and
behave as ``spread_coordination_unavailable`` says) instead of trying again.
"""),
    cfg.BoolOpt(
        'spread_serialize_groups',
        default=True,
        help="""
Serialise the scheduling of each server group with a failure-domain spread
and count its members from placement. False restores the unlocked behaviour,
in which concurrent creates of one group can share a failure domain; only for
measuring what the lock costs.
"""),
]

ALL_OPTS = (failure_domain_opts + failure_domain_source_opts
            + spread_coordination_opts
            + bin_packing_opts + image_locality_opts
            + request_filter_opts + quota_opts + libvirt_opts)

DATABASE_GROUP = cfg.OptGroup(
    'nova_ext_database',
    title='nova-ext database',
    help="""
Where nova-ext keeps its own tables (per-flavor quota limits and the record
of which processes activated nova-ext). Unset ``connection``: the tables live
in Nova's API database (``[api_database] connection``), next to Nova's
flavors and quotas. Create or upgrade them with ``nova-ext-manage db sync``.
""")


def _database_opts():
    # oslo.db's own [database] options, so pool sizes, retries and the
    # connection string behave exactly as in Nova's [api_database].
    from oslo_db import options as db_options
    return [opt for opt in db_options.database_opts]


def register_opts(conf):
    """Register nova-ext's options; safe to call any number of times."""
    conf.register_group(GROUP)
    conf.register_opts(ALL_OPTS, group=GROUP)
    conf.register_group(DATABASE_GROUP)
    conf.register_opts(_database_opts(), group=DATABASE_GROUP)


def list_opts():
    return [(GROUP, ALL_OPTS), (DATABASE_GROUP, _database_opts())]
