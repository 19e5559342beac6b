# SPDX-License-Identifier: Apache-2.0
"""Hypothesis settings for every property test (imported by tests/unit).

CI runs the ``ci`` profile: a fixed, bounded number of examples, generated
from a fixed seed (``derandomize``), no example database written, no
deadline (the machine is shared; a slow example is not a failure). Every
run tries the same inputs, so a failure in CI is one you can reproduce.

A longer, randomised search locally::

    NOVA_EXT_HYPOTHESIS_PROFILE=search python -m testtools.run \\
        tests.unit.test_configure_properties

(``search``: 5,000 examples a test, a new seed each run, failures kept in
``.hypothesis/`` and replayed first next time). A shrunk counterexample it
finds becomes an ordinary regression test (``test_configure_properties``'s
``REGRESSIONS``).
"""

import os

import hypothesis

hypothesis.settings.register_profile(
    'ci', max_examples=60, derandomize=True, database=None, deadline=None,
    print_blob=True,
    suppress_health_check=[hypothesis.HealthCheck.too_slow,
                           hypothesis.HealthCheck.data_too_large])
hypothesis.settings.register_profile(
    'search', max_examples=5000, deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow,
                           hypothesis.HealthCheck.data_too_large])
hypothesis.settings.load_profile(
    os.environ.get('NOVA_EXT_HYPOTHESIS_PROFILE', 'ci'))
