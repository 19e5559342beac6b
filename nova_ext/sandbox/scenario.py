# SPDX-License-Identifier: Apache-2.0
"""Run a sandbox scenario against an EmbeddedNova and tabulate what happened.

A scenario (YAML) names racks and their sizes, ``[nova_ext]`` options and a
list of steps, each done through the compute REST API:

* ``flavor: {name, vcpu, ram, disk, extra_specs}`` (``expect: rejected``
  when nova-api must refuse the extra specs);
* ``group: {name, policy}``;
* ``boot: {name, flavor, group, hints, image, zone}`` (``expect: ERROR``
  when the boot must fail; ``same_host_as: <server>`` when it must land
  beside that server; ``image: second`` picks the second image; ``zone:
  nova:<host>`` pins it as an operator would);
* ``say: text``, printed as a heading.

Every step checks its expectation; the run fails if any is not met.
"""

import os
import re
import threading
from wsgiref import simple_server

from nova.tests.fixtures import glance
from nova.tests.functional.api import client

from nova_ext import configure
from nova_ext import errors
from nova_ext.sandbox import cloud
from nova_ext import yaml_input

IMAGES = {'first': glance.GlanceFixture.image1['id'],
          'second': glance.GlanceFixture.image2['id']}
DEFAULT_SCENARIO = os.path.join(os.path.dirname(__file__), 'scenarios',
                                'default.yaml')


# What each step may hold: a misspelled step or key would otherwise be
# skipped and the run would still report success.
STEP_KEYS = {
    'say': set(),
    'flavor': {'expect'},
    'group': set(),
    'boot': {'expect', 'same_host_as'},
}
SPEC_KEYS = {
    'flavor': {'name', 'vcpu', 'ram', 'disk', 'extra_specs'},
    'group': {'name', 'policy'},
    'boot': {'name', 'flavor', 'group', 'hints', 'image', 'zone'},
}
EXPECT = {'flavor': ('created', 'rejected'), 'boot': ('ACTIVE', 'ERROR')}
MAX_HOSTS = 200  # each is an in-process nova-compute
_OPTION_NAME = re.compile(r'[a-z_][a-z0-9_]*')
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')


class ScenarioError(errors.OperatorError):
    pass


def load(path=None):
    path = path or DEFAULT_SCENARIO
    try:
        scenario = yaml_input.load(path)
    except yaml_input.YamlInputError as error:
        raise ScenarioError(str(error))
    validate(scenario, path)
    return scenario


