"""nova-ext-manage: nova-ext's operator commands.

    nova-ext-manage [--config-file nova.conf] host maintenance on HOST
    nova-ext-manage host maintenance off HOST
    nova-ext-manage host maintenance list
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
                             [--plot DIR] [--json FILE]

``on``/``off`` add or remove ``[nova_ext] maintenance_trait`` on the compute
node resource provider named HOST (its hypervisor hostname), keeping every
other trait: unlike ``openstack resource provider trait set``, which replaces
the whole list. Placement credentials come from nova.conf's ``[placement]``
section, as for Nova's own services.

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
"""

import argparse
import sys

from oslo_config import cfg

PLACEMENT_VERSION = '1.18'  # ?required=<trait> on GET /resource_providers
CONFLICT_RETRIES = 5


class CommandError(Exception):
    pass


class Maintenance:
    """Mark, unmark and list hosts in maintenance through placement's API."""

    def __init__(self, placement, trait):
        self.placement = placement
        self.trait = trait

    def _call(self, method, url, **kwargs):
        return getattr(self.placement, method)(
            url, microversion=PLACEMENT_VERSION, raise_exc=False, **kwargs)

    def _provider(self, host):
        resp = self._call('get', '/resource_providers?name=%s' % host)
        if resp.status_code != 200:
            raise CommandError('placement: GET /resource_providers: %s %s'
                               % (resp.status_code, resp.text))
        providers = resp.json()['resource_providers']
        if not providers:
            raise CommandError('no resource provider named %s in placement'
                               % host)
        return providers[0]['uuid']

    def _change(self, host, add):
        uuid = self._provider(host)
        if add:
            resp = self._call('put', '/traits/%s' % self.trait)
            if resp.status_code not in (201, 204):
                raise CommandError('placement: PUT /traits/%s: %s %s'
                                   % (self.trait, resp.status_code,
                                      resp.text))
        for _attempt in range(CONFLICT_RETRIES):
            url = '/resource_providers/%s/traits' % uuid
            current = self._call('get', url).json()
            traits = set(current['traits'])
            wanted = traits | {self.trait} if add else traits - {self.trait}
            if wanted == traits:
                return False
            resp = self._call('put', url, json={
                'traits': sorted(wanted),
                'resource_provider_generation':
                    current['resource_provider_generation']})
            if resp.status_code == 200:
                return True
            if resp.status_code != 409:  # 409: nova-compute got in first
                raise CommandError('placement: PUT %s: %s %s'
                                   % (url, resp.status_code, resp.text))
        raise CommandError('placement kept reporting conflicts for %s' % host)

    def on(self, host):
        return self._change(host, add=True)

    def off(self, host):
        return self._change(host, add=False)

    def list(self):
        resp = self._call('get', '/resource_providers?required=%s'
                          % self.trait)
        if resp.status_code == 400:  # the trait was never created
            return []
        return sorted(p['name'] for p in resp.json()['resource_providers'])


