# SPDX-License-Identifier: Apache-2.0
"""An embedded Nova for trying nova-ext and for its functional tests.

Runs Nova's own services in one process on Nova's functional-test fixtures
(shipped in the nova wheel): API (real WSGI app and policy), conductor,
scheduler, fake-driver computes and placement (its real WSGI app), over
sqlite and in-memory messaging. Needs the test requirements installed
(openstack-placement, wsgi-intercept).
"""
