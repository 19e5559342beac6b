# SPDX-License-Identifier: Apache-2.0
"""nova-ext-manage: nova-ext's operator commands.

    nova-ext-manage [--config-file nova.conf] host maintenance on HOST
    nova-ext-manage host maintenance off HOST
    nova-ext-manage host maintenance list
    nova-ext-manage host drain (HOST... | --domain LEVEL=NAME) [--dry-run]
                              [--live | --cold]
                              [--max-unavailable-per-group N]
                              [--parallel N] [--timeout S] [--json]
                              [--os-cloud CLOUD]
    nova-ext-manage spread audit [--group G] [--project P] [--plan]
                                 [--format table|json|prometheus]
                                 [--json] [--output FILE]
    nova-ext-manage spread rebalance [--group G] [--project P] [--execute]
                                     [--live | --cold] [...as drain]
    nova-ext-manage db sync
    nova-ext-manage quota set --project P (--flavor F | --class C)
                              [--instances N] [--cores N] [--ram MB]
    nova-ext-manage quota show [--project P] [--flavor F | --class C]
    nova-ext-manage quota delete --project P (--flavor F | --class C)
    nova-ext-manage quota usage --project P (--flavor F | --class C)
    nova-ext-manage quota check
    nova-ext-manage driver install | remove | check
    nova-ext-manage configure nova|tempest --config-file FILE [...]
                              [--all | --filters --weighers
                               --request-filters --quota --libvirt-driver]
                              [--failure-domain LEVEL:DOMAIN,...]
                              [--set SECTION.OPTION=VALUE ...]
                              [--undo] [--dry-run]
    nova-ext-manage simulate [--cluster FILE] [--workload FILE]
                             [--conf FILE ...] [--seed N] [--arrivals N]
                             [--plot DIR] [--json FILE] [--explain N]
    nova-ext-manage explain (--flavor F [--image I] [--hint K=V ...]
                             [--group G] [--project P] [--az Z]
                             | --server UUID) [--num N]
                            [--set SECTION.OPTION=VALUE ...] [--json]

``on``/``off`` add or remove ``[nova_ext] maintenance_trait`` on the compute
node resource provider named HOST (its hypervisor hostname), keeping every
other trait: unlike ``openstack resource provider trait set``, which replaces
the whole list. Placement credentials come from nova.conf's ``[placement]``
section, as for Nova's own services.

``host drain`` puts hosts (or every host of a failure domain) in
maintenance, plans their servers' moves (which may go, which a spread
constraint blocks and why), then live- or cold-migrates them through
Nova's API (credentials: clouds.yaml / ``OS_*``), at most N members of one
server group moving at once; SIGINT or SIGTERM stops it cleanly, and run
again it goes on. ``spread audit`` judges every server group's spread
constraints where its members run now (exit code 2 when a hard one is
violated; Prometheus text for node_exporter); ``spread rebalance`` plans,
and with ``--execute`` makes, the moves that restore them
(doc/source/maintenance.rst).

``db sync`` creates or upgrades nova-ext's tables; ``quota`` manages the
per-flavor quota limits (``--project '*'``: the default for every project;
-1: unlimited) and ``quota check`` says whether every nova-api and
nova-conductor activated the same quota driver (exit code 1 if not).

``driver install`` puts the module that lets an unmodified nova-compute load
nova-ext's libvirt driver (``compute_driver = nova_ext_libvirt.LibvirtDriver``)
into Nova's ``nova/virt`` package; re-run it after upgrading Nova. ``check``
says whether it is in place, what nova.conf's ``compute_driver`` is and which
guest mutators are installed and enabled (exit code 1 when the driver cannot
load); ``remove`` takes the module out again.

``configure`` switches features on in an existing nova.conf (the scheduler
plugins, the request filters, the quota driver with ``?plugin=nova_ext`` on
the database URLs, the libvirt driver) or tempest.conf (our plugin's
feature flags), keeping every other line; ``--undo`` switches them off. The
DevStack plugin and the loopback cloud both use it (doc/source/devstack.rst).

``simulate`` replays a workload on a modeled cluster through Nova's real
scheduler code once per nova.conf fragment and compares them side by side
(doc/source/simulator.rst); it needs no cloud. Without arguments it runs the
built-in examples.

``explain`` dry-runs one request through the live cloud's scheduler code
and configuration: request filters, placement's candidates, which filter
removed each host, each weigher's share, the host Nova would pick
(doc/source/explain.rst). It writes nothing.
"""

import argparse
import io
import logging
import os
import re
import sys
from urllib import parse as urlparse
import warnings

from oslo_config import cfg
import prettytable

from nova_ext import config_files as nova_config_files
from nova_ext import errors
from nova_ext import files
from nova_ext import numbers

PLACEMENT_VERSION = '1.18'  # ?required=<trait> on GET /resource_providers
CONFLICT_RETRIES = 5
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')


