# SPDX-License-Identifier: Apache-2.0
"""Per-flavor and per-flavor-class quotas on top of Nova's DB quota driver.

Enabled by ``[nova_ext] quota_driver = per_flavor``. Limits are set with
``nova-ext-manage quota set --project P (--flavor F | --class C)
--instances N --cores N --ram MB`` (``--project '*'``: default for every
project) and stored in ``nova_ext_flavor_quotas``. A flavor belongs to class
C through the extra spec ``nova_ext:quota_class=C`` (one of ``[nova_ext]
quota_classes``). Everything else (instances, cores, ram, key pairs, server
groups, metadata ...) is Nova's ``DbQuotaDriver`` unchanged.

Usage is counted, not reserved: instances of the flavor, or of every flavor
in the class, in the project, in each cell, as Nova counts its own quotas
since Pike. Before Nova's check the driver reads the limits on the flavor
joined with the flavors they cover (one statement), then counts in place of
Nova's own instance count: Nova's statement, with sums of the limited
flavors added (the same totals for Nova, the usage of each limit kept for
this check). So a limited create costs one statement more than Nova's
check. Races between concurrent creates are settled by the recheck
nova-conductor runs after creating the instances.
"""

from oslo_log import log as logging

from nova import exception
from nova import quota

from nova_ext import cache
from nova_ext import quota as plug_point
from nova_ext.quota import db

LOG = logging.getLogger(__name__)

# (scope, name) -> internal ids of the flavors in it.
flavors_in_scope = cache.TTLLookup('quota_flavor_cache_seconds')
# (project, flavor ID, class) -> the limits that apply.
limits_for = cache.TTLLookup('quota_limits_cache_seconds')
# Where the check memo keeps the limits on the checked flavor, read before
# Nova's check, and what Nova's count counted of the flavors they cover
# (plug_point.check_memo).
_SCOPES = 'per_flavor:scopes'
_COUNTED = 'per_flavor:counted'


def quota_class(flavor):
    if 'extra_specs' not in flavor:  # an object built without them
        return None
    return (flavor.extra_specs or {}).get(db.QUOTA_CLASS_SPEC)


def _label(resource, scope, name):
    if scope == 'class':
        return '%s of flavor class %s' % (resource, name)
    return '%s of flavor %s' % (resource, name)


def _need(flavor):
    return {'instances': 1, 'cores': flavor.vcpus, 'ram': flavor.memory_mb}


def _groups(scopes):
    return [flavor_ids for _scope, _name, _limits, flavor_ids in scopes]


def _limited(scopes):
    """The resources a limit caps in ``scopes``: the only ones counted."""
    return tuple(resource for resource in db.RESOURCES
                 if any(limits.get(resource, -1) >= 0
                        for _scope, _name, limits, _ids in scopes))


