# SPDX-License-Identifier: Apache-2.0
"""What an operator sees when a nova-ext command fails, and what it never
sees: a secret.

:class:`OperatorError` is an input or environment problem the operator can
fix; ``nova-ext-manage`` prints its message as one line and exits 1. Any
other exception is a bug or an unforeseen state: the operator gets one line
naming a details file, which holds the traceback with secrets masked, never
a traceback on the terminal.

:func:`mask_secrets` is the one function every output path goes through
(configure's summary and diff, ``explain --set``'s what-if header, every
error line, the details files). What is secret comes from oslo.config:

* the names of every option registered with ``secret=True`` by Nova, the
  libraries its services load, keystoneauth's plugins and nova-ext
  (:func:`secret_option_names`, read through the ``oslo.config.opts``
  entry points oslo-config-generator uses), plus any name holding
  ``password``, ``secret`` or ``token`` (an option of a library not
  installed here): such an option's value is masked to the end of its line
  (``password = ***``; a URL keeps its host and query: ``u:***@host``);
* the values themselves, once read (:func:`learn_secrets_from_view`,
  :func:`learn_secret_assignment`, :func:`learn_secrets_from_files`): the
  value of a secret option and the password of any URL, as oslo.db
  (SQLAlchemy's ``make_url``) and oslo.messaging (``TransportURL.parse``)
  read it, are then masked wherever they appear (a database error naming
  the host part of a password holding ``@``, a parse error). They live in
  :data:`_KNOWN_SECRETS` for the rest of the process (one command).
"""

import functools
import logging
import os
import re
import sys
import tempfile
import traceback
from urllib import parse as urlparse

MASK = '***'
# A known secret shorter than this is masked where it stands (after its
# option's name, in a URL) but not searched for in free text, where it
# would mask ordinary words.
MIN_SEARCHED_SECRET = 4

# The oslo.config namespaces of Nova's own sample config
# (etc/nova/nova-config-generator.conf), of nova-ext and of tempest (for
# tempest.conf).
OPTION_NAMESPACES = (
    'nova.conf', 'keystonemiddleware.auth_token', 'oslo.log',
    'oslo.messaging', 'oslo.policy', 'oslo.privsep',
    'oslo.service.periodic_task', 'oslo.service.service', 'oslo.db',
    'oslo.db.concurrency', 'oslo.cache', 'oslo.middleware',
    'oslo.concurrency', 'oslo.reports', 'oslo.versionedobjects',
    'castellan.config', 'osprofiler', 'oslo.limit', 'nova_ext',
    'tempest.config')
_SECRET_WORDS = ('password', 'secret', 'token')

# Secret values read by this process (see the module docstring), each
# with what it is shown as.
_KNOWN_SECRETS = {}

# SECTION.OPTION=VALUE (--set), OPTION = VALUE, OPTION: VALUE, [SECTION]
# OPTION = VALUE (our messages); after an optional diff or indentation
# prefix. Possessive quantifiers (*+) wherever what follows cannot start
# with what they take: the same matches, without the backtracking that made
# a line of spaces cost the cube of its length.
_ASSIGNMENT = re.compile(
    r'(?P<head>^[ +\-]?\s*+(?:--set[ =]\s*+)?(?:\[[^\]]*+\]\s*+)?["\']?'
    r'(?:[A-Za-z][\w-]*+\.)?(?P<name>[A-Za-z_][\w-]*+)["\']?\s*+[=:]\s*)'
    r'(?P<value>.*)$')


class OperatorError(Exception):
    """A problem the operator can fix, said in one line."""

    def __str__(self):
        return one_line(super().__str__())


def one_line(text):
    return ' '.join(str(text).split())


# What an error line shows of one echoed value, and of the whole line: a
# value is cut to ECHO_LIMIT characters and its length, a line to
# LINE_LIMIT (its start and its end: the cause is often last).
ECHO_LIMIT = 200
LINE_LIMIT = 1000
# a run of non-blanks longer than ECHO_LIMIT, from its first character
_LONG_RUN = re.compile(r'(?<!\S)\S{%d,}+' % (ECHO_LIMIT + 1))


def cut(text, limit=ECHO_LIMIT):
    """``text``, or its first ``limit`` characters, '...' and its length."""
    text = str(text)
    if len(text) <= limit:
        return text
    return '%s... (%d characters)' % (text[:limit], len(text))


def echo(value):
    """How an error shows a value the operator gave: its repr, cut."""
    return cut(repr(value))


