# SPDX-License-Identifier: Apache-2.0
"""The Nova internals nova-ext relies on are there, as nova-ext expects them,
in the Nova this venv runs (CI runs this on 2026.1 and 2026.2), and no module
but nova_ext/upstream.py reaches them."""

import ast
import pathlib
import re
import sys
import types

import nova.conf
from nova.scheduler import host_manager
from oslo_config import fixture as config_fixture
import testtools

from nova_ext import upstream

PACKAGE = pathlib.Path(upstream.__file__).parent

# Modules that may still name internals directly: the names each may use
# (None: any, and assignments to Nova's modules too).
EXEMPT = {
    # nova-compute instantiates this subclass: overriding is the hook.
    'virt/libvirt/driver.py': {'_get_guest_config'},
}

DOTTED_NAME = re.compile(r'[A-Za-z_][\w.]*')


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _stored(targets):
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            yield from _stored(target.elts)
        elif isinstance(target, ast.Starred):
            yield from _stored([target.value])
        else:
            yield target


def direct_uses(source):
    """(line, what, name) for each place ``source`` names an internal or
    assigns to an attribute of something imported from ``nova``.
    """
    registered = {internal.path for internal in upstream.INTERNALS}
    names = {path.rsplit('.', 1)[-1] for path in registered}
    tree = ast.parse(source)
    from_nova = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            from_nova.update(
                alias.asname or alias.name.split('.')[0]
                for alias in node.names
                if alias.name == 'nova' or alias.name.startswith('nova.'))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (
                node.module == 'nova' or node.module.startswith('nova.')):
            from_nova.update(alias.asname or alias.name
                             for alias in node.names)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names:
            found.append((node.lineno, 'names', node.attr))
        elif isinstance(node, ast.Name) and node.id in names:
            found.append((node.lineno, 'names', node.id))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                node.name in names):
            found.append((node.lineno, 'defines', node.name))
        elif isinstance(node, ast.ImportFrom):
            found.extend((node.lineno, 'imports', alias.name)
                         for alias in node.names if alias.name in names)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and DOTTED_NAME.fullmatch(node.value)
              and node.value not in registered):
            # getattr(obj, '_name') and unregistered dotted paths; the full
            # registered path is what upstream.get and upstream.patch take
            found.extend((node.lineno, 'names', part)
                         for part in node.value.split('.') if part in names)

        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = _stored(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = _stored([node.target])
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ('setattr', 'delattr') and node.args):
            # setattr(owner, ...) assigns to an attribute of owner
            targets = [ast.Attribute(value=node.args[0], attr='*')]
        else:
            targets = []
        found.extend(
            (node.lineno, 'assigns to', ast.unparse(target))
            for target in targets
            if isinstance(target, (ast.Attribute, ast.Subscript))
            and _root(target) in from_nova)
    return sorted(found)


class UpstreamInternalsTest(testtools.TestCase):

    def test_running_nova_is_supported(self):
        self.assertIn(upstream.nova_major(), upstream.SUPPORTED_NOVA_MAJORS)

    def test_every_internal_is_present_with_its_signature(self):
        self.assertEqual([], upstream.problems())

    def test_a_changed_signature_is_named(self):
        moved = upstream.Internal(
            'nova.compute.utils.check_num_instances_quota',
            '(context, flavor)', 'test')
        [problem] = upstream.problems([moved])
        self.assertIn('nova.compute.utils.check_num_instances_quota: '
                      'signature changed: nova-ext expects (context, flavor)',
                      problem)

    def test_a_missing_internal_is_named(self):
        gone = upstream.Internal('nova.scheduler.manager.NoSuchManager.run',
                                 None, 'test')
        [problem] = upstream.problems([gone])
        self.assertTrue(problem.startswith(
            'nova.scheduler.manager.NoSuchManager.run: missing'), problem)

    def test_an_object_compared_by_value_is_named(self):
        # Fraction defines __eq__ and __hash__ from its value
        by_value = upstream.Assumption('fractions.Fraction',
                                       upstream.HASHED_BY_IDENTITY, 'test')
        [problem] = upstream.problems([], [by_value])
        self.assertEqual('fractions.Fraction: no longer hashes and compares '
                         'by identity, as nova-ext expects: test', problem)

    def test_a_host_manager_without_its_weighers_is_named(self):
        # Given a HostManager that keeps one weigher fewer than nova.conf
        # names (as a Nova keeping them elsewhere would look to nova-ext)
        assumption = upstream.Assumption(
            __name__ + '.HostManagerDroppingAWeigher',
            upstream.KEEPS_PLUGINS, 'test')
        # When its assumptions are checked
        [problem] = upstream.problems([], [assumption])
        # Then the check names it, and Nova's own passes
        self.assertEqual(
            __name__ + '.HostManagerDroppingAWeigher: no longer keeps the '
            'filters and weighers nova.conf names, loaded and in order, in '
            'enabled_filters and weighers, as nova-ext expects: test',
            problem)
        self.assertEqual([], upstream.problems([], [assumption._replace(
            path='nova.scheduler.host_manager.HostManager')]))

    def test_the_host_manager_check_reads_no_filter_of_this_node(self):
        # Given a node whose nova.conf names a filter nobody can load
        conf = self.useFixture(config_fixture.Config(nova.conf.CONF))
        conf.config(enabled_filters=['NoSuchFilter'],
                    group='filter_scheduler')
        assumption = upstream.Assumption(
            'nova.scheduler.host_manager.HostManager',
            upstream.KEEPS_PLUGINS, 'test')
        # When Nova's HostManager is checked, then it passes: the probe is
        # made with Nova's own filters and weighers
        self.assertEqual([], upstream.problems([], [assumption]))
        # ... and the node's setting is as it was
        self.assertEqual(['NoSuchFilter'],
                         nova.conf.CONF.filter_scheduler.enabled_filters)

    def test_every_internal_is_used_by_nova_ext(self):
        # An entry nobody uses any more hides the real list. The registry
        # itself does not count as a use; upstream.py's helpers do.
        own = (PACKAGE / 'upstream.py').read_text()
        [registry] = [node for node in ast.parse(own).body
                      if isinstance(node, ast.Assign)
                      and node.targets[0].id == 'INTERNALS']
        lines = own.splitlines()
        source = '\n'.join(
            lines[:registry.lineno - 1] + lines[registry.end_lineno:] + [
                path.read_text() for path in PACKAGE.rglob('*.py')
                if path.name != 'upstream.py'])
        for internal in upstream.INTERNALS:
            self.assertIn(internal.path.rsplit('.', 1)[-1], source,
                          internal.path)


