# SPDX-License-Identifier: Apache-2.0
"""The confidence interval tools/benchmark_scheduler.py puts on the median
request-by-request overhead: it must hold the true median as often as it
claims, whatever the shape of the timings.
"""

import random

from nova import test

from tests import tool_scripts


class MedianIntervalTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.median_interval = tool_scripts.load(
            'benchmark_scheduler').median_interval

    def test_order_statistics_of_the_sign_test(self):
        # the textbook ranks: 40th and 61st of 100; none below 6 values
        self.assertEqual((50.5, 40, 61),
                         self.median_interval(list(range(1, 101))))
        self.assertEqual((3.5, 1, 6), self.median_interval([6, 5, 4, 3, 2, 1]))
        self.assertEqual((3, None, None),
                         self.median_interval([1, 2, 3, 4, 5]))

    def test_long_runs(self):
        # 2 ** n is past a float's range from 1,024 values on
        median, low, high = self.median_interval(list(range(1, 3001)))
        self.assertEqual(1500.5, median)
        # symmetric ranks, about 1.96 x sqrt(n) / 2 = 54 each side
        self.assertEqual(3001, low + high)
        self.assertTrue(1440 < low < 1450, low)

    def test_holds_the_true_median_as_often_as_claimed(self):
        # Given ratios drawn from a skewed distribution (a slow request
        # now and then, as on a shared machine) with a known median
        rng = random.Random(19)
        true_median = 1.04 + 0.05 * 0.6931471805599453  # exponential's
        held = 0
        trials = 2000
        for _ in range(trials):
            ratios = [1.04 + rng.expovariate(20.0) for _ in range(24)]
            # When the interval is computed from 24 requests
            _median, low, high = self.median_interval(ratios)
            held += low <= true_median <= high
        # Then it holds the true median at least 95 % of the time, give
        # or take the simulation's own error (±1 % at 2,000 trials)
        self.assertGreaterEqual(held / trials, 0.94)
        # and it is not the whole range of the values
        self.assertLess(held / trials, 1.0)
