# SPDX-License-Identifier: Apache-2.0
"""Where Nova's log lines go in the unit and functional tests.

Nova's log lines written outside a test's log capture (its import-time
notices, thread pools shutting down after each test) go to
``.test-logs/<pid>.log``, not into the test runner's output: what a person
reads there is which tests ran and how they ended.
"""

import logging
import os
import warnings

LOG_DIR = os.environ.get('NOVA_EXT_TEST_LOG_DIR') or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    '.test-logs')


def route_nova_logs():
    """Called by tests/unit and tests/functional only: the system and
    loopback tiers start real services through ``python -m tests....``,
    whose logs must stay theirs.
    """
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    os.makedirs(LOG_DIR, exist_ok=True)
    handler = logging.FileHandler(
        os.path.join(LOG_DIR, '%d.log' % os.getpid()))
    handler.setFormatter(logging.Formatter(
        '%(asctime)s %(levelname)s %(name)s %(message)s'))

    def route():
        root = logging.getLogger()
        for other in list(root.handlers):
            root.removeHandler(other)
        root.addHandler(handler)

    route()
    # nova.test sets up oslo.log with a stdout handler when imported.
    from nova import test  # noqa: F401
    route()