# Every number an option takes, read by nova_ext.numbers (plain ASCII
# decimal: int() would take '٣', '1_000' and ' 12 '); each command checks
# its own range after.
WHOLE_NUMBER = numbers.argument(numbers.parse_whole_number, 0,
                                numbers.DEFAULT_MAXIMUM)
SECONDS = numbers.argument(numbers.parse_decimal, 0, numbers.DEFAULT_MAXIMUM)
# quota limits: -1 is unlimited; the hard_limit column is a signed 32-bit
# integer (nova_ext.quota.commands.MAX_LIMIT, not imported: it needs Nova)
QUOTA_LIMIT = numbers.argument(numbers.parse_integer, -1, 2 ** 31 - 1)


class CommandError(errors.OperatorError):
    pass


def check_host_name(host):
    """A host name as the operator typed it: one Nova could have (no
    control character, no surrounding space), so that "no such provider"
    is said only of a name that could exist.
    """
    if not host or _CONTROL.search(host) or len(host) > 255:
        raise CommandError('host %r: not a compute node name' % host[:100])
    if host != host.strip():
        raise CommandError('host %r: leading or trailing whitespace; a '
                           'compute node name has none' % host)


class Maintenance:
    """Mark, unmark and list hosts in maintenance through placement's API."""

    def __init__(self, placement, trait):
        self.placement = placement
        self.trait = trait

    def _call(self, method, url, expect=(200,), **kwargs):
        resp = getattr(self.placement, method)(
            url, microversion=PLACEMENT_VERSION, raise_exc=False, **kwargs)
        if resp.status_code == 401:
            raise CommandError('placement: keystone refused the [placement] '
                               'credentials in nova.conf (HTTP 401)')
        if resp.status_code == 403:
            raise CommandError('placement: the [placement] user in nova.conf '
                               'may not %s %s (HTTP 403; it needs the admin '
                               'role, as nova-compute\'s does)'
                               % (method.upper(), url.split('?')[0]))
        if resp.status_code not in expect:
            raise CommandError('placement: %s %s: HTTP %s %s' % (
                method.upper(), url, resp.status_code,
                errors.one_line(resp.text)[:200]))
        return resp

    @staticmethod
    def _json(resp, key):
        try:
            return resp.json()[key]
        except (ValueError, KeyError, TypeError):
            raise CommandError('placement: %s answered without %r; is '
                               '[placement] pointing at placement?'
                               % (resp.url, key))

    def _provider(self, host):
        check_host_name(host)
        # Quoted: a name holding '&' or '#' would otherwise ask placement
        # something else. Compared exactly: the operator named one host.
        providers = self._json(self._call(
            'get', '/resource_providers?name=%s' % urlparse.quote(
                host, safe='')), 'resource_providers')
        matches = [p for p in providers if p.get('name') == host]
        if not matches:
            raise CommandError('no resource provider named %s in placement '
                               "(see 'openstack resource provider list')"
                               % host)
        if len(matches) > 1:
            raise CommandError('%d resource providers are named %s; not '
                               'guessing which one' % (len(matches), host))
        return matches[0]['uuid']

    def _change(self, host, add):
        uuid = self._provider(host)
        if add:
            self._call('put', '/traits/%s' % self.trait, expect=(201, 204))
        for _attempt in range(CONFLICT_RETRIES):
            url = '/resource_providers/%s/traits' % uuid
            current = self._call('get', url).json()
            traits = set(current['traits'])
            wanted = traits | {self.trait} if add else traits - {self.trait}
            if wanted == traits:
                return False
            resp = self._call('put', url, expect=(200, 409), json={
                'traits': sorted(wanted),
                'resource_provider_generation':
                    current['resource_provider_generation']})
            if resp.status_code == 200:
                return True
            # 409: nova-compute got in first; read the generation again.
        raise CommandError('placement kept reporting conflicts for %s' % host)

    def on(self, host):
        return self._change(host, add=True)

    def off(self, host):
        return self._change(host, add=False)

    def list(self):
        resp = self._call('get', '/resource_providers?required=%s'
                          % urlparse.quote(self.trait, safe=''),
                          expect=(200, 400))
        if resp.status_code == 400:  # the trait was never created
            return []
        return sorted(p['name'] for p in self._json(resp,
                                                    'resource_providers'))


# Commands import what they need inside run(): configure and simulate run
# where nova.conf is not parsed, and importing Nova's database and messaging
# layers costs every invocation a second or more.

class Command:
    """One ``nova-ext-manage CATEGORY ...`` command.

    ``add_arguments`` fills its argparse sub-parser; ``run(args, conf,
    out)`` carries it out with nova.conf parsed into ``conf`` (None when
    :meth:`needs_nova_conf` says no) and returns the exit code. Errors the
    operator can fix are raised as :class:`nova_ext.errors.OperatorError`
    (or left to :func:`_operator_message`); :func:`main` prints them, once.
    """
    name = None
    help = None
    # config.parse_args(configure_db=...): Nova's database layer reads
    # nova.conf's database URLs
    opens_databases = False

    def add_arguments(self, parser):
        pass

    def needs_nova_conf(self, args):
        return True

    def needs_databases(self, args):
        return self.opens_databases

    def run(self, args, conf, out):
        raise NotImplementedError


