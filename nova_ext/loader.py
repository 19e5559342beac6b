# SPDX-License-Identifier: Apache-2.0
"""Find nova-ext plugins, ours and third parties', through stevedore.

Nova loads scheduler filters and weighers from class paths or from functions
returning classes (``nova/loadables.py``). ``all_filters``/``all_weighers`` in
``nova_ext.scheduler`` are such functions; they return every class registered
in our entry-point namespace. A plugin that fails to import, or that is not
the kind of class its namespace expects, is logged and skipped: one broken
distribution must not stop nova-scheduler from starting.
"""

from oslo_log import log as logging
from stevedore import extension

LOG = logging.getLogger(__name__)


def load_plugin_classes(namespace, base_class):
    """Return the classes registered in ``namespace`` that subclass
    ``base_class``, sorted by entry-point name so the order is stable.
    """

    def _log_load_failure(manager, entry_point, error):
        LOG.error("nova-ext: skipping plugin %(name)s = %(value)s from "
                  "namespace %(ns)s: it failed to load: %(error)s",
                  {'name': entry_point.name, 'value': entry_point.value,
                   'ns': namespace, 'error': error})

    manager = extension.ExtensionManager(
        namespace, invoke_on_load=False,
        on_load_failure_callback=_log_load_failure)

    classes = []
    for ext in sorted(manager, key=lambda e: e.name):
        plugin = ext.plugin
        if not (isinstance(plugin, type) and issubclass(plugin, base_class)):
            LOG.error("nova-ext: skipping plugin %(name)s from namespace "
                      "%(ns)s: %(plugin)r is not a subclass of %(base)s",
                      {'name': ext.name, 'ns': namespace, 'plugin': plugin,
                       'base': base_class.__name__})
            continue
        classes.append(plugin)
    LOG.info("nova-ext: loaded %(count)d plugin(s) from %(ns)s: %(names)s",
             {'count': len(classes), 'ns': namespace,
              'names': ', '.join(c.__name__ for c in classes) or 'none'})
    return classes
