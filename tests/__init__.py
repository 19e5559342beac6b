# SPDX-License-Identifier: Apache-2.0
"""nova-ext's tests.

The property-based tests (hypothesis) share one example budget, chosen by
``NOVA_EXT_HYPOTHESIS_PROFILE``: ``ci`` (the default: a fixed number of
examples, derandomized, so that CI is repeatable and bounded) or ``long``
(a search of 5,000 examples a property, random, for a developer's machine).
"""

import os

import hypothesis

hypothesis.settings.register_profile(
    'ci', max_examples=300, derandomize=True, deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow,
                           hypothesis.HealthCheck.data_too_large],
    database=None)
hypothesis.settings.register_profile(
    'long', max_examples=5000, deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow,
                           hypothesis.HealthCheck.data_too_large])
hypothesis.settings.load_profile(
    os.environ.get('NOVA_EXT_HYPOTHESIS_PROFILE', 'ci'))
