# SPDX-License-Identifier: Apache-2.0
"""``nova-ext-manage configure nova|tempest``: switch nova-ext's features on
(or, with ``undo``, off) in an existing nova.conf or tempest.conf.

The DevStack plugin and the loopback cloud both call it, so the one place
that knows which options each feature needs is tested once. Edits are made
line by line, as DevStack's ``iniset`` does: oslo.config reads but never
writes files, and configparser drops the operator's comments and cannot
hold a multi-valued option such as ``available_filters`` (one line per
value).

How a file is read is oslo.config's business, so :class:`IniFile` reads it
the way ``oslo_config.iniparser`` does (continuation lines, ``:`` or ``=``,
quotes, duplicate sections merged, section names compared as oslo.config
compares groups) and every edit is checked against oslo.config's own parser
before anything is written: the new file must read back as the old one with
only the options nova-ext touched changed (:func:`_verify`). A file where
that cannot be guaranteed is refused with the line number, never guessed at.

Writing (:func:`_replace_keeping_identity`): under a lock next to the file
(``.<name>.nova-ext-lock``, oslo.concurrency), held from the read to the
rename, so two runs never lose one another's change; the new content is
written to an unnamed file in the same directory (``O_TMPFILE``) that gets
the old file's owner, mode and every extended attribute (POSIX ACLs,
SELinux labels) before it is renamed over the old one, with SIGINT, SIGTERM
and SIGHUP held back, so a crash or a signal leaves the old or the new file.
A file with several hard links is refused: a new inode would leave the
other names with the old content.
"""

import contextlib
import difflib
import errno
import io
import os
import re
import signal
import stat

from nova.conf import scheduler as nova_scheduler_conf
import os_traits
from oslo_concurrency import lockutils
from oslo_config import cfg
from oslo_config import iniparser
from oslo_config import types
import sqlalchemy.engine

from nova_ext import conf as ext_conf
from nova_ext import errors
from nova_ext.virt.libvirt import shim

NOVA_ALL_FILTERS = 'nova.scheduler.filters.all_filters'
NOVA_ALL_WEIGHERS = 'nova.scheduler.weights.all_weighers'
OUR_FILTERS = 'nova_ext.scheduler.filters.all_filters'
OUR_WEIGHERS = 'nova_ext.scheduler.weights.all_weighers'
OUR_FILTER_NAMES = ('FailureDomainAntiAffinityFilter',)
REQUEST_FILTERS = 'maintenance,host_class,failure_domain'
QUOTA_DRIVER = 'per_flavor'
GUEST_MUTATORS = 'domain_metadata,oem_strings,memory_sharing'
NOVA_LIBVIRT_DRIVER = 'libvirt.LibvirtDriver'
DATABASE_SECTIONS = ('database', 'api_database')
ENGINE_PLUGIN = 'plugin=nova_ext'
LOCK_SUFFIX = '.nova-ext-lock'
TMP_SUFFIX = '.nova-ext-tmp'

FEATURES = ('filters', 'weighers', 'request_filters', 'quota',
            'libvirt_driver')
# nova-scheduler activates nova-ext's scheduler hooks (request pre-filters,
# the per-request wrapper) through the same SQLAlchemy engine plugin as the
# quota driver: ?plugin=nova_ext on [api_database] connection
# (nova_ext/activation.py). The quota driver needs it on [database] too.
ENGINE_PLUGIN_SECTIONS = {
    'filters': ('api_database',),
    'weighers': ('api_database',),
    'request_filters': ('api_database',),
    'quota': ('database', 'api_database'),
}

# Which features each Nova process runs code for (``configure --role``).
# The quota driver is needed where Nova checks instance quota: nova-api
# (create, resize) and the conductor that nova-api's ComputeTaskAPI casts
# to -- the superconductor in a multi-cell deployment, which runs the
# recheck after scheduling (schedule_and_build_instances) and unshelve's
# recheck. A cell conductor only answers its computes (object calls,
# reschedules to alternates with build_instances, which checks no quota),
# and has no API database for the limits or the activation record.
ROLES = {
    'api': ('quota',),
    'superconductor': ('quota',),
    'conductor': ('quota',),  # one conductor for everything: one cell
    'scheduler': ('filters', 'weighers', 'request_filters'),
    'cell-conductor': (),
    'compute': ('libvirt_driver',),
}
ROLE_REASONS = {
    'quota': 'Nova checks instance quota in nova-api and the '
             '(super)conductor only',
    'filters': 'only nova-scheduler loads filters',
    'weighers': 'only nova-scheduler loads weighers',
    'request_filters': 'only nova-scheduler runs request filters',
    'libvirt_driver': 'only nova-compute loads a compute driver',
}

# Sections only one of the two files has: ``configure tempest`` on a
# nova.conf (or the reverse) is refused instead of adding flags nobody
# reads.
NOVA_ONLY_SECTIONS = ('api_database', 'database', 'filter_scheduler',
                      'conductor', 'scheduler', 'libvirt', 'vnc',
                      'keystone_authtoken', 'oslo_messaging_rabbit')
TEMPEST_ONLY_SECTIONS = ('auth', 'identity', 'identity-feature-enabled',
                         'compute-feature-enabled', 'service_available',
                         'validation', 'nova_ext_feature_enabled')