class HostCommands(Command):
    name = 'host'
    help = 'host commands'

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest='command', required=True)
        maintenance = commands.add_parser(
            'maintenance', help='mark, unmark or list hosts in maintenance')
        maintenance.add_argument('action', choices=['on', 'off', 'list'])
        maintenance.add_argument('host', nargs='?',
                                 help='compute node (resource provider) '
                                      'name')
        drain = commands.add_parser(
            'drain', help='put hosts in maintenance and move their '
                          'servers away, keeping spread constraints')
        drain.add_argument('hosts', nargs='*', metavar='HOST',
                           help='compute host (nova-compute service) name')
        drain.add_argument('--domain', action='append', default=[],
                           metavar='LEVEL=NAME',
                           help='every host of a failure domain, e.g. '
                                'rack=r3; repeat for several')
        drain.add_argument('--dry-run', action='store_true',
                           help='print the plan; mark and move nothing')
        add_move_arguments(drain)

    def needs_databases(self, args):
        return args.command == 'drain'

    def run(self, args, conf, out):
        # here: only this command needs it (the CLI starts without Nova)
        from nova import utils
        if args.command == 'maintenance':
            _check_maintenance_args(args)  # before placement is asked
        maintenance = Maintenance(utils.get_ksa_adapter('placement'),
                                  conf.nova_ext.maintenance_trait)
        if args.command == 'drain':
            # here: only this command needs it (the CLI starts without Nova)
            from nova_ext.maintenance import commands
            return _maintenance_command(
                commands.drain_command, conf, args, maintenance,
                _compute_api(args), out)
        return self.maintenance(args, utils.get_ksa_adapter('placement'),
                                conf.nova_ext.maintenance_trait, out)

    @staticmethod
    def maintenance(args, placement, trait, out):
        """``host maintenance`` against a placement keystoneauth Adapter."""
        _check_maintenance_args(args)
        maintenance = Maintenance(placement, trait)
        if args.action == 'list':
            for name in maintenance.list():
                print(name, file=out)
            return 0
        if not args.host:
            raise CommandError('host maintenance %s needs a HOST'
                               % args.action)
        changed = getattr(maintenance, args.action)(args.host)
        print('%s: maintenance %s%s' % (args.host, args.action,
                                        '' if changed else ' (already)'),
              file=out)
        return 0


def _check_maintenance_args(args):
    if args.action == 'list' and args.host is not None:
        raise CommandError('host maintenance list takes no HOST (got %r)'
                           % args.host[:100])
    if args.action != 'list' and args.host:
        check_host_name(args.host)


def add_move_arguments(parser):
    """The options of the commands that move servers."""
    method = parser.add_mutually_exclusive_group()
    method.add_argument('--live', dest='cold', action='store_false',
                        default=False,
                        help='live-migrate (the default): ACTIVE and '
                             'PAUSED servers; the others are reported, '
                             'not touched')
    method.add_argument('--cold', action='store_true',
                        help='cold-migrate (and confirm) every server '
                             'instead: ACTIVE ones are restarted on the '
                             'new host, SHUTOFF ones stay stopped')
    parser.add_argument('--max-unavailable-per-group', type=WHOLE_NUMBER,
                        default=1,
                        metavar='N',
                        help='at most N members of one server group '
                             'moving at once (default: %(default)s)')
    parser.add_argument('--parallel', type=WHOLE_NUMBER, default=2,
                        metavar='N',
                        help='at most N moves at once (default: '
                             '%(default)s)')
    parser.add_argument('--timeout', type=SECONDS, default=900,
                        metavar='S',
                        help='report a move still running after S seconds '
                             'and start no more moves of its group '
                             '(default: %(default)s)')
    parser.add_argument('--json', action='store_true',
                        help='the plan and the results as JSON (progress '
                             'on stderr)')
    parser.add_argument('--os-cloud', default=os.environ.get('OS_CLOUD'),
                        metavar='CLOUD',
                        help="the cloud of clouds.yaml whose Nova API moves "
                             "the servers (default: OS_CLOUD; without "
                             "either, the OS_* variables)")


def _compute_api(args):
    def connect():
        # here: only this command needs it (the CLI starts without Nova)
        from nova_ext.maintenance import compute_api
        return compute_api.connect(cloud=args.os_cloud)
    return connect


def _maintenance_command(function, conf, args, maintenance, connect, out):
    # here: only this command needs it (the CLI starts without Nova)
    from nova import objects

    from nova_ext.maintenance import commands

    objects.register_all()
    # cell mappings refer to [DEFAULT] transport_url
    _parse_transport_url(conf)
    try:
        return function(conf, args, maintenance, connect, out)
    except commands.CommandError as error:
        raise CommandError(str(error))