class RoutingTest(testtools.TestCase):
    """Only nova_ext/upstream.py touches Nova's internals."""

    def _uses(self):
        for path in sorted(PACKAGE.rglob('*.py')):
            relative = path.relative_to(PACKAGE).as_posix()
            if relative == 'upstream.py':
                continue
            allowed = EXEMPT.get(relative, set())
            for line, what, name in direct_uses(path.read_text()):
                yield relative, line, what, name, (
                    allowed is None or name in allowed)

    def test_no_module_but_upstream_reaches_into_nova(self):
        direct = ['nova_ext/%s:%d: %s %s' % (relative, line, what, name)
                  for relative, line, what, name, exempt in self._uses()
                  if not exempt]
        self.assertEqual([], direct, 'go through nova_ext.upstream '
                         '(get, patch or a helper there) instead')

    def test_every_exemption_is_still_needed(self):
        needed = {relative for relative, _, _, _, exempt in self._uses()
                  if exempt}
        self.assertEqual(set(EXEMPT), needed)

    def test_the_scan_finds_each_kind_of_direct_use(self):
        source = '\n'.join([
            'import nova.conf',
            'from nova.compute import api as compute_api',
            'from nova.scheduler import manager',
            'from nova.scheduler.request_filter import ALL_REQUEST_FILTERS',
            'manager.SchedulerManager._get_sorted_hosts(s, spec, hosts, 0)',
            'compute_api.API.check = staticmethod(check)',
            'setattr(compute_api.API, name, check)',
            'nova.conf.CONF.x += 1',
            'getattr(conf, "_get_opt_info")',
            'class Manager(manager.SchedulerManager):',
            '    def _consume_selected_host(self): pass',
            'upstream.get("nova.policy._ENFORCER")',
            'local.attribute = compute_api',
        ])
        self.assertEqual([
            (4, 'imports', 'ALL_REQUEST_FILTERS'),
            (5, 'names', '_get_sorted_hosts'),
            (6, 'assigns to', 'compute_api.API.check'),
            (7, 'assigns to', 'compute_api.API.*'),
            (8, 'assigns to', 'nova.conf.CONF.x'),
            (9, 'names', '_get_opt_info'),
            (11, 'defines', '_consume_selected_host'),
        ], direct_uses(source))


class UpstreamApiTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        # a stand-in registry: patching Nova for real would leak into other
        # tests of this worker on a failure
        module = types.ModuleType('nova_ext_test_upstream_target')
        module.Owner = type('Owner', (), {
            'tool': staticmethod(lambda: 'nova'), 'flag': 1})
        sys.modules[module.__name__] = module
        self.addCleanup(sys.modules.pop, module.__name__)
        internals = {path: upstream.Internal(path, None, 'test') for path in (
            module.__name__ + '.Owner.tool', module.__name__ + '.Owner.flag')}
        self.patch(upstream, '_BY_PATH', internals)
        self.module = module

    def test_an_unregistered_path_is_refused(self):
        error = self.assertRaises(KeyError, upstream.get, 'nova.quota.QUOTAS')
        self.assertIn('nova.quota.QUOTAS is not in nova_ext.upstream.'
                      'INTERNALS', str(error))
        self.assertRaises(KeyError, upstream.patch, 'nova.quota.QUOTAS', None)

    def test_patch_returns_what_puts_it_back(self):
        path = self.module.__name__ + '.Owner.tool'
        original = upstream.patch(path, staticmethod(lambda: 'nova-ext'))
        self.assertEqual('nova-ext', self.module.Owner().tool())
        self.assertEqual('nova-ext', upstream.get(path)())
        upstream.patch(path, original)
        # a staticmethod comes back as one: callable on an instance
        self.assertEqual('nova', self.module.Owner().tool())
        self.assertIs(original, vars(self.module.Owner)['tool'])


class HostManagerDroppingAWeigher(host_manager.HostManager):

    def __init__(self):
        super().__init__()
        self.weighers = self.weighers[1:]
