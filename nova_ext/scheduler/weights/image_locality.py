# SPDX-License-Identifier: Apache-2.0
"""ImageLocalityWeigher: prefer hosts already running the requested image.

A compute downloads an image once into its image cache (``_base``) and boots
later instances of it from there, so a host already running the image boots
without a download. Driven by ``[nova_ext] image_locality_weight_multiplier``
(aggregate metadata ``nova_ext:image_locality_weight_multiplier`` overrides
it): weight 1 for hosts running an instance of the image, 0 otherwise.
Servers booted from volume have no image to cache and get 0 everywhere.

Which hosts run an image the request's cloud says
(``hosts_running_image``, :mod:`nova_ext.scheduler.cloud`): in
nova-scheduler, one query per cell (distinct ``host`` of the non-deleted
instances with that ``image_ref``), cached per image for ``[nova_ext]
image_locality_cache_seconds`` and refreshed in the background past it, so
only the first request for an image waits for the cells. The scheduler's
own per-host instance lists are often uuid-only stubs (after a restart or a
sync), so they cannot tell which image an instance runs. Per host the
weigher is a set lookup.

Outside a request nova-ext opened (nova-ext not activated in this
nova-scheduler) it stands aside, with a warning once per process.
"""

import numpy

from nova_ext.scheduler import scheduling_request
from nova_ext.scheduler import weights


class ImageLocalityWeigher(weights.PerRequestWeigher):

    multiplier_option = 'image_locality_weight_multiplier'

    def prepare(self, spec_obj, host_states):
        if 'is_bfv' in spec_obj and spec_obj.is_bfv:
            return None
        image = spec_obj.image if 'image' in spec_obj else None
        if image is None or 'id' not in image:
            return None
        request = scheduling_request.find(spec_obj)
        if request is None:
            scheduling_request.warn_not_activated(type(self).__name__)
            return None
        return request, request.cloud.hosts_running_image(image.id)

    def weigh_all(self, host_states, state):
        if state is None:
            return [0.0] * len(host_states)
        request, hosts_with_image = state
        # 1.0 on a host running the image, else 0.0; no Python bytecode
        # per host, for the 10,000 candidates of a large cloud
        return numpy.fromiter(
            map(hosts_with_image.__contains__, request.names(host_states)),
            dtype=float, count=len(host_states))
