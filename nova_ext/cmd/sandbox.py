# SPDX-License-Identifier: Apache-2.0
"""nova-ext-sandbox: an embedded Nova with nova-ext enabled, and a scenario.

Starts Nova's own services in this process (API, conductor, scheduler,
fake-driver hypervisors in racks, placement; sqlite and in-memory
messaging), writes the nova.conf that enables nova-ext and loads it, runs a
scripted scenario through the compute REST API and prints what happened.
Exits 0 when every step had the outcome the scenario expects.
"""

import argparse
import contextlib
import io
import logging
import os
import socket
import sys
import warnings

from nova_ext import errors
from nova_ext import files
from nova_ext import numbers


class SandboxError(Exception):
    """Printed as one line: ``sandbox: ...``, exit 1."""


# In a state directory the sandbox made: it may write nova.conf, nova.log
# and error.log over the last run's. Any other directory must be empty.
STATE_MARKER = '.nova-ext-sandbox'


def claim_state_dir(path):
    """Make ``path`` the sandbox's state directory, or refuse it: a
    directory it did not make (no :data:`STATE_MARKER`) is used only if
    empty, so an operator's nova.conf or nova.log is never overwritten.
    """
    try:
        os.makedirs(path, exist_ok=True)
        if os.path.isfile(os.path.join(path, STATE_MARKER)):
            return
        if os.listdir(path):
            raise SandboxError(
                '--state-dir %s: not empty and not made by nova-ext-sandbox '
                '(no %s in it); it would overwrite nova.conf and nova.log '
                'there: name a new or empty directory' % (path,
                                                          STATE_MARKER))
        with open(os.path.join(path, STATE_MARKER), 'w') as marker:
            marker.write('made by nova-ext-sandbox, which writes nova.conf, '
                         'nova.log and error.log here on every run\n')
    except FileExistsError:
        raise SandboxError('--state-dir %s: a file, not a directory' % path)
    except OSError as error:
        raise SandboxError('--state-dir %s: %s' % (path, error.strerror))


def check_port_free(port):
    """``--keep-serving PORT``: refused before the scenario runs if
    nothing could listen there (taken, privileged, out of range).
    """
    if not 1 <= port <= 65535:
        raise SandboxError('--keep-serving %d: a TCP port, 1 to 65535'
                           % port)
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # as wsgiref's server binds it (SO_REUSEADDR): a port in TIME_WAIT
        # is free for it
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(('127.0.0.1', port))
    except OSError as error:
        raise SandboxError('--keep-serving %d: cannot listen on '
                           '127.0.0.1:%d: %s' % (port, port,
                                                 error.strerror))
    finally:
        probe.close()


def _spread_hosts(racks, total, most):
    """Resize racks to ``total`` hosts in proportion to their sizes."""
    if not len(racks) <= total <= most:
        raise SandboxError('--hosts %d: from the number of racks (%d) to %d'
                           % (total, len(racks), most))
    scale = total / sum(racks.values())
    sizes = {name: max(1, int(size * scale)) for name, size in racks.items()}
    biggest = max(racks, key=racks.get)
    sizes[biggest] += total - sum(sizes.values())
    return sizes


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='nova-ext-sandbox', description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        '--scenario', metavar='FILE',
        help='scenario YAML (default: the built-in one, '
             'nova_ext/sandbox/scenarios/default.yaml)')
    parser.add_argument(
        '--hosts', type=numbers.argument(
            numbers.parse_whole_number, 0, numbers.DEFAULT_MAXIMUM),
        metavar='N',
        help="number of fake hypervisors, spread over the scenario's racks "
             '(default: the sizes the scenario gives, 9 in the built-in one)')
    parser.add_argument(
        '--state-dir', default='sandbox-state', metavar='DIR',
        help='where nova.conf and nova.log are written (default: '
             '%(default)s)')
    parser.add_argument(
        # a number here; whether it is a port, and free, check_port_free
        # says in one line before the scenario runs
        '--keep-serving', type=numbers.argument(
            numbers.parse_whole_number, 0, numbers.DEFAULT_MAXIMUM),
        metavar='PORT',
        help='after the scenario, keep serving the compute API on '
             '127.0.0.1:PORT until Ctrl-C')
    return parser.parse_args(argv)