def build_parser():
    parser = argparse.ArgumentParser(prog='nova-ext-manage',
                                     description=__doc__.split('\n')[0])
    parser.add_argument('--config-file', action='append', default=[],
                        help='nova.conf to read [placement] and [nova_ext] '
                             'from (default: /etc/nova/nova.conf)')
    commands = parser.add_subparsers(dest='category', required=True)
    host = commands.add_parser('host', help='host commands')
    host_commands = host.add_subparsers(dest='command', required=True)
    maintenance = host_commands.add_parser(
        'maintenance', help='mark, unmark or list hosts in maintenance')
    maintenance.add_argument('action', choices=['on', 'off', 'list'])
    maintenance.add_argument('host', nargs='?',
                             help='compute node (resource provider) name')

    database = commands.add_parser('db', help="nova-ext's tables")
    database.add_subparsers(dest='command', required=True).add_parser(
        'sync', help='create or upgrade the tables')

    quota = commands.add_parser('quota', help='per-flavor quota limits')
    quota_commands = quota.add_subparsers(dest='command', required=True)
    for name, help_text in (('set', 'set limits'), ('show', 'list limits'),
                            ('delete', 'delete limits'),
                            ('usage', 'usage against limits')):
        command = quota_commands.add_parser(name, help=help_text)
        command.add_argument('--project', required=name != 'show',
                             help="project ID, or '*' for every project")
        scope = command.add_mutually_exclusive_group(
            required=name in ('set', 'delete', 'usage'))
        scope.add_argument('--flavor', help='flavor ID or name')
        scope.add_argument('--class', dest='quota_class',
                           help='flavor class (nova_ext:quota_class)')
        if name == 'set':
            command.add_argument('--instances', type=int)
            command.add_argument('--cores', type=int)
            command.add_argument('--ram', type=int, help='MB')
    quota_commands.add_parser(
        'check', help='do all nova-api and nova-conductor processes run the '
                      'same quota driver?')

    driver = commands.add_parser(
        'driver', help="the module that lets nova-compute load nova-ext's "
                       "libvirt driver")
    driver.add_argument('action', choices=['install', 'remove', 'check'])

    configure = commands.add_parser(
        'configure', help="switch nova-ext's features on (or off) in a "
                          "nova.conf or tempest.conf")
    configure.add_argument('target', choices=['nova', 'tempest'])
    configure.add_argument('--config-file', dest='target_files',
                           action='append', required=True, metavar='FILE',
                           help='file to edit, in place; repeat for several')
    configure.add_argument('--all', action='store_true',
                           help='every feature below')
    for feature, help_text in (
            ('filters', 'FailureDomainAntiAffinityFilter, keeping Nova\'s '
                        'filters'),
            ('weighers', "nova-ext's weighers next to Nova's"),
            ('request-filters', 'the maintenance and host_class request '
                                'filters'),
            ('quota', 'the per_flavor quota driver, activated through '
                      '?plugin=nova_ext on the database URLs'),
            ('libvirt-driver', "nova-ext's libvirt driver and its guest "
                               "mutators (run 'driver install' too)")):
        configure.add_argument('--' + feature, action='store_true',
                               help=help_text)
    configure.add_argument('--failure-domain', metavar='LEVEL:DOMAIN,...',
                           help="this compute's failure domains "
                                "([nova_ext] failure_domain)")
    configure.add_argument('--set', dest='assignments', action='append',
                           default=[], metavar='SECTION.OPTION=VALUE',
                           help='any other option; repeat for several')
    configure.add_argument('--undo', action='store_true',
                           help='take out what these flags put in')
    configure.add_argument('--dry-run', action='store_true',
                           help='print the changes, write nothing')

    simulate = commands.add_parser(
        'simulate', help="replay a workload on a modeled cluster through "
                         "Nova's scheduler, once per nova.conf fragment")
    simulate.add_argument(
        '--cluster', default='cluster-100.yaml',
        help='cluster model (YAML), or the name of a built-in one: %s '
             '(default: %%(default)s)' % ', '.join(_builtin('cluster-')))
    simulate.add_argument(
        '--workload', default='workload-mixed.yaml',
        help='workload (YAML), or the name of a built-in one: %s '
             '(default: %%(default)s)' % ', '.join(_builtin('workload-')))
    simulate.add_argument(
        '--conf', action='append', default=[], metavar='FILE',
        help='nova.conf fragment to compare, applied on top of Nova\'s '
             'defaults, or the name of a built-in one; repeat it (default: '
             'the built-in %s)'
        % ', '.join(DEFAULT_SIMULATE_CONFS))
    simulate.add_argument('--seed', type=int,
                          help="the workload's random seed (default: the "
                               "workload file's)")
    simulate.add_argument('--arrivals', type=int, metavar='N',
                          help='replay only the first N arrivals')
    simulate.add_argument('--plot', metavar='DIR',
                          help='write utilisation.png and stranded.png '
                               'into DIR')
    simulate.add_argument('--json', metavar='FILE',
                          help="write the results as JSON to FILE ('-': "
                               "standard output, instead of the table)")
    return parser