class PerFlavorQuotaDriver(quota.DbQuotaDriver):

    def prepare_flavor_check(self, context, project_id, flavor):
        """Before Nova's check (called by the plug point): the limits on
        ``flavor`` and the flavors they cover, so that Nova's count (next)
        counts those flavors in the same statement.
        """
        memo = plug_point.check_memo()
        if memo is not None:
            memo[_SCOPES] = (project_id, flavor.flavorid,
                             self._read_scopes(context, project_id, flavor))

    def count_instances_cores_ram(self, context, project_id, user_id=None):
        """Nova's instance count (installed in its place by the plug point):
        Nova gets its totals; the flavor check of the same quota check gets
        the usage of each limited scope, counted in the same statement.
        """
        memo = plug_point.check_memo()
        prepared = memo.get(_SCOPES) if memo is not None else None
        groups, resources = [], ()
        if prepared is not None and prepared[0] == project_id:
            groups, resources = _groups(prepared[2]), _limited(prepared[2])
        totals, usages = db.count_instances(context, project_id, user_id,
                                            groups, resources)
        if groups:
            memo[_COUNTED] = (project_id, groups, resources, usages)
        return totals

    def _scopes(self, context, project_id, flavor):
        """[(scope, name, limits, flavor ids)] of the limits on ``flavor``:
        read by prepare_flavor_check for this check, else now.
        """
        memo = plug_point.check_memo()
        prepared = memo.get(_SCOPES) if memo is not None else None
        if prepared is not None and prepared[:2] == (project_id,
                                                     flavor.flavorid):
            return prepared[2]
        return self._read_scopes(context, project_id, flavor)

    @staticmethod
    def _read_scopes(context, project_id, flavor):
        members = {}

        def read_limits(key):
            limits, read = db.limits_for(db.CONF, context, *key)
            members.update(read or {})
            return limits

        limits = limits_for.get(
            (project_id, flavor.flavorid, quota_class(flavor)), read_limits)
        scopes = []
        for (scope, name), scope_limits in sorted(limits.items()):
            if all(limit < 0 for limit in scope_limits.values()):
                continue
            if (scope, name) in members:  # read with the limits just now
                flavor_ids = members[scope, name]
                flavors_in_scope.put((scope, name), flavor_ids)
            else:
                flavor_ids = flavors_in_scope.get(
                    (scope, name),
                    lambda key: db.flavors_in_scope(context, *key))
            scopes.append((scope, name, scope_limits,
                           tuple(sorted(set(flavor_ids)))))
        return scopes

    @staticmethod
    def _usages(context, project_id, groups, resources):
        """Usage of each group of flavors: from Nova's count of this check
        when it ran with them (it does unless ``[quota]
        count_usage_from_placement``, or for a resize that grows neither
        cores nor RAM), else counted now.
        """
        if not groups:
            return []
        memo = plug_point.check_memo()
        counted = memo.get(_COUNTED) if memo is not None else None
        if counted is None or counted[:3] != (project_id, groups, resources):
            counted = (project_id, groups, resources,
                       db.count_instances(context, project_id,
                                          groups=groups,
                                          resources=resources)[1])
            if memo is not None:
                memo[_COUNTED] = counted
        return counted[3]

    def _scoped_usage(self, context, project_id, flavor):
        """Yield (scope, name, limits, usage, flavor ids) for each limit on
        ``flavor``.
        """
        scopes = self._scopes(context, project_id, flavor)
        usages = self._usages(context, project_id, _groups(scopes),
                              _limited(scopes))
        for (scope, name, limits, flavor_ids), usage in zip(scopes, usages):
            yield scope, name, limits, usage, flavor_ids

    def check_flavor_instances(self, context, flavor, min_count, max_count,
                               project_id, orig_num_req=None):
        need = _need(flavor)
        recheck = min_count == max_count == 0
        allowed = max_count
        worst = None
        for scope, name, limits, usage, _ids in self._scoped_usage(
                context, project_id, flavor):
            for resource, limit in sorted(limits.items()):
                if limit < 0 or not need[resource]:
                    continue
                if recheck:
                    # The new instances are already in the database.
                    if usage[resource] > limit:
                        requested = (orig_num_req or 0) * need[resource]
                        self._raise(resource, scope, name, requested,
                                    usage[resource] - requested, limit,
                                    project_id)
                    continue
                fits = max(0, (limit - usage[resource]) // need[resource])
                if fits < allowed:
                    allowed = fits
                    worst = (resource, scope, name, usage[resource], limit)
        if recheck or allowed >= min_count:
            return allowed
        resource, scope, name, used, limit = worst
        self._raise(resource, scope, name, max_count * need[resource], used,
                    limit, project_id)

    def check_flavor_resize(self, context, project_id, current_flavor,
                            new_flavor):
        new_need = _need(new_flavor)
        current_need = _need(current_flavor)
        for scope, name, limits, usage, flavor_ids in self._scoped_usage(
                context, project_id, new_flavor):
            staying_in_scope = current_flavor.id in flavor_ids
            for resource, limit in sorted(limits.items()):
                if limit < 0:
                    continue
                delta = new_need[resource]
                if staying_in_scope:
                    delta -= current_need[resource]
                if delta > 0 and usage[resource] + delta > limit:
                    self._raise(resource, scope, name, delta,
                                usage[resource], limit, project_id)

    @staticmethod
    def _raise(resource, scope, name, requested, used, limit, project_id):
        overs = _label(resource, scope, name)
        LOG.info('nova-ext: project %(project)s over quota for %(overs)s: '
                 'requested %(req)s, used %(used)s, limit %(limit)s',
                 {'project': project_id, 'overs': overs, 'req': requested,
                  'used': used, 'limit': limit})
        raise exception.TooManyInstances(overs=overs, req=requested,
                                         used=used, allowed=limit)
