# SPDX-License-Identifier: Apache-2.0
"""Cluster models and workloads of ``nova-ext-manage simulate``, from YAML.

Both files are read with a YAML loader that remembers where each value
came from, so a mistake is reported as ``FILE:LINE: FIELD: what is wrong``
(:class:`ModelError`). The formats are described in
``doc/source/simulator.rst``; the built-in examples are in
``nova_ext/simulator/examples/``.
"""

import dataclasses
import os
import random
import re
import typing as ty

import yaml

from nova_ext import errors
from nova_ext.scheduler import spread_constraints
from nova_ext import yaml_input

EXAMPLES = os.path.join(os.path.dirname(__file__), 'examples')
DEFAULT_CLUSTER = os.path.join(EXAMPLES, 'cluster-500.yaml')
DEFAULT_WORKLOAD = os.path.join(EXAMPLES, 'workload-mixed.yaml')

# Refused before anything is allocated: a typo such as count: 1000000000
# would otherwise build hosts until memory runs out.
MAX_NUMBER = 10 ** 9
MAX_HOSTS = 20000
MAX_ARRIVALS = 1000000
MAX_IMAGES = 100000

TRAIT_NAME = re.compile(r'^[A-Z0-9_]{1,255}$')

POLICIES = ('anti-affinity', 'soft-anti-affinity', 'affinity',
            'soft-affinity')


class ModelError(errors.OperatorError, ValueError):
    """A cluster model or workload file that cannot be simulated."""

    def __init__(self, path, line, field, message):
        self.path = path
        self.line = line
        self.field = field
        self.message = message
        where = '%s:%s' % (path, line) if line else path
        super().__init__('%s: %s: %s' % (where, field, message)
                         if field else '%s: %s' % (where, message))


# -- YAML with line numbers ---------------------------------------------------

class _Map(dict):
    """A mapping that knows the line of itself and of each key."""
    line = None
    lines = None


class _Seq(list):
    """A sequence that knows the line of itself and of each item."""
    line = None
    lines = None


class _Loader(yaml_input.BoundedSafeLoader):
    pass


def _construct_map(loader, node):
    own = {id(key_node) for key_node, _ in node.value}
    loader.flatten_mapping(node)
    result = _Map()
    result.line = node.start_mark.line + 1
    result.lines = {}
    merged = set()  # keys from a '<<' merge, which this mapping overrides
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise ModelError(loader.name, key_node.start_mark.line + 1,
                             repr(key), 'field names are strings')
        if key in result and key not in merged:
            raise ModelError(loader.name, key_node.start_mark.line + 1, key,
                             'appears twice in this mapping')
        result[key] = loader.construct_object(value_node, deep=True)
        result.lines[key] = key_node.start_mark.line + 1
        if id(key_node) in own:
            merged.discard(key)
        else:
            merged.add(key)
    return result


def _construct_seq(loader, node):
    result = _Seq(loader.construct_object(item, deep=True)
                  for item in node.value)
    result.line = node.start_mark.line + 1
    result.lines = [item.start_mark.line + 1 for item in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                        _construct_map)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG,
                        _construct_seq)


def _load_yaml(path):
    try:
        document = yaml_input.load(path, _Loader)
    except yaml_input.YamlInputError as error:
        raise ModelError(path, error.line, None, error.problem)
    if not isinstance(document, _Map):
        raise ModelError(path, 1, None, 'must be a YAML mapping')
    return document


