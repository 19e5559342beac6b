# SPDX-License-Identifier: Apache-2.0
"""nova-ext scheduler filters.

Operators list :func:`all_filters` beside Nova's own in nova.conf::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_ext.scheduler.filters.all_filters
    enabled_filters = ...,FailureDomainAntiAffinityFilter
"""

from nova.scheduler import filters

from nova_ext import loader

NAMESPACE = 'nova_ext.scheduler.filters'


def all_filters():
    """Every filter class registered in the ``nova_ext.scheduler.filters``
    entry-point namespace, ours and third parties'.
    """
    return loader.load_plugin_classes(NAMESPACE, filters.BaseHostFilter)
