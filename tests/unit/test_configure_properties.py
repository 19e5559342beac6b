# SPDX-License-Identifier: Apache-2.0
"""``configure``'s nova.conf editor against oslo.config's own parser.

Hypothesis writes nova.conf files oslo.config accepts -- comments (``#``,
``;``), blank and whitespace-only lines, values continued on indented
lines, duplicate sections (also differing in case, which oslo.config
merges), duplicate keys, ``DEFAULT``, CRLF, lone CR and missing final
newlines, trailing whitespace, unicode, values holding ``=``, ``#``, ``;``,
``:`` and quotes -- then applies each feature, ``--set`` and combinations,
and ``--undo``. Each result is read with ``oslo_config.cfg.ConfigParser``
and compared with :func:`expected_view`, a model of what each feature means
written on the parsed options (not on lines): every option nova-ext does
not own reads back exactly as before, the owned ones read as the model
says, and ``--undo`` gives back the parsed original. A file that cannot be
edited safely must be refused with one line naming the line number, and
only then.

Budget: tests/hypothesis_profiles.py (CI: a fixed seed, 60 examples a
test, a few seconds each; ``NOVA_EXT_HYPOTHESIS_PROFILE=search`` for a
long local search). What such a search found is in :data:`REGRESSIONS`.
"""

import copy
import os
import re
import shutil
import tempfile

import hypothesis
from hypothesis import strategies as st
from oslo_config import cfg
from oslo_config import types
import sqlalchemy.engine
import testtools

from nova_ext import configure

LIST = types.List()
NOVA_FILTERS = configure._nova_default('enabled_filters')
NOVA_WEIGHERS = configure._nova_default('weight_classes')
SHIM = 'nova_ext_libvirt.LibvirtDriver'

# Options nova-ext owns, by feature: compared by what oslo.config makes of
# them (a list, Nova's default when unset); every other option exactly.
OWNED = {
    ('filter_scheduler', 'available_filters'),
    ('filter_scheduler', 'enabled_filters'),
    ('filter_scheduler', 'weight_classes'),
    ('nova_ext', 'request_filters'), ('nova_ext', 'quota_driver'),
    ('DEFAULT', 'compute_driver'), ('nova_ext', 'guest_mutators'),
    ('database', 'connection'), ('api_database', 'connection'),
}
LISTS = {('filter_scheduler', 'enabled_filters'): NOVA_FILTERS,
         ('filter_scheduler', 'weight_classes'): NOVA_WEIGHERS}

# -- what oslo.config accepts ------------------------------------------------

TEXT = st.text(
    st.characters(blacklist_categories=('Cc', 'Cs', 'Zl', 'Zp'),
                  blacklist_characters='\x85'),
    max_size=12)
PLAIN_VALUE = st.one_of(
    TEXT,
    st.sampled_from(['a=b', 'x # not a comment', 'y ; nor this', 'k:v',
                     '"quoted"', "'single'", '"unbalanced', ' padded ',
                     'ünïcödé ✓', 'trailing\t', '=', '#', ';', '',
                     'http://u:p@ss@h:1/x?y=1#z']))
OTHER_KEYS = st.one_of(
    st.sampled_from(['debug', 'host', 'my_ip', 'workers', 'region_name',
                     'Enabled_Filters', 'password', 'transport_url',
                     'connection_recycle_time', 'ünï', 'a.b']),
    st.from_regex(r'[A-Za-z_][A-Za-z0-9_.-]{0,10}', fullmatch=True))
FILTER_LISTS = st.sampled_from([
    'ComputeFilter,ImagePropertiesFilter',
    'ComputeFilter, AvailabilityZoneFilter ,',
    'ComputeFilter,\n  AggregateInstanceExtraSpecsFilter,\n'
    '\tPciPassthroughFilter',
    'ComputeFilter,\n  PciPassthroughFilter\n  ,NUMATopologyFilter',
    '"ComputeFilter,ImagePropertiesFilter"',
    'all', '', 'FailureDomainAntiAffinityFilter',
    ','.join(NOVA_FILTERS),
    'ComputeFilter,FailureDomainAntiAffinityFilter,PciPassthroughFilter',
    # an item split over two lines without a comma: unsafe, refused
    'ComputeFilter,\n  Aggregate\n  InstanceExtraSpecsFilter'])