class SpreadCommands(Command):
    name = 'spread'
    help = ("server groups' spread constraints where their members run "
            "now: audit, repair")
    opens_databases = True

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest='command', required=True)
        audit = commands.add_parser(
            'audit', help='judge every server group with spread '
                          'constraints where its members run now (exit '
                          'code 2: a hard one is violated)')
        rebalance = commands.add_parser(
            'rebalance', help='plan, and with --execute make, the moves '
                              'that restore the spread constraints')
        for command in (audit, rebalance):
            command.add_argument('--group', help='server group name or '
                                                 'UUID')
            command.add_argument('--project', help='project ID')
        audit.add_argument('--format', choices=('table', 'json',
                                                'prometheus'),
                           default='table')
        audit.add_argument('--json', action='store_true',
                           help='same as --format json')
        audit.add_argument('--output', metavar='FILE',
                           help='--format prometheus: write FILE '
                                "atomically (node_exporter's textfile "
                                'collector directory)')
        audit.add_argument('--plan', action='store_true',
                           help='and the moves that would repair the '
                                'violations')
        audit.add_argument('--cold', action='store_true',
                           help='--plan: with cold migrations')
        rebalance.add_argument('--execute', action='store_true',
                               help='make the moves (default: print the '
                                    'plan)')
        add_move_arguments(rebalance)

    def run(self, args, conf, out):
        # here: only this command needs it (the CLI starts without Nova)
        from nova import utils

        from nova_ext.maintenance import commands

        maintenance = Maintenance(utils.get_ksa_adapter('placement'),
                                  conf.nova_ext.maintenance_trait)
        if args.command == 'audit':
            return _maintenance_command(
                lambda conf, args, maintenance, _connect, out:
                commands.audit_command(conf, args, maintenance, out),
                conf, args, maintenance, None, out)
        return _maintenance_command(commands.rebalance_command, conf, args,
                                    maintenance, _compute_api(args), out)


class DbCommands(Command):
    name = 'db'
    help = "nova-ext's tables"
    opens_databases = True

    def add_arguments(self, parser):
        parser.add_subparsers(dest='command', required=True).add_parser(
            'sync', help='create or upgrade the tables')

    def run(self, args, conf, out):
        # here: only this command needs it (the CLI starts without Nova)
        from nova_ext.quota import db
        _parse_transport_url(conf)
        print('nova-ext tables at revision %s' % db.sync(conf), file=out)
        return 0


class QuotaCommands(Command):
    name = 'quota'
    help = 'per-flavor quota limits'
    opens_databases = True

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest='command', required=True)
        for name, help_text in (('set', 'set limits'),
                                ('show', 'list limits'),
                                ('delete', 'delete limits'),
                                ('usage', 'usage against limits')):
            command = commands.add_parser(name, help=help_text)
            command.add_argument('--project', required=name != 'show',
                                 help="project ID, or '*' for every "
                                      "project")
            scope = command.add_mutually_exclusive_group(
                required=name in ('set', 'delete', 'usage'))
            scope.add_argument('--flavor', help='flavor ID or name')
            scope.add_argument('--class', dest='quota_class',
                               help='flavor class (nova_ext:quota_class)')
            if name == 'set':
                command.add_argument('--instances', type=QUOTA_LIMIT)
                command.add_argument('--cores', type=QUOTA_LIMIT)
                command.add_argument('--ram', type=QUOTA_LIMIT,
                                     help='MB')
        commands.add_parser(
            'check', help='do all nova-api and nova-conductor processes run '
                          'the same quota driver?')

    def run(self, args, conf, out):
        # here: only this command needs it (the CLI starts without Nova)
        from nova_ext.quota import commands

        _parse_transport_url(conf)
        try:
            return getattr(self, args.command)(args, conf, commands, out)
        except commands.CommandError as error:
            raise CommandError(str(error))

    @staticmethod
    def set(args, conf, commands, out):
        scope, name, limits = commands.set_limits(
            conf, args.project, args.flavor, args.quota_class,
            args.instances, args.cores, args.ram)
        values = ', '.join('%s=%d' % item for item in sorted(limits.items()))
        print('%s %s, project %s: %s' % (scope, name, args.project, values),
              file=out)
        return 0

    @staticmethod
    def show(args, conf, commands, out):
        _table(['project', 'scope', 'name', 'resource', 'limit'],
               commands.show_limits(conf, args.project, args.flavor,
                                    args.quota_class), out)
        return 0

    @staticmethod
    def delete(args, conf, commands, out):
        count = commands.delete_limits(conf, args.project, args.flavor,
                                       args.quota_class)
        print('deleted %d limit(s)' % count, file=out)
        return 0

    @staticmethod
    def usage(args, conf, commands, out):
        scope, name, rows = commands.usage(conf, args.project, args.flavor,
                                           args.quota_class)
        print('project %s, %s %s' % (args.project, scope, name), file=out)
        _table(['resource', 'in use', 'limit'], rows, out)
        return 0

    @staticmethod
    def check(args, conf, commands, out):
        # here: only this command needs it (the CLI starts without Nova)
        from nova_ext import activation

        expected = conf.nova_ext.quota_driver
        rows = [[binary, host, driver or '-', when or 'never',
                 'ok' if agrees else 'MISMATCH']
                for binary, host, driver, when, agrees
                in activation.activation_states(conf, expected)]
        print('[nova_ext] quota_driver here: %s' % (expected or 'none'),
              file=out)
        if not rows:
            print('no nova-api or nova-conductor has started with nova-ext '
                  'installed yet: nothing to compare', file=out)
            return 1
        _table(['binary', 'host', 'quota driver', 'activated', 'state'],
               rows, out)
        return 0 if all(row[-1] == 'ok' for row in rows) else 1


