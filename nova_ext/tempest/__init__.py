# SPDX-License-Identifier: Apache-2.0
"""nova-ext's tempest plugin (entry point ``tempest.test_plugins``).

Tests a running cloud through its APIs only, with tempest's stable surfaces
(``tempest.lib``, ``tempest.test``, ``tempest.config``)::

    tempest run --regex '^nova_ext\\.tempest'

``[nova_ext_feature_enabled]`` in tempest.conf says which nova-ext features
the cloud runs (the DevStack plugin's test-config phase and the loopback
cloud set it); tests of a disabled feature skip, saying so.
"""