def check_roles(roles):
    unknown = [role for role in roles if role not in ROLES]
    if unknown:
        raise ConfigureError('--role %s: expected one of %s' % (
            ','.join(unknown), ', '.join(sorted(ROLES))))


def features_for_roles(features, roles):
    """(features the processes of ``roles`` use, notes on the others).

    ``roles``: names from :data:`ROLES` of the processes that read the
    file; empty means "any process" and keeps every feature.
    """
    check_roles(roles)
    if not roles:
        return list(features), []
    used = {feature for role in roles for feature in ROLES[role]}
    kept = [feature for feature in features if feature in used]
    notes = ['%s left out for %s: %s' % (
        feature, ','.join(roles), ROLE_REASONS[feature])
        for feature in features if feature not in used]
    return kept, notes


# What our tempest plugin's [nova_ext_feature_enabled] flags mean, by
# feature (nova_ext/tempest/config.py).
TEMPEST_FLAGS = {
    'filters': ('failure_domain_filter',),
    'weighers': ('bin_packing_weigher',),
    'request_filters': ('host_class', 'maintenance'),
    'quota': ('per_flavor_quota',),
    'libvirt_driver': ('libvirt_driver',),
}


class ConfigureError(errors.OperatorError):
    pass


def _nova_default(name):
    for opt in nova_scheduler_conf.filter_scheduler_opts:
        if opt.name == name:
            return list(opt.default)
    raise KeyError(name)


def group_name(section):
    """The group oslo.config reads ``[section]`` as: names are compared
    in lower case, except DEFAULT (oslo_config.cfg._normalize_group_name).
    """
    return section if section == 'DEFAULT' else section.lower()


class _Assignment(object):
    """One option as oslo.config reads it: a ``key = value`` line and its
    continuation lines (``start`` to ``end``, end excluded).
    """

    def __init__(self, group, key, value, start):
        self.group, self.key, self.start, self.end = group, key, start, start
        self.parts = [value]

    @property
    def value(self):
        return '\n'.join(self.parts)


class _Unreadable(Exception):
    def __init__(self, index, message):
        super().__init__(message)
        self.index = index


def _split_key_value(line):
    # As oslo_config.iniparser.BaseParser: the first ':' or '=' splits,
    # the value is stripped and loses one pair of matching quotes.
    colon, equal = line.find(':'), line.find('=')
    if colon < 0 and equal < 0:
        return None, None
    at = equal if colon < 0 or 0 <= equal < colon else colon
    key, value = line[:at].strip(), line[at + 1:].strip()
    if value and value[0] == value[-1] and value.startswith(('"', "'")):
        value = value[1:-1]
    return key, value


