# SPDX-License-Identifier: Apache-2.0
"""nova_ext: flavor extra specs are validated by nova-api itself.

Nova loads our validators through its ``nova.api.extra_spec_validators``
namespace; from microversion 2.86 a bad ``nova_ext:`` key or value is a 400
that names the key and what it accepts, and nothing is stored.
"""

from nova.tests.functional.api import client

from tests.functional import base


class ExtraSpecValidationTest(base.NovaExtTestCase):
    HOSTS = ['host1']

    def setUp(self):
        super().setUp()
        self.flavor = self.create_flavor('m1')

    def _set(self, key, value):
        return self.admin_api.post_extra_spec(
            self.flavor, {'extra_specs': {key: value}})

    def _assert_refused(self, key, value, *expected):
        error = self.assertRaises(client.OpenStackApiException,
                                  self._set, key, value)
        self.assertEqual(400, error.response.status_code)
        body = error.response.text
        self.assertIn(key, body)
        for text in expected:
            self.assertIn(text, body)
        self.assertNotIn(key, self.admin_api.get_extra_specs(self.flavor))

    def test_unknown_level_names_key_and_levels(self):
        self._assert_refused('nova_ext:spread_level', 'rakc',
                             'rack, row, power')

    def test_levels_follow_nova_conf(self):
        self.flags(failure_domain_levels=['pdu'], group='nova_ext')
        self._assert_refused('nova_ext:spread_level', 'rack', 'pdu')
        self._set('nova_ext:spread_level', 'pdu')
        self.assertEqual(
            'pdu', self.admin_api.get_extra_specs(
                self.flavor)['nova_ext:spread_level'])

    def test_max_per_domain_must_be_positive_integer(self):
        # Nova's own int() check would take '1_000', '+3', ' 3' and '３'.
        for bad in ('0', 'two', '1_000', '+3', ' 3', '\uff13', '03',
                    '10000000', '9' * 200):
            self._assert_refused('nova_ext:spread_max_per_domain', bad,
                                 'a whole number from 1 to 1000000 in plain '
                                 'decimal digits')

    def test_unknown_key_in_our_namespace_is_refused(self):
        self._assert_refused('nova_ext:spread_levle', 'rack')

    def test_valid_specs_are_stored(self):
        self._set('nova_ext:spread_level', 'row')
        self._set('nova_ext:spread_max_per_domain', '3')
        specs = self.admin_api.get_extra_specs(self.flavor)
        self.assertEqual('row', specs['nova_ext:spread_level'])
        self.assertEqual('3', specs['nova_ext:spread_max_per_domain'])

    def test_spread_constraints_are_parsed_by_nova_api(self):
        key = 'nova_ext:spread_constraints'
        for bad, constraint in (
                ('rack:max=0', "'rack:max=0'"),
                ('rack:max=1;row:skew=1,min_domains=x', 'min_domains'),
                ('rakc:skew=1', "'rakc:skew=1'"),
                ('rack:max=1,min_domains=2', 'only goes with skew'),
                ('rack:max=1;rack:max=2', "'rack:max=2' repeats")):
            self._assert_refused(key, bad, constraint,
                                 '<level>:max=<N>|skew=<N>')
        self._set(key, 'rack:max=1;row:skew=1,min_domains=3,soft')
        self._set(key, 'host:skew=2,hard')
        self.assertEqual('host:skew=2,hard',
                         self.admin_api.get_extra_specs(self.flavor)[key])

    def test_spread_constraint_levels_follow_nova_conf(self):
        self.flags(failure_domain_levels=['pdu'], group='nova_ext')
        self._assert_refused('nova_ext:spread_constraints', 'rack:max=1',
                             'known: pdu, host')
        self._set('nova_ext:spread_constraints', 'pdu:max=1')