class _Reader:
    """Typed access to one mapping, errors naming file, line and field."""

    def __init__(self, path, mapping, prefix=''):
        self.path = path
        self.mapping = mapping
        self.prefix = prefix
        self.used = set()

    def _field(self, key):
        return self.prefix + key

    def line(self, key=None):
        if key is not None and key in (self.mapping.lines or {}):
            return self.mapping.lines[key]
        return self.mapping.line

    def error(self, key, message):
        return ModelError(self.path, self.line(key),
                          self._field(key) if key else self.prefix.rstrip(
                              '.') or None, message)

    def has(self, key):
        return key in self.mapping

    def get(self, key, kind, default=None, required=False, minimum=None,
            choices=None):
        self.used.add(key)
        if key not in self.mapping:
            if required:
                raise self.error(None, 'missing required field %s'
                                 % self._field(key))
            return default
        value = self.mapping[key]
        if kind is float and isinstance(value, int) and not isinstance(
                value, bool):
            value = float(value)
        if kind is str and isinstance(value, (int, float)) and not isinstance(
                value, bool):
            value = str(value)
        if not isinstance(value, kind) or (kind is int and isinstance(
                value, bool)):
            raise self.error(key, 'must be %s, got %r' % (
                _KIND_NAMES.get(kind, kind.__name__), value))
        if kind in (int, float) and not (
                -MAX_NUMBER <= value <= MAX_NUMBER):  # also NaN
            raise self.error(key, 'must be a number from %s to %d, got %r'
                             % (minimum if minimum is not None
                                else -MAX_NUMBER, MAX_NUMBER, value))
        if minimum is not None and value < minimum:
            raise self.error(key, 'must be at least %s, got %r'
                             % (minimum, value))
        if choices is not None and value not in choices:
            raise self.error(key, 'must be one of %s, got %r'
                             % (', '.join(map(str, choices)), value))
        return value

    def items(self, key, required=False):
        """The list under ``key`` as (reader or value, line) pairs."""
        self.used.add(key)
        if key not in self.mapping:
            if required:
                raise self.error(None, 'missing required field %s'
                                 % self._field(key))
            return []
        value = self.mapping[key]
        if not isinstance(value, _Seq):
            raise self.error(key, 'must be a list')
        return [(_Reader(self.path, item, '%s[%d].' % (self._field(key), i))
                 if isinstance(item, _Map) else item, value.lines[i])
                for i, item in enumerate(value)]

    def mapping_of(self, key):
        self.used.add(key)
        value = self.mapping.get(key)
        if value is None:
            return None
        if not isinstance(value, _Map):
            raise self.error(key, 'must be a mapping')
        return _Reader(self.path, value, self._field(key) + '.')

    def string_map(self, key):
        self.used.add(key)
        value = self.mapping.get(key)
        if value is None:
            return {}
        if not isinstance(value, _Map):
            raise self.error(key, 'must be a mapping of strings')
        for k, v in value.items():
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise ModelError(self.path, value.lines[k],
                                 '%s.%s' % (self._field(key), k),
                                 'must be a string, got %r' % (v,))
        return {str(k): str(v) for k, v in value.items()}

    def finish(self):
        """Refuse fields nobody asked for: they are typos."""
        for key in self.mapping:
            if key not in self.used:
                raise ModelError(self.path, self.line(key), self._field(key),
                                 'unknown field (known: %s)'
                                 % ', '.join(sorted(self.used)))


_KIND_NAMES = {int: 'a whole number', float: 'a number', str: 'a string',
               bool: 'true or false'}


def _reader_item(path, item, line, field):
    if not isinstance(item, _Reader):
        raise ModelError(path, line, field, 'must be a mapping, got %r'
                         % (item,))
    return item


# -- the cluster --------------------------------------------------------------

@dataclasses.dataclass
class HostGroup:
    name: str
    count: int
    vcpus: int
    ram_mb: int
    disk_gb: int
    cpu_allocation_ratio: float
    ram_allocation_ratio: float
    disk_allocation_ratio: float
    reserved_ram_mb: int
    reserved_disk_gb: int
    rack_size: int
    host_class: ty.Optional[str]
    maintenance: int
    aggregates: ty.List[str]
    # what the hypervisor reports as disk_available_least (None: the free
    # disk); Nova's HostState takes the smaller of the two
    disk_available_least_gb: ty.Optional[int] = None
    # placement traits of the hosts' compute node providers
    traits: ty.List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class DomainLevel:
    """One failure-domain level the cluster generates.

    The innermost level groups ``size`` consecutive hosts of a host group
    per domain. An outer level groups the domains of the level inside it:
    ``size`` consecutive ones per domain, or, with ``count``, deals them to
    ``count`` domains in turn (what ``rows`` always did with racks).
    """
    level: str
    size: ty.Optional[int]
    count: ty.Optional[int]
    # domain number (from 1) -> domain name
    name_format: str

    def domain(self, number):
        return self.name_format % number