class IniFile(object):
    """An INI file edited in place: untouched lines stay byte for byte.

    Lines end where Python's universal newlines end them (``\\r\\n``,
    ``\\r``, ``\\n``), as oslo.config reads the file in text mode; each line
    keeps its own ending and new lines get the file's usual one.
    """

    def __init__(self, text):
        pieces = _NEWLINE.split(text)
        self.lines = pieces[0::2]
        self.ends = pieces[1::2] + ['']
        if self.lines[-1] == '':
            self.lines.pop()
            self.ends.pop()
        self.newline = '\r\n' if self.ends.count('\r\n') > len(
            self.ends) / 2 else '\n'
        # (group, key) of every option an edit changed
        self.touched = set()
        self._scan()

    def text(self):
        return ''.join(line + end for line, end in zip(self.lines,
                                                       self.ends))

    def _scan(self):
        """Sections and assignments, read as oslo.config's parser reads
        them; :class:`_Unreadable` where it would stop.
        """
        self.sections = []  # [section name, header index, end index]
        self.assignments = []
        current = section = None
        for index, raw in enumerate(self.lines):
            line = raw.rstrip()
            if not line:
                current = None  # a blank line ends a multi-line value
                continue
            if line.startswith((' ', '\t')):
                if current is None:
                    raise _Unreadable(index, 'Unexpected continuation line')
                current.parts.append(line.lstrip())
                current.end = index + 1
                continue
            current = None
            if line.startswith('['):
                if not line.endswith(']') or len(line) <= 2:
                    raise _Unreadable(index, 'Invalid section')
                if self.sections:
                    self.sections[-1][2] = index
                section = line[1:-1]
                self.sections.append([section, index, len(self.lines)])
            elif not line.startswith(('#', ';')):
                key, value = _split_key_value(line)
                if not key or section is None:
                    raise _Unreadable(index, 'not an assignment')
                current = _Assignment(group_name(section), key, value, index)
                current.end = index + 1
                self.assignments.append(current)

    def view(self):
        """{group: {key: [values]}}, as oslo.config's parser sees them."""
        view = {}
        for found in self.assignments:
            view.setdefault(found.group, {}).setdefault(
                found.key, []).append(found.value)
        return view

    def occurrences(self, section, key):
        group = group_name(section)
        return [found for found in self.assignments
                if found.group == group and found.key == key]

    def get(self, section, key):
        """Every value of ``key`` (several for a multi-valued option)."""
        return [found.value for found in self.occurrences(section, key)]

    def get_one(self, section, key):
        """The value oslo.config uses for a single-valued option: the
        last one, across duplicate sections.
        """
        values = self.get(section, key)
        return values[-1] if values else None

    def line_number(self, section, key):
        """Line (1-based) where the value oslo.config uses starts."""
        found = self.occurrences(section, key)
        return found[-1].start + 1 if found else None

    def _replace(self, start, end, new_lines):
        """Lines ``start`` to ``end`` become ``new_lines``."""
        if new_lines and start == len(self.lines) and start > 0 and \
                not self.ends[start - 1]:
            self.ends[start - 1] = self.newline
        self.lines[start:end] = new_lines
        self.ends[start:end] = [self.newline] * len(new_lines)
        self._scan()

    def _insert(self, section, line, after=None):
        group = group_name(section)
        blocks = [block for block in self.sections
                  if group_name(block[0]) == group]
        if not blocks:
            new = ['[%s]' % section, line]
            if self.lines and self.lines[-1].strip():
                new.insert(0, '')
            self._replace(len(self.lines), len(self.lines), new)
            return
        if after is None:
            # After the section's last non-blank line (of its last block:
            # oslo.config merges duplicate sections), so the blank line
            # that separates it from the next section stays.
            _name, header, end = blocks[-1]
            after = header
            for index in range(header + 1, end):
                if self.lines[index].strip():
                    after = index
        self._replace(after + 1, after + 1, [line])

    @staticmethod
    def _format(key, value):
        if '\n' in value or '\r' in value:
            raise ConfigureError('%s: a value of one line only' % key)
        # oslo.config strips the value and one pair of matching quotes:
        # such a value is written inside the other kind of quote.
        if value != value.strip() or (
                value and value[0] == value[-1] and value[0] in '"\''):
            quote = "'" if value.startswith('"') else '"'
            value = quote + value + quote
        return ('%s = %s' % (key, value)).rstrip()

    def set(self, section, key, value):
        """One ``key = value`` line, where the value oslo.config used was;
        other occurrences are removed.
        """
        found = self.occurrences(section, key)
        line = self._format(key, value)
        self.touched.add((group_name(section), key))
        if not found:
            self._insert(section, line)
            return
        for other in reversed(found[:-1]):
            self._replace(other.start, other.end, [])
        last = self.occurrences(section, key)[-1]
        self._replace(last.start, last.end, [line])

    def add(self, section, key, value):
        """Another value of a multi-valued option, unless already there."""
        found = self.occurrences(section, key)
        if value in (f.value for f in found):
            return
        self.touched.add((group_name(section), key))
        self._insert(section, self._format(key, value),
                     after=found[-1].end - 1 if found else None)

    def remove(self, section, key, value=None):
        for found in reversed(self.occurrences(section, key)):
            if value is None or found.value == value:
                self.touched.add((found.group, key))
                self._replace(found.start, found.end, [])

    def remove_if_empty(self, section):
        """Drop ``section`` (each of its blocks) if nothing but blank lines
        is left in it.
        """
        group = group_name(section)
        for name, header, end in reversed(self.sections):
            if group_name(name) != group or any(
                    line.strip() for line in self.lines[header + 1:end]):
                continue
            self._replace(header, end, [])
        while self.lines and not self.lines[-1].strip():
            self._replace(len(self.lines) - 1, len(self.lines), [])


_NEWLINE = re.compile(r'(\r\n|\r|\n)')
_LIST = types.List()


def _list(ini, section, key, default):
    """The items of list option ``key`` as oslo.config reads them (Nova's
    ``default`` when unset).
    """
    current = ini.get_one(section, key)
    if current is None:
        return None
    items = _LIST(current)
    if any('\n' in item for item in items):
        raise ConfigureError(
            'line %d: [%s] %s continues on the next line without a comma '
            'between the items; oslo.config reads one item holding a '
            'newline (nova-scheduler would not start): put a comma at the '
            'end of each line' % (ini.line_number(section, key), section,
                                  key))
    return items


def _append_to_list(ini, section, key, items, default):
    values = _list(ini, section, key, default)
    if values is None:
        values = list(default)
    if values == ['all']:
        return
    missing = [item for item in items if item not in values]
    if missing or ini.get_one(section, key) is None:
        ini.set(section, key, ','.join(values + missing))


def _remove_from_list(ini, section, key, items, default):
    current = _list(ini, section, key, default)
    if current is None:
        return
    values = [value for value in current if value not in items]
    if values == list(default):
        # What _append_to_list wrote for an option that was not set.
        ini.remove(section, key)
    elif values != current:
        ini.set(section, key, ','.join(values))


def _query_start(url):
    """Index of the '?' where SQLAlchemy (oslo.db's parser) starts the
    query of ``url``, or -1: a password may hold '?' and '@', a query
    value '@'; the parser decides which '?' it is.
    """
    marks = [index for index, char in enumerate(url) if char == '?']
    if not marks:
        return -1
    try:
        whole = sqlalchemy.engine.make_url(url)
    except Exception:  # noqa: not a database URL: after the credentials
        return url.find('?', url.rfind('@') + 1)
    key = (whole.username, whole.password, whole.host, whole.port,
           whole.database)
    for mark in marks:
        try:
            head = sqlalchemy.engine.make_url(url[:mark])
        except Exception:  # noqa: cut inside the credentials
            continue
        if (head.username, head.password, head.host, head.port,
                head.database) == key:
            return mark
    return -1


