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
  the head migration (``nova-ext-manage db sync``); with the spread filter
  enabled and quotas off, a Warning when they are not (the spread ledger's
  table is missing: nova-scheduler then reads placement instead).
* **Quota activation**: every nova-api and conductor activated the quota
  driver nova.conf names (as ``nova-ext-manage quota check``).
* **Flavor extra specs**: every stored flavor's ``nova_ext:`` extra specs
  pass nova-ext's validators (flavors created before nova-ext was
  installed, or before microversion 2.86, were never checked): a Warning
  naming the flavor and the key.
* **Aggregate metadata**: no host aggregate in the API database has a key
  nova-ext would ignore (differing from one it reads by case or whitespace,
  or an unknown ``nova_ext:`` key) or a failure-domain or host-class value
  with surrounding whitespace (:mod:`nova_ext.scheduler.aggregate_keys`),
  and no two failure-domain names at one level that placement and the
  scheduler read as one domain (``r-1`` and ``r_1``: one trait).

No Success without evidence: with the quota driver on and no nova-api or
conductor started yet, "Quota activation" is a Warning saying so; a
``quota_driver`` no installed driver answers to is a Failure.

What goes wrong before any check runs is one line and exit code 255
(oslo.upgradecheck's "the check could not run"): a missing, unreadable,
binary or unparsable config file (named with its line number, never the
line: it may hold a password), an option value oslo.config refuses. The
databases are tried once, 1 s apart at most twice, whatever nova.conf
says for the services (``max_retries`` is overridden for this command);
when the first check finds them unreachable, the others say so without
trying again.
"""

import collections
import itertools
import sys
import textwrap
import warnings

import os_traits
from oslo_config import cfg
from oslo_upgradecheck import upgradecheck

from nova_ext import conf as ext_conf
from nova_ext import config_files
from nova_ext import errors

CONF = cfg.CONF
Code = upgradecheck.Code
Result = upgradecheck.Result
# aggregate and flavor problems listed in full; the rest are counted
MAX_AGGREGATE_PROBLEMS = 20
DATABASE_GROUPS = ('database', 'api_database', 'nova_ext_database')
# the filter whose turns write the spread ledger, one of nova-ext's tables
SPREAD_FILTER = 'FailureDomainAntiAffinityFilter'


class Checks(upgradecheck.UpgradeCommands):
    """nova-ext's upgrade checks, each one Result."""

    display_title = 'nova-ext Upgrade Check Results'

    def __init__(self, conf=CONF):
        self.conf = conf
        # the first database failure; later checks report it untried
        self.database_down = None

    def _database_failure(self, what, error):
        """A Failure for a database error; remembers an unreachable one."""
        # here: only this check needs it (the CLI starts without Nova)
        from oslo_db import exception as db_exc
        import sqlalchemy.exc

        if isinstance(error, (db_exc.DBConnectionError,
                              sqlalchemy.exc.OperationalError)):
            self.database_down = _first_line(error)
        return Result(Code.FAILURE, 'cannot read %s: %s' % (
            what, errors.mask_secrets(_first_line(error))))

    def _skipped(self):
        if self.database_down:
            return Result(Code.FAILURE, 'not checked: the database is '
                          'unreachable (%s)' % errors.mask_secrets(
                              self.database_down))
        return None

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

    # Nova and nova-ext's scheduler modules are imported in the checks:
    # main() first quiets the deprecation notices of the libraries Nova
    # pulls in (eventlet's is printed at import).

    def _check_nova_release(self):
        # here: only this check needs it (the CLI starts without Nova)
        from nova_ext import upstream

        major = upstream.nova_major()
        if major in upstream.SUPPORTED_NOVA_MAJORS:
            return Result(Code.SUCCESS, 'Nova %d' % major)
        return Result(Code.FAILURE, 'Nova %d is not supported by this '
                      'nova-ext (supported: %s)' % (major, ', '.join(
                          str(m) for m in upstream.SUPPORTED_NOVA_MAJORS)))

    def _check_nova_internals(self):
        # here: only this check needs it (the CLI starts without Nova)
        from nova_ext import upstream

        problems = upstream.problems()
        if problems:
            return Result(Code.FAILURE, '; '.join(problems))
        return Result(Code.SUCCESS, '%d internals present, signatures as '
                      'expected; %d assumptions hold' % (
                          len(upstream.INTERNALS), len(upstream.ASSUMPTIONS)))

    def _check_driver_shim(self):
        # here: only this check needs it (the CLI starts without Nova)
        from nova_ext.virt.libvirt import shim

        if self.conf.compute_driver != shim.COMPUTE_DRIVER:
            return Result(Code.SUCCESS, 'not used here (compute_driver = %s)'
                          % (self.conf.compute_driver or 'unset'))
        ok, lines = shim.check()
        return Result(Code.SUCCESS if ok else Code.FAILURE, '; '.join(lines))

    def _check_database(self):
        # here: only this check needs it (the CLI starts without Nova)
        from nova_ext.quota import db

        quotas = bool(self.conf.nova_ext.quota_driver)
        spread = SPREAD_FILTER in self.conf.filter_scheduler.enabled_filters
        if not (quotas or spread):
            return Result(Code.SUCCESS, 'per-flavor quotas are off and no '
                          'spread filter is enabled: nova-ext has no tables '
                          'to check')
        skipped = self._skipped()
        if skipped:
            return skipped
        try:
            current = db.current_revision(self.conf)
        except Exception as error:  # noqa: any database error is the answer
            return self._database_failure("nova-ext's tables", error)
        head = db.head_revision()
        if current == head:
            return Result(Code.SUCCESS, 'at revision %s' % head)
        behind = 'at revision %s, this nova-ext needs %s: run ' \
            '"nova-ext-manage db sync"' % (current or 'none', head)
        if quotas:
            return Result(Code.FAILURE, behind)
        # the spread ledger's table missing costs placement reads, no spread
        return Result(Code.WARNING, behind + '; until then nova-scheduler '
                      'counts the members of a spread group not yet built '
                      'from placement, one read each, at every turn')

    def _check_scheduler_activation(self):
        """nova.conf loads nova-ext's scheduler plugins: nova-scheduler
        must open its API database through the engine plugin, which
        activates the hooks they read (nova_ext.scheduler.activate).
        """
        # here: only this check needs it (the CLI starts without Nova)
        from sqlalchemy.engine import make_url

        options = self.conf.filter_scheduler
        loaded = [path for path in itertools.chain(
            options.available_filters, options.weight_classes)
            if path.startswith('nova_ext.')]
        if self.conf.nova_ext.request_filters:
            loaded.append('[nova_ext] request_filters')
        if not loaded:
            return Result(Code.SUCCESS, "not used here (nova.conf loads none "
                          "of nova-ext's scheduler plugins)")
        connection = self.conf.api_database.connection or ''
        try:
            plugins = make_url(connection).query.get('plugin', ())
        except Exception:  # noqa: the database checks name a bad URL
            plugins = ()
        if isinstance(plugins, str):
            plugins = (plugins,)
        if 'nova_ext' in plugins:
            return Result(Code.SUCCESS, 'nova-scheduler activates nova-ext '
                          'through ?plugin=nova_ext on [api_database] '
                          'connection')
        return Result(
            Code.FAILURE, "nova.conf loads %s, but [api_database] connection "
            "has no ?plugin=nova_ext: nova-scheduler will not activate "
            "nova-ext's scheduler hooks, and refuses every spread request; "
            "run \"nova-ext-manage configure nova --filters\" (or add it) "
            "and restart nova-scheduler" % ', '.join(loaded))

    def _check_quota_activation(self):
        # here: only this check needs it (the CLI starts without Nova)
        from nova_ext import activation

        from nova_ext.quota import db

        expected = self.conf.nova_ext.quota_driver
        if not expected:
            return Result(Code.SUCCESS, 'per-flavor quotas are off')
        known = quota_drivers()
        if expected not in known:
            return Result(Code.FAILURE, '[nova_ext] quota_driver = %s: no '
                          'such quota driver (installed: %s); nova-api '
                          'would refuse every request' % (
                              expected, ', '.join(known) or 'none'))
        skipped = self._skipped()
        if skipped:
            return skipped
        try:
            if db.current_revision(self.conf) is None:
                return Result(Code.FAILURE, 'activations are recorded in '
                              'nova-ext\'s tables: run "nova-ext-manage db '
                              'sync"')
            states = activation.activation_states(self.conf, expected)
            problems = activation.consistency_problems(self.conf, expected)
        except Exception as error:  # noqa: any database error is the answer
            return self._database_failure("Nova's services", error)
        if problems:
            return Result(Code.FAILURE, '; '.join(problems))
        if not states:
            return Result(Code.WARNING, 'no nova-api or nova-conductor has '
                          'started with nova-ext installed yet: nothing '
                          'shows that %s is active; run this check again '
                          'after starting them' % expected)
        return Result(Code.SUCCESS, 'every nova-api and conductor runs %s'
                      % expected)

    def _check_aggregate_metadata(self):
        """Every aggregate's metadata against the keys nova-ext reads with
        this nova.conf (``[nova_ext] failure_domain_levels``).
        """
        # here: only this check needs it (the CLI starts without Nova)
        from nova import context as nova_context
        from nova import objects

        from nova_ext.scheduler import aggregate_keys

        skipped = self._skipped()
        if skipped:
            return skipped
        try:
            aggregates = objects.AggregateList.get_all(
                nova_context.get_admin_context())
        except Exception as error:  # noqa: any database error is the answer
            return self._database_failure('the host aggregates', error)
        problems = aggregate_keys.problems_in_aggregates(
            aggregates, aggregate_keys.keys_read(self.conf))
        problems += domain_collisions(aggregates,
                                      self.conf.nova_ext.failure_domain_levels)
        if not problems:
            return Result(Code.SUCCESS, '%d aggregate(s), no key nova-ext '
                          'would ignore' % len(aggregates))
        lines = ['aggregate %s: %s' % problem
                 for problem in problems[:MAX_AGGREGATE_PROBLEMS]]
        if len(problems) > MAX_AGGREGATE_PROBLEMS:
            lines.append('and %d more' % (len(problems)
                                          - MAX_AGGREGATE_PROBLEMS))
        return Result(Code.WARNING, '\n'.join(lines))

    def _check_flavor_extra_specs(self):
        """Every stored flavor's ``nova_ext:`` extra specs against the
        validators nova-api runs (from microversion 2.86) today.
        """
        # here: only this check needs it (the CLI starts without Nova)
        from nova import context as nova_context
        from nova import objects

        skipped = self._skipped()
        if skipped:
            return skipped
        try:
            flavors = objects.FlavorList.get_all(
                nova_context.get_admin_context())
        except Exception as error:  # noqa: any database error is the answer
            return self._database_failure('the flavors', error)
        problems = flavor_problems(flavors)
        if not problems:
            return Result(Code.SUCCESS, '%d flavor(s), every nova_ext: extra '
                          'spec valid' % len(flavors))
        lines = problems[:MAX_AGGREGATE_PROBLEMS]
        if len(problems) > MAX_AGGREGATE_PROBLEMS:
            lines.append('and %d more' % (len(problems)
                                          - MAX_AGGREGATE_PROBLEMS))
        return Result(Code.WARNING, '\n'.join(lines))

    _upgrade_checks = (
        ('Nova release', _check_nova_release),
        ('Nova internals', _check_nova_internals),
        ('Libvirt driver shim', _check_driver_shim),
        ('nova-ext database', _check_database),
        ('Scheduler hooks', _check_scheduler_activation),
        ('Quota activation', _check_quota_activation),
        ('Flavor extra specs', _check_flavor_extra_specs),
        ('Aggregate metadata', _check_aggregate_metadata),
    )


def quota_drivers():
    """Names of the installed quota drivers (entry points)."""
    # here: only this check needs it (the CLI starts without Nova)
    from importlib import metadata

    return sorted(entry.name for entry in metadata.entry_points(
        group='nova_ext.quota.drivers'))


def flavor_problems(flavors):
    """'flavor NAME (ID): problem' for each ``nova_ext:`` extra spec the
    validators refuse, or that no validator knows.
    """
    # here: only this check needs it (the CLI starts without Nova)
    from nova import exception

    from nova_ext.api.validators import nova_ext as validators

    known = {validator.name: validator for validator in
             validators.register()}
    problems = []
    for flavor in sorted(flavors, key=lambda flavor: flavor.name):
        for key, value in sorted((flavor.extra_specs or {}).items()):
            if not key.startswith('nova_ext:'):
                continue
            where = 'flavor %s (%s)' % (flavor.name, flavor.flavorid)
            if key not in known:
                problems.append('%s: %s is not a nova-ext extra spec; it '
                                'is ignored' % (where, key))
                continue
            try:
                known[key].validate(key, value)
            except exception.ValidationError as error:
                problems.append('%s: %s' % (where, errors.one_line(error)))
    return problems


def domain_collisions(aggregates, levels):
    """(aggregate, problem) where two failure-domain names at one level
    are one placement trait (``r-1``, ``r_1``, ``R-1``): the scheduler's
    trait source sees one domain, aggregates two.
    """
    # here: only this check needs it (the CLI starts without Nova)
    from nova_ext.scheduler import aggregate_keys as keys

    names = collections.defaultdict(set)
    owners = collections.defaultdict(set)
    for aggregate in aggregates:
        for level in levels:
            domain = (aggregate.metadata or {}).get(
                keys.FAILURE_DOMAIN_PREFIX + level)
            if domain:
                trait = os_traits.normalize_name(domain)
                names[level, trait].add(domain)
                owners[level, trait].add(aggregate.name)
    return [(', '.join(sorted(owners[key])),
             '%s domains %s are one placement trait (%s): hosts in them are '
             'one domain to the traits source; rename one' % (
                 key[0], ' and '.join(sorted(names[key])), key[1]))
            for key in sorted(names) if len(names[key]) > 1]


def _first_line(error):
    """Database errors carry the SQL and URL; one line, no secrets."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text.split(' (Background on this error')[0][:300]


def main(argv=None):
    # What the operator reads is ours: not the deprecation notices of the
    # libraries Nova pulls in (as nova-ext-manage).
    warnings.filterwarnings('ignore', category=DeprecationWarning)
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    # here: only this check needs it (the CLI starts without Nova)
    import nova.conf
    from oslo_log import log
    from oslo_utils import importutils

    argv = sys.argv[1:] if argv is None else argv
    conf = nova.conf.CONF
    ext_conf.register_opts(conf)
    # The options nova's config.parse_args registers before parsing
    # (oslo.upgradecheck parses the command line and nova.conf itself).
    log.register_options(conf)
    profiler = importutils.try_import('osprofiler.opts')
    if profiler:
        profiler.set_defaults(conf)
    # An answer in seconds: one retry, 1 s later, for this command only
    # (a service waits for its database; an operator at a terminal does
    # not).
    for group in DATABASE_GROUPS:
        conf.set_override('max_retries', 1, group=group)
        conf.set_override('retry_interval', 1, group=group)
    try:
        config_files.check_argv(argv)
        code = upgradecheck.main(conf, project='nova',
                                 upgrade_command=Checks(conf), argv=argv)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except (errors.OperatorError, cfg.Error) as error:
        print('nova-ext-status: %s' % errors.error_line(error),
              file=sys.stderr)
        return 255
    except BrokenPipeError:
        return errors.closed_pipe()


if __name__ == '__main__':
    sys.exit(main())
