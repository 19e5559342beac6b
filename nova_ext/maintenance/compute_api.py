# SPDX-License-Identifier: Apache-2.0
"""Nova's REST API, as the drain and the rebalance use it: start a live or
cold migration (Nova's scheduler picks the host), follow the server and
its migration record, confirm a cold migration, read why one failed.

Through openstacksdk on a keystoneauth session, with the credentials every
OpenStack CLI takes: ``clouds.yaml`` and ``--os-cloud`` / ``OS_CLOUD``, or
``OS_AUTH_URL`` and friends. openstacksdk negotiates the compute API
microversion per call within what it documents: live migration at 2.30
(``block_migration: auto``, no host), ``/os-migrations?instance_uuid=``
at up to 2.80, instance actions with their events' details at 2.84.
"""

import typing as ty

from keystoneauth1 import exceptions as ks_exceptions
import openstack
from openstack import config as sdk_config
from openstack import exceptions as sdk_exceptions

from nova_ext import errors

LIVE = 'live'
COLD = 'cold'
MIGRATION_TYPES = {LIVE: 'live-migration', COLD: 'migration'}
# a migration record in one of these states is over
MIGRATION_OVER = ('completed', 'finished', 'confirmed', 'done', 'error',
                  'failed', 'cancelled', 'reverted')
MIGRATION_FAILED = ('error', 'failed', 'cancelled', 'reverted')
NO_CREDENTIALS = ("Nova's API: no credentials: name a cloud of clouds.yaml "
                  "with --os-cloud (or OS_CLOUD), or set OS_AUTH_URL and "
                  "friends, as for the openstack CLI")


class APIError(errors.OperatorError):
    pass


class Refused(Exception):
    """Nova refused to start a move (its HTTP error, in one line)."""


class ServerView(ty.NamedTuple):
    status: str
    task_state: ty.Optional[str]
    host: ty.Optional[str]
    fault: ty.Optional[str]


class MigrationView(ty.NamedTuple):
    id: ty.Any
    uuid: ty.Optional[str]
    kind: ty.Optional[str]
    status: str
    source: ty.Optional[str]
    dest: ty.Optional[str]

    @property
    def over(self):
        return self.status in MIGRATION_OVER

    @property
    def failed(self):
        return self.status in MIGRATION_FAILED


def connect(cloud=None, session=None):
    """A :class:`ComputeAPI` on ``session`` (a keystoneauth Session), or on
    the cloud openstacksdk finds (``cloud``, clouds.yaml, ``OS_*``).
    APIError in one line when there are no credentials or Nova cannot be
    reached.
    """
    try:
        if session is not None:
            connection = openstack.connection.Connection(session=session)
        else:
            connection = openstack.connect(cloud=cloud)
        connection.compute.get_endpoint()
    except ks_exceptions.MissingRequiredOptions:
        raise APIError(NO_CREDENTIALS)
    except sdk_exceptions.ConfigException as error:
        raise APIError("Nova's API: %s (clouds.yaml: %s)" % (
            error, ', '.join(_clouds_yaml_paths())))
    except (ks_exceptions.ClientException,
            sdk_exceptions.SDKException) as error:
        raise APIError("Nova's API: %s" % error)
    return ComputeAPI(connection)


def _clouds_yaml_paths():
    return sdk_config.loader.CONFIG_FILES


def _message(error):
    """Nova's words in an openstacksdk HTTP error, on one line."""
    details = getattr(error, 'details', None)
    status = getattr(error, 'status_code', None)
    text = details or str(error)
    return errors.one_line('%s%s' % ('HTTP %s: ' % status if status else '',
                                     text))


class ComputeAPI(object):
    """The calls the executor makes, on an openstacksdk Connection."""

    def __init__(self, connection):
        self.connection = connection
        self.compute = connection.compute

    def start(self, server, method):
        """Ask Nova to move ``server`` (``LIVE`` or ``COLD``), naming no
        host. Refused with Nova's reason when the API says no.
        """
        try:
            if method == LIVE:
                self.compute.live_migrate_server(server, host=None,
                                                 block_migration='auto')
            else:
                self.compute.migrate_server(server)
        except sdk_exceptions.HttpException as error:
            raise Refused(_message(error))

    def server(self, server):
        """The server's :class:`ServerView`, or None once it is gone."""
        try:
            found = self.compute.get_server(server)
        except sdk_exceptions.NotFoundException:
            return None
        fault = found.fault or {}
        return ServerView(found.status, found.task_state, found.compute_host,
                          fault.get('message') if fault else None)

    def migrations(self, server, method):
        """The server's migration records of ``method``'s kind, oldest
        first.
        """
        found = []
        for migration in self.compute.migrations(
                server_id=server, migration_type=MIGRATION_TYPES[method]):
            body = migration.to_dict()
            found.append(MigrationView(
                body.get('id'), body.get('uuid'),
                body.get('migration_type'), body.get('status') or '',
                body.get('source_compute'), body.get('dest_compute')))
        return sorted(found, key=lambda m: (m.id is None, m.id or 0))

    def confirm(self, server):
        """Confirm a cold migration waiting in VERIFY_RESIZE."""
        try:
            self.compute.confirm_server_resize(server)
        except sdk_exceptions.HttpException as error:
            raise Refused(_message(error))

    def failure(self, server, method):
        """Why the server's last move of ``method``'s kind failed: the
        error event of its instance action (Nova's own message, e.g. the
        scheduler's NoValidHost), or None.
        """
        action_name = 'live-migration' if method == LIVE else 'migrate'
        try:
            actions = [a for a in self.compute.server_actions(server)
                       if a.action == action_name]
            if not actions:
                return None
            last = max(actions, key=lambda a: str(a.start_time))
            action = self.compute.get_server_action(last.request_id, server)
        except Exception as error:  # noqa: the reason is a bonus
            return 'its instance action could not be read: %s' % (
                errors.one_line(error))
        for event in action.events or ():
            event = event if isinstance(event, dict) else event.to_dict()
            if event.get('result') == 'Error':
                return errors.one_line(event.get('details') or
                                       event.get('traceback') or
                                       event.get('event'))
        return errors.one_line(action.message) if action.message else None