@dataclasses.dataclass
class Host:
    name: str
    group: HostGroup
    maintenance: bool
    # level -> domain, innermost level first
    domains: ty.Dict[str, str] = dataclasses.field(default_factory=dict)

    # the two levels every cluster had before failure_domains: existing
    # callers and tests read them
    @property
    def rack(self):
        return self.domains.get('rack')

    @property
    def row(self):
        return self.domains.get('row')


@dataclasses.dataclass
class Aggregate:
    name: str
    hosts: ty.List[str]
    metadata: ty.Dict[str, str]


@dataclasses.dataclass
class Cluster:
    path: str
    name: str
    groups: ty.List[HostGroup]
    hosts: ty.List[Host]
    aggregates: ty.List[Aggregate]
    # the generated levels, innermost first
    domain_levels: ty.List[DomainLevel] = dataclasses.field(
        default_factory=list)

    def levels(self):
        """Every failure-domain level the cluster defines: the generated
        ones, innermost first, then those its extra aggregates declare
        (``nova_ext:failure_domain:<level>`` metadata), sorted.
        """
        # here: the simulate parser loads this module at every CLI start
        from nova_ext.scheduler import failure_domains

        prefix = failure_domains.AGGREGATE_KEY_PREFIX
        generated = [level.level for level in self.domain_levels]
        declared = sorted({key[len(prefix):] for aggregate in self.aggregates
                           for key in aggregate.metadata
                           if key.startswith(prefix)} - set(generated))
        return generated + declared

    def domains(self, level):
        """{host name: set of its domains at ``level``}, from the
        aggregates' metadata, as the scheduler reads a cloud's.
        """
        # here: the simulate parser loads this module at every CLI start
        from nova_ext.scheduler import failure_domains

        key = failure_domains.AGGREGATE_KEY_PREFIX + level
        found = {}
        for aggregate in self.aggregates:
            domain = aggregate.metadata.get(key)
            if domain is not None:
                for host in aggregate.hosts:
                    found.setdefault(host, set()).add(domain)
        return found

    def capacity(self, hosts=None):
        """Placement capacity (allocation ratios applied, reservations
        removed) summed over ``hosts`` (default: all): (VCPU, MEMORY_MB,
        DISK_GB).
        """
        total = [0.0, 0.0, 0.0]
        for host in self.hosts if hosts is None else hosts:
            for i, amount in enumerate(host_capacity(host.group)):
                total[i] += amount
        return tuple(total)


def host_capacity(group):
    """(VCPU, MEMORY_MB, DISK_GB) placement would allocate on one host."""
    return (int(group.vcpus * group.cpu_allocation_ratio),
            int((group.ram_mb - group.reserved_ram_mb)
                * group.ram_allocation_ratio),
            int((group.disk_gb - group.reserved_disk_gb)
                * group.disk_allocation_ratio))


