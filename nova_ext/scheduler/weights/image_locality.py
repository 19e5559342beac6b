# SPDX-License-Identifier: Apache-2.0
"""ImageLocalityWeigher: prefer hosts already running the requested image.

A compute downloads an image once into its image cache (``_base``) and boots
later instances of it from there, so a host already running the image boots
without a download. Driven by ``[nova_ext] image_locality_weight_multiplier``
(aggregate metadata ``nova_ext:image_locality_weight_multiplier`` overrides
it): weight 1 for hosts running an instance of the image, 0 otherwise.
Servers booted from volume have no image to cache and get 0 everywhere.

Which hosts run an image comes from one query per cell (distinct ``host`` of
the non-deleted instances with that ``image_ref``), cached per image for
``[nova_ext] image_locality_cache_seconds``. Past that, the cached answer
still serves while a background thread asks the cells again
(:class:`nova_ext.cache.RefreshAheadLookup`): only the first request for an
image waits for them. The scheduler's own per-host instance lists are often
uuid-only stubs (after a restart or a sync), so they cannot tell which image
an instance runs. Per host the weigher is a set lookup.

Where there is no database (``nova-ext-manage simulate``), the model in
place (:func:`nova_ext.cache.answered_by`) answers instead, uncached.
"""

import operator

from oslo_log import log as logging

from nova import context as nova_context
from nova.db.main import api as main_db
from nova.db.main import models

from nova_ext import cache
from nova_ext.scheduler import weights

LOG = logging.getLogger(__name__)

_HOST_NAME = operator.attrgetter('host')

hosts_by_image = cache.RefreshAheadLookup('image_locality_cache_seconds')


@main_db.pick_context_manager_reader
def _hosts_running_image_in_cell(context, image_id):
    rows = (context.session.query(models.Instance.host)
            .filter(models.Instance.image_ref == image_id,
                    models.Instance.deleted == 0,
                    models.Instance.host.isnot(None))
            .distinct())
    return {host for host, in rows}


def _ask_cells(image_id):
    results = nova_context.scatter_gather_skip_cell0(
        nova_context.get_admin_context(), _hosts_running_image_in_cell,
        image_id)
    answered = []
    for cell_uuid, result in results.items():
        if nova_context.is_cell_failure_sentinel(result):
            LOG.warning("ImageLocalityWeigher: cell %s did not say which "
                        "hosts run image %s; its hosts get no preference",
                        cell_uuid, image_id)
            continue
        answered.append(result)
    # one copy of thousands of names, not two
    return frozenset().union(*answered)


def hosts_running_image(image_id):
    model = cache.model()
    if model is not None:
        return frozenset(model.hosts_running_image(image_id))
    return hosts_by_image.get(image_id, _ask_cells)


class ImageLocalityWeigher(weights.PerRequestWeigher):

    multiplier_option = 'image_locality_weight_multiplier'

    def prepare(self, spec_obj, host_states):
        if 'is_bfv' in spec_obj and spec_obj.is_bfv:
            return frozenset()
        image = spec_obj.image if 'image' in spec_obj else None
        if image is None or 'id' not in image:
            return frozenset()
        return hosts_running_image(image.id)

    def weigh_all(self, host_states, hosts_with_image):
        # 1.0 on a host running the image, else 0.0; no Python bytecode
        # per host, for the 10,000 candidates of a large cloud
        return list(map(float, map(hosts_with_image.__contains__,
                                   map(_HOST_NAME, host_states))))
