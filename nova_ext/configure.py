# SPDX-License-Identifier: Apache-2.0
"""``nova-ext-manage configure nova|tempest``: switch nova-ext's features on
(or, with ``undo``, off) in an existing nova.conf or tempest.conf.

The DevStack plugin and the loopback cloud both call it, so the one place
that knows which options each feature needs is tested once. Edits are made
line by line, as DevStack's ``iniset`` does: oslo.config reads but never
writes files, and configparser drops the operator's comments and cannot
hold a multi-valued option such as ``available_filters`` (one line per
value).
"""

import difflib
import os
import re
import stat
import tempfile

from nova.conf import scheduler as nova_scheduler_conf
from oslo_config import cfg

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

FEATURES = ('filters', 'weighers', 'request_filters', 'quota',
            'libvirt_driver')

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


def features_for_roles(features, roles):
    """(features the processes of ``roles`` use, notes on the others).

    ``roles``: names from :data:`ROLES` of the processes that read the
    file; empty means "any process" and keeps every feature.
    """
    unknown = [role for role in roles if role not in ROLES]
    if unknown:
        raise ConfigureError('--role %s: expected one of %s' % (
            ','.join(unknown), ', '.join(sorted(ROLES))))
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


_SECTION = re.compile(r'^\s*\[([^\]]+)\]\s*$')
_OPTION = re.compile(r'^([^#;\s=][^=]*?)\s*=\s*(.*?)\s*$')


class IniFile(object):
    """An INI file edited in place: untouched lines stay byte for byte."""

    def __init__(self, text):
        # split('\n'), not splitlines(): that also splits at \x0c, \x1c,
        # U+2028 ... inside a value, and text() would write them back as
        # newlines.
        self.lines = text.split('\n')
        if self.lines[-1] == '':
            self.lines.pop()

    def text(self):
        return '\n'.join(self.lines) + '\n' if self.lines else ''

    def _section_span(self, section):
        """(header index, end index) of ``section``, or None."""
        start = None
        for index, line in enumerate(self.lines):
            match = _SECTION.match(line)
            if not match:
                continue
            if start is not None:
                return start, index
            if match.group(1).strip() == section:
                start = index
        return None if start is None else (start, len(self.lines))

    def _occurrences(self, section, key):
        span = self._section_span(section)
        if span is None:
            return []
        found = []
        for index in range(span[0] + 1, span[1]):
            match = _OPTION.match(self.lines[index])
            if match and match.group(1) == key:
                found.append((index, match.group(2)))
        return found

    def get(self, section, key):
        """Every value of ``key`` (several for a multi-valued option)."""
        return [value for _, value in self._occurrences(section, key)]

    def get_one(self, section, key):
        values = self.get(section, key)
        return values[-1] if values else None

    def _insert(self, section, line, after=None):
        span = self._section_span(section)
        if span is None:
            if self.lines and self.lines[-1].strip():
                self.lines.append('')
            self.lines += ['[%s]' % section, line]
            return
        if after is None:
            # After the section's last non-blank line, so the blank line
            # that separates it from the next section stays.
            after = span[0]
            for index in range(span[0] + 1, span[1]):
                if self.lines[index].strip():
                    after = index
        self.lines.insert(after + 1, line)

    def set(self, section, key, value):
        """One ``key = value`` line, where the first one was."""
        found = self._occurrences(section, key)
        line = '%s = %s' % (key, value)
        if not found:
            self._insert(section, line)
            return
        self.lines[found[0][0]] = line
        for index, _ in reversed(found[1:]):
            del self.lines[index]

    def add(self, section, key, value):
        """Another value of a multi-valued option, unless already there."""
        found = self._occurrences(section, key)
        if value in (v for _, v in found):
            return
        self._insert(section, '%s = %s' % (key, value),
                     after=found[-1][0] if found else None)

    def remove(self, section, key, value=None):
        for index, current in reversed(self._occurrences(section, key)):
            if value is None or current == value:
                del self.lines[index]

    def remove_if_empty(self, section):
        """Drop ``section`` if nothing but blank lines is left in it."""
        span = self._section_span(section)
        if span is None or any(line.strip()
                               for line in self.lines[span[0] + 1:span[1]]):
            return
        del self.lines[span[0]:span[1]]
        while self.lines and not self.lines[-1].strip():
            self.lines.pop()


