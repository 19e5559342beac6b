# SPDX-License-Identifier: Apache-2.0
"""A test-only virt driver whose every spawn fails, on a host the
scheduler prefers.

Nova's fake driver with twice its memory (Nova's RAMWeigher puts this host
first) and a ``spawn`` that raises: nova-compute gives the claim back and
asks the conductor to reschedule the server to its next alternate host.
Nova loads a compute driver from ``nova.virt`` only: this module, once
imported (``NOVA_EXT_TEST_IMPORTS=tests.system.failing_driver`` in the
environment of :mod:`tests.system.launch`), is also
``nova.virt.nova_ext_failing_driver``. Set on one compute with::

    [DEFAULT]
    compute_driver = nova_ext_failing_driver.FailingDriver
"""

import sys

from oslo_config import cfg

from nova.virt import fake

CONF = cfg.CONF

NAME = 'nova_ext_failing_driver'
MESSAGE = 'failing_driver: spawn refused on purpose on %s'


class FailingDriver(fake.FakeDriverWithoutFakeNodes):

    memory_mb = fake.FakeDriver.memory_mb * 2

    def spawn(self, context, instance, *args, **kwargs):
        raise RuntimeError(MESSAGE % CONF.host)


sys.modules['nova.virt.' + NAME] = sys.modules[__name__]
