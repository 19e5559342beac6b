# SPDX-License-Identifier: Apache-2.0
# Before any test's fixtures: numpy's first import calls os.uname, which
# Nova's GenericPoisonFixture forbids, and BinPackingWeigher needs numpy
# when a test's scheduler loads the weighers (nova_ext.sandbox.cloud does
# the same for the sandbox).
import numpy  # noqa: F401

from tests import logs

logs.route_nova_logs()