class DriverCommands(Command):
    name = 'driver'
    help = ("the module that lets nova-compute load nova-ext's libvirt "
            "driver")

    def add_arguments(self, parser):
        parser.add_argument('action', choices=['install', 'remove', 'check'])

    def needs_nova_conf(self, args):
        # install and remove touch Nova's package, not its configuration
        return args.action == 'check'

    def run(self, args, conf, out):
        # here: only this command needs it (the CLI starts without Nova)
        from nova_ext.virt.libvirt import mutators
        from nova_ext.virt.libvirt import shim

        try:
            if args.action != 'check':
                print(getattr(shim, args.action)(), file=out)
                return 0
            ok, lines = shim.check()
        except shim.ShimError as error:
            raise CommandError(str(error))
        for line in lines:
            print(line, file=out)
        print('nova.conf compute_driver: %s%s' % (
            conf.compute_driver,
            '' if conf.compute_driver == shim.COMPUTE_DRIVER
            else ' (not nova-ext\'s driver)'), file=out)
        installed = set(mutators.installed())
        enabled = conf.nova_ext.guest_mutators
        print('guest mutators installed: %s' % (
            ', '.join(sorted(installed)) or 'none'), file=out)
        print('[nova_ext] guest_mutators: %s' % (
            ', '.join(enabled) or 'none'), file=out)
        unknown = [name for name in enabled if name not in installed]
        if unknown:
            print('not installed: %s' % ', '.join(unknown), file=out)
            ok = False
        return 0 if ok else 1


class ConfigureCommands(Command):
    name = 'configure'
    help = "switch nova-ext's features on (or off) in a nova.conf or " \
           "tempest.conf"
    FEATURE_FLAGS = (
        ('filters', 'FailureDomainAntiAffinityFilter, keeping Nova\'s '
                    'filters'),
        ('weighers', "nova-ext's weighers next to Nova's"),
        ('request-filters', 'the maintenance, host_class and '
                            'failure_domain request filters'),
        ('quota', 'the per_flavor quota driver, activated through '
                  '?plugin=nova_ext on the database URLs'),
        ('libvirt-driver', "nova-ext's libvirt driver and its guest "
                           "mutators (run 'driver install' too)"))

    def add_arguments(self, parser):
        parser.add_argument('target', choices=['nova', 'tempest'])
        parser.add_argument('--config-file', dest='target_files',
                            action='append', required=True, metavar='FILE',
                            help='file to edit, in place; repeat for '
                                 'several')
        parser.add_argument('--all', action='store_true',
                            help='every feature below')
        for feature, help_text in self.FEATURE_FLAGS:
            parser.add_argument('--' + feature, action='store_true',
                                help=help_text)
        parser.add_argument('--failure-domain', metavar='LEVEL:DOMAIN,...',
                            help="this compute's failure domains "
                                 "([nova_ext] failure_domain)")
        parser.add_argument('--set', dest='assignments', action='append',
                            default=[], metavar='SECTION.OPTION=VALUE',
                            help='any other option; repeat for several')
        parser.add_argument(
            '--role', dest='roles', action='append', default=[],
            metavar='ROLE', help='a process that reads this nova.conf (api, '
            'superconductor, conductor, scheduler, cell-conductor, '
            'compute); repeat for several: features none of them runs are '
            'left out')
        parser.add_argument('--undo', action='store_true',
                            help='take out what these flags put in')
        parser.add_argument('--dry-run', action='store_true',
                            help='print the changes, write nothing')

    def needs_nova_conf(self, args):
        # it edits configuration files, and may be run before they exist
        return False

    def run(self, args, conf, out, err=None):
        # here: only this command needs it (the CLI starts without Nova)
        from nova_ext import configure

        err = err or sys.stderr
        features = [feature for feature in configure.FEATURES
                    if args.all or getattr(args, feature)]
        if not (features or args.failure_domain or args.assignments):
            raise CommandError('configure %s: nothing to do; name features '
                               '(--all, --filters, ...), --failure-domain '
                               'or --set' % args.target)
        try:
            roles = [r for role in args.roles for r in role.split(',') if r]
            # checked with --undo too: a mistyped role is a mistake there
            configure.check_roles(roles)
            failure_domain = args.failure_domain
            if roles and not args.undo:
                features, notes = configure.features_for_roles(features,
                                                               roles)
                if failure_domain and 'compute' not in roles:
                    notes.append('--failure-domain left out: only '
                                 'nova-compute reads it')
                    failure_domain = None
                for note in notes:
                    print('nova-ext-manage: %s' % note, file=err)
            results = configure.configure_files(
                args.target_files, args.target, features, undo=args.undo,
                failure_domain=failure_domain,
                assignments=args.assignments, dry_run=args.dry_run)
        except configure.ConfigureError as error:
            raise CommandError(str(error))
        for path, changed, diff, notes in results:
            self._report(args, path, features, failure_domain, changed,
                         diff, notes, out, err)
        return 0

    @staticmethod
    def _report(args, path, features, failure_domain, changed, diff,
                notes, out, err):
        for note in notes:
            print('nova-ext-manage: %s: %s: %s' % (
                'note' if args.undo else 'warning', path, note),
                file=err)
        if args.dry_run:
            for line in diff:
                print(line, file=out)
            return
        done = features + (['failure_domain'] if failure_domain else [])
        done += [errors.mask_secrets(assignment)
                 for assignment in args.assignments]
        print('%s: %s (%s)' % (path, 'updated' if changed else 'unchanged',
                               ', '.join(done)), file=out)