WEIGHT_LISTS = st.sampled_from([
    'nova.scheduler.weights.all_weighers',
    'nova.scheduler.weights.ram.RAMWeigher,\n  '
    'nova_ext.scheduler.weights.all_weighers',
    'nova.scheduler.weights.ram.RAMWeigher', ''])
PASSWORDS = st.text(st.sampled_from('aZ9@:/,"\' #%?&=é'), min_size=1,
                    max_size=8)


@st.composite
def urls(draw):
    password = draw(PASSWORDS)
    query = draw(st.sampled_from(
        ['', '?charset=utf8', '?charset=utf8&plugin=dbcounter',
         '?plugin=nova_ext', '?read_default_file=/etc/my.cnf&x=1']))
    if draw(st.booleans()):
        return 'mysql+pymysql://nova:%s@db.example/nova%s' % (
            password, query)
    return 'sqlite:////var/lib/nova/nova.sqlite' + query


OWNED_VALUES = {
    'available_filters': st.sampled_from([
        'nova.scheduler.filters.all_filters',
        'nova_ext.scheduler.filters.all_filters', 'my.filters.Mine']),
    'enabled_filters': FILTER_LISTS,
    'weight_classes': WEIGHT_LISTS,
    'request_filters': st.sampled_from(['maintenance', '', 'host_class']),
    'quota_driver': st.sampled_from(['per_flavor', '']),
    'compute_driver': st.sampled_from(['libvirt.LibvirtDriver', SHIM,
                                       'fake.FakeDriver']),
    'guest_mutators': st.sampled_from(['oem_strings', '']),
    'connection': urls(),
}
SECTION_NAMES = st.sampled_from([
    'DEFAULT', 'filter_scheduler', 'Filter_Scheduler', 'nova_ext',
    'NOVA_EXT', 'database', 'api_database', 'Api_Database', 'placement',
    'libvirt', ' nova_ext ', 'ünï', 'x-y', 'default'])
ENDINGS = st.sampled_from(['\n'] * 6 + ['\r\n'] * 3 + ['\r'])


@st.composite
def assignment_lines(draw, owned):
    if owned:
        key = draw(st.sampled_from(sorted(OWNED_VALUES)))
        value = draw(OWNED_VALUES[key])
    else:
        key = draw(OTHER_KEYS)
        value = draw(PLAIN_VALUE)
    separator = draw(st.sampled_from([' = ', '=', ' =', ': ', ':']))
    first, *more = value.split('\n')
    if not more and draw(st.integers(0, 4)) == 0:
        more = [draw(TEXT.filter(lambda text: text.strip()))]
    lines = [key + separator + first]
    for line in more:
        indent = draw(st.sampled_from(['  ', '\t', '    ']))
        lines.append(indent + line.lstrip())
    return lines


@st.composite
def nova_confs(draw, owned=True):
    """(file text, list of lines) oslo.config parses."""
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        lines.append('[%s]' % draw(SECTION_NAMES))
        for _ in range(draw(st.integers(0, 5))):
            kind = draw(st.sampled_from(
                ['owned', 'other', 'other', 'comment', 'blank']
                if owned else ['other', 'other', 'comment', 'blank']))
            if kind == 'comment':
                lines.append(draw(st.sampled_from(['#', ';', '# '])) +
                             draw(TEXT))
            elif kind == 'blank':
                lines.append(draw(st.sampled_from(['', '  ', '\t'])))
            else:
                lines += draw(assignment_lines(kind == 'owned'))
    text = ''
    for line in lines:
        trailing = draw(st.sampled_from(['', '', ' ', '\t']))
        text += line + trailing + draw(ENDINGS)
    if draw(st.integers(0, 5)) == 0:
        text = text.rstrip('\r\n')
    return text


FEATURE_SETS = st.lists(st.sampled_from(configure.FEATURES), unique=True,
                        min_size=0, max_size=5)
