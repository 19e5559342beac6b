# SPDX-License-Identifier: Apache-2.0
"""What ``nova-ext-manage db|quota ...`` does, apart from argument parsing.

Every function takes the parsed nova.conf and raises :class:`CommandError`
with a message for the operator when the input is wrong.
"""

import re
from urllib import parse as urlparse

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import utils
from oslo_log import log as logging

from nova_ext import errors
from nova_ext.quota import db

LOG = logging.getLogger(__name__)

UNLIMITED = -1


class CommandError(errors.OperatorError):
    pass


def _nova_context():
    objects.register_all()
    return nova_context.get_admin_context()


def resolve_scope(conf, flavor=None, quota_class=None):
    """(scope, name) for --flavor (ID or name) or --class; checked."""
    if bool(flavor) == bool(quota_class):
        raise CommandError('give exactly one of --flavor and --class')
    if quota_class:
        if quota_class not in conf.nova_ext.quota_classes:
            raise CommandError(
                'unknown flavor class %r: [nova_ext] quota_classes lists %s'
                % (quota_class, ', '.join(conf.nova_ext.quota_classes)
                   or 'none'))
        return 'class', quota_class
    ctxt = _nova_context()
    try:
        return 'flavor', objects.Flavor.get_by_flavor_id(ctxt, flavor).flavorid
    except exception.FlavorNotFound:
        pass
    try:
        return 'flavor', objects.Flavor.get_by_name(ctxt, flavor).flavorid
    except exception.FlavorNotFound:
        raise CommandError('no flavor with ID or name %r' % flavor)


def check_project(conf, project_id):
    """Refuse projects keystone does not know; '*' is every project."""
    if project_id == db.DEFAULT_PROJECT:
        return
    try:
        # Nova's service credentials; keystone is asked as Nova would.
        auth = ks_loading.load_auth_from_conf_options(conf, 'placement')
        if auth is None:
            raise ks_exc.MissingAuthPlugin('no auth_type in [placement]')
        identity = utils.get_ksa_adapter(
            'identity', ksa_auth=auth, min_version=(3, 0),
            max_version=(3, 'latest'))
        # quoted although check_project_id allows nothing to quote: the
        # URL asks about this ID and no other
        response = identity.get('/projects/%s' % urlparse.quote(
            project_id, safe=''), raise_exc=False)
    except (ks_exc.ClientException, ks_exc.MissingAuthPlugin,
            ks_exc.EndpointNotFound) as error:
        LOG.warning('could not ask keystone whether project %s exists '
                    '(%s); storing the limit anyway', project_id, error)
        return
    if response.status_code == 404 and _is_keystone_project_not_found(
            response):
        raise CommandError('keystone knows no project %r' % project_id)
    if response.status_code != 200:
        LOG.warning('could not verify project %s with keystone (HTTP %s '
                    'from %s); storing the limit anyway', project_id,
                    response.status_code, response.url)


def _is_keystone_project_not_found(response):
    # A 404 from something that is not keystone (an endpoint override
    # pointing elsewhere) proves nothing about the project.
    try:
        message = response.json()['error']['message']
    except (ValueError, KeyError, TypeError):
        return False
    return 'could not find project' in message.lower()


# The hard_limit column is a signed 32-bit integer on every database.
MAX_LIMIT = 2 ** 31 - 1
# What keystone accepts as a project ID (keystone's id_string: its API
# schema, and the 64 characters of its project.id column) and Nova's own
# project_id parameter allows: letters, digits and '-'. Anything else would
# change the keystone URL it is checked with ('#', '/', '?', '%', '..') and
# could then be stored under an ID no project has.
PROJECT_ID = re.compile(r'[A-Za-z0-9-]{1,64}')
PROJECT_ID_LENGTH = 64


def check_project_id(project_id):
    """A project ID keystone could have issued, or '*'."""
    if project_id is None or project_id == db.DEFAULT_PROJECT:
        return
    if not project_id.strip() or project_id != project_id.strip():
        raise CommandError('--project %r: give a project ID (no surrounding '
                           'spaces) or \'*\'' % project_id)
    if len(project_id) > PROJECT_ID_LENGTH:
        raise CommandError('--project: %d characters; a keystone project ID '
                           'has at most %d' % (len(project_id),
                                               PROJECT_ID_LENGTH))
    if any(ord(char) < 32 or ord(char) == 127 for char in project_id):
        raise CommandError('--project %r: holds a control character'
                           % project_id)
    if not PROJECT_ID.fullmatch(project_id):
        raise CommandError(
            '--project %r: not a keystone project ID (letters, digits and '
            '- only, as keystone issues them; "openstack project show NAME '
            '-f value -c id" gives it)' % project_id)


def _limits(instances, cores, ram):
    limits = {name: value for name, value in (
        ('instances', instances), ('cores', cores), ('ram', ram))
        if value is not None}
    if not limits:
        raise CommandError('give at least one of --instances, --cores, --ram')
    for name, value in limits.items():
        if not UNLIMITED <= value <= MAX_LIMIT:
            raise CommandError('--%s %d: a limit is -1 (unlimited) or from '
                               '0 to %d' % (name, value, MAX_LIMIT))
    return limits


def set_limits(conf, project_id, flavor=None, quota_class=None,
               instances=None, cores=None, ram=None):
    check_project_id(project_id)
    limits = _limits(instances, cores, ram)
    scope, name = resolve_scope(conf, flavor, quota_class)
    check_project(conf, project_id)
    db.set_limits(conf, project_id, scope, name, limits)
    return scope, name, limits


def delete_limits(conf, project_id, flavor=None, quota_class=None):
    check_project_id(project_id)
    scope, name = resolve_scope(conf, flavor, quota_class)
    deleted = db.delete_limits(conf, project_id, scope, name)
    if not deleted:
        raise CommandError('no limits for project %s on %s %s'
                           % (project_id, scope, name))
    return deleted


def show_limits(conf, project_id=None, flavor=None, quota_class=None):
    check_project_id(project_id)
    scope = name = None
    if flavor or quota_class:
        scope, name = resolve_scope(conf, flavor, quota_class)
    return db.list_limits(conf, project_id, scope, name)


def usage(conf, project_id, flavor=None, quota_class=None):
    """Rows (resource, in use, limit) for one project and scope."""
    check_project_id(project_id)
    if project_id == db.DEFAULT_PROJECT:
        raise CommandError('usage is counted per project: give a project ID')
    scope, name = resolve_scope(conf, flavor, quota_class)
    ctxt = _nova_context()
    in_use = db.count_usage(ctxt, project_id,
                            db.flavors_in_scope(ctxt, scope, name))
    limits = db.scope_limits(conf, project_id, scope, name)
    return scope, name, [(resource, in_use[resource],
                          limits.get(resource, UNLIMITED))
                         for resource in db.RESOURCES]