def _with_engine_plugin(url, add):
    # The query is kept as written: re-encoding it would rewrite values
    # such as read_default_file=/etc/my.cnf. Not urlsplit/urlunsplit: they
    # turn sqlite:////abs/path into sqlite://abs/path.
    start = _query_start(url)
    base, query = (url, '') if start < 0 else (url[:start], url[start + 1:])
    pairs = [pair for pair in query.split('&')
             if pair and pair != ENGINE_PLUGIN]
    if add:
        pairs.append(ENGINE_PLUGIN)
    return base + ('?' + '&'.join(pairs) if pairs else '')


def _set_engine_plugin(ini, section, add):
    url = ini.get_one(section, 'connection')
    if not url:
        return False
    if '\n' in url:
        raise ConfigureError(
            'line %d: [%s] connection continues over several lines; '
            'cannot add or remove ?%s safely: write the URL on one line'
            % (ini.line_number(section, 'connection'), section,
               ENGINE_PLUGIN))
    try:
        sqlalchemy.engine.make_url(url)
    except Exception:  # noqa: what is wrong with it may quote the password
        raise ConfigureError(
            'line %d: [%s] connection is not a URL SQLAlchemy (oslo.db) can '
            'read; nova-api would not start with it: fix the URL first '
            "(a password holding '@', ':' or '/' is written %%40, %%3A, "
            '%%2F)' % (ini.line_number(section, 'connection'), section))
    new = _with_engine_plugin(url, add)
    if new != url:
        ini.set(section, 'connection', new)
    return True


def _features_on(ini):
    """The features that need the engine plugin and are on in ``ini``."""
    on = set()
    if ini.get_one('nova_ext', 'quota_driver'):
        on.add('quota')
    if OUR_FILTERS in ini.get('filter_scheduler', 'available_filters'):
        on.add('filters')
    weighers = ini.get_one('filter_scheduler', 'weight_classes') or ''
    if OUR_WEIGHERS in _LIST(weighers):
        on.add('weighers')
    if (ini.get_one('nova_ext', 'request_filters') or '').strip():
        on.add('request_filters')
    return on


_PLAIN_DOMAIN = re.compile(r'[A-Za-z0-9]+')


def _check_failure_domain(value, levels):
    """``[nova_ext] failure_domain`` from ``--failure-domain``; (value,
    notes).
    """
    pairs = [item.strip() for item in value.split(',') if item.strip()]
    parsed = [tuple(part.strip() for part in pair.split(':'))
              for pair in pairs]
    if not parsed or any(len(pair) != 2 or not all(pair)
                         for pair in parsed):
        raise ConfigureError(
            "--failure-domain %r: expected LEVEL:DOMAIN[,LEVEL:DOMAIN...], "
            "e.g. rack:r12,row:b" % value)
    seen = {}
    notes = []
    for level, domain in parsed:
        if level in seen:
            raise ConfigureError(
                '--failure-domain %r: level %s given twice (%s and %s); a '
                'host is in one domain per level' % (value, level,
                                                     seen[level], domain))
        seen[level] = domain
        if level not in levels:
            raise ConfigureError(
                '--failure-domain %r: level %r is not in [nova_ext] '
                'failure_domain_levels (%s); nova-compute would not start'
                % (value, level, ', '.join(levels)))
        trait = os_traits.normalize_name(domain)[len('CUSTOM_'):]
        if not _PLAIN_DOMAIN.fullmatch(domain):
            notes.append(
                '--failure-domain %s:%s: placement and the scheduler '
                'know this domain by its trait suffix %s; every host whose '
                '%s is written with the same letters and digits (%s, ...) '
                'is in the same %s' % (level, domain, trait, level,
                                       ', '.join(sorted({
                                           domain, trait,
                                           trait.lower()})), level))
    return ','.join('%s:%s' % pair for pair in parsed), notes


def escape_value(value):
    """``value`` as written in a file so that oslo.config reads it back
    as given: oslo.config reads ``$name`` and ``${name}`` as the value of
    another option (string.Template), and ``$$`` as one ``$``.
    """
    return value.replace('$', '$$')


def _remove_if_ours(ini, section, key, ours, notes):
    """``--undo``'s rule: an option is taken out only when the value
    oslo.config uses is the one configure writes (``ours``, as written
    in the file); any other value is the operator's and stays, with a
    note saying so.
    """
    value = ini.get_one(section, key)
    if value is None:
        return
    if value == ours:
        ini.remove(section, key)
        return
    notes.append(errors.mask_secrets(
        'left [%s] %s = %s in place: configure writes %s there, so this '
        'value is not one it wrote; remove the line by hand if it should '
        'go' % (section, key, value, ours or "''")))