def load_cluster(path):
    top = _Reader(path, _load_yaml(path))
    name = top.get('name', str, default=os.path.basename(path))
    levels = _domain_levels(top)
    default_rack_size = levels[0].size
    groups = []
    for item, line in top.items('host_groups', required=True):
        group = _reader_item(path, item, line, 'host_groups[]')
        ram_mb = group.get('ram_mb', int, minimum=1)
        if ram_mb is None:
            ram_gb = group.get('ram_gb', int, minimum=1)
            if ram_gb is None:
                raise group.error(None, 'missing required field %sram_mb '
                                  '(or ram_gb)' % group.prefix)
            ram_mb = ram_gb * 1024
        else:
            group.used.add('ram_gb')
            if group.has('ram_gb'):
                raise group.error('ram_gb', 'give ram_mb or ram_gb, not both')
        parsed = HostGroup(
            name=group.get('name', str, required=True),
            count=group.get('count', int, required=True, minimum=1),
            vcpus=group.get('vcpus', int, required=True, minimum=1),
            ram_mb=ram_mb,
            disk_gb=group.get('disk_gb', int, required=True, minimum=1),
            cpu_allocation_ratio=group.get('cpu_allocation_ratio', float,
                                           default=4.0, minimum=0.0),
            ram_allocation_ratio=group.get('ram_allocation_ratio', float,
                                           default=1.0, minimum=0.0),
            disk_allocation_ratio=group.get('disk_allocation_ratio', float,
                                            default=1.0, minimum=0.0),
            reserved_ram_mb=group.get('reserved_ram_mb', int, default=0,
                                      minimum=0),
            reserved_disk_gb=group.get('reserved_disk_gb', int, default=0,
                                       minimum=0),
            rack_size=group.get('rack_size', int, default=default_rack_size,
                                minimum=1),
            host_class=group.get('host_class', str),
            maintenance=group.get('maintenance', int, default=0, minimum=0),
            aggregates=[],
            disk_available_least_gb=group.get('disk_available_least_gb',
                                              int, minimum=0),
            traits=_traits(path, group))
        if parsed.maintenance > parsed.count:
            raise group.error('maintenance', 'more hosts in maintenance (%d) '
                              'than in the group (%d)'
                              % (parsed.maintenance, parsed.count))
        if parsed.reserved_ram_mb >= parsed.ram_mb:
            raise group.error('reserved_ram_mb', 'reserves all the RAM')
        if any(g.name == parsed.name for g in groups):
            raise group.error('name', 'host group %r is defined twice'
                              % parsed.name)
        group.finish()
        groups.append(parsed)

    total = sum(group.count for group in groups)
    if total > MAX_HOSTS:
        raise top.error('host_groups', '%d hosts; the simulator models at '
                        'most %d' % (total, MAX_HOSTS))
    hosts = []
    inner_number = 0
    for group in groups:
        for i in range(group.count):
            # a host group starts a new innermost domain (its own racks)
            if i % group.rack_size == 0:
                inner_number += 1
            hosts.append(Host(
                name='%s-%03d' % (group.name, i + 1), group=group,
                # the last hosts of a group are the ones in maintenance
                maintenance=i >= group.count - group.maintenance,
                domains=_host_domains(levels, inner_number)))

    aggregates = _layout_aggregates(hosts, groups, levels)
    for item, line in top.items('aggregates'):
        agg = _reader_item(path, item, line, 'aggregates[]')
        agg_name = agg.get('name', str, required=True)
        members = []
        for group_name, group_line in agg.items('host_groups', required=True):
            if not any(g.name == group_name for g in groups):
                raise ModelError(path, group_line, agg.prefix + 'host_groups',
                                 'no host group named %r (groups: %s)' % (
                                     group_name,
                                     ', '.join(g.name for g in groups)))
            members += [h.name for h in hosts if h.group.name == group_name]
        aggregates.append(Aggregate(agg_name, members,
                                    agg.string_map('metadata')))
        agg.finish()
    top.finish()
    return Cluster(path, name, groups, hosts, aggregates, levels)


LEVEL_NAME = re.compile(r'^[a-z0-9][a-z0-9_-]{0,63}$')
# the level nova_ext:spread_constraints gives every host by itself
RESERVED_LEVELS = ('host',)