class SimulateCommands(Command):
    name = 'simulate'
    help = ("replay a workload on a modeled cluster through Nova's "
            "scheduler, once per nova.conf fragment")
    DEFAULT_CONFS = ('nova-defaults', 'nova-packing', 'nova-ext-bin-packing',
                     'nova-ext-image-locality', 'nova-ext-failure-domain')

    def add_arguments(self, parser):
        # here: only this command needs it (the CLI starts without Nova)
        from nova_ext.simulator import model

        def builtin(prefix):
            return ', '.join(sorted(name for name in os.listdir(
                model.EXAMPLES) if name.startswith(prefix)))

        parser.add_argument(
            '--cluster', default='cluster-100.yaml',
            help='cluster model (YAML), or the name of a built-in one: %s '
                 '(default: %%(default)s)' % builtin('cluster-'))
        parser.add_argument(
            '--workload', default='workload-mixed.yaml',
            help='workload (YAML), or the name of a built-in one: %s '
                 '(default: %%(default)s)' % builtin('workload-'))
        parser.add_argument(
            '--conf', action='append', default=[], metavar='FILE',
            help='nova.conf fragment to compare, applied on top of Nova\'s '
                 'defaults, or the name of a built-in one; repeat it '
                 '(default: the built-in %s)' % ', '.join(self.DEFAULT_CONFS))
        parser.add_argument('--seed', type=WHOLE_NUMBER,
                            help="the workload's random seed (default: the "
                                 "workload file's)")
        parser.add_argument('--arrivals', type=WHOLE_NUMBER,
                            metavar='N',
                            help='replay only the first N arrivals')
        parser.add_argument('--plot', metavar='DIR',
                            help='write utilisation.png and stranded.png '
                                 'into DIR')
        parser.add_argument('--json', metavar='FILE',
                            help="write the results as JSON to FILE ('-': "
                                 "standard output, instead of the table)")
        parser.add_argument('--explain', type=WHOLE_NUMBER,
                            metavar='N',
                            help="for arrival N (1: the first) in each "
                                 "configuration, what nova-ext-manage "
                                 "explain shows: which filter removed each "
                                 "host, each weigher's share, the pick")

    def needs_nova_conf(self, args):
        # it models a cluster; each fragment is applied on Nova's defaults
        return False

    def run(self, args, conf, out, err=None):
        # here: only this command needs it (the CLI starts without Nova)
        from nova_ext.simulator import engine
        from nova_ext.simulator import model
        from nova_ext.simulator import report

        err = err or sys.stderr
        logging.basicConfig(level=logging.WARNING,
                            format='%(levelname)s %(name)s: %(message)s')
        engine.parse_defaults()

        def example(path):
            if os.path.exists(path) or os.sep in path:
                return path
            return os.path.join(model.EXAMPLES, path)

        if args.plot and not report.can_plot():
            raise CommandError(report.PLOT_NEEDS)
        configs = []
        for path in args.conf or self.DEFAULT_CONFS:
            builtin = os.path.join(model.EXAMPLES, 'conf', path + '.conf')
            if not os.path.exists(path) and os.path.exists(builtin):
                path = builtin
            name = os.path.splitext(os.path.basename(path))[0]
            configs.append((name, path))
        cluster = model.load_cluster(example(args.cluster))
        workload = model.load_workload(example(args.workload), args.seed,
                                       cluster)
        if args.arrivals is not None:
            workload.arrivals = workload.arrivals[:max(0, args.arrivals)]
        self.check_explain(args.explain, len(workload.arrivals))
        comparison = engine.compare(
            cluster, workload, configs,
            progress_factory=lambda name, total: report.Progress(
                name, total, err), explain_arrival=args.explain)
        if args.json == '-':
            report.write_json(comparison, out)
        else:
            report.table(comparison, out)
            if args.explain is not None:
                report.explanations(comparison, out)
        try:
            if args.json and args.json != '-':
                text = io.StringIO()
                report.write_json(comparison, text)
                files.write_atomically(args.json, text.getvalue())
            if args.plot:
                for path in report.plot(comparison, args.plot):
                    print('wrote %s' % path, file=err)
        except OSError as error:
            raise CommandError('cannot write %s: %s' % (
                error.filename, error.strerror))
        return 0

    @staticmethod
    def check_explain(arrival, arrivals):
        # before the replay, which can take minutes
        if arrival is not None and not 1 <= arrival <= arrivals:
            raise CommandError(
                '--explain %d: no such arrival; this run replays %s' % (
                    arrival, 'arrivals 1 to %d' % arrivals if arrivals
                    else 'none'))