def configure_nova(ini, features, undo=False, failure_domain=None):
    """Edit ``ini`` (a nova.conf) for ``features``; return warnings."""
    warnings = []
    if 'filters' in features:
        if undo:
            ini.remove('filter_scheduler', 'available_filters', OUR_FILTERS)
            if ini.get('filter_scheduler', 'available_filters') == [
                    NOVA_ALL_FILTERS]:
                ini.remove('filter_scheduler', 'available_filters')
            _remove_from_list(ini, 'filter_scheduler', 'enabled_filters',
                              OUR_FILTER_NAMES,
                              _nova_default('enabled_filters'))
        else:
            # A first available_filters line would replace Nova's default,
            # which enabled_filters still names.
            if not ini.get('filter_scheduler', 'available_filters'):
                ini.add('filter_scheduler', 'available_filters',
                        NOVA_ALL_FILTERS)
            ini.add('filter_scheduler', 'available_filters', OUR_FILTERS)
            _append_to_list(ini, 'filter_scheduler', 'enabled_filters',
                            OUR_FILTER_NAMES, _nova_default('enabled_filters'))
    if 'weighers' in features:
        if undo:
            _remove_from_list(ini, 'filter_scheduler', 'weight_classes',
                              (OUR_WEIGHERS,), _nova_default('weight_classes'))
        else:
            _append_to_list(ini, 'filter_scheduler', 'weight_classes',
                            (OUR_WEIGHERS,), _nova_default('weight_classes'))
    if 'request_filters' in features:
        if undo:
            _remove_if_ours(ini, 'nova_ext', 'request_filters',
                            REQUEST_FILTERS, warnings)
        elif ini.get_one('nova_ext', 'request_filters') != REQUEST_FILTERS:
            ini.set('nova_ext', 'request_filters', REQUEST_FILTERS)
    if 'quota' in features:
        if undo:
            _remove_if_ours(ini, 'nova_ext', 'quota_driver', QUOTA_DRIVER,
                            warnings)
        elif ini.get_one('nova_ext', 'quota_driver') != QUOTA_DRIVER:
            ini.set('nova_ext', 'quota_driver', QUOTA_DRIVER)
    if 'libvirt_driver' in features:
        if undo:
            if ini.get_one('DEFAULT', 'compute_driver') == \
                    shim.COMPUTE_DRIVER:
                ini.set('DEFAULT', 'compute_driver', NOVA_LIBVIRT_DRIVER)
            _remove_if_ours(ini, 'nova_ext', 'guest_mutators',
                            GUEST_MUTATORS, warnings)
        else:
            if ini.get_one('DEFAULT', 'compute_driver') != \
                    shim.COMPUTE_DRIVER:
                ini.set('DEFAULT', 'compute_driver', shim.COMPUTE_DRIVER)
            if ini.get_one('nova_ext', 'guest_mutators') != GUEST_MUTATORS:
                ini.set('nova_ext', 'guest_mutators', GUEST_MUTATORS)
    if failure_domain is not None:
        levels = _nova_ext_value(ini, 'failure_domain_levels')
        value, notes = _check_failure_domain(failure_domain, levels)
        if undo:
            _remove_if_ours(ini, 'nova_ext', 'failure_domain', value,
                            warnings)
        else:
            warnings += notes
            if ini.get_one('nova_ext', 'failure_domain') != value:
                ini.set('nova_ext', 'failure_domain', value)
    warnings += _engine_plugins(ini, features, undo)
    return warnings


def _engine_plugins(ini, features, undo):
    """``?plugin=nova_ext`` where a feature that is on needs it, and only
    there; warnings.
    """
    named = [feature for feature in features
             if feature in ENGINE_PLUGIN_SECTIONS]
    if not named:
        return []
    on = _features_on(ini)
    warnings = []
    for section in DATABASE_SECTIONS:
        needed = [feature for feature in on
                  if section in ENGINE_PLUGIN_SECTIONS[feature]]
        touched = [feature for feature in named
                   if section in ENGINE_PLUGIN_SECTIONS[feature]]
        if not touched or (undo and needed):
            continue
        if not _set_engine_plugin(ini, section, add=not undo) and not undo \
                and section == 'api_database':
            warnings.append(
                'no [api_database] connection here: nova-api, '
                'nova-conductor and nova-scheduler activate nova-ext '
                'through ?plugin=nova_ext on that URL (fine for a '
                "compute's nova.conf)")
    return warnings


def configure_tempest(ini, features, undo=False, failure_domain=None):
    """Edit ``ini`` (a tempest.conf) for ``features``; return warnings."""
    warnings = []
    for feature in features:
        for flag in TEMPEST_FLAGS[feature]:
            if undo:
                _remove_if_ours(ini, 'nova_ext_feature_enabled', flag,
                                'True', warnings)
            elif ini.get_one('nova_ext_feature_enabled', flag) != 'True':
                ini.set('nova_ext_feature_enabled', flag, 'True')
    if 'filters' in features:
        if undo:
            _remove_from_list(ini, 'compute-feature-enabled',
                              'scheduler_enabled_filters', OUR_FILTER_NAMES,
                              _nova_default('enabled_filters'))
        else:
            _append_to_list(ini, 'compute-feature-enabled',
                            'scheduler_enabled_filters', OUR_FILTER_NAMES,
                            _nova_default('enabled_filters'))
    return warnings


_SECTION_NAME = re.compile(r'[A-Za-z][A-Za-z0-9_-]*')
_OPTION_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')


