# SPDX-License-Identifier: Apache-2.0
"""Strict whole numbers: what a hint, extra spec or aggregate key accepts."""

import testtools

from nova_ext import numbers


class ParseWholeNumberTest(testtools.TestCase):

    def test_plain_decimal_is_accepted(self):
        self.assertEqual(0, numbers.parse_whole_number('0'))
        self.assertEqual(42, numbers.parse_whole_number('42'))
        self.assertEqual(3, numbers.parse_whole_number(3))

    def test_what_int_accepts_but_a_person_did_not_mean_is_refused(self):
        for text in ('1_000', '+3', '-1', ' 3', '3 ', '03', '\uff13',
                     '\u0663', '3.0', '', '0x10', '1e3', True, 2.0, None,
                     ['2']):
            self.assertRaises(ValueError, numbers.parse_whole_number, text)

    def test_bounds_are_checked_before_converting(self):
        self.assertRaises(ValueError, numbers.parse_whole_number, '9' * 5000)
        self.assertRaises(ValueError, numbers.parse_whole_number, '0',
                          minimum=1)
        self.assertRaises(ValueError, numbers.parse_whole_number, '11',
                          maximum=10)
        self.assertEqual(10, numbers.parse_whole_number('10', maximum=10))

    def test_the_message_says_what_is_accepted(self):
        error = self.assertRaises(ValueError, numbers.parse_whole_number,
                                  '1_0', 1, 64)
        self.assertEqual('must be a whole number from 1 to 64 in plain '
                         'decimal digits', str(error))
