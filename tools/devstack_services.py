#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write tests/devstack/devstack-services.txt from a DevStack checkout.

    tools/devstack_services.py /opt/stack/devstack > \\
        tests/devstack/devstack-services.txt

DevStack's ``is_service_enabled`` matches a service name exactly, so a name
the plugin spells its own way (``n-sched`` for DevStack's ``n-sch``) is
silently never enabled. The list holds the names DevStack itself gives its
services, read from its code rather than typed by us:

- stackrc's default ``ENABLED_SERVICES`` (what a local.conf that sets none
  runs), marked ``default`` and kept in stackrc's order;
- every name ``run_process`` starts and every name ``enable_service``
  switches on in stack.sh and lib/ (``${i}`` in a name becomes ``*``).

Names DevStack only *asks* about (``is_service_enabled``) are not taken:
they include DevStack's own misspellings (lib/nova asks for ``n-sched``).
"""

import collections
import os
import re
import subprocess
import sys

# The block of stackrc that sets the defaults:
#   if ! isset ENABLED_SERVICES ; then ... ENABLED_SERVICES+=,a,b ... fi
DEFAULTS_BLOCK = re.compile(
    r'^if ! isset ENABLED_SERVICES ?; then\n(.*?)^fi$',
    re.MULTILINE | re.DOTALL)
DEFAULTS_LINE = re.compile(r'^\s*ENABLED_SERVICES\+?=,?([\w,.-]+)\s*$',
                           re.MULTILINE)
# run_process NAME ... / enable_service NAME...; NAME possibly quoted
STARTED = re.compile(
    r'^[ \t]*(run_process|enable_service)[ \t]+'
    r'((?:["\']?[\w.${}-]+["\']?[ \t]*)+)',
    re.MULTILINE)


def _pattern(word):
    word = word.strip('"\'')
    # a name built from a variable: n-cond-cell${i} -> n-cond-cell*
    return re.sub(r'\$\{?\w+\}?', '*', word)


def extract(devstack_dir):
    """(default names in stackrc's order, {name: set of where})."""
    where = collections.defaultdict(set)
    with open(os.path.join(devstack_dir, 'stackrc')) as f:
        block = DEFAULTS_BLOCK.search(f.read())
    if block is None:
        sys.exit('%s/stackrc: no "if ! isset ENABLED_SERVICES" block; '
                 'DevStack changed how it sets its defaults'
                 % devstack_dir)
    defaults = []
    for names in DEFAULTS_LINE.findall(block.group(1)):
        for name in names.split(','):
            if name and name not in defaults:
                defaults.append(name)
                where[name].add('stackrc')
    sources = ['stack.sh'] + sorted(
        os.path.join(root, name)[len(devstack_dir) + 1:]
        for root, _dirs, files in os.walk(os.path.join(devstack_dir, 'lib'))
        for name in files)
    for source in sources:
        with open(os.path.join(devstack_dir, source)) as f:
            text = f.read()
        for function, words in STARTED.findall(text):
            # run_process takes one name (then the command);
            # enable_service takes several
            names = words.split()[:1] if function == 'run_process' \
                else words.split()
            for word in names:
                name = _pattern(word)
                # a name that starts with a variable (${srv}-cell${i})
                # says nothing about the names it matches
                if not name.startswith('*'):
                    where[name].add('%s: %s' % (source, function))
    return defaults, where


def commit_of(devstack_dir):
    result = subprocess.run(
        ['git', '-C', devstack_dir, 'log', '-1', '--format=%H %cs'],
        capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit('%s is not a git checkout of DevStack: the list must say '
                 'which commit it came from' % devstack_dir)
    return result.stdout.strip()


def render(devstack_dir):
    defaults, where = extract(devstack_dir)
    commit, date = commit_of(devstack_dir).split()
    lines = [
        "# DevStack's service names, as is_service_enabled matches them "
        "(exactly).",
        '# Written by tools/devstack_services.py from openstack/devstack',
        '# commit %s (%s); run it on a newer checkout' % (commit, date),
        '# to refresh, never edit by hand. "default": in stackrc\'s '
        'ENABLED_SERVICES',
        '# when local.conf sets none, in its order.',
    ]
    width = max(len(name) for name in where) + 1
    for name in defaults:
        lines.append('%s default  # %s' % (
            name.ljust(width), '; '.join(sorted(where[name]))))
    for name in sorted(set(where) - set(defaults)):
        lines.append('%s          # %s' % (
            name.ljust(width), '; '.join(sorted(where[name]))))
    return '\n'.join(lines) + '\n'


def main(argv):
    if len(argv) != 2:
        sys.exit('usage: %s DEVSTACK_CHECKOUT' % argv[0])
    sys.stdout.write(render(os.path.abspath(argv[1])))


if __name__ == '__main__':
    main(sys.argv)