def parse_assignment(assignment, error=None):
    """(section, option, value) of one ``--set SECTION.OPTION=VALUE``, or
    ``error`` (default :class:`ConfigureError`) naming what is wrong: a
    name with spaces or brackets, or a value with a newline, would write
    lines that mean something else to oslo.config (``configure``), and
    names no option (``explain --set``).
    """
    error = error or ConfigureError
    shown = errors.mask_secrets(assignment)
    name, equals, value = assignment.partition('=')
    section, dot, key = name.strip().rpartition('.')
    value = value.strip()
    if not equals or not dot or not section or not key:
        raise error(
            '--set %s: expected SECTION.OPTION=VALUE, e.g. '
            'nova_ext.bin_packing_weight_multiplier=2.0' % shown)
    if not _SECTION_NAME.fullmatch(section):
        raise error('--set %s: section name %r: letters, digits, '
                    '_ and - only' % (shown, section))
    if not _OPTION_NAME.fullmatch(key):
        raise error('--set %s: option name %r: letters, digits and _ only '
                    '(oslo.config reads an option from the file by its '
                    'name with _, never -)' % (shown, key))
    if _CONTROL.search(value):
        raise error('--set %s.%s: the value holds a control '
                    'character (newline, tab, ...); one line of '
                    'text only' % (section, key))
    errors.learn_secret_assignment(section, key, value)
    return section, key, value


def _parse_set(assignment, target='nova'):
    """(section, option, value) of one ``--set``; checked before any
    write.
    """
    section, key, value = parse_assignment(assignment)
    if target == 'nova' and group_name(section) == ext_conf.GROUP.name:
        check_nova_ext_option(key, value)
    return section, key, value


def _ext_opt(name):
    return {opt.dest: opt for opt in ext_conf.ALL_OPTS}.get(name)


def check_nova_ext_option(key, value):
    """An unknown [nova_ext] option would be ignored by Nova without a
    word; a mistyped value would stop the service that reads it.
    """
    opt = _ext_opt(key)
    if opt is None:
        raise ConfigureError(
            '--set nova_ext.%s: nova-ext has no such option (see '
            'etc/nova-ext.conf.sample)' % key)
    try:
        conf = cfg.ConfigOpts()
        conf.register_opt(opt, group='check')
        conf.set_override(opt.dest, value, group='check')
        getattr(conf.check, opt.dest)
    except (ValueError, cfg.Error) as error:
        raise ConfigureError('--set nova_ext.%s=%s: %s' % (
            key, errors.mask_secrets(value), errors.one_line(error)))


def _nova_ext_value(ini, name):
    """``[nova_ext] name`` as nova-ext reads it from ``ini``."""
    opt = _ext_opt(name)
    value = ini.get_one('nova_ext', name)
    return opt.default if value is None else opt.type(value)


def _check_cross_options(ini):
    """Values that are fine alone but name something that is not there:
    checked on the edited file, for the options this run touched.
    """
    # here: only this check reads entry points (~0.2 s to import)
    from importlib import metadata

    touched = {key for group, key in ini.touched if group == 'nova_ext'}
    if 'quota_driver' in touched:
        driver = ini.get_one('nova_ext', 'quota_driver')
        known = sorted(entry.name for entry in metadata.entry_points(
            group='nova_ext.quota.drivers'))
        if driver and driver != QUOTA_DRIVER and driver not in known:
            raise ConfigureError(
                '[nova_ext] quota_driver = %s: no such quota driver '
                '(installed: %s); nova-api would refuse every request'
                % (driver, ', '.join(known) or 'none'))
    levels = _nova_ext_value(ini, 'failure_domain_levels')
    if touched & {'default_spread_level', 'failure_domain_levels'}:
        level = _nova_ext_value(ini, 'default_spread_level')
        if level and level not in levels:
            raise ConfigureError(
                '[nova_ext] default_spread_level = %s: not a failure-domain '
                'level ([nova_ext] failure_domain_levels: %s)'
                % (level, ', '.join(levels)))
    if touched & {'failure_domain', 'failure_domain_levels'}:
        unknown = sorted(set(_nova_ext_value(ini, 'failure_domain'))
                         - set(levels))
        if unknown:
            raise ConfigureError(
                '[nova_ext] failure_domain names level %s, which is not in '
                '[nova_ext] failure_domain_levels (%s); nova-compute would '
                'not start' % (', '.join(unknown), ', '.join(levels)))


def _check_kind(ini, path, target):
    """``configure tempest`` on a nova.conf, or the reverse: refused."""
    mine, other = ((TEMPEST_ONLY_SECTIONS, NOVA_ONLY_SECTIONS)
                   if target == 'tempest' else
                   (NOVA_ONLY_SECTIONS, TEMPEST_ONLY_SECTIONS))
    groups = {group_name(name): header for name, header, _ in ini.sections}
    if any(group in groups for group in mine):
        return
    for group in other:
        if group in groups:
            raise ConfigureError(
                '%s:%d: [%s] is a %s section: this looks like a %s, not a '
                '%s.conf; not editing it (configure %s edits that one)' % (
                    path, groups[group] + 1, group,
                    'nova' if target == 'tempest' else 'tempest',
                    'nova.conf' if target == 'tempest' else 'tempest.conf',
                    target, 'nova' if target == 'tempest' else 'tempest'))


