# SPDX-License-Identifier: Apache-2.0
"""The loopback tier: a real cloud (keystone, glance, placement, Nova's
services, three computes) driven by the openstack CLI and tempest.

It takes minutes and the machine's MariaDB and RabbitMQ, so a plain
``stestr run`` leaves it out: only ``./run-tests.sh loopback`` (which sets
``NOVA_EXT_LOOPBACK=1``) and ``./run-tests.sh all``, last, run it.
"""

import os
import unittest


def load_tests(loader, tests, pattern):
    if os.environ.get('NOVA_EXT_LOOPBACK') != '1':
        return unittest.TestSuite()
    top = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    tests.addTests(loader.discover(os.path.dirname(__file__),
                                   pattern=pattern or 'test*.py',
                                   top_level_dir=top))
    return tests
