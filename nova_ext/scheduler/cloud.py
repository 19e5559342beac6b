# SPDX-License-Identifier: Apache-2.0
"""What nova-ext's scheduler plugins read of the cloud, through one door.

A plugin never asks a database, glance or placement itself, and never asks
where it runs: it reads the :class:`Cloud` of the request it serves
(``scheduling_request.of(spec_obj).cloud``). Whoever opens the request
chooses the cloud:

* nova-scheduler (:mod:`nova_ext.scheduler.nova_patches`) and
  ``nova-ext-manage explain`` open every request with :class:`LiveCloud`:
  the API and cell databases, glance and placement, through Nova's own
  objects and clients, each answer kept for its ``[nova_ext]`` TTL;
* ``nova-ext-manage simulate`` opens them with its model of a cloud
  (:class:`nova_ext.simulator.cloud.SimulatedCloud`), the property tests
  and benchmarks with theirs.

A :class:`Cloud` is the list of questions; each method names the plugin
that asks it. The failure-domain aggregates are not among them: they come
from nova-scheduler's HostManager, which the request is opened with too.

State: :class:`LiveCloud` objects hold none; the answers they keep live in
this module's lookups below, one per ``[nova_ext]`` TTL option, each
bounded, per process, and forgotten by :func:`nova_ext.cache.forget_all`.
"""

import collections

import cachetools
from oslo_log import log as logging

from nova import context as nova_context
from nova.db.main import api as main_db
from nova.db.main import models
from nova.image import glance
from nova import objects
from nova.scheduler.client import report

from nova_ext import cache
from nova_ext.scheduler import failure_domains
from nova_ext.scheduler import group_members
from nova_ext.scheduler import spread_ledger

LOG = logging.getLogger(__name__)


class Cloud(object):
    """The questions nova-ext's scheduler plugins ask a cloud."""

    def same_as(self, other):
        """Whether ``other`` answers as this cloud does (what was worked
        out from one serves the other).
        """
        return other is self

    def aggregates_with_key(self, context, key):
        """The ``objects.Aggregate`` objects whose metadata has ``key``
        (the host_class request filter).
        """
        raise NotImplementedError()

    def image_properties(self, context, image_id):
        """Image ``image_id``'s properties, all of them, as glance keeps
        them (the host_class request filter: Nova's ImageMetaProps drops
        the ones it does not know).
        """
        raise NotImplementedError()

    def hosts_running_image(self, image_id):
        """A frozenset of the names of the hosts running an instance of
        ``image_id`` (ImageLocalityWeigher).
        """
        raise NotImplementedError()

    def trait_exists(self, trait):
        """Whether placement knows ``trait``: True, False, or a text saying
        why it could not tell (the maintenance request filter).
        """
        raise NotImplementedError()

    def failure_domain_traits(self, level):
        """{compute-node provider name: set of domains} its
        ``CUSTOM_NOVA_EXT_FD_<LEVEL>_<DOMAIN>`` traits name at ``level``
        (:class:`nova_ext.scheduler.failure_domains.Domains`).
        """
        raise NotImplementedError()

    def group_members(self, context, group_uuid):
        """{member uuid: frozenset of hosts it holds resources on} for
        server group ``group_uuid`` (:mod:`nova_ext.scheduler.group_members`:
        what a request of the group counts). A request opened with its
        members counted already never asks.
        """
        raise NotImplementedError()

    def record_claims(self, context, group_uuid, claimed, counted):
        """Keep the hosts a turn of the group claimed (``claimed``: {member:
        host}) for the group's next turn to count, and forget what the
        turn's own count (``counted``) found settled. A cloud whose counts
        need no record (a model's) keeps none.
        """


