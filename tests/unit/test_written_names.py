# SPDX-License-Identifier: Apache-2.0
"""Every name nova-ext writes into another system's file is that system's.

oslo.config ignores an option it does not know, under a group it does not
know, without a word: a ``[filter_scheduler] availabe_filters`` line, or a
tempest flag under a misspelt group, would be written, "updated", and read
by nobody. So every ``[group] option`` that ``nova-ext-manage configure``
or the DevStack plugin writes is looked up among the options the installed
Nova and tempest register themselves (their ``oslo.config.opts`` entry
points, their own option lists) or nova-ext's own, never a list of ours,
and the class names it writes as values load through Nova's own loaders.
"""

import importlib.metadata
import os
import re

from nova.scheduler import filters as nova_filters
from nova.scheduler import weights as nova_weights
import os_traits
from oslo_config import cfg
from tempest import config as tempest_config
import testtools

from nova_ext import conf as ext_conf
from nova_ext import configure
from nova_ext.tempest import config as plugin_config
from tests.unit import test_configure

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# DevStack's nova.conf on a controller (lib/nova's create_nova_conf).
NOVA_CONF = """\
[DEFAULT]
compute_driver = libvirt.LibvirtDriver

[database]
connection = mysql+pymysql://root:secret@127.0.0.1/nova_cell0?charset=utf8

[api_database]
connection = mysql+pymysql://root:secret@127.0.0.1/nova_api?charset=utf8

[filter_scheduler]
enabled_filters = ComputeFilter,ImagePropertiesFilter
"""

TEMPEST_CONF = """\
[compute]
image_ref = 00000000-0000-0000-0000-000000000001

[compute-feature-enabled]
scheduler_enabled_filters = ComputeFilter,ImagePropertiesFilter
"""


def _group_key(group):
    """The group as oslo.config finds it in a file: DEFAULT as is, any
    other name compared in lower case.
    """
    name = getattr(group, 'name', group) or 'DEFAULT'
    return name if name == 'DEFAULT' else name.lower()


def _names(listed):
    """{group: {option names, deprecated names included}}."""
    known = {}
    for group, opts in listed:
        names = known.setdefault(_group_key(group), set())
        for opt in opts:
            names.add(opt.name)
            names.update(d.name for d in opt.deprecated_opts if d.name)
    return known


def _entry_point(namespace):
    found = [ep for ep in importlib.metadata.entry_points(
        group='oslo.config.opts') if ep.name == namespace]
    if not found:
        raise AssertionError('no oslo.config.opts entry point %s: is it '
                             'installed?' % namespace)
    return found[0].load()()


def nova_options():
    """What the installed Nova registers (its config generator's list),
    and nova-ext's own.
    """
    known = _names(_entry_point('nova.conf'))
    for group, names in _names(_entry_point('nova_ext')).items():
        known.setdefault(group, set()).update(names)
    return known


def tempest_options():
    """What the installed tempest registers, and nova-ext's plugin."""
    known = _names(tempest_config._opts)
    for group, names in _names(plugin_config.list_opts()).items():
        known.setdefault(group, set()).update(names)
    return known


def written(before, after):
    """(group, option) of every assignment ``after`` has that ``before``
    had not, read with oslo.config's own parser.
    """
    def assignments(path):
        sections = {}
        cfg.ConfigParser(path, sections).parse()
        return {(_group_key(section), option)
                for section, options in sections.items()
                for option in options}
    return sorted(assignments(after) - assignments(before))


def unknown(pairs, known):
    return ['[%s] %s' % pair for pair in pairs
            if pair[1] not in known.get(pair[0], ())]