def format_table(rows):
    header = ('server', 'flavor', 'group', 'host', 'rack', 'outcome')
    table = [r for r in rows if r[0] != '--']
    widths = [max(len(str(r[i])) for r in table + [header])
              for i in range(5)]
    lines = []

    def line(row):
        cells = [str(c).ljust(w) for c, w in zip(row[:5], widths)]
        return '  '.join(cells + [str(row[5])])

    lines.append(line(header))
    lines.append(line(['-' * w for w in widths] + ['-------']))
    for row in rows:
        if row[0] == '--':
            lines.append('# ' + row[1])
        else:
            lines.append(line(row))
    return '\n'.join(lines)


def _log_only_to(handler):
    root = logging.getLogger()
    for other in list(root.handlers):
        root.removeHandler(other)
    root.addHandler(handler)
    root.setLevel(logging.INFO)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        code = _main(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except SandboxError as error:
        print('sandbox: %s' % errors.error_line(error), file=sys.stderr)
        return 1
    except BrokenPipeError:
        return errors.closed_pipe()
    except OSError as error:
        # disk full, ulimit -f, a read-only state directory
        reason = files.describe_os_error(error)
        if reason is None:
            raise
        print('sandbox: %s' % reason, file=sys.stderr)
        return 1


def _main(args):
    warnings.simplefilter('ignore')
    if args.keep_serving is not None:
        check_port_free(args.keep_serving)
    claim_state_dir(args.state_dir)
    # Nova's log lines (its import-time notices, the thread pools shutting
    # down after the scenario) belong in nova.log, not before the table.
    log_file = logging.FileHandler(
        os.path.join(args.state_dir, 'nova.log'), mode='w')
    log_file.setFormatter(logging.Formatter(
        '%(asctime)s %(levelname)s %(name)s %(message)s'))
    _log_only_to(log_file)
    warnings.filterwarnings('ignore')
    # Nova's test fixtures turn warnings back on inside the embedded cloud
    # (Nova 33 then prints its objects' deprecation notices): they go to
    # nova.log through logging, like every other line of Nova's.
    logging.captureWarnings(True)
    # Imported late: --help must work without starting anything.
    # Importing Nova sets up a stdout log handler and logs through it
    # (periodic-task notices): those lines go to nova.log too.
    imported = io.StringIO()
    try:
        with contextlib.redirect_stdout(imported):
            # here: the scenario imports Nova (see above)
            from nova_ext.sandbox import scenario as sandbox_scenario
    except ImportError as error:
        # Nova's and placement's test fixtures are an extra: the product
        # installed into Nova's environment does not carry them.
        print('nova-ext-sandbox needs the sandbox extra: pip install '
              '"nova-ext[sandbox]" (%s)' % error, file=sys.stderr)
        return 2
    _log_only_to(log_file)  # importing Nova adds a stdout handler
    log_file.stream.write(imported.getvalue())

    try:
        scenario = sandbox_scenario.load(args.scenario)
    except sandbox_scenario.ScenarioError as error:
        print('sandbox: %s' % errors.error_line(error), file=sys.stderr)
        return 1
    if args.hosts is not None:  # --hosts 0 is a mistake, not "default"
        scenario['racks'] = _spread_hosts(scenario['racks'], args.hosts,
                                          sandbox_scenario.MAX_HOSTS)
    state_dir = os.path.abspath(args.state_dir)

    report = sandbox_scenario.Report()
    sandbox = sandbox_scenario.Sandbox(scenario, report, sys.stdout,
                                       state_dir, args.keep_serving)
    hosts = len(sandbox.HOSTS)
    print('nova-ext sandbox: %d hypervisors in racks %s'
          % (hosts, ', '.join(
              '%s (%d)' % kv for kv in scenario['racks'].items())))
    nova_conf = sandbox.NOVA_CONF
    print('nova.conf (%s/nova.conf):\n' % state_dir)
    print('    ' + nova_conf.replace('\n', '\n    '))

    # here: testtools is the [sandbox] extra, checked with the scenario
    import testtools
    result = testtools.TestResult()
    sandbox.run(result)
    print(format_table(report.rows))
    print('\nNova log: %s/nova.log' % state_dir)
    if result.errors or result.failures:
        # The traceback is for whoever debugs the sandbox, not the reader.
        details = os.path.join(state_dir, 'error.log')
        with open(details, 'w') as f:
            for _test, error in result.errors + result.failures:
                f.write(error)
        print('sandbox: Nova failed to run the scenario; traceback in %s'
              % details, file=sys.stderr)
        return 1
    if report.failures:
        print('sandbox: outcomes differ from the scenario:\n  '
              + '\n  '.join(report.failures), file=sys.stderr)
        return 1
    print('sandbox: every step had the expected outcome')
    return 0


if __name__ == '__main__':
    sys.exit(main())
