# SPDX-License-Identifier: Apache-2.0
"""Imports at the top of a module unless a comment says why.

An import inside a function hides a module's dependencies from its reader;
nova-ext keeps one only for a reason a comment gives: a CLI that starts
without Nova's modules, the engine plugin every Nova process loads, an
extra (matplotlib, testtools) or a module that loads without Nova. The
comment stands on the import's line or directly above its block of
imports.
"""

import ast
import pathlib

import testtools

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / 'nova_ext'


def function_imports(source):
    """Line numbers of the imports inside functions of ``source``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    found.add(inner.lineno)
    return found


def said_why(lines, lineno):
    """Whether the import at ``lineno`` (1-based) carries a comment, on its
    line or above the block of imports it belongs to.
    """
    if '#' in lines[lineno - 1]:
        return True
    index = lineno - 2
    while index >= 0 and (not lines[index].strip() or lines[index].strip()
                          .startswith(('import ', 'from '))):
        index -= 1
    return index >= 0 and lines[index].strip().startswith('#')


class ImportsTest(testtools.TestCase):

    def test_every_import_inside_a_function_says_why(self):
        bare = []
        for path in sorted(PACKAGE.rglob('*.py')):
            source = path.read_text()
            lines = source.splitlines()
            for lineno in sorted(function_imports(source)):
                if not said_why(lines, lineno):
                    bare.append('%s:%d: %s' % (
                        path.relative_to(PACKAGE.parent), lineno,
                        lines[lineno - 1].strip()))
        self.assertEqual([], bare, 'imports inside functions with no '
                         'comment saying why (move them to the top or say '
                         'why not)')

    def test_the_rule_reads_a_block_as_one(self):
        lines = ['def f():', '    """Doc."""', '    # here: why',
                 '    import os', '', '    from nova import objects',
                 '    return os']
        self.assertTrue(said_why(lines, 4))
        self.assertTrue(said_why(lines, 6))
        self.assertFalse(said_why(lines[:2] + lines[3:], 3))
        self.assertEqual({4, 6}, function_imports('\n'.join(lines)))