class WrittenNamesTest(test_configure.ConfigureTestCase):

    def configure(self, *argv):
        code, output = super().configure(*argv)
        self.assertEqual(0, code, output)

    def test_configure_nova_writes_only_options_nova_registers(self):
        known = nova_options()
        # every role's selection, every feature, the failure domain and the
        # --set that the DevStack plugin passes
        for roles in [()] + [('--role', role) for role in configure.ROLES]:
            before = self.write('before.conf', NOVA_CONF)
            path = self.write('nova.conf', NOVA_CONF)
            self.configure('nova', '--config-file', path, '--all',
                           '--failure-domain', 'rack:r1', '--set',
                           'nova_ext.bin_packing_weight_multiplier=10',
                           *roles)
            pairs = written(before, path)
            self.assertTrue(pairs or roles, roles)
            self.assertEqual([], unknown(pairs, known), roles)

    def test_configure_tempest_writes_only_options_tempest_registers(self):
        before = self.write('before.conf', TEMPEST_CONF)
        path = self.write('tempest.conf', TEMPEST_CONF)
        self.configure('tempest', '--config-file', path, '--all')
        pairs = written(before, path)
        self.assertIn(('nova_ext_feature_enabled', 'per_flavor_quota'),
                      pairs)
        self.assertEqual([], unknown(pairs, tempest_options()))

    def test_devstack_plugin_writes_only_registered_options(self):
        # iniset/iniadd lines of the plugin: FILE GROUP OPTION
        targets = {'$NOVA_CONF': nova_options(),
                   '$NOVA_CPU_CONF': nova_options(),
                   '$TEMPEST_CONFIG': tempest_options()}
        found = []
        for name in ('plugin.sh', 'settings'):
            with open(os.path.join(TOP, 'devstack', name)) as f:
                found += re.findall(
                    r'\bini(?:set|add|set_multiline)\s+"?(\$\w+)"?\s+'
                    r'(\S+)\s+(\S+)', f.read())
        self.assertTrue(found)
        for target, group, option in found:
            self.assertIn(target, targets)
            self.assertEqual([], unknown([(_group_key(group), option)],
                                         targets[target]))

    def test_the_check_finds_a_misspelt_name(self):
        known = nova_options()
        self.assertEqual([], unknown([('filter_scheduler',
                                       'available_filters')], known))
        self.assertEqual(
            ['[filter_scheduler] availabe_filters',
             '[filter_schedular] available_filters'],
            unknown([('filter_scheduler', 'availabe_filters'),
                     ('filter_schedular', 'available_filters')], known))

    def test_class_names_written_load_through_novas_loaders(self):
        path = self.write('nova.conf', NOVA_CONF)
        self.configure('nova', '--config-file', path, '--filters',
                       '--weighers')
        sections = {}
        cfg.ConfigParser(path, sections).parse()
        filters = nova_filters.HostFilterHandler().get_matching_classes(
            sections['filter_scheduler']['available_filters'])
        self.assertIn('FailureDomainAntiAffinityFilter',
                      [cls.__name__ for cls in filters])
        weighers = nova_weights.HostWeightHandler().get_matching_classes(
            sections['filter_scheduler']['weight_classes'][-1].split(','))
        # nova-ext's weighers reach Nova as one class, which runs them
        self.assertIn('NovaExtWeighers', [cls.__name__ for cls in weighers])

    def test_trait_defaults_are_custom_traits_placement_accepts(self):
        conf = cfg.ConfigOpts()
        ext_conf.register_opts(conf)
        tempest = cfg.ConfigOpts()
        for group, opts in plugin_config.list_opts():
            tempest.register_opts(opts, group=group)
        tempest([])
        conf([])
        for trait in (conf.nova_ext.maintenance_trait,
                      tempest.nova_ext.maintenance_trait):
            # placement takes a custom trait as os_traits makes one
            self.assertTrue(os_traits.is_custom(trait), trait)
            self.assertEqual(trait, os_traits.normalize_name(
                trait[len('CUSTOM_'):]))


# Options the docs name although no installed library registers them, each
# with why.
NAMED_BUT_GONE = {
    # upgrades.rst: placement 15 reads it and oslo.policy 6 removed it,
    # which is why 2026.1 pins oslo.policy 5
    ('oslo_policy', 'enforce_scope'),
}
# ``[group] option`` in a literal: how the docs name an option
DOC_OPTION = re.compile(r'``\[([A-Za-z0-9_.-]+)\]\s+([a-z][a-z0-9_]*)')


class DocumentedNamesTest(testtools.TestCase):
    """Every ``[group] option`` the docs and release notes tell an operator
    to set or read is one the installed Nova, placement, tempest, oslo
    libraries or nova-ext register.
    """

    def test_every_documented_option_is_registered(self):
        known = nova_options()
        for listed in (tempest_options(), *(
                _names(_entry_point(ns)) for ns in (
                    'placement.conf', 'oslo.db', 'oslo.log', 'oslo.messaging',
                    'oslo.policy', 'oslo.concurrency',
                    'keystonemiddleware.auth_token'))):
            for group, names in listed.items():
                known.setdefault(group, set()).update(names)
        paths = [os.path.join(TOP, 'README.md')]
        for folder in ('doc/source', 'releasenotes/notes'):
            for root, _dirs, files in os.walk(os.path.join(TOP, folder)):
                paths += [os.path.join(root, name) for name in files
                          if name.endswith(('.rst', '.yaml'))]
        found = []
        for path in sorted(paths):
            with open(path) as f:
                for group, option in DOC_OPTION.findall(f.read()):
                    pair = (_group_key(group), option)
                    if pair not in NAMED_BUT_GONE and unknown([pair], known):
                        found.append('%s: [%s] %s' % (
                            os.path.relpath(path, TOP), group, option))
        self.assertEqual([], found)