def _list(value):
    return [item.strip() for item in (value or '').split(',')
            if item.strip()]


def _append_to_list(ini, section, key, items, default):
    current = ini.get_one(section, key)
    values = _list(current) if current is not None else list(default)
    if values == ['all']:
        return
    ini.set(section, key, ','.join(
        values + [item for item in items if item not in values]))


def _remove_from_list(ini, section, key, items, default):
    current = ini.get_one(section, key)
    if current is None:
        return
    values = [value for value in _list(current) if value not in items]
    if values == list(default):
        # What _append_to_list wrote for an option that was not set.
        ini.remove(section, key)
    else:
        ini.set(section, key, ','.join(values))


def _with_engine_plugin(url, add):
    # The query is kept as written: re-encoding it would rewrite values
    # such as read_default_file=/etc/my.cnf. Not urlsplit/urlunsplit: they
    # turn sqlite:////abs/path into sqlite://abs/path. The query starts at
    # the first '?' after the credentials (a password may hold one).
    start = url.find('?', url.find('@') + 1)
    base, query = (url, '') if start < 0 else (url[:start], url[start + 1:])
    pairs = [pair for pair in query.split('&')
             if pair and pair != ENGINE_PLUGIN]
    if add:
        pairs.append(ENGINE_PLUGIN)
    return base + ('?' + '&'.join(pairs) if pairs else '')


def _parse_failure_domain(value):
    pairs = [item.strip() for item in value.split(',') if item.strip()]
    if not pairs or any(
            len([p for p in pair.split(':') if p.strip()]) != 2
            for pair in pairs):
        raise ConfigureError(
            "--failure-domain %r: expected LEVEL:DOMAIN[,LEVEL:DOMAIN...], "
            "e.g. rack:r12,row:b" % value)
    return ','.join(pairs)


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
            ini.remove('nova_ext', 'request_filters')
        else:
            ini.set('nova_ext', 'request_filters', REQUEST_FILTERS)
            if OUR_FILTERS not in ini.get('filter_scheduler',
                                          'available_filters') and \
                    OUR_WEIGHERS not in _list(ini.get_one(
                        'filter_scheduler', 'weight_classes')):
                warnings.append(
                    'request filters are activated when nova-scheduler '
                    'loads nova-ext\'s filters or weighers: add --filters '
                    'or --weighers on the scheduler\'s nova.conf')
    if 'quota' in features:
        if undo:
            ini.remove('nova_ext', 'quota_driver')
        else:
            ini.set('nova_ext', 'quota_driver', QUOTA_DRIVER)
        urls = 0
        for section in DATABASE_SECTIONS:
            url = ini.get_one(section, 'connection')
            if url:
                urls += 1
                ini.set(section, 'connection',
                        _with_engine_plugin(url, add=not undo))
        if not urls and not undo:
            warnings.append(
                'no [database] or [api_database] connection here: '
                'nova-api and nova-conductor activate the quota driver '
                'through ?plugin=nova_ext on those URLs (fine for a '
                "compute's nova.conf)")
    if 'libvirt_driver' in features:
        if undo:
            if ini.get_one('DEFAULT', 'compute_driver') == \
                    shim.COMPUTE_DRIVER:
                ini.set('DEFAULT', 'compute_driver', NOVA_LIBVIRT_DRIVER)
            ini.remove('nova_ext', 'guest_mutators')
        else:
            ini.set('DEFAULT', 'compute_driver', shim.COMPUTE_DRIVER)
            ini.set('nova_ext', 'guest_mutators', GUEST_MUTATORS)
    if failure_domain is not None:
        if undo:
            ini.remove('nova_ext', 'failure_domain')
        else:
            ini.set('nova_ext', 'failure_domain',
                    _parse_failure_domain(failure_domain))
    return warnings