def error_line(message):
    """What a CLI prints for an error: ``message`` on one line, secrets
    masked (before anything is cut, so no part of one is left to show),
    each run of more than ECHO_LIMIT non-blank characters cut, and the
    line cut to LINE_LIMIT characters. The one place echoes are cut.
    """
    line = mask_secrets(one_line(message))
    line = _LONG_RUN.sub(lambda run: cut(run.group()), line)
    if len(line) > LINE_LIMIT:
        keep = (LINE_LIMIT - 40) // 2
        line = '%s ... (%d characters cut) ... %s' % (
            line[:keep], len(line) - 2 * keep, line[-keep:])
    return line


@functools.lru_cache(maxsize=None)
def secret_option_names():
    """Every option name registered ``secret=True`` (and its deprecated
    names) in :data:`OPTION_NAMESPACES` and keystoneauth's plugins.
    """
    # here: only this path needs it; every CLI loads errors at start
    from importlib import metadata

    from keystoneauth1 import loading

    names = set()

    def add(opt):
        if getattr(opt, 'secret', False):
            names.add(opt.dest)
            for old in getattr(opt, 'deprecated_opts', ()):
                if old.name:
                    names.add(old.name.replace('-', '_'))

    # Listing Nova's options loads its os-vif plugins through stevedore,
    # which logs an ERROR for a plugin whose dependency is absent (ovs
    # without pyroute2): nothing the operator asked about.
    stevedore_log = logging.getLogger('stevedore')
    level = stevedore_log.level
    stevedore_log.setLevel(logging.CRITICAL)
    try:
        for entry in metadata.entry_points(group='oslo.config.opts'):
            if entry.name not in OPTION_NAMESPACES:
                continue
            try:
                groups = entry.load()()
            except Exception:  # noqa: a library that cannot load: no opts
                continue
            for _group, opts in groups:
                for opt in opts:
                    add(opt)
    finally:
        stevedore_log.setLevel(level)
    for loader in loading.get_available_plugin_loaders().values():
        for opt in loader.get_options():
            add(opt)
    return frozenset(names)


def is_secret_option(name):
    name = name.replace('-', '_').lower()
    return name in secret_option_names() or any(
        word in name for word in _SECRET_WORDS)


def _url_passwords(url):
    """The passwords in ``url`` as oslo.db and oslo.messaging read it."""
    # here: only this path needs it; every CLI loads errors at start
    import sqlalchemy.engine

    found = set()
    try:
        parsed = sqlalchemy.engine.make_url(url)
        if parsed.password:
            found.add(str(parsed.password))
        if parsed.host and '@' in parsed.host:
            # an unquoted '@' in the password: SQLAlchemy's host starts
            # with the rest of the password, and a driver's error names it
            _KNOWN_SECRETS[parsed.host] = MASK + '@' + parsed.host.rpartition(
                '@')[2]
    except Exception:  # noqa: not a database URL
        pass
    try:
        # here: only this path needs it; every CLI loads errors at start
        from oslo_config import cfg
        import oslo_messaging

        for host in oslo_messaging.TransportURL.parse(
                cfg.ConfigOpts(), url).hosts:
            if host.password:
                found.add(host.password)
    except Exception:  # noqa: not a transport URL
        pass
    return found


# A URL's scheme is [A-Za-z][A-Za-z0-9+.-]*:// (RFC 3986). Searching for
# that pattern rescans a long run of scheme characters from each of its
# characters (quadratic); this one is tried only where a run starts (the
# look-behind), so each character is looked at a bounded number of times.
_SCHEME_CHARACTERS = 'A-Za-z0-9+.-'
_SCHEME_RUN = re.compile(
    r'(?<![%s])[%s]*+://' % (_SCHEME_CHARACTERS, _SCHEME_CHARACTERS))
_LETTER = re.compile('[A-Za-z]')


def _scheme_ends(text):
    """(start, end) of each URL scheme in ``text`` with its '://', left to
    right without overlap, in time linear in ``len(text)``: a scheme starts
    at the first letter of the run of scheme characters before its '://'.
    """
    for run in _SCHEME_RUN.finditer(text):
        letter = _LETTER.search(text, run.start(), run.end() - 3)
        if letter:
            yield letter.start(), run.end()


def _userinfo_spans(text):
    """(start, end) of each URL password in ``text``: from the ':' after
    the user name to the last '@' on the line before the next URL (a
    password may hold '@', ':' or '/', which parsers read differently: all
    of it is masked). One pass: each URL's search stops where the next
    begins, and the end of a line is looked for once per line.
    """
    schemes = list(_scheme_ends(text))
    spans = []
    line_end = -1
    for index, (_, start) in enumerate(schemes):
        if line_end < start:
            line_end = text.find('\n', start)
            line_end = len(text) if line_end < 0 else line_end
        stop = line_end
        if index + 1 < len(schemes):
            stop = min(stop, schemes[index + 1][0])
        at = text.rfind('@', start, stop)
        if at < 0:
            continue
        colon = text.find(':', start, at)
        if colon >= 0:
            spans.append((colon + 1, at))
    return spans


