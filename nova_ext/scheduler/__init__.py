# SPDX-License-Identifier: Apache-2.0
"""nova-ext in nova-scheduler: request pre-filters, filters, weighers, and
the per-request wrapper they read (:mod:`.scheduling_request`).

Filters and weighers are loaded by Nova from ``[filter_scheduler]
available_filters`` and ``weight_classes``; loading them does nothing else.
What Nova has no plug point for is activated at one point of
nova-scheduler's start, :func:`activate`, which the SQLAlchemy engine
plugin runs when nova-scheduler first opens its API database through
``[api_database] connection = ...?plugin=nova_ext`` (:mod:`nova_ext.
activation`): the ``[nova_ext] request_filters`` are appended to Nova's
pre-filters, and Nova's scheduler is wrapped where nova-ext needs a hook
it has none for (:mod:`.nova_patches`: each request spanned, a spread
group's requests scheduled in turns). It runs once per process, before the
workers are forked; each forked worker inherits it.
"""


def activate():
    """Activate nova-ext's scheduler hooks in this process (idempotent);
    return the names of the request filters active.
    """
    # here, not at the top: nova-api and nova-conductor run the engine
    # plugin too, and need none of the scheduler's modules
    from nova_ext.scheduler import nova_patches
    from nova_ext.scheduler import request_filters

    nova_patches.install()
    return request_filters.activate()