def configure_tempest(ini, features, undo=False, failure_domain=None):
    """Edit ``ini`` (a tempest.conf) for ``features``; return warnings."""
    for feature in features:
        for flag in TEMPEST_FLAGS[feature]:
            if undo:
                ini.remove('nova_ext_feature_enabled', flag)
            else:
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
    return []


_SECTION_NAME = re.compile(r'[A-Za-z][A-Za-z0-9_-]*')
_OPTION_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_-]*')
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
            '--set %r: expected SECTION.OPTION=VALUE, e.g. '
            'nova_ext.bin_packing_weight_multiplier=2.0' % shown)
    if not _SECTION_NAME.fullmatch(section):
        raise error('--set %r: section name %r: letters, digits, '
                    '_ and - only' % (shown, section))
    if not _OPTION_NAME.fullmatch(key):
        raise error('--set %r: option name %r: letters, digits, '
                    '_ and - only' % (shown, key))
    if _CONTROL.search(value):
        raise error('--set %s.%s: the value holds a control '
                    'character (newline, tab, ...); one line of '
                    'text only' % (section, key))
    return section, key, value


def _parse_set(assignment, target='nova'):
    """(section, option, value) of one ``--set``; checked before any
    write.
    """
    section, key, value = parse_assignment(assignment)
    if target == 'nova' and section == ext_conf.GROUP.name:
        _check_nova_ext_option(key, value)
    return section, key, value


def _check_nova_ext_option(key, value):
    """An unknown [nova_ext] option would be ignored by Nova without a
    word; a mistyped value would stop the service that reads it.
    """
    known = {opt.dest: opt for opt in ext_conf.ALL_OPTS}
    opt = known.get(key.replace('-', '_'))
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


def _read_ini(path):
    """The text of an INI file, or a one-line refusal: a binary file or
    one oslo.config cannot parse is not edited.
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
        cfg.ConfigParser(path, {}).parse()
    except cfg.ParseError as error:
        raise ConfigureError('%s; not editing it' % errors.mask_secrets(
            errors.one_line(error)))
    return text


def write_atomically(path, text):
    """Replace ``path``'s content: the old or the new file, never half of
    one, with the same mode and owner (nova.conf is often root:nova 0640).
    """
    target = os.path.realpath(path)  # keep a symlinked nova.conf a symlink
    old = os.stat(target)
    directory = os.path.dirname(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.' %
                                   os.path.basename(target), suffix='.tmp')
    except OSError as error:
        raise ConfigureError('%s: cannot write in %s: %s' % (
            path, directory, error.strerror))
    try:
        with os.fdopen(fd, 'w') as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(old.st_mode))
        if (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
            try:
                os.chown(tmp, old.st_uid, old.st_gid)
            except PermissionError:
                raise ConfigureError(
                    '%s: owned by uid %d gid %d, which only root can keep '
                    'when replacing it; run as root or as its owner'
                    % (path, old.st_uid, old.st_gid))
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    directory_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


def configure_file(path, target, features, undo=False, failure_domain=None,
                   assignments=(), dry_run=False):
    """Edit one file; return (changed, diff lines, warnings)."""
    parsed = [_parse_set(assignment, target) for assignment in assignments]
    before = _read_ini(path)
    ini = IniFile(before)
    edit = configure_nova if target == 'nova' else configure_tempest
    warnings = edit(ini, features, undo=undo, failure_domain=failure_domain)
    for section, key, value in parsed:
        if undo:
            ini.remove(section, key)
        else:
            ini.set(section, key, value)
    if undo:
        for section in ('filter_scheduler', 'nova_ext',
                        'nova_ext_feature_enabled',
                        'compute-feature-enabled'):
            ini.remove_if_empty(section)
    after = ini.text()
    diff = [errors.mask_secrets(line) for line in difflib.unified_diff(
        before.splitlines(), after.splitlines(), path, path, lineterm='')]
    if after != before and not dry_run:
        write_atomically(path, after)
    return after != before, diff, warnings