# '$' starts an interpolation for oslo.config: each must read back as
# given.
DOLLAR_VALUES = st.one_of(
    st.sampled_from(['Pa$word9', '/var/lib/$nosuchvar', '$', '$$', '${x}',
                     'a$', '$state_path/x', '"$q"', 'u:p$@h']),
    st.text(st.sampled_from('a$ {}_'), min_size=1, max_size=8).map(
        lambda v: v.strip()))
SETS = st.lists(st.tuples(
    st.sampled_from(['placement', 'libvirt', 'DEFAULT', 'workarounds',
                     'Placement']),
    st.from_regex(r'[a-z_][a-z0-9_]{0,8}', fullmatch=True),
    st.one_of(PLAIN_VALUE.map(lambda v: v.strip()).filter(
        lambda v: not configure._CONTROL.search(v)), urls(),
        DOLLAR_VALUES)),
    max_size=3, unique_by=lambda item: (item[0].lower(), item[1]))


# -- the model ---------------------------------------------------------------

def effective(view, group, key):
    values = view.get(group, {}).get(key)
    return values[-1] if values else None


def read_as_nova(view, group, key):
    """What Nova makes of an owned option (lists parsed, defaults)."""
    if (group, key) == ('filter_scheduler', 'available_filters'):
        return view.get(group, {}).get(key) or [
            configure.NOVA_ALL_FILTERS]
    value = effective(view, group, key)
    if (group, key) in LISTS:
        return LISTS[group, key] if value is None else LIST(value)
    if key == 'connection' and value is not None:
        return url_as_oslo_db_reads_it(value)
    return value or None


def _plugins(url):
    plugins = url.query.get('plugin', ())
    return [plugins] if isinstance(plugins, str) else list(plugins)


def url_as_oslo_db_reads_it(value):
    """SQLAlchemy's reading of a URL (oslo.db's parser), the plugins
    apart.
    """
    try:
        url = sqlalchemy.engine.make_url(value)
    except Exception:  # noqa: left as written
        return value
    return (url.drivername, url.username, url.password, url.host, url.port,
            url.database, sorted((key, url.query[key]) for key in url.query
                                 if key != 'plugin'), _plugins(url))


def with_plugin(value, add):
    """``value`` with (or without) plugin=nova_ext last, through
    SQLAlchemy's URL object.
    """
    url = sqlalchemy.engine.make_url(value)
    plugins = [name for name in _plugins(url) if name != 'nova_ext']
    url = url.difference_update_query(['plugin'])
    if add:
        plugins.append('nova_ext')
    if plugins:
        url = url.update_query_pairs([('plugin', name) for name in plugins])
    return url.render_as_string(hide_password=False)


class Unsafe(Exception):
    """The model says: refuse this edit."""


def _set(view, group, key, value):
    view.setdefault(group, {})[key] = None if value is None else [value]


def _set_or_undo(view, group, key, ours, undo):
    """configure writes ``ours``; --undo takes out only that value: any
    other is the operator's and stays.
    """
    if not undo:
        _set(view, group, key, ours)
    elif effective(view, group, key) == ours:
        _set(view, group, key, None)


def _items(view, key, default):
    value = effective(view, 'filter_scheduler', key)
    if value is None:
        return None
    items = LIST(value)
    if any('\n' in item for item in items):
        raise Unsafe(key)
    return items