def _domain_levels(top):
    """The cluster's generated failure-domain levels, innermost first:
    ``failure_domains`` or, in the files written before it, ``rack_size``
    hosts per rack and racks dealt in turn to ``rows`` rows (same domain
    names as then, so those files give the same hosts and domains).
    """
    if not top.has('failure_domains'):
        rows = top.get('rows', int, default=1, minimum=1)
        rack_size = top.get('rack_size', int, default=20, minimum=1)
        return [DomainLevel('rack', rack_size, None, 'r%03d'),
                DomainLevel('row', None, rows, 'row%d')]
    for key in ('rows', 'rack_size'):
        if top.has(key):
            raise top.error(key, 'give failure_domains or rows/rack_size, '
                            'not both (rack_size and rows are a '
                            'failure_domains list of rack and row)')
    levels = []
    items = top.items('failure_domains')
    if not items:
        raise top.error('failure_domains', 'needs at least one level')
    for position, (item, line) in enumerate(items):
        spec = _reader_item(top.path, item, line, 'failure_domains[]')
        level = spec.get('level', str, required=True)
        if not LEVEL_NAME.match(level) or level in RESERVED_LEVELS:
            raise spec.error('level', 'not a level name (a-z, 0-9, _ and -; '
                             'not %s): %r'
                             % (', '.join(RESERVED_LEVELS), level))
        if any(known.level == level for known in levels):
            raise spec.error('level', 'level %r is listed twice' % level)
        size = spec.get('size', int, minimum=1)
        count = spec.get('count', int, minimum=1)
        if position == 0 and (size is None or count is not None):
            raise spec.error('size', 'the first (innermost) level needs '
                             'size, its hosts per domain (no count)')
        if position and (size is None) == (count is None):
            raise spec.error('size', 'give size (%s domains per %s, '
                             'consecutive) or count (that many %ss, the %s '
                             'domains dealt to them in turn), one of them'
                             % (levels[-1].level, level, level,
                                levels[-1].level))
        spec.finish()
        levels.append(DomainLevel(level, size, count, level + '%03d'))
    return levels


def _host_domains(levels, inner_number):
    """{level: domain} of a host in innermost domain ``inner_number``."""
    domains = {}
    number = inner_number
    for position, level in enumerate(levels):
        if position:
            if level.count is not None:
                number = (number - 1) % level.count + 1
            else:
                number = (number - 1) // level.size + 1
        domains[level.level] = level.domain(number)
    return domains


def _traits(path, group):
    traits = []
    for trait, line in group.items('traits'):
        if not isinstance(trait, str) or not TRAIT_NAME.match(trait):
            raise ModelError(path, line, group.prefix + 'traits',
                             'not a placement trait name (A-Z, 0-9, _): %r'
                             % (trait,))
        traits.append(trait)
    return traits


def _layout_aggregates(hosts, groups, levels):
    # here: the simulate parser loads this module at every CLI start
    from nova_ext.scheduler import failure_domains
    from nova_ext.scheduler.request_filters import host_class

    by_key = {}
    for host in hosts:
        for level in levels:
            by_key.setdefault((level.level, host.domains[level.level]),
                              []).append(host.name)
    aggregates = [
        Aggregate('%s-%s' % (level, domain), members,
                  {failure_domains.AGGREGATE_KEY_PREFIX + level: domain})
        for (level, domain), members in sorted(by_key.items())]
    for group in groups:
        if group.host_class:
            aggregates.append(Aggregate(
                'class-%s' % group.name,
                [h.name for h in hosts if h.group is group],
                {host_class.AGGREGATE_KEY: group.host_class}))
    return aggregates


# -- the workload -------------------------------------------------------------