class ExplainCommands(Command):
    name = 'explain'
    help = ('why a request would land where it does, or why there is no '
            'valid host, on the live cloud')
    opens_databases = True

    def add_arguments(self, parser):
        request = parser.add_mutually_exclusive_group(required=True)
        request.add_argument('--flavor', help='flavor ID or name')
        request.add_argument('--server', metavar='UUID',
                             help="an existing server's stored request")
        parser.add_argument('--image', help='image ID')
        parser.add_argument('--hint', action='append', default=[],
                            metavar='KEY=VALUE',
                            help='scheduler hint; repeat')
        parser.add_argument('--group', help='server group name or UUID')
        parser.add_argument('--project', help='project ID of the request')
        parser.add_argument('--az', help='availability zone')
        parser.add_argument('--num', type=WHOLE_NUMBER, default=1,
                            help='number of servers in the request (a '
                                 'multi-create): where each would go')
        parser.add_argument('--set', dest='assignments', action='append',
                            default=[], metavar='SECTION.OPTION=VALUE',
                            help='what if nova.conf said this: explain '
                                 'again with it and compare; repeat for '
                                 'several')
        parser.add_argument('--json', action='store_true',
                            help='JSON instead of tables')

    def run(self, args, conf, out):
        # here: only this command needs it (the CLI starts without Nova)
        from nova_ext import explain
        return explain.run(args, conf, out)


CATEGORIES = {command.name: command for command in (
    HostCommands(), SpreadCommands(), DbCommands(), QuotaCommands(),
    DriverCommands(), ConfigureCommands(), SimulateCommands(),
    ExplainCommands())}


def build_parser():
    # allow_abbrev=False: --config-fil is an error, not a file read
    # unchecked (nova_ext.config_files)
    parser = argparse.ArgumentParser(prog='nova-ext-manage',
                                     description=__doc__.split('\n')[0],
                                     allow_abbrev=False)
    parser.add_argument('--config-file', action='append', default=[],
                        help='nova.conf to read [placement] and [nova_ext] '
                             'from (default: /etc/nova/nova.conf)')
    parser.add_argument('--config-dir', action='append', default=[],
                        help='a directory of *.conf files read after the '
                             '--config-files, as Nova reads nova.conf.d')
    categories = parser.add_subparsers(dest='category', required=True)
    for command in CATEGORIES.values():
        command.add_arguments(categories.add_parser(command.name,
                                                    help=command.help))
    return parser


def _table(headers, rows, out):
    table = prettytable.PrettyTable(headers)
    for row in rows:
        table.add_row(row)
    print(table, file=out)


def _parse_transport_url(conf):
    # registers [DEFAULT] transport_url, which cell mappings refer to
    import oslo_messaging
    oslo_messaging.TransportURL.parse(conf)


def nova_conf(config_files, opens_databases, config_dirs=()):
    """nova.conf parsed as nova-manage parses it, with nova-ext's options."""
    # here: only this command needs it (the CLI starts without Nova)
    import nova.conf
    from nova import config

    from nova_ext import conf as ext_conf

    conf = nova.conf.CONF
    ext_conf.register_opts(conf)
    # An operator at a terminal hears about an unreachable database in
    # seconds, not after oslo.db's service defaults (10 retries, 10 s
    # apart); nova.conf can still set others.
    for group in ('api_database', 'database', 'nova_ext_database'):
        conf.set_default('max_retries', 2, group=group)
        conf.set_default('retry_interval', 1, group=group)
    # One line for a missing, binary or unparsable file (oslo.config would
    # print the offending line, which may hold a password), and every
    # secret in the files is known before anything is printed.
    nova_config_files.check(config_files, config_dirs)
    config_args = ['nova-ext-manage']
    for path in config_files:
        config_args += ['--config-file', path]
    for path in config_dirs:
        config_args += ['--config-dir', path]
    config.parse_args(config_args, init_rpc=False,
                      configure_db=opens_databases)
    _quiet_nova_logs()
    return conf


def _dispatch(args):
    command = CATEGORIES[args.category]
    conf = None
    if command.needs_nova_conf(args):
        conf = nova_conf(args.config_file, command.needs_databases(args),
                         args.config_dir)
    return command.run(args, conf, sys.stdout)


