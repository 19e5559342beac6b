# SPDX-License-Identifier: Apache-2.0
"""The product apart from its workshop.

What runs in Nova's processes and the operator commands must install into
Nova's environment without the sandbox's test fixtures or the simulator's
plotting library: those are the ``sandbox`` and ``simulator`` extras.
"""

import ast
import pathlib

import testtools

import nova_ext

PACKAGE = pathlib.Path(nova_ext.__file__).parent
REPO = PACKAGE.parent
WORKSHOP_LIBRARIES = ('matplotlib', 'placement', 'wsgi_intercept',
                      'fixtures', 'testtools', 'nova.tests', 'nova.test')
# Only these may import them: the sandbox is the workshop, and the tempest
# plugin runs inside tempest's environment.
WORKSHOP_PACKAGES = ('sandbox', 'tempest')


def imported_modules(path):
    """Modules imported at module level (not inside functions)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


class ProductImportsTest(testtools.TestCase):

    def test_product_modules_import_no_workshop_library(self):
        offenders = []
        for path in sorted(PACKAGE.rglob('*.py')):
            relative = path.relative_to(PACKAGE)
            if relative.parts[0] in WORKSHOP_PACKAGES:
                continue
            for module in imported_modules(path):
                if any(module == lib or module.startswith(lib + '.')
                       for lib in WORKSHOP_LIBRARIES):
                    offenders.append('%s: %s' % (relative, module))
        self.assertEqual([], offenders)

    def test_runtime_requirements_carry_no_workshop_library(self):
        names = [line.split('#')[0].strip().split('>')[0].split('=')[0]
                 .split('<')[0].strip().lower()
                 for line in (REPO / 'requirements.txt').read_text()
                 .splitlines()]
        for library in ('matplotlib', 'openstack-placement',
                        'wsgi-intercept'):
            self.assertNotIn(library, names)

    def test_extras_name_the_workshop_libraries(self):
        setup_cfg = (REPO / 'setup.cfg').read_text()
        extras = setup_cfg.split('[extras]', 1)[1].split('\n[', 1)[0]
        self.assertIn('sandbox =\n    openstack-placement', extras)
        self.assertIn('simulator =\n    matplotlib', extras)


class ConstraintsTest(testtools.TestCase):
    """The 2026.1 pins are 2026.2's but for what 2026.1 needs older, so a
    new dependency pinned in one file cannot be forgotten in the other.
    """

    RELEASE_SPECIFIC = {'nova', 'openstack-placement', 'oslo.policy',
                        'keystone', 'glance'}

    @staticmethod
    def pins(name):
        return dict(line.split('==', 1) for line in
                    (REPO / name).read_text().splitlines()
                    if '==' in line and not line.startswith('#'))

    def test_releases_differ_only_where_2026_1_needs_it(self):
        current = self.pins('constraints.txt')
        previous = self.pins('constraints-2026.1.txt')
        self.assertEqual(set(current), set(previous))
        differing = {name for name in current
                     if current[name] != previous[name]}
        self.assertEqual(self.RELEASE_SPECIFIC, differing)