DEFAULT_SIMULATE_CONFS = ('nova-defaults', 'nova-packing',
                          'nova-ext-bin-packing', 'nova-ext-image-locality',
                          'nova-ext-failure-domain')


def _builtin(prefix):
    import os

    from nova_ext.simulator import model
    return sorted(name for name in os.listdir(model.EXAMPLES)
                  if name.startswith(prefix))


def run_simulate(args, out=sys.stdout, err=sys.stderr):
    import os

    from nova_ext.simulator import engine
    from nova_ext.simulator import model
    from nova_ext.simulator import report

    def example(path):
        if os.path.exists(path) or os.sep in path:
            return path
        return os.path.join(model.EXAMPLES, path)

    confs = args.conf or [
        os.path.join(model.EXAMPLES, 'conf', name + '.conf')
        for name in DEFAULT_SIMULATE_CONFS]
    configs = []
    for path in confs:
        builtin = os.path.join(model.EXAMPLES, 'conf', path + '.conf')
        if not os.path.exists(path) and os.path.exists(builtin):
            path = builtin
        name = os.path.splitext(os.path.basename(path))[0]
        configs.append((name, path))
    try:
        cluster = model.load_cluster(example(args.cluster))
        workload = model.load_workload(example(args.workload), args.seed)
    except model.ModelError as error:
        raise CommandError(str(error))
    if args.arrivals is not None:
        workload.arrivals = workload.arrivals[:max(0, args.arrivals)]
    try:
        comparison = engine.compare(
            cluster, workload, configs,
            progress_factory=lambda name, total: report.Progress(
                name, total, err))
    except engine.ConfigError as error:
        raise CommandError(str(error))
    if args.json == '-':
        report.write_json(comparison, out)
    else:
        report.table(comparison, out)
    try:
        if args.json and args.json != '-':
            with open(args.json, 'w') as stream:
                report.write_json(comparison, stream)
        if args.plot:
            for path in report.plot(comparison, args.plot):
                print('wrote %s' % path, file=err)
    except OSError as error:
        raise CommandError('cannot write %s: %s' % (
            error.filename, error.strerror))
    return 0


def _table(headers, rows, out):
    import prettytable
    table = prettytable.PrettyTable(headers)
    for row in rows:
        table.add_row(row)
    print(table, file=out)


def run_quota(args, conf, out=sys.stdout):
    from nova_ext import activation
    from nova_ext.quota import commands
    from nova_ext.quota import db

    try:
        if args.category == 'db':
            print('nova-ext tables at revision %s' % db.sync(conf), file=out)
            return 0
        if args.command == 'set':
            scope, name, limits = commands.set_limits(
                conf, args.project, args.flavor, args.quota_class,
                args.instances, args.cores, args.ram)
            values = ', '.join('%s=%d' % item for item in sorted(
                limits.items()))
            print('%s %s, project %s: %s' % (scope, name, args.project,
                                             values), file=out)
        elif args.command == 'show':
            _table(['project', 'scope', 'name', 'resource', 'limit'],
                   commands.show_limits(conf, args.project, args.flavor,
                                        args.quota_class), out)
        elif args.command == 'delete':
            count = commands.delete_limits(conf, args.project, args.flavor,
                                           args.quota_class)
            print('deleted %d limit(s)' % count, file=out)
        elif args.command == 'usage':
            scope, name, rows = commands.usage(
                conf, args.project, args.flavor, args.quota_class)
            print('project %s, %s %s' % (args.project, scope, name),
                  file=out)
            _table(['resource', 'in use', 'limit'], rows, out)
        elif args.command == 'check':
            return check(conf, activation, out)
    except commands.CommandError as error:
        raise CommandError(str(error))
    return 0