def _quiet_nova_logs():
    # Nova's INFO lines (oslo.db, the thread pools) are for its services'
    # log files; the operator sees our output and warnings.
    import logging
    logging.getLogger().setLevel(logging.WARNING)
    # keystoneauth's discovery warnings come before our own one line
    # saying the same.
    logging.getLogger('keystoneauth').setLevel(logging.ERROR)
    # oslo.db logs each database error it wraps with its traceback
    # ("DBAPIError exception wrapped."); our one line says it.
    logging.getLogger('oslo_db.sqlalchemy.exc_filters').setLevel(
        logging.CRITICAL)


_MISSING_TABLE = re.compile(
    r'no such table: ([\w.]+)|Table \'([\w.]+)\' doesn.t exist|'
    r'relation "([\w.]+)" does not exist')


def _missing_table(error):
    """The name of the table ``error`` says is missing, or None."""
    # here: only this command needs it (the CLI starts without Nova)
    from oslo_db import exception as db_exc

    if isinstance(error, db_exc.DBNonExistentTable) and error.table:
        return error.table.rpartition('.')[2]
    match = _MISSING_TABLE.search(str(error))
    if match is None:
        return None
    return next(name for name in match.groups() if name).rpartition('.')[2]


def _operator_message(error):
    """One line for an environment failure the operator can fix, or None."""
    # here: only this command needs it (the CLI starts without Nova)
    from keystoneauth1 import exceptions as ks_exc
    from oslo_db import exception as db_exc
    import sqlalchemy.exc

    if isinstance(error, cfg.Error):
        return str(error)
    # disk full, ulimit -f, a read-only or immutable file system: the
    # system's reason and the path, not "unexpected OSError"
    if isinstance(error, OSError) and error.strerror:
        return files.describe_os_error(error)
    if isinstance(error, ks_exc.MissingAuthPlugin):
        return ('placement: no credentials in nova.conf [placement] '
                '(auth_type and friends, as for nova-compute)')
    if isinstance(error, ks_exc.Unauthorized):
        return ('placement: keystone refused the [placement] credentials '
                'in nova.conf (HTTP 401)')
    if isinstance(error, (ks_exc.ConnectFailure, ks_exc.EndpointNotFound,
                          ks_exc.DiscoveryFailure,
                          ks_exc.ConnectionError)):
        return 'placement or keystone unreachable: %s' % error
    if isinstance(error, ks_exc.ClientException):
        return 'placement: %s' % error
    if isinstance(error, db_exc.CantStartEngineError):
        return ('no database in nova.conf: %s (pass --config-file with '
                'the nova.conf of nova-api or nova-conductor)' % error)
    table = _missing_table(error)
    if table is not None:
        if table.startswith('nova_ext_'):
            return ('table %s is missing from the database: run '
                    'nova-ext-manage db sync' % table)
        return ("Nova's table %s is missing from the database nova.conf "
                "names: is it Nova's API database, and has nova-manage "
                "api_db sync run?" % table)
    if isinstance(error, (db_exc.DBConnectionError,
                          sqlalchemy.exc.OperationalError)):
        reason = getattr(error, 'orig', None) or getattr(
            error, 'inner_exception', None) or error
        return 'database unreachable or refusing us: %s' % reason
    if isinstance(error, sqlalchemy.exc.ArgumentError):
        return 'database URL in nova.conf: %s' % error
    if isinstance(error, (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError)):
        reason = getattr(error, 'orig', None) or getattr(
            error, 'inner_exception', None) or error
        # SQLAlchemy appends the statement and its parameters
        return 'database: %s' % str(reason).split(' [SQL: ')[0]
    return None


def main(argv=None, err=None):
    """Run one command; errors become one line on stderr and exit 1."""
    err = err or sys.stderr
    # What the operator reads is ours: not the deprecation notices of
    # libraries Nova pulls in.
    warnings.filterwarnings('ignore', category=DeprecationWarning)
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    try:
        # argparse would name the path after --config-fil an unknown
        # command: say what is wrong instead
        nova_config_files.named_sources(
            sys.argv[1:] if argv is None else argv)
    except errors.OperatorError as error:
        print('nova-ext-manage: %s' % error, file=err)
        return 2
    args = build_parser().parse_args(argv)
    try:
        code = _dispatch(args)
        # a pipe's reader gone (| head -1) shows here, not at exit
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return errors.closed_pipe()
    except errors.OperatorError as error:
        message = str(error)
    except KeyboardInterrupt:
        print('nova-ext-manage: interrupted', file=err)
        return 130
    except Exception as error:
        message = _operator_message(error)
        if message is None:
            message = 'unexpected %s; details in %s' % (
                type(error).__name__, errors.write_details(error))
    try:
        print('nova-ext-manage: %s' % errors.error_line(message), file=err)
    except BrokenPipeError:
        return errors.closed_pipe()
    return 1


if __name__ == '__main__':
    sys.exit(main())