def expected_view(before, features, undo, sets):
    """``before`` with what ``features`` and ``sets`` mean applied."""
    view = copy.deepcopy(before)
    fs = view.setdefault('filter_scheduler', {})
    if 'filters' in features:
        available = fs.get('available_filters', [])
        enabled = _items(view, 'enabled_filters', NOVA_FILTERS)
        if undo:
            available = [v for v in available
                         if v != configure.OUR_FILTERS]
            if available == [configure.NOVA_ALL_FILTERS]:
                available = []
            if enabled is not None:
                enabled = [item for item in enabled
                           if item not in configure.OUR_FILTER_NAMES]
                _set(view, 'filter_scheduler', 'enabled_filters',
                     None if enabled == NOVA_FILTERS else ','.join(enabled))
        else:
            if not available:
                available = [configure.NOVA_ALL_FILTERS]
            if configure.OUR_FILTERS not in available:
                available = available + [configure.OUR_FILTERS]
            enabled = NOVA_FILTERS if enabled is None else enabled
            if enabled != ['all']:
                _set(view, 'filter_scheduler', 'enabled_filters', ','.join(
                    enabled + [name for name in configure.OUR_FILTER_NAMES
                               if name not in enabled]))
        fs['available_filters'] = available
    if 'weighers' in features:
        weighers = _items(view, 'weight_classes', NOVA_WEIGHERS)
        if undo:
            if weighers is not None:
                weighers = [w for w in weighers
                            if w != configure.OUR_WEIGHERS]
                _set(view, 'filter_scheduler', 'weight_classes',
                     None if weighers == NOVA_WEIGHERS
                     else ','.join(weighers))
        else:
            weighers = NOVA_WEIGHERS if weighers is None else weighers
            if weighers != ['all']:
                _set(view, 'filter_scheduler', 'weight_classes', ','.join(
                    weighers + [configure.OUR_WEIGHERS]
                    if configure.OUR_WEIGHERS not in weighers
                    else weighers))
    if 'request_filters' in features:
        _set_or_undo(view, 'nova_ext', 'request_filters',
                     configure.REQUEST_FILTERS, undo)
    if 'quota' in features:
        _set_or_undo(view, 'nova_ext', 'quota_driver',
                     configure.QUOTA_DRIVER, undo)
    if 'libvirt_driver' in features:
        if not undo:
            _set(view, 'DEFAULT', 'compute_driver', SHIM)
        elif effective(view, 'DEFAULT', 'compute_driver') == SHIM:
            _set(view, 'DEFAULT', 'compute_driver',
                 configure.NOVA_LIBVIRT_DRIVER)
        _set_or_undo(view, 'nova_ext', 'guest_mutators',
                     configure.GUEST_MUTATORS, undo)
    on = set()
    if effective(view, 'nova_ext', 'quota_driver'):
        on.add('quota')
    if configure.OUR_FILTERS in fs.get('available_filters', []):
        on.add('filters')
    if configure.OUR_WEIGHERS in LIST(
            effective(view, 'filter_scheduler', 'weight_classes') or ''):
        on.add('weighers')
    if (effective(view, 'nova_ext', 'request_filters') or '').strip():
        on.add('request_filters')
    for section in configure.DATABASE_SECTIONS:
        named = [f for f in features
                 if section in configure.ENGINE_PLUGIN_SECTIONS.get(f, ())]
        needed = [f for f in on
                  if section in configure.ENGINE_PLUGIN_SECTIONS[f]]
        url = effective(view, section, 'connection')
        if not named or not url or (undo and needed):
            continue
        if '\n' in url:
            raise Unsafe(section)
        try:
            sqlalchemy.engine.make_url(url)
        except Exception:  # noqa: refused: oslo.db could not read it
            raise Unsafe(section)
        _set(view, section, 'connection', with_plugin(url, not undo))
    for section, key, value in sets:
        # written with each '$' doubled: oslo.config reads '$$' as '$'
        _set_or_undo(view, configure.group_name(section), key,
                     value.replace('$', '$$'), undo)
    return view


def compare_views(test, expected, actual, owned):
    groups = set(expected) | set(actual)
    for group in groups:
        keys = set(expected.get(group, {})) | set(actual.get(group, {}))
        for key in keys:
            if (group, key) in owned:
                test.assertEqual(read_as_nova(expected, group, key),
                                 read_as_nova(actual, group, key),
                                 '[%s] %s' % (group, key))
            else:
                test.assertEqual(expected.get(group, {}).get(key) or None,
                                 actual.get(group, {}).get(key) or None,
                                 '[%s] %s' % (group, key))


class ConfigurePropertiesCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def write(self, text):
        path = os.path.join(self.dir, 'nova.conf')
        with open(path, 'w', encoding='utf-8', newline='') as handle:
            handle.write(text)
        return path

    def read(self, path):
        with open(path, 'rb') as handle:
            return handle.read()

    def apply(self, text, features, undo, sets, before_view=None):
        """Configure ``text``; (expected view or None, actual view)."""
        path = self.write(text)
        before = configure.oslo_view(path)
        owned = OWNED | {(configure.group_name(s), k) for s, k, _ in sets}
        try:
            expected = expected_view(before, features, undo, sets)
        except Unsafe:
            expected = None
        assignments = ['%s.%s=%s' % item for item in sets]
        try:
            configure.configure_file(path, 'nova', list(features),
                                     undo=undo, assignments=assignments)
        except configure.ConfigureError as error:
            self.assertIsNone(expected, 'refused: %s' % error)
            self.assertRegex(str(error), r'nova\.conf:\d+: ')
            self.assertEqual(text.encode('utf-8'), self.read(path))
            return None, None
        self.assertIsNotNone(expected, 'an unsafe edit was made')
        after = configure.oslo_view(path)
        compare_views(self, expected, after, owned)
        if not undo:
            self.assert_reads_back(path, sets)
        self.assertEqual(['.nova.conf.nova-ext-lock', 'nova.conf'],
                         sorted(os.listdir(self.dir)))
        return expected, after

    def assert_reads_back(self, path, sets):
        """Each ``--set`` value is what oslo.config gives a service that
        registers the option (interpolation included).
        """
        # oslo.config registers no option named with a leading '_'
        sets = [item for item in sets if not item[1].startswith('_')]
        conf = cfg.ConfigOpts()
        for section, key, _value in sets:
            conf.register_opt(cfg.StrOpt(key), group=section)
        conf(['--config-file', path], default_config_files=[],
             default_config_dirs=[])
        for section, key, value in sets:
            self.assertEqual(value, conf[section][key],
                             '--set %s.%s' % (section, key))


class TestConfigureProperties(ConfigurePropertiesCase):

    @hypothesis.given(nova_confs(), FEATURE_SETS, st.booleans(), SETS)
    def test_edit_reads_back_as_the_model_says(self, text, features, undo,
                                               sets):
        hypothesis.assume(features or sets)
        self.apply(text, features, undo, sets)

    @hypothesis.given(nova_confs(owned=False), FEATURE_SETS, SETS)
    def test_undo_gives_back_the_parsed_original(self, text, features,
                                                 sets):
        hypothesis.assume(features or sets)
        path = self.write(text)
        original = configure.oslo_view(path)
        hypothesis.assume(not any(
            (configure.group_name(s), k) in OWNED or
            k in original.get(configure.group_name(s), {})
            for s, k, _ in sets))
        expected, _ = self.apply(text, features, False, sets)
        with open(path, encoding='utf-8', newline='') as handle:
            applied = handle.read()
        self.apply(applied, features, True, sets)
        undone = configure.oslo_view(path)
        if 'libvirt_driver' in features:
            # --undo cannot know what compute_driver was: it names Nova's
            # libvirt driver (doc/source/troubleshooting.rst)
            undone['DEFAULT'].pop('compute_driver')
            if not undone['DEFAULT']:
                del undone['DEFAULT']
        compare_views(self, original, undone, OWNED)

    @hypothesis.given(nova_confs(), FEATURE_SETS, SETS)
    def test_twice_is_once(self, text, features, sets):
        hypothesis.assume(features or sets)
        expected, _ = self.apply(text, features, False, sets)
        hypothesis.assume(expected is not None)
        path = os.path.join(self.dir, 'nova.conf')
        once = self.read(path)
        changed, _diff, _warnings = configure.configure_file(
            path, 'nova', list(features),
            assignments=['%s.%s=%s' % item for item in sets])
        self.assertFalse(changed)
        self.assertEqual(once, self.read(path))