@dataclasses.dataclass
class Flavor:
    name: str
    vcpus: int
    ram_mb: int
    disk_gb: int
    ephemeral_gb: int
    swap_mb: int
    weight: float
    extra_specs: ty.Dict[str, str]

    def resources(self):
        """(VCPU, MEMORY_MB, DISK_GB) one instance takes in placement."""
        return (self.vcpus, self.ram_mb,
                self.disk_gb + self.ephemeral_gb
                + (self.swap_mb + 1023) // 1024)


@dataclasses.dataclass
class GroupSpec:
    name: str
    policy: str
    spread_level: ty.Optional[str]
    max_per_domain: ty.Optional[int]
    # nova_ext:spread_constraints, sent as a scheduler hint
    spread_constraints: ty.Optional[str] = None
    # what the report groups groups by (the server_groups entry's name)
    constraint_set: ty.Optional[str] = None

    def constraint_set_name(self):
        """The name the report lists this group's figures under."""
        if self.constraint_set:
            return self.constraint_set
        if self.spread_constraints:
            return self.spread_constraints
        if self.spread_level:
            return '%s:max=%s' % (self.spread_level,
                                  self.max_per_domain or 'default')
        return None

    def levels(self):
        """The failure-domain levels the group asks to spread across."""
        if self.spread_constraints:
            return [text.partition(':')[0]
                    for text in self.spread_constraints.split(';')]
        return [self.spread_level] if self.spread_level else []


@dataclasses.dataclass
class Arrival:
    index: int
    flavor: Flavor
    image: str
    group: ty.Optional[str]       # server group name, or None
    departs_after: ty.Optional[int] = None   # arrival index, or None


@dataclasses.dataclass
class Workload:
    path: str
    name: str
    seed: int
    stop_at_first_failure: bool
    flavors: ty.List[Flavor]
    groups: ty.Dict[str, GroupSpec]
    arrivals: ty.List[Arrival]
    # arrival index -> indexes of earlier arrivals that depart before it
    departures: ty.Dict[int, ty.List[int]]
    # image name -> its glance properties
    image_properties: ty.Dict[str, ty.Dict[str, str]] = dataclasses.field(
        default_factory=dict)


def _zipf_weights(count, exponent):
    return [1.0 / (rank ** exponent) for rank in range(1, count + 1)]


def load_workload(path, seed=None, cluster=None):
    """Read a workload and generate its arrivals.

    ``seed`` overrides the file's. ``cluster``: the model the workload
    runs on; a spread constraint naming a level it does not define is
    refused (without it, only the constraints' grammar is checked).
    """
    levels = cluster.levels() if cluster is not None else None
    top = _Reader(path, _load_yaml(path))
    name = top.get('name', str, default=os.path.basename(path))
    file_seed = top.get('seed', int, default=1)
    seed = file_seed if seed is None else seed
    stop = top.get('stop_at_first_failure', bool, default=True)

    flavors = []
    for item, line in top.items('flavors', required=True):
        flavor = _reader_item(path, item, line, 'flavors[]')
        parsed = Flavor(
            name=flavor.get('name', str, required=True),
            vcpus=flavor.get('vcpus', int, required=True, minimum=1),
            ram_mb=flavor.get('ram_mb', int, required=True, minimum=1),
            disk_gb=flavor.get('disk_gb', int, default=0, minimum=0),
            ephemeral_gb=flavor.get('ephemeral_gb', int, default=0,
                                    minimum=0),
            swap_mb=flavor.get('swap_mb', int, default=0, minimum=0),
            weight=flavor.get('weight', float, default=1.0, minimum=0.0),
            extra_specs=flavor.string_map('extra_specs'))
        if any(f.name == parsed.name for f in flavors):
            raise flavor.error('name', 'flavor %r is defined twice'
                               % parsed.name)
        if spread_constraints.KEY in parsed.extra_specs:
            # as nova-api's validator refuses the flavor
            specs = flavor.mapping_of('extra_specs')
            _check_constraints(specs, parsed.extra_specs[
                spread_constraints.KEY], levels, spread_constraints.KEY)
        flavor.finish()
        flavors.append(parsed)
    if not flavors:
        raise top.error('flavors', 'needs at least one flavor')

    images, image_properties = _images(top)
    groups = {}
    for item, line in top.items('groups'):
        group = _reader_item(path, item, line, 'groups[]')
        spec = _group_spec(group, group.get('name', str, required=True),
                           levels)
        group.finish()
        groups[spec.name] = spec

    rng = random.Random(seed)
    if top.has('sequence'):
        for key in ('arrivals', 'server_groups', 'departures'):
            if top.has(key):
                raise top.error(key, 'give either sequence or generated '
                                'arrivals (arrivals, server_groups, '
                                'departures), not both')
        arrivals, departures = _sequence(top, flavors, images, groups)
    else:
        arrivals, departures = _generate(top, flavors, images, groups, rng,
                                         levels)
    top.finish()
    return Workload(path, name, seed, stop, flavors, groups, arrivals,
                    departures, image_properties)


def _images(top):
    """[(name, weight)] and {name: properties}."""
    images = top.mapping_of('images')
    if images is None:
        return [('image-1', 1.0)], {}
    if images.has('names'):
        listed = [(str(n), None) for n, _ in images.items('names')]
    else:
        count = images.get('count', int, default=1, minimum=1)
        if count > MAX_IMAGES:
            raise images.error('count', 'at most %d, got %d'
                               % (MAX_IMAGES, count))
        listed = [('image-%d' % (i + 1), None) for i in range(count)]
    exponent = images.get('zipf', float, default=0.0, minimum=0.0)
    weights = _zipf_weights(len(listed), exponent)
    properties = {}
    listed_names = [n for n, _ in listed]
    per_image = images.mapping_of('properties')
    for image in (per_image.mapping if per_image is not None else ()):
        if image not in listed_names:
            raise per_image.error(image, 'no image named %r (images: %s)' % (
                image, ', '.join(listed_names[:10])
                + (' ...' if len(listed_names) > 10 else '')))
        properties[image] = per_image.string_map(image)
    images.finish()
    return [(n, w) for (n, _), w in zip(listed, weights)], properties


def _group_spec(reader, name, levels):
    from nova_ext.scheduler import failure_domains  # noqa: F401

    spec = GroupSpec(
        name=name,
        policy=reader.get('policy', str, default='anti-affinity',
                          choices=POLICIES),
        spread_level=reader.get('spread_level', str),
        max_per_domain=reader.get('max_per_domain', int, minimum=1),
        spread_constraints=reader.get('spread_constraints', str))
    if spec.spread_constraints is not None and (
            spec.spread_level is not None
            or spec.max_per_domain is not None):
        # as nova-ext refuses the two kinds of keys in one request
        raise reader.error('spread_constraints', 'give spread_constraints '
                           'or spread_level/max_per_domain, not both')
    if spec.spread_constraints is not None:
        _check_constraints(reader, spec.spread_constraints, levels)
    return spec


def _check_constraints(reader, value, levels, field='spread_constraints'):
    """Refuse ``value`` as the extra-spec validator refuses it (the same
    parser, the same message), its levels checked against ``levels`` (the
    cluster's; None: any level, only the grammar is checked).
    """
    if levels is None:
        levels = [text.partition(':')[0] for text in value.split(';')]
    try:
        spread_constraints.parse(value, levels)
    except ValueError as error:
        raise reader.error(field, str(error))


def _group_mixes(top, levels):
    """[(share, size, GroupSpec template)] of ``server_groups``: one
    mapping, or a list of them (each may be ``name``d: the report's
    constraint set).
    """
    if not top.has('server_groups'):
        return []
    if isinstance(top.mapping.get('server_groups'), _Seq):
        entries = [_reader_item(top.path, item, line, 'server_groups[]')
                   for item, line in top.items('server_groups')]
        named = True
    else:
        entries = [top.mapping_of('server_groups')]
        named = False
    mixes = []
    for entry in entries:
        share = entry.get('share', float, default=0.1, minimum=0.0)
        if share > 1.0:
            raise entry.error('share', 'must be between 0 and 1')
        size = entry.get('size', int, default=3, minimum=1)
        set_name = entry.get('name', str) if named else None
        template = _group_spec(entry, None, levels)
        template.constraint_set = set_name
        entry.finish()
        mixes.append((share, size, template))
    return mixes


def _flavor_named(reader, key, flavors):
    name = reader.get(key, str, required=True)
    for flavor in flavors:
        if flavor.name == name:
            return flavor
    raise reader.error(key, 'no flavor named %r (flavors: %s)' % (
        name, ', '.join(f.name for f in flavors)))


def _sequence(top, flavors, images, groups):
    arrivals = []
    departures = {}
    pending = []
    image_names = [n for n, _ in images]
    for item, line in top.items('sequence'):
        step = _reader_item(path_of(top), item, line, 'sequence[]')
        if step.has('depart'):
            index = step.get('depart', int, minimum=0)
            if index >= len(arrivals):
                raise step.error('depart', 'arrival %d has not arrived yet '
                                 '(arrivals are numbered from 0)' % index)
            pending.append(index)
            step.finish()
            continue
        flavor = _flavor_named(step, 'flavor', flavors)
        image = step.get('image', str, default=image_names[0])
        group = step.get('group', str)
        if group is not None and group not in groups:
            raise step.error('group', 'no server group named %r under '
                             'groups' % group)
        count = step.get('count', int, default=1, minimum=1)
        if len(arrivals) + count > MAX_ARRIVALS:
            raise step.error('count', 'the sequence would hold more than '
                             '%d arrivals' % MAX_ARRIVALS)
        for _ in range(count):
            if pending:
                departures[len(arrivals)] = pending
                pending = []
            arrivals.append(Arrival(len(arrivals), flavor, image, group))
        step.finish()
    return arrivals, departures


def path_of(reader):
    return reader.path


def _generate(top, flavors, images, groups, rng, levels):
    count = top.get('arrivals', int, required=True, minimum=1)
    if count > MAX_ARRIVALS:
        raise top.error('arrivals', 'at most %d, got %d'
                        % (MAX_ARRIVALS, count))
    mixes = _group_mixes(top, levels)
    group_share = sum(share for share, _, _ in mixes)
    if group_share > 1.0:
        raise top.error('server_groups', 'the shares add up to %.3g, more '
                        'than 1' % group_share)
    # a group of mix i starts with probability p_i, so that share_i of the
    # arrivals belong to mix i: p_i*size_i / D = share_i, D = sum(p*size)
    # + 1 - sum(p) the arrivals per draw; with one mix p = share /
    # (size*(1-share) + share), the formula of the single-mapping form
    per_draw = 1.0 / (1.0 - group_share + sum(
        share / size for share, size, _ in mixes)) if mixes else 0.0
    starts = [share * per_draw / size for share, size, _ in mixes]
    if len(mixes) == 1:
        # the very expression of the single-mapping form, so that its
        # files draw the same groups to the last bit
        share, size, _ = mixes[0]
        starts = [share / (size * (1.0 - share) + share)]
    lifetime = None
    departure_spec = top.mapping_of('departures')
    if departure_spec is not None:
        lifetime = departure_spec.get('mean_lifetime', float,
                                      required=True, minimum=1.0)
        departure_spec.finish()

    flavor_weights = [f.weight for f in flavors]
    if sum(flavor_weights) <= 0:
        raise top.error('flavors', 'every flavor has weight 0')
    image_names = [n for n, _ in images]
    image_weights = [w for _, w in images]
    arrivals = []
    while len(arrivals) < count:
        flavor = rng.choices(flavors, flavor_weights)[0]
        image = rng.choices(image_names, image_weights)[0]
        name, members = None, 1
        if group_share:
            # one draw per arrival or group, as with the single mapping
            draw = rng.random()
            for start, (_, size, template) in zip(starts, mixes):
                if draw < start:
                    name = 'group-%d' % (len(groups) + 1)
                    groups[name] = dataclasses.replace(template, name=name)
                    members = min(size, count - len(arrivals))
                    break
                draw -= start
        for _ in range(members):
            arrivals.append(Arrival(len(arrivals), flavor, image, name))
    departures = {}
    if lifetime:
        for arrival in arrivals:
            leaves = arrival.index + 1 + int(rng.expovariate(1.0 / lifetime))
            arrival.departs_after = leaves
            if leaves < count:
                departures.setdefault(leaves, []).append(arrival.index)
    return arrivals, departures