class _OsloReader(cfg.ConfigParser):
    """oslo.config's own parser, recording each assignment in order."""

    def __init__(self, path):
        super().__init__(path, {})
        self.view = {}

    def assignment(self, key, value):
        super().assignment(key, value)
        self.view.setdefault(group_name(self.section), {}).setdefault(
            key, []).append('\n'.join(value))


def oslo_view(path, text=None):
    """{group: {key: [values]}} of a file (or of ``text``, read as that
    file would be) through oslo.config's parser; ParseError as it raises.
    """
    reader = _OsloReader(path)
    if text is None:
        reader.parse()
    else:
        iniparser.BaseParser.parse(
            reader, io.StringIO(text, newline=None).readlines())
    return reader.view


def _first_difference(ini, view):
    """1-based line of the first option ``ini`` reads unlike ``view``."""
    mine = ini.view()
    for found in ini.assignments:
        if view.get(found.group, {}).get(found.key) != \
                mine[found.group][found.key]:
            return found.start + 1
    return 1


def _verify(path, before, ini, after_view):
    """The edit reads back, through oslo.config, as the old file with only
    the options ``ini.touched`` changed, each to what ``ini`` set.
    """
    if after_view != ini.view():
        raise ConfigureError(
            '%s:%d: oslo.config would read the edited file differently '
            'from what nova-ext wrote; not editing it (please report this '
            'file)' % (path, _first_difference(ini, after_view)))
    old = before.view()
    keys = {(group, key) for view in (old, after_view)
            for group in view for key in view[group]}
    for group, key in sorted(keys - ini.touched):
        if old.get(group, {}).get(key) != after_view.get(group, {}).get(key):
            raise ConfigureError(
                '%s:%d: [%s] %s would read differently after the edit; not '
                'editing it (please report this file)'
                % (path, before.line_number(group, key) or 1, group, key))


def _read_ini(path):
    """The text of an INI file and its :class:`IniFile`, or a one-line
    refusal: a binary file or one oslo.config cannot parse is not edited.
    """
    if not os.path.isfile(path):
        raise ConfigureError('%s: no such file' % path)
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except OSError as error:
        raise ConfigureError('%s: cannot read: %s' % (path, error.strerror))
    if b'\0' in data:
        raise ConfigureError('%s: binary file (NUL bytes), not an INI file; '
                             'not editing it' % path)
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as error:
        raise ConfigureError('%s: not UTF-8 text (byte %d); not editing it'
                             % (path, error.start))
    try:
        view = oslo_view(path, text)
    except iniparser.ParseError as error:
        raise ConfigureError('%s; not editing it' % errors.parse_error_line(
            error, path))
    try:
        ini = IniFile(text)
    except _Unreadable as error:
        raise ConfigureError('%s:%d: %s; not editing it' % (
            path, error.index + 1, error))
    if ini.view() != view:
        raise ConfigureError(
            '%s:%d: nova-ext cannot tell how oslo.config reads this line; '
            'not editing the file (please report it)'
            % (path, _first_difference(ini, view)))
    errors.learn_secrets_from_view(view)
    return text, ini


def _target(path):
    """The file a path names (a symlinked nova.conf stays a symlink), and
    a refusal for what cannot be replaced safely.
    """
    target = os.path.realpath(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        raise ConfigureError('%s: no such file' % path)
    except OSError as error:
        raise ConfigureError('%s: %s' % (path, error.strerror))
    if not stat.S_ISREG(info.st_mode):
        raise ConfigureError('%s: not a regular file' % path)
    if info.st_nlink > 1:
        raise ConfigureError(
            '%s: has %d hard links; replacing it would leave the other '
            'names with the old content: edit the file those names share '
            'through a symlink instead, or remove the other links'
            % (path, info.st_nlink))
    return target


@contextlib.contextmanager
def file_lock(target):
    """Serialise every nova-ext edit of ``target``: an fcntl lock on
    ``.<name>.nova-ext-lock`` next to it (left there; it holds nothing).
    """
    directory, name = os.path.split(target)
    lock = lockutils.external_lock('.%s%s' % (name, LOCK_SUFFIX),
                                   lock_path=directory)
    try:
        lock.acquire()
    except OSError as error:
        raise ConfigureError('%s: cannot create the lock file %s in %s: %s'
                             % (target, '.%s%s' % (name, LOCK_SUFFIX),
                                directory, error.strerror))
    try:
        yield
    finally:
        lock.release()


# SIGINT, SIGTERM and SIGHUP wait while the new file is put in place.
_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@contextlib.contextmanager
def _signals_held():
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _copy_identity(source, fd):
    """Owner, extended attributes (ACLs, SELinux label ...) and mode of
    ``source`` onto the open file ``fd``.
    """
    old = os.stat(source)
    if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:
            raise ConfigureError(
                '%s: owned by uid %d gid %d, which only root can keep '
                'when replacing it; run as root or as its owner'
                % (source, old.st_uid, old.st_gid))
    try:
        names = os.listxattr(source)
    except OSError as error:
        if error.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        names = []
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(source, name))
        except OSError as error:
            raise ConfigureError(
                '%s: cannot keep its extended attribute %s on the new file '
                '(%s); not replacing it' % (source, name, error.strerror))
    # After the ACL: chmod sets the ACL mask from the group bits, which
    # were the old file's mask.
    os.fchmod(fd, stat.S_IMODE(old.st_mode))