# Counterexamples hypothesis found (shrunk), and the issue's: each stays an
# ordinary test. (text, features, undo, sets)
REGRESSIONS = [
    # issue 34: a multi-line enabled_filters became one item holding a
    # newline
    ('[filter_scheduler]\nenabled_filters = ComputeFilter,\n'
     '    AggregateInstanceExtraSpecsFilter,\n    PciPassthroughFilter\n',
     ['filters'], False, []),
    ('[filter_scheduler]\nenabled_filters = ComputeFilter,\n'
     '    FailureDomainAntiAffinityFilter,\n    PciPassthroughFilter\n',
     ['filters'], True, []),
    # duplicate sections: the value oslo.config uses is in the second
    ('[nova_ext]\nquota_driver = per_flavor\n[DEFAULT]\n[NOVA_EXT]\n'
     'quota_driver = other\n', ['quota'], True, []),
    ('[filter_scheduler]\nweight_classes = a.B\n[Filter_Scheduler]\n'
     'weight_classes = nova_ext.scheduler.weights.all_weighers\n',
     ['weighers'], True, []),
    # CRLF, a lone CR, no final newline
    ('[DEFAULT]\r\ndebug = true\r\n[api_database]\r\nconnection = '
     'sqlite:////x.db', ['quota', 'filters'], False, []),
    ('[DEFAULT]\rdebug = 1\r[nova_ext]\rx = 1', ['quota'], False, []),
    # ':' assignments and quotes
    ('[api_database]\nconnection: "mysql://u:p@h/db"\n', ['quota'], False,
     []),
    ('[DEFAULT]\n', [], False, [('placement', 'region_name', '"x"')]),
    ('[DEFAULT]\n', [], False, [('placement', 'region_name', "'")]),
    # a value continued after its key, then a section named with spaces
    ('[DEFAULT]\nbanner = a\n  b\n[ nova_ext ]\nquota_driver = x\n',
     ['quota'], False, []),
    # a URL over two lines: refused, naming the line
    ('[api_database]\nconnection = mysql://u:p@h/db\n  ?charset=utf8\n',
     ['quota'], False, []),
    # found by the search profile: a URL SQLAlchemy cannot read (a
    # password '@:' makes a port of '@db.example'): refused where touched,
    # left alone elsewhere
    ('[database]\nconnection = mysql+pymysql://nova:@:@db.example/nova\n'
     '[DEFAULT]', ['quota'], False, []),
    ('[database]\nconnection = mysql+pymysql://nova:@:@db.example/nova\n'
     '[DEFAULT]', ['filters'], False, []),
    # an item split without a comma: refused, naming the line
    ('[filter_scheduler]\nenabled_filters = A,\n  B\n  C\n', ['filters'],
     False, []),
    # issue 42: --undo took out the operator's own values
    ('[database]\nconnection = mysql+pymysql://nova:pw@db/nova\n',
     [], True, [('database', 'connection', 'sqlite://')]),
    ('[nova_ext]\nrequest_filters = maintenance\nquota_driver = mine\n'
     'guest_mutators = oem_strings\n',
     ['request_filters', 'quota', 'libvirt_driver'], True, []),
    # issue 42: '$' read as an interpolation
    ('[DEFAULT]\n', [], False, [('placement', 'password', 'Pa$word9'),
                                ('DEFAULT', 'state_path',
                                 '/var/lib/$nosuchvar')]),
    ('[placement]\npassword = Pa$$word9\n', [], True,
     [('placement', 'password', 'Pa$word9')]),
]


class TestRegressions(ConfigurePropertiesCase):

    def test_each_regression(self):
        for text, features, undo, sets in REGRESSIONS:
            self.apply(text, features, undo, sets)

    def test_issue_example_reads_as_nova_would(self):
        text = REGRESSIONS[0][0]
        self.apply(text, ['filters'], False, [])
        path = os.path.join(self.dir, 'nova.conf')
        value = configure.oslo_view(path)['filter_scheduler'][
            'enabled_filters'][-1]
        self.assertEqual(['ComputeFilter',
                          'AggregateInstanceExtraSpecsFilter',
                          'PciPassthroughFilter',
                          'FailureDomainAntiAffinityFilter'], LIST(value))

    def test_refusals_name_the_line(self):
        for text, line in (
                ('[api_database]\nconnection = mysql://u:p@h/db\n'
                 '  ?charset=utf8\n', 2),
                ('[DEFAULT]\n\n[filter_scheduler]\nenabled_filters = A,\n'
                 '  B\n  C\n', 4),
                ('[DEFAULT]\n[database]\nconnection = mysql://n:@:@h/n\n', 3)):
            path = self.write(text)
            error = self.assertRaises(
                configure.ConfigureError, configure.configure_file, path,
                'nova', ['quota', 'filters'])
            self.assertIn('nova.conf:%d: ' % line, str(error))
            self.assertIsNone(re.search(r'\n', str(error)))