def _learn(value):
    if value:
        for form in (value, urlparse.quote(value, safe=''),
                     urlparse.unquote(value)):
            _KNOWN_SECRETS[form] = MASK


def learn_secret_value(name, value):
    """Remember what is secret in the value ``value`` of option ``name``."""
    if not isinstance(value, str) or not value:
        return
    if '://' in value:
        for password in _url_passwords(value):
            _learn(password)
        for start, end in _userinfo_spans(value):
            _learn(value[start:end])
    elif is_secret_option(name):
        _learn(value)
        for line in value.splitlines():
            _learn(line.strip())


def learn_secret_assignment(section, name, value):
    learn_secret_value(name, value)


def learn_secrets_from_view(view):
    """Learn from a parsed file, {group: {key: [values]}}."""
    for options in view.values():
        for name, values in options.items():
            for value in values:
                learn_secret_value(name, value)


def learn_secrets_from_files(paths):
    """Learn from config files (those oslo.config can parse)."""
    # here: only this path needs it; every CLI loads errors at start
    from oslo_config import cfg

    for path in paths:
        sections = {}
        try:
            cfg.ConfigParser(path, sections).parse()
        except Exception:  # noqa: unreadable files are reported elsewhere
            continue
        for options in sections.values():
            for name, values in options.items():
                for value in values:
                    learn_secret_value(name, value)


def _mask_value(value):
    """An option's secret value: a URL keeps its scheme, user, host and
    the names of its query parameters; anything else is masked whole.
    """
    if '://' not in value:
        return MASK
    masked = _mask_urls(value)
    base, question, query = masked.partition('?')
    if question:
        query = '&'.join(
            (pair.partition('=')[0] + '=' + MASK)
            if is_secret_option(pair.partition('=')[0]) else pair
            for pair in query.split('&'))
    return base + question + query


def _mask_urls(text):
    pieces = []
    shown = 0
    for start, end in _userinfo_spans(text):
        pieces += [text[shown:start], MASK]
        shown = end
    pieces.append(text[shown:])
    return ''.join(pieces)


def mask_secrets(text):
    """``text`` with every secret nova-ext knows of masked (see the
    module docstring).
    """
    # Option names first: a known secret may be part of a name
    # ("secret" in memcache_secret_key).
    lines = []
    for line in str(text).split('\n'):
        match = _ASSIGNMENT.match(line)
        if match and match.group('value') and is_secret_option(
                match.group('name')):
            line = match.group('head') + _mask_value(match.group('value'))
        lines.append(_mask_urls(line))
    text = '\n'.join(lines)
    for secret in sorted(_KNOWN_SECRETS, key=len, reverse=True):
        if len(secret) >= MIN_SEARCHED_SECRET and secret in text:
            text = text.replace(secret, _KNOWN_SECRETS[secret])
    return text


def parse_error_line(error, path=None):
    """One line for an oslo.config ParseError: file, line number and what
    is wrong, never the line itself (it may be a password).
    """
    filename = getattr(error, 'filename', None) or path or 'config file'
    return '%s:%d: %s' % (filename, error.lineno, error.msg)


def check_config_files(paths):
    """Refuse, in one line, a config file oslo.config would choke on:
    missing, unreadable, binary, not UTF-8 or not parsable; and learn the
    secrets of the others.
    """
    # here: only this path needs it; every CLI loads errors at start
    from oslo_config import iniparser

    from oslo_config import cfg

    for path in paths:
        if not os.path.isfile(path):
            raise OperatorError('%s: no such file' % path)
        try:
            with open(path, 'rb') as handle:
                data = handle.read()
        except OSError as error:
            raise OperatorError('%s: cannot read: %s' % (
                path, error.strerror))
        if b'\0' in data:
            raise OperatorError('%s: binary file (NUL bytes), not a '
                                'config file' % path)
        try:
            data.decode('utf-8')
        except UnicodeDecodeError as error:
            raise OperatorError('%s: not UTF-8 text (byte %d)'
                                % (path, error.start))
        try:
            cfg.ConfigParser(path, {}).parse()
        except iniparser.ParseError as error:
            raise OperatorError(parse_error_line(error, path))
    learn_secrets_from_files(paths)


def closed_pipe():
    """The reader went away (``| head -1``): say nothing more, as a Unix
    tool killed by SIGPIPE would; the exit code a shell shows for that.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):
            pass  # not a real file (a test's StringIO)
    os.close(devnull)
    return 141


def write_details(error):
    """Write ``error``'s traceback (masked) to a private file; its path."""
    fd, path = tempfile.mkstemp(prefix='nova-ext-manage-', suffix='.log')
    with os.fdopen(fd, 'w') as details:
        details.write(mask_secrets(''.join(traceback.format_exception(
            type(error), error, error.__traceback__))))
    return path