class LiveCloud(Cloud):
    """The cloud nova-scheduler runs in, asked through Nova's own objects
    and clients.
    """

    def same_as(self, other):
        # every LiveCloud of a process asks the same databases, clients
        # and caches: one is opened per request
        return isinstance(other, LiveCloud)

    def aggregates_with_key(self, context, key):
        return objects.AggregateList.get_by_metadata_key(context, key)

    def image_properties(self, context, image_id):
        def ask_glance(image_id):
            meta = glance.API().get(context, image_id)
            return dict(meta.get('properties') or {})

        return image_properties_by_id.get(image_id, ask_glance)

    def hosts_running_image(self, image_id):
        return hosts_by_image.get(image_id, _ask_cells_for_image)

    def trait_exists(self, trait):
        if trait in _traits_known:
            return True
        try:
            resp = report.report_client_singleton().get(
                '/traits/%s' % trait, version='1.6')
        except Exception as error:  # noqa: a failing lookup fails no request
            return str(error)
        if resp.status_code == 204:
            _traits_known[trait] = True
            return True
        if resp.status_code == 404:
            return False
        return '%s %s' % (resp.status_code, resp.text)

    def failure_domain_traits(self, level):
        return trait_domains_by_level.get(level, _domains_from_traits)

    def group_members(self, context, group_uuid):
        return group_members.where(context, group_uuid)

    def record_claims(self, context, group_uuid, claimed, counted):
        try:
            spread_ledger.record(group_uuid, claimed,
                                 getattr(counted, 'settled', ()))
        except spread_ledger.Unavailable:
            pass  # before db sync: the counts read placement instead


# -- what LiveCloud keeps -----------------------------------------------------

# {image id: its properties}, each for [nova_ext]
# host_class_image_cache_seconds: an image's properties rarely change
image_properties_by_id = cache.TTLLookup('host_class_image_cache_seconds')

# {image id: hosts running it}, for [nova_ext] image_locality_cache_seconds
# and refreshed in the background past it (a preference one refresh old is
# as good, and no request waits for the cells but the first per image)
hosts_by_image = cache.RefreshAheadLookup('image_locality_cache_seconds')

# {level: {provider name: domains}} from placement's traits, for [nova_ext]
# failure_domain_cache_seconds
trait_domains_by_level = cache.TTLLookup('failure_domain_cache_seconds')

# Traits placement was seen to know, for TRAIT_KNOWN_SECONDS. Placement
# refuses (400) a query forbidding a trait it does not know, and the
# maintenance trait exists only once "nova-ext-manage host maintenance on"
# created it; a custom trait is deleted by hand, if ever, and placement
# refuses that while a provider carries it. "Unknown" is asked again at the
# next request, so the first "maintenance on" counts at once.
TRAIT_KNOWN_SECONDS = 300
_traits_known = cachetools.TTLCache(maxsize=16, ttl=TRAIT_KNOWN_SECONDS)
cache.register_reset(_traits_known.clear)


@main_db.pick_context_manager_reader
def _hosts_running_image_in_cell(context, image_id):
    rows = (context.session.query(models.Instance.host)
            .filter(models.Instance.image_ref == image_id,
                    models.Instance.deleted == 0,
                    models.Instance.host.isnot(None))
            .distinct())
    return {host for host, in rows}


def _ask_cells_for_image(image_id):
    """The hosts running ``image_id``: one query per cell (cell0 holds no
    running instance); a cell that does not answer gives its hosts no
    preference.
    """
    results = nova_context.scatter_gather_skip_cell0(
        nova_context.get_admin_context(), _hosts_running_image_in_cell,
        image_id)
    answered = []
    for cell_uuid, result in results.items():
        if nova_context.is_cell_failure_sentinel(result):
            LOG.warning("nova-ext: cell %s did not say which hosts run "
                        "image %s; its hosts get no image-locality "
                        "preference", cell_uuid, image_id)
            continue
        answered.append(result)
    # one copy of thousands of names, not two
    return frozenset().union(*answered)


def _domains_from_traits(level):
    """{provider name: set of domains} for every provider with a
    ``CUSTOM_NOVA_EXT_FD_<LEVEL>_`` trait: one placement call to list the
    traits, one per trait (domain) for its providers.
    """
    prefix = failure_domains.trait_prefix(level)
    found = collections.defaultdict(set)
    try:
        # Inside: a client that cannot be built (no [placement]
        # credentials) is placement trouble too.
        client = report.report_client_singleton()
        resp = client.get('/traits?name=startswith:' + prefix,
                          version='1.6')
        resp.raise_for_status()
        for trait in resp.json()['traits']:
            resp = client.get('/resource_providers?required=' + trait,
                              version='1.18')
            resp.raise_for_status()
            for provider in resp.json()['resource_providers']:
                found[provider['name']].add(trait[len(prefix):])
    except Exception as error:
        # placement trouble must cost this source, not the scheduler
        LOG.warning("nova-ext: could not read the %s* traits from "
                    "placement (%s); failure domains at level %s come "
                    "from aggregates only for now", prefix, error, level)
        return {}
    return dict(found)
