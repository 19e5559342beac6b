# SPDX-License-Identifier: Apache-2.0
"""The supported Nova releases, said the same way everywhere they are said.

The constraints files are what CI tests (one per release, each pinning
Nova); setup.cfg's summary, requirements.txt's range, the README, the
documentation's index and its upgrades page must name exactly those
releases, as "Nova <major> (<OpenStack release>)" pairs.
"""

import pathlib
import re

import testtools

REPO = pathlib.Path(__file__).resolve().parents[2]
CONSTRAINTS = {'constraints.txt': '2026.2',
               'constraints-2026.1.txt': '2026.1'}
# "Nova 34 (2026.2)", "**Nova 34** (2026.2)", "Nova 33 (2026.1; ..."
NAMED = re.compile(r'Nova (\d+) \((\d{4}\.\d)')


def tested_releases():
    """{OpenStack release: Nova major} from the constraints files."""
    releases = {}
    for name, release in CONSTRAINTS.items():
        text = (REPO / name).read_text()
        pin = re.search(r'^nova==(\d+)\.', text, re.MULTILINE)
        releases[release] = int(pin.group(1))
    return releases


def named_releases(path):
    text = (REPO / path).read_text().replace('*', '')
    text = re.sub(r'\s+', ' ', text)
    return {release: int(major) for major, release in NAMED.findall(text)}


class SupportedReleasesTest(testtools.TestCase):

    def test_two_releases_are_tested(self):
        self.assertEqual({'2026.2': 34, '2026.1': 33}, tested_releases())

    def test_every_place_names_the_tested_releases(self):
        tested = tested_releases()
        for path in ('setup.cfg', 'README.md', 'doc/source/index.rst'):
            self.assertEqual(tested, named_releases(path), path)

    def test_upgrades_page_table_lists_them(self):
        text = (REPO / 'doc/source/upgrades.rst').read_text()
        rows = dict(re.findall(r'^(\d{4}\.\d) \S*\s+(\d+)\.x', text,
                               re.MULTILINE))
        self.assertEqual(tested_releases(),
                         {release: int(major)
                          for release, major in rows.items()})

    def test_requirements_range_is_exactly_the_tested_majors(self):
        text = (REPO / 'requirements.txt').read_text()
        low, high = map(int, re.search(
            r'^nova>=(\d+)\.0\.0,<(\d+)', text, re.MULTILINE).groups())
        self.assertEqual(sorted(tested_releases().values()),
                         list(range(low, high)))

    def test_python_requires_matches_the_classifiers(self):
        text = (REPO / 'setup.cfg').read_text()
        self.assertIn('python_requires = >=3.11', text)
        versions = re.findall(r'Programming Language :: Python :: (3\.\d+)',
                              text)
        self.assertEqual(['3.11'], versions)