def validate(scenario, path):
    """Refuse what the sandbox would skip or trip over, naming the place."""
    def fail(where, problem):
        raise ScenarioError('%s: %s: %s' % (path, where, problem))

    if not isinstance(scenario, dict):
        fail('top', 'must be a mapping with racks and steps')
    unknown = set(scenario) - {'racks', 'nova_conf', 'steps'}
    if unknown:
        fail(sorted(map(str, unknown))[0], 'unknown key (known: racks, '
             'nova_conf, steps)')
    racks = scenario.get('racks')
    if not isinstance(racks, dict) or not racks:
        fail('racks', 'must map rack names to numbers of hypervisors')
    for rack, size in racks.items():
        if not isinstance(rack, str) or isinstance(size, bool) or (
                not isinstance(size, int)) or not 1 <= size <= MAX_HOSTS:
            fail('racks.%s' % rack, 'a rack name and 1 to %d hypervisors'
                 % MAX_HOSTS)
    if sum(racks.values()) > MAX_HOSTS:
        fail('racks', 'at most %d hypervisors in all' % MAX_HOSTS)
    nova_conf = scenario.get('nova_conf') or {}
    if not isinstance(nova_conf, dict):
        fail('nova_conf', 'must map [nova_ext] option names to one-line '
             'values')
    for key, value in nova_conf.items():
        # written into nova.conf as "key = value": a newline or CR in
        # either would write other lines, other options
        if not isinstance(key, str) or not _OPTION_NAME.fullmatch(key):
            fail('nova_conf.%r' % (key,), 'not a [nova_ext] option name')
        if isinstance(value, (dict, list)) or value is None or \
                _CONTROL.search(str(value)):
            fail('nova_conf.%s' % key, 'must be one line of text (no '
                 'newline, CR or other control character)')
        try:
            configure.check_nova_ext_option(key, str(value))
        except configure.ConfigureError as error:
            fail('nova_conf.%s' % key, str(error).split(': ', 1)[-1])
    steps = scenario.get('steps')
    if not isinstance(steps, list):
        fail('steps', 'must be a list')
    flavors, groups = set(), set()
    for index, step in enumerate(steps):
        where = 'steps[%d]' % index
        kinds = [key for key in STEP_KEYS if isinstance(step, dict)
                 and key in step]
        if len(kinds) != 1:
            fail(where, 'one of %s per step, got %s' % (
                ', '.join(STEP_KEYS), ', '.join(map(str, step)) if
                isinstance(step, dict) else repr(step)))
        kind = kinds[0]
        extra = set(step) - {kind} - STEP_KEYS[kind]
        if extra:
            fail(where, 'unknown key %s in a %s step' % (
                sorted(map(str, extra))[0], kind))
        if 'expect' in step and step['expect'] not in EXPECT[kind]:
            fail(where + '.expect', 'one of %s' % ', '.join(EXPECT[kind]))
        spec = step[kind]
        if kind == 'say':
            continue
        if not isinstance(spec, dict) or not isinstance(spec.get('name'),
                                                        str):
            fail(where + '.' + kind, 'must be a mapping with a name')
        extra = set(spec) - SPEC_KEYS[kind]
        if extra:
            fail('%s.%s' % (where, kind), 'unknown key %s (known: %s)' % (
                sorted(map(str, extra))[0], ', '.join(sorted(
                    SPEC_KEYS[kind]))))
        if kind == 'flavor' and step.get('expect', 'created') == 'created':
            flavors.add(spec['name'])
        elif kind == 'group':
            groups.add(spec['name'])
        elif kind == 'boot':
            if spec.get('flavor') not in flavors:
                fail(where + '.boot.flavor', 'no flavor %r created by an '
                     'earlier step' % spec.get('flavor'))
            if spec.get('group') is not None and spec['group'] not in groups:
                fail(where + '.boot.group', 'no group %r created by an '
                     'earlier step' % spec['group'])
            if spec.get('image', 'first') not in IMAGES:
                fail(where + '.boot.image', 'one of %s' % ', '.join(IMAGES))


def host_names(racks):
    return {'%s-h%d' % (rack, i + 1): rack
            for rack, size in racks.items() for i in range(size)}


def nova_conf_text(scenario):
    lines = [
        '# Written by nova-ext-sandbox: what an operator adds to nova.conf.',
        '[filter_scheduler]',
        'available_filters = nova.scheduler.filters.all_filters',
        'available_filters = nova_ext.scheduler.filters.all_filters',
        'enabled_filters = ' + ','.join(
            cloud.NOVA_DEFAULT_FILTERS + ['FailureDomainAntiAffinityFilter']),
        'weight_classes = nova.scheduler.weights.all_weighers,'
        'nova_ext.scheduler.weights.all_weighers',
        '',
        '[nova_ext]',
    ]
    for name, value in (scenario.get('nova_conf') or {}).items():
        lines.append('%s = %s' % (name, value))
    lines += ['', '# The sandbox boots more servers than the default quota.',
              '[quota]', 'instances = -1', 'cores = -1', 'ram = -1']
    return '\n'.join(lines) + '\n'


class Report:
    """What a scenario did: table rows and unmet expectations."""

    def __init__(self):
        self.rows = []
        self.failures = []


