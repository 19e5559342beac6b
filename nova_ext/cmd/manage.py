"""nova-ext-manage: operator commands that talk to placement.

    nova-ext-manage [--config-file nova.conf] host maintenance on HOST
    nova-ext-manage host maintenance off HOST
    nova-ext-manage host maintenance list

``on``/``off`` add or remove ``[nova_ext] maintenance_trait`` on the compute
node resource provider named HOST (its hypervisor hostname), keeping every
other trait: unlike ``openstack resource provider trait set``, which replaces
the whole list. Placement credentials come from nova.conf's ``[placement]``
section, as for Nova's own services.
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
    return parser


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
    import nova.conf
    from nova import utils

    from nova_ext import conf as ext_conf

    conf = nova.conf.CONF
    ext_conf.register_opts(conf)
    try:
        conf([], project='nova',
             default_config_files=args.config_file or None)
        placement = utils.get_ksa_adapter('placement')
        return run(args, placement, conf.nova_ext.maintenance_trait)
    except (CommandError, cfg.Error) as error:
        print('nova-ext-manage: %s' % error, file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
