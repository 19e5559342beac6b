# SPDX-License-Identifier: Apache-2.0
"""What nova-ext keeps between calls is listed in doc/source/state.rst,
all of it and nothing else: a module-level name that can hold state (a
container or an object built at import, or a name a function rebinds with
``global``) in the product code must have its row there (owner, bound,
life), and a row must name something that exists.
"""

import ast
import pathlib
import re

import fixtures
import testtools

TOP = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = TOP / 'nova_ext'
TABLE = TOP / 'doc' / 'source' / 'state.rst'

# Calls that build a value that never changes, or a lock (which guards the
# state listed, and is not state itself).
IMMUTABLE_CALLS = {
    'compile', 'namedtuple', 'getLogger', 'OptGroup', 'attrgetter',
    'itemgetter', 'join', 'dirname', 'frozenset', 'tuple', 'partial',
    'Lock', 'RLock',
}
CONTAINERS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp,
              ast.SetComp)
# alembic's revision identifiers, at the top of each migration
ALEMBIC = {'revision', 'down_revision', 'branch_labels', 'depends_on'}


def _holds_state(name, value):
    if name.isupper() or (name.startswith('__') and name.endswith('__')):
        return False  # a constant, or a module attribute Python defines
    if name in ALEMBIC or name.endswith('opts') and isinstance(
            value, ast.List):
        return False  # migration ids; oslo.config option declarations
    if isinstance(value, CONTAINERS):
        return True
    if isinstance(value, ast.Call):
        function = value.func
        called = getattr(function, 'attr', None) or getattr(
            function, 'id', None)
        return called not in IMMUTABLE_CALLS
    return False


def state_in_code(package=PACKAGE):
    """{'package.module.name'} of every module-level name holding state."""
    found = set()
    for path in package.rglob('*.py'):
        module = '.'.join(path.relative_to(package.parent).with_suffix(
            '').parts)
        module = module.removesuffix('.__init__')
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Name) and _holds_state(
                        target.id, value):
                    found.add('%s.%s' % (module, target.id))
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found.update('%s.%s' % (module, name) for name in node.names)
    return found


def state_in_table():
    """{'nova_ext.module.name'} named in the first column of the table."""
    named = set()
    for line in TABLE.read_text().splitlines():
        if line.startswith('   * - ``nova_ext.'):
            named.update(re.findall(r'``(nova_ext\.[\w.]+)``', line))
    return named


class StateTableTest(testtools.TestCase):

    def test_every_state_is_in_the_table_and_nothing_else(self):
        in_code, in_table = state_in_code(), state_in_table()
        self.assertEqual(set(), in_code - in_table,
                         'kept between calls but not in %s: say who owns '
                         'it, its bound and its life' % TABLE.name)
        self.assertEqual(set(), in_table - in_code,
                         'in %s but gone from the code' % TABLE.name)

    def test_the_scan_finds_each_kind_of_state(self):
        # the scan itself, on each kind it must find and each it must not
        source = '\n'.join([
            'CONSTANT = {}', 'cache = {}', 'seen = set()',
            'lookup = TTLLookup("x")', 'lock = threading.Lock()',
            'pattern = re.compile("x")', 'feature_opts = [1]',
            'def f():', '    global flag', '    flag = True'])
        package = pathlib.Path(self.useFixture(
            fixtures.TempDir()).path) / 'nova_ext'
        package.mkdir()
        (package / 'scanned.py').write_text(source)
        self.assertEqual({'nova_ext.scanned.%s' % name
                          for name in ('cache', 'seen', 'lookup', 'flag')},
                         state_in_code(package))
