# SPDX-License-Identifier: Apache-2.0
"""The one way nova-ext's commands read nova.conf: which files and
directories the command line names, and one check of all of them before
oslo.config (or Nova's ``config.parse_args``) parses them.

Every refusal is one :class:`~nova_ext.errors.OperatorError` line naming
the file, never echoing a line of it (it may hold a password), and every
secret in the files is learnt before anything is printed:

- ``--config-fil`` and other abbreviations of ``--config-file`` and
  ``--config-dir`` are refused: argparse (and so oslo.config) accepts
  them, and a file read under a name this check did not see would skip
  it;
- every ``*.conf`` file of a ``--config-dir`` is checked as a
  ``--config-file`` is (missing, binary, not UTF-8, not parsable), in the
  order oslo.config reads them;
- a ``sqlite://`` database URL naming a file that is not an SQLite
  database (``file is not a database`` from SQLAlchemy, wrapped in
  oslo.db's traceback, once per query) is refused naming the option.
"""

import glob
import os

from oslo_config import cfg

from nova_ext import errors

CONFIG_OPTIONS = ('--config-file', '--config-dir')
# Where Nova's services and nova-ext read a database URL.
DATABASE_GROUPS = ('database', 'api_database', 'nova_ext_database')
SQLITE_HEADER = b'SQLite format 3\0'


def named_sources(argv):
    """([--config-file paths], [--config-dir paths]) of ``argv`` in order;
    an abbreviation of either option is refused. Only the options before
    the command (the first argument not an option) are the program's: a
    command's own options (``simulate --conf``) are its business.
    """
    files, dirs = [], []
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == '--' or not arg.startswith('-'):
            break
        name, equals, value = arg.partition('=')
        if name in CONFIG_OPTIONS:
            if not equals:
                index += 1
                if index >= len(argv):
                    raise errors.OperatorError('%s: expected a path' % name)
                value = argv[index]
            (files if name == '--config-file' else dirs).append(value)
        elif name.startswith('--co') and any(
                option.startswith(name) for option in CONFIG_OPTIONS):
            raise errors.OperatorError(
                '%s: write the option in full (%s); an abbreviation is not '
                'read' % (name, ' or '.join(
                    option for option in CONFIG_OPTIONS
                    if option.startswith(name))))
        index += 1
    return files, dirs


def dir_files(directory):
    """The files oslo.config reads from a ``--config-dir``, in its order."""
    if not os.path.isdir(directory):
        raise errors.OperatorError('%s: no such directory (--config-dir)'
                                   % directory)
    return sorted(glob.glob(os.path.join(directory, '*.conf')))


def check(files, dirs=(), default_project='nova'):
    """Check every file ``files`` and ``dirs`` name (oslo.config's default
    nova.conf and nova.conf.d when neither is given); return the files in
    the order oslo.config reads them.
    """
    if not files and not dirs:
        files = cfg.find_config_files(project=default_project)
        dirs = cfg.find_config_dirs(project=default_project)
    paths = list(files)
    for directory in dirs:
        paths += dir_files(directory)
    errors.check_config_files(paths)
    _check_sqlite_urls(paths)
    return paths


def check_argv(argv, default_project='nova'):
    """:func:`check` of what ``argv`` names."""
    files, dirs = named_sources(argv)
    return check(files, dirs, default_project)


def _last_values(paths, groups, key):
    values = {}
    for path in paths:
        sections = {}
        cfg.ConfigParser(path, sections).parse()
        for section, options in sections.items():
            group = section if section == 'DEFAULT' else section.lower()
            if group in groups and options.get(key):
                values[group] = (path, options[key][-1])
    return values


def _check_sqlite_urls(paths):
    # here: every CLI loads this module at start, most without a database
    import sqlalchemy.engine

    for group, (path, url) in sorted(_last_values(
            paths, DATABASE_GROUPS, 'connection').items()):
        try:
            parsed = sqlalchemy.engine.make_url(url)
        except Exception:  # noqa: oslo.db's own error names the URL
            continue
        database = parsed.database
        if parsed.get_backend_name() != 'sqlite' or not database or \
                database == ':memory:':
            continue
        try:
            with open(database, 'rb') as handle:
                header = handle.read(len(SQLITE_HEADER))
        except FileNotFoundError:
            continue  # SQLite creates it
        except OSError as error:
            raise errors.OperatorError(
                '%s: [%s] connection names %s: %s' % (
                    path, group, database, error.strerror))
        if header and header != SQLITE_HEADER:
            raise errors.OperatorError(
                '%s: [%s] connection names %s, which is not an SQLite '
                'database' % (path, group, database))
