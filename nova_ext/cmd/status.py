# SPDX-License-Identifier: Apache-2.0
"""nova-ext-status: nova-ext's upgrade check, in the OpenStack way.

    nova-ext-status [--config-file /etc/nova/nova.conf] upgrade check [--json]

Built on oslo.upgradecheck (the library behind ``nova-status upgrade
check``): run it after upgrading Nova or nova-ext and before restarting the
services. Each check prints Success, Warning or Failure with details; the
exit code is oslo.upgradecheck's (0 success, 1 warning, 2 failure, 255 the
check itself crashed). The checks:

* **Nova release**: the installed Nova is one nova-ext supports.
* **Nova internals**: every private part of Nova nova-ext relies on
  (:mod:`nova_ext.upstream`) is there with the signature nova-ext expects.
* **Libvirt driver shim**: when ``compute_driver`` is nova-ext's driver, the
  module that lets nova-compute load it is in this Nova's ``nova/virt``,
  matches this nova-ext and imports (re-run ``nova-ext-manage driver
  install`` after every Nova upgrade).
* **nova-ext database**: with per-flavor quotas on, nova-ext's tables are at
  the head migration (``nova-ext-manage db sync``).
* **Quota activation**: every nova-api and conductor activated the quota
  driver nova.conf names (as ``nova-ext-manage quota check``).
* **Aggregate metadata**: no host aggregate in the API database has a key
  nova-ext would ignore (differing from one it reads by case or whitespace,
  or an unknown ``nova_ext:`` key) or a failure-domain or host-class value
  with surrounding whitespace (:mod:`nova_ext.scheduler.aggregate_keys`).
"""

import sys
import textwrap

from oslo_config import cfg
from oslo_upgradecheck import upgradecheck

from nova_ext import conf as ext_conf
from nova_ext.scheduler import aggregate_keys
from nova_ext import upstream

CONF = cfg.CONF
Code = upgradecheck.Code
Result = upgradecheck.Result
# aggregate problems listed in full; the rest are counted
MAX_AGGREGATE_PROBLEMS = 20


