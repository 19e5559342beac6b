# SPDX-License-Identifier: Apache-2.0
"""The ``--json`` output of tools/benchmark_*.py, tools/scheduler_curve.py
and tools/simulator_figures.py: each script's own figures, plus a
``measured`` block saying when, on what and with which command they were
measured. tools/render_results.py renders the committed ones
(doc/source/results/*.json) into doc/source/benchmark.rst's tables.
"""

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _version(package):
    from importlib import metadata
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _commit():
    try:
        return subprocess.run(
            ['git', 'rev-parse', '--short', 'HEAD'], cwd=TOP, check=True,
            capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def measured(argv=None):
    """Where and when this run measured: the ``measured`` block."""
    argv = sys.argv if argv is None else argv
    with open('/proc/loadavg') as f:
        load_average = [float(x) for x in f.read().split()[:3]]
    return {
        'date': datetime.datetime.now(datetime.timezone.utc).strftime(
            '%Y-%m-%dT%H:%MZ'),
        'commit': _commit(),
        # quoted as a shell would need it: '--shapes "spread fits"'
        'command': shlex.join(['python', os.path.relpath(
            os.path.abspath(argv[0]), TOP)] + list(argv[1:])),
        'machine': {'cpus': os.cpu_count(),
                    'python': platform.python_version(),
                    'platform': platform.platform(terse=True),
                    'nova': _version('nova'),
                    'load_average_at_end': load_average},
    }


def write(path, document):
    """``document`` plus its ``measured`` block, to standard output
    (``-``) or to ``path``, written whole or not at all.
    """
    document = dict(document, measured=measured())
    if path == '-':
        json.dump(document, sys.stdout, indent=2, sort_keys=True)
        print('')
        return
    directory = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile('w', dir=directory, delete=False,
                                     suffix='.tmp') as out:
        json.dump(document, out, indent=2, sort_keys=True)
        out.write('\n')
    os.replace(out.name, path)