def check(conf, activation, out):
    expected = conf.nova_ext.quota_driver
    rows = [[binary, host, driver or '-', when or 'never',
             'ok' if agrees else 'MISMATCH']
            for binary, host, driver, when, agrees
            in activation.activation_states(conf, expected)]
    print('[nova_ext] quota_driver here: %s' % (expected or 'none'),
          file=out)
    _table(['binary', 'host', 'quota driver', 'activated', 'state'], rows,
           out)
    return 0 if all(row[-1] == 'ok' for row in rows) else 1


def run_driver(args, conf=None, out=sys.stdout):
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
    if conf is not None:
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


def run_configure(args, out=sys.stdout, err=sys.stderr):
    from nova_ext import configure

    features = [feature for feature in configure.FEATURES
                if args.all or getattr(args, feature)]
    if not (features or args.failure_domain or args.assignments):
        raise CommandError('configure %s: nothing to do; name features '
                           '(--all, --filters, ...), --failure-domain or '
                           '--set' % args.target)
    try:
        for path in args.target_files:
            changed, diff, warnings = configure.configure_file(
                path, args.target, features, undo=args.undo,
                failure_domain=args.failure_domain,
                assignments=args.assignments, dry_run=args.dry_run)
            for warning in warnings:
                print('nova-ext-manage: warning: %s: %s' % (path, warning),
                      file=err)
            if args.dry_run:
                for line in diff:
                    print(line, file=out)
            else:
                print('%s: %s (%s)' % (
                    path, 'updated' if changed else 'unchanged',
                    ', '.join(features + (['failure_domain']
                                          if args.failure_domain else [])
                              + args.assignments)), file=out)
    except configure.ConfigureError as error:
        raise CommandError(str(error))
    return 0


def run(args, placement, trait, out=sys.stdout):
    """Carry out parsed ``args`` against a placement keystoneauth Adapter."""
    maintenance = Maintenance(placement, trait)
    if args.action == 'list':
        for name in maintenance.list():
            print(name, file=out)
        return 0
    if not args.host:
        raise CommandError('host maintenance %s needs a HOST' % args.action)
    changed = getattr(maintenance, args.action)(args.host)
    print('%s: maintenance %s%s' % (args.host, args.action,
                                    '' if changed else ' (already)'),
          file=out)
    return 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.category == 'simulate':
        import logging
        logging.basicConfig(level=logging.WARNING,
                            format='%(levelname)s %(name)s: %(message)s')
        try:
            from nova_ext.simulator import engine
            engine.parse_defaults()
            return run_simulate(args)
        except CommandError as error:
            print('nova-ext-manage: %s' % error, file=sys.stderr)
            return 1
    if args.category == 'configure':
        try:
            return run_configure(args)
        except CommandError as error:
            print('nova-ext-manage: %s' % error, file=sys.stderr)
            return 1
    if args.category == 'driver' and args.action != 'check':
        try:
            return run_driver(args)
        except CommandError as error:
            print('nova-ext-manage: %s' % error, file=sys.stderr)
            return 1
    import oslo_messaging

    import nova.conf
    from nova import config
    from nova import utils

    from nova_ext import conf as ext_conf

    conf = nova.conf.CONF
    ext_conf.register_opts(conf)
    try:
        # As nova-manage does: registers messaging options (cells carry
        # transport URLs) and points Nova's database layer at nova.conf.
        config_args = ['nova-ext-manage']
        for path in args.config_file:
            config_args += ['--config-file', path]
        config.parse_args(config_args, init_rpc=False,
                          configure_db=args.category in ('db', 'quota'))
        if args.category in ('db', 'quota'):
            # Registers [DEFAULT] transport_url, which cell mappings refer
            # to.
            oslo_messaging.TransportURL.parse(conf)
            return run_quota(args, conf)
        if args.category == 'driver':
            return run_driver(args, conf)
        placement = utils.get_ksa_adapter('placement')
        return run(args, placement, conf.nova_ext.maintenance_trait)
    except (CommandError, cfg.Error) as error:
        print('nova-ext-manage: %s' % error, file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
