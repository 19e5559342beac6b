# SPDX-License-Identifier: Apache-2.0
"""Every ``nova_ext:`` flavor extra spec, accepted and refused (400) by
the real nova-api (microversion 2.86 and later validate extra specs).
"""

from tempest import config
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from nova_ext.tempest.tests import base

CONF = config.CONF


class ExtraSpecValidationTest(base.NovaExtTest):
    feature = 'extra_spec_validators'

    def _accepted(self):
        levels = CONF.nova_ext.failure_domain_levels
        cases = [
            ('nova_ext:spread_level', levels[0]),
            ('nova_ext:spread_max_per_domain', '2'),
            ('nova_ext:host_class', 'gpu.large-1'),
            ('nova_ext:oem_strings', 'asset=A-1;licence=win2022'),
            ('nova_ext:memory_sharing', 'false'),
        ]
        if CONF.nova_ext.quota_classes:
            cases.append(('nova_ext:quota_class',
                          CONF.nova_ext.quota_classes[0]))
        return cases

    REFUSED = [
        ('nova_ext:spread_level', 'galaxy'),
        ('nova_ext:spread_max_per_domain', '0'),
        ('nova_ext:spread_max_per_domain', 'many'),
        ('nova_ext:host_class', 'no spaces allowed'),
        ('nova_ext:quota_class', 'no-such-class'),
        ('nova_ext:oem_strings', ';'.join(['x'] * 17)),
        ('nova_ext:memory_sharing', 'sometimes'),
        ('nova_ext:no_such_key', 'value'),
    ]

    @decorators.idempotent_id('0b0f8f52-6a40-4d43-9c55-4f1f0c1d6e01')
    def test_valid_extra_specs_are_accepted(self):
        flavor = self.create_flavor()
        for key, value in self._accepted():
            body = self.flavors.set_flavor_extra_spec(flavor, **{key: value})
            self.assertEqual(value, body['extra_specs'][key])

    @decorators.idempotent_id('0b0f8f52-6a40-4d43-9c55-4f1f0c1d6e02')
    def test_invalid_extra_specs_are_refused_naming_the_key(self):
        flavor = self.create_flavor()
        for key, value in self.REFUSED:
            error = self.assertRaises(
                lib_exc.BadRequest, self.flavors.set_flavor_extra_spec,
                flavor, **{key: value})
            self.assertIn(key, str(error))
        # nothing invalid was stored
        self.assertEqual(
            {}, self.flavors.list_flavor_extra_specs(flavor)['extra_specs'])