class Sandbox(cloud.EmbeddedNova):
    """One scenario, run as Nova's services see a real cloud.

    Results go to ``report``: Nova's TestCase deletes its own public
    attributes when it finishes.
    """

    def __init__(self, scenario, report, out, state_dir, keep_serving=None):
        super().__init__('run_scenario')
        self.scenario = scenario
        self.report = report
        self.out = out
        self.state_dir = state_dir
        self.keep_serving = keep_serving
        self.rack_of = host_names(scenario['racks'])
        self.HOSTS = list(self.rack_of)
        self.NOVA_CONF = nova_conf_text(scenario)

    def setUp(self):
        super().setUp()
        with open(os.path.join(self.state_dir, 'nova.conf'), 'w') as f:
            f.write(self.NOVA_CONF)
        for rack in self.scenario['racks']:
            self.set_failure_domains('rack', {
                rack: [h for h, r in self.rack_of.items() if r == rack]})

    def run_scenario(self):
        self.flavors = {}
        self.groups = {}
        self.hosts_of_servers = {}
        for step in self.scenario['steps']:
            if 'say' in step:
                self.report.rows.append(('--', step['say']))
            elif 'flavor' in step:
                self._flavor(step['flavor'], step.get('expect', 'created'))
            elif 'group' in step:
                spec = step['group']
                self.groups[spec['name']] = self.create_server_group(
                    spec['name'], spec.get('policy', 'anti-affinity'))
            elif 'boot' in step:
                self._boot(step['boot'], step.get('expect', 'ACTIVE'),
                           step.get('same_host_as'))
        # Appended: nova-ext-sandbox logs Nova's own lines there too.
        with open(os.path.join(self.state_dir, 'nova.log'), 'a') as f:
            f.write(self.stdlog.logger.output)
        if self.keep_serving:
            self._serve(self.keep_serving)

    def _flavor(self, spec, expect):
        flavor_id = self.create_flavor(spec['name'], spec.get('vcpu', 1),
                                       spec.get('ram', 512),
                                       spec.get('disk', 1))
        outcome = 'created'
        try:
            if spec.get('extra_specs'):
                self.admin_api.post_extra_spec(
                    flavor_id, {'extra_specs': spec['extra_specs']})
            self.flavors[spec['name']] = flavor_id
        except client.OpenStackApiException as error:
            outcome = 'rejected: HTTP %d %s' % (
                error.response.status_code,
                error.response.json()['badRequest']['message'])
        self._record('-', 'flavor ' + spec['name'], '-', '', outcome,
                     expect)

    def _boot(self, spec, expect, same_host_as):
        group = spec.get('group')
        server = self.boot(
            spec['name'], self.flavors[spec['flavor']],
            group=self.groups.get(group), hints=spec.get('hints'),
            image=IMAGES[spec.get('image', 'first')], expected_state=None,
            zone=spec.get('zone'))
        host = self.host_of(server) or ''
        self.hosts_of_servers[spec['name']] = host
        if same_host_as and self.hosts_of_servers.get(same_host_as) != host:
            self.report.failures.append(
                '%s: expected on the host of %s (%s), got %s' % (
                    spec['name'], same_host_as,
                    self.hosts_of_servers.get(same_host_as), host))
        outcome = server['status']
        if server.get('fault'):
            outcome += ': ' + server['fault']['message']
        self._record(spec['name'], spec['flavor'], group or '-', host,
                     outcome, expect)

    def _record(self, server, flavor, group, host, outcome, expect):
        met = outcome.split(':')[0].strip() == expect
        if not met:
            self.report.failures.append(
                '%s: expected %s, got %s' % (server, expect, outcome))
        self.report.rows.append((server, flavor, group, host,
                                 self.rack_of.get(host, '-'), outcome))

    def _serve(self, port):
        app = self.api_fixture.app()
        httpd = simple_server.make_server('127.0.0.1', port, app)
        print('\nServing the compute API on http://127.0.0.1:%d/v2.1 '
              '(Ctrl-C stops). Try:\n  curl -s -H "X-Auth-User: admin" '
              '-H "X-Auth-Project-Id: sandbox" -H "X-Roles: admin,member,'
              'reader" -H "OpenStack-API-Version: compute latest" '
              '"http://127.0.0.1:%d/v2.1/servers/detail?all_tenants=1"'
              % (port, port),
              file=self.out, flush=True)
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            thread.join()
        except KeyboardInterrupt:
            httpd.shutdown()