def _replace_keeping_identity(path, target, text):
    """Put ``text`` in ``target``'s place: the old or the new file, never
    half of one, with the old one's owner, mode and extended attributes.
    """
    directory, name = os.path.split(target)
    tmp = os.path.join(directory, '.%s%s' % (name, TMP_SUFFIX))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a run killed (SIGKILL) just before its rename
    data = text.encode('utf-8')
    directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with _signals_held():
            fd, named = _new_file(path, directory, tmp)
            try:
                remaining = memoryview(data)
                while remaining:
                    remaining = remaining[os.write(fd, remaining):]
                os.fsync(fd)
                _copy_identity(target, fd)
                if not named:
                    # linkat(AT_SYMLINK_FOLLOW) gives the unnamed file a
                    # name: os.link calls linkat only with a dir_fd.
                    os.link('/proc/self/fd/%d' % fd, tmp,
                            src_dir_fd=directory_fd, follow_symlinks=True)
                os.replace(tmp, target)
            except BaseException as error:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                if isinstance(error, OSError) and error.strerror:
                    # disk full, ulimit -f, read-only: the system's reason
                    raise ConfigureError('%s: cannot write the new file: %s; '
                                         'the old one is unchanged'
                                         % (path, error.strerror))
                raise
            finally:
                os.close(fd)
            os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


def _new_file(path, directory, tmp):
    """(fd, named): an unnamed file in ``directory`` (a crash before the
    rename leaves nothing), or ``tmp`` where the file system has no
    O_TMPFILE.
    """
    try:
        return os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o600), False
    except OSError as error:
        if error.errno not in (errno.EOPNOTSUPP, errno.EISDIR,
                               errno.EINVAL):
            raise ConfigureError('%s: cannot write in %s: %s' % (
                path, directory, error.strerror))
    try:
        return os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                       0o600), True
    except OSError as error:
        raise ConfigureError('%s: cannot write in %s: %s' % (
            path, directory, error.strerror))


def _check_writable(path, target):
    """Refuse now what :func:`_replace_keeping_identity` would fail on
    later: a directory where no new file can be made, a file whose
    owner or extended attributes could not be kept.
    """
    directory, name = os.path.split(target)
    tmp = os.path.join(directory, '.%s%s' % (name, TMP_SUFFIX))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd, named = _new_file(path, directory, tmp)
    try:
        _copy_identity(target, fd)
    finally:
        os.close(fd)
        if named:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def configure_files(paths, target, features, undo=False,
                    failure_domain=None, assignments=(), dry_run=False):
    """Edit several files: each is read, edited in memory, verified, and
    checked for a lock and a writable directory before any is written,
    so a file that would fail stops the run with none changed.

    Return [(path, changed, diff lines, warnings)].
    """
    for path in paths:
        configure_file(path, target, features, undo=undo,
                       failure_domain=failure_domain,
                       assignments=assignments, check_only=True)
    return [(path,) + configure_file(
        path, target, features, undo=undo, failure_domain=failure_domain,
        assignments=assignments, dry_run=dry_run) for path in paths]


def configure_file(path, target, features, undo=False, failure_domain=None,
                   assignments=(), dry_run=False, check_only=False):
    """Edit one file; return (changed, diff lines, warnings).

    ``check_only``: everything but the write, under the lock, and a new
    file made and removed where the new content would go.
    """
    parsed = [_parse_set(assignment, target) for assignment in assignments]
    real = _target(path)
    lock = contextlib.nullcontext() if dry_run else file_lock(real)
    with lock:
        before, ini = _read_ini(real)
        _check_kind(ini, path, target)
        original = IniFile(before)
        edit = configure_nova if target == 'nova' else configure_tempest
        try:
            warnings = edit(ini, features, undo=undo,
                            failure_domain=failure_domain)
            for section, key, value in parsed:
                written = escape_value(value)
                if undo:
                    _remove_if_ours(ini, section, key, written, warnings)
                elif ini.get(section, key) != [written]:
                    ini.set(section, key, written)
            if undo:
                for section in ('filter_scheduler', 'nova_ext',
                                'nova_ext_feature_enabled',
                                'compute-feature-enabled'):
                    ini.remove_if_empty(section)
                for section, key, _value in parsed:
                    if (group_name(section), key) in ini.touched:
                        ini.remove_if_empty(section)
        except ConfigureError as error:
            if str(error).startswith('line '):
                raise ConfigureError('%s:%s' % (path, str(error)[5:]))
            raise
        if target == 'nova' and not undo:
            _check_cross_options(ini)
        after = ini.text()
        _verify(path, original, ini, oslo_view(real, after))
        diff = [errors.mask_secrets(line) for line in difflib.unified_diff(
            before.splitlines(), after.splitlines(), path, path,
            lineterm='')]
        if check_only:
            _check_writable(path, real)
        elif after != before and not dry_run:
            _replace_keeping_identity(path, real, after)
    return after != before, diff, warnings