class Checks(upgradecheck.UpgradeCommands):
    """nova-ext's upgrade checks, each one Result."""

    display_title = 'nova-ext Upgrade Check Results'

    def __init__(self, conf=CONF):
        self.conf = conf

    def check(self):
        # As nova-status does: Nova's database layer reads the databases
        # from the nova.conf just parsed.
        from nova.db.api import api as api_db
        from nova.db.main import api as main_db
        from nova import objects
        import oslo_messaging

        objects.register_all()
        # Cell mappings name transport URLs; this registers the option.
        oslo_messaging.TransportURL.parse(self.conf)
        main_db.configure(self.conf)
        api_db.configure(self.conf)
        return super().check()

    def _get_details(self, result):
        # oslo.upgradecheck wraps the details as one paragraph: a check
        # listing one problem per line keeps its lines.
        if result.details is None:
            return None
        return '\n'.join(
            wrapped for line in result.details.splitlines()
            for wrapped in textwrap.wrap(line, 60, subsequent_indent='  ')
            or [''])

    def _check_nova_release(self):
        major = upstream.nova_major()
        if major in upstream.SUPPORTED_NOVA_MAJORS:
            return Result(Code.SUCCESS, 'Nova %d' % major)
        return Result(Code.FAILURE, 'Nova %d is not supported by this '
                      'nova-ext (supported: %s)' % (major, ', '.join(
                          str(m) for m in upstream.SUPPORTED_NOVA_MAJORS)))

    def _check_nova_internals(self):
        problems = upstream.problems()
        if problems:
            return Result(Code.FAILURE, '; '.join(problems))
        return Result(Code.SUCCESS, '%d internals present, signatures as '
                      'expected; %d assumptions hold' % (
                          len(upstream.INTERNALS), len(upstream.ASSUMPTIONS)))

    def _check_driver_shim(self):
        from nova_ext.virt.libvirt import shim

        if self.conf.compute_driver != shim.COMPUTE_DRIVER:
            return Result(Code.SUCCESS, 'not used here (compute_driver = %s)'
                          % (self.conf.compute_driver or 'unset'))
        ok, lines = shim.check()
        return Result(Code.SUCCESS if ok else Code.FAILURE, '; '.join(lines))

    def _check_database(self):
        from nova_ext.quota import db

        if not self.conf.nova_ext.quota_driver:
            return Result(Code.SUCCESS, 'per-flavor quotas are off: nova-ext '
                          'has no tables to check')
        try:
            current = db.current_revision(self.conf)
        except Exception as error:  # noqa: any database error is the answer
            return Result(Code.FAILURE, 'cannot read nova-ext\'s tables: %s'
                          % _first_line(error))
        head = db.head_revision()
        if current == head:
            return Result(Code.SUCCESS, 'at revision %s' % head)
        return Result(Code.FAILURE,
                      'at revision %s, this nova-ext needs %s: run '
                      '"nova-ext-manage db sync"' % (current or 'none', head))

    def _check_quota_activation(self):
        from nova_ext import activation

        from nova_ext.quota import db

        expected = self.conf.nova_ext.quota_driver
        if not expected:
            return Result(Code.SUCCESS, 'per-flavor quotas are off')
        try:
            if db.current_revision(self.conf) is None:
                return Result(Code.FAILURE, 'activations are recorded in '
                              'nova-ext\'s tables: run "nova-ext-manage db '
                              'sync"')
            problems = activation.consistency_problems(self.conf, expected)
        except Exception as error:  # noqa: any database error is the answer
            return Result(Code.FAILURE, 'cannot read Nova\'s services: %s'
                          % _first_line(error))
        if problems:
            return Result(Code.FAILURE, '; '.join(problems))
        return Result(Code.SUCCESS, 'every nova-api and conductor runs %s'
                      % expected)

    def _check_aggregate_metadata(self):
        """Every aggregate's metadata against the keys nova-ext reads with
        this nova.conf (``[nova_ext] failure_domain_levels``).
        """
        from nova import context as nova_context
        from nova import objects

        try:
            aggregates = objects.AggregateList.get_all(
                nova_context.get_admin_context())
        except Exception as error:  # noqa: any database error is the answer
            return Result(Code.FAILURE, 'cannot read the host aggregates: %s'
                          % _first_line(error))
        problems = aggregate_keys.problems_in_aggregates(
            aggregates, aggregate_keys.keys_read(self.conf))
        if not problems:
            return Result(Code.SUCCESS, '%d aggregate(s), no key nova-ext '
                          'would ignore' % len(aggregates))
        lines = ['aggregate %s: %s' % problem
                 for problem in problems[:MAX_AGGREGATE_PROBLEMS]]
        if len(problems) > MAX_AGGREGATE_PROBLEMS:
            lines.append('and %d more' % (len(problems)
                                          - MAX_AGGREGATE_PROBLEMS))
        return Result(Code.WARNING, '\n'.join(lines))

    _upgrade_checks = (
        ('Nova release', _check_nova_release),
        ('Nova internals', _check_nova_internals),
        ('Libvirt driver shim', _check_driver_shim),
        ('nova-ext database', _check_database),
        ('Quota activation', _check_quota_activation),
        ('Aggregate metadata', _check_aggregate_metadata),
    )


def _first_line(error):
    """Database errors carry the SQL and URL; one line, no secrets."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text.split(' (Background on this error')[0][:300]


def main(argv=None):
    import nova.conf
    from oslo_log import log
    from oslo_utils import importutils

    conf = nova.conf.CONF
    ext_conf.register_opts(conf)
    # The options nova's config.parse_args registers before parsing
    # (oslo.upgradecheck parses the command line and nova.conf itself).
    log.register_options(conf)
    profiler = importutils.try_import('osprofiler.opts')
    if profiler:
        profiler.set_defaults(conf)
    return upgradecheck.main(conf, project='nova',
                             upgrade_command=Checks(conf),
                             argv=sys.argv[1:] if argv is None else argv)


if __name__ == '__main__':
    sys.exit(main())
