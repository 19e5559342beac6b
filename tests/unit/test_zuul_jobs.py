# SPDX-License-Identifier: Apache-2.0
""".zuul.yaml: the CI jobs in OpenStack's form.

Every ``devstack_localrc`` variable a job sets (for the controller or in
``group-vars``) must be one devstack/settings defines or one DevStack does:
a misspelt name is silently ignored by ``stack.sh``, and the job would test
less than it says. DevStack's names come from a checked-in list with the
file each is defined in (tests/devstack/devstack-variables.txt): no network
at test time. Every tox environment a job calls exists in tox.ini.
"""

import configparser
import pathlib
import re

import testtools
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]


def load_jobs():
    with open(REPO / '.zuul.yaml') as f:
        entries = yaml.safe_load(f)
    jobs = {entry['job']['name']: entry['job'] for entry in entries
            if 'job' in entry}
    project = [entry['project'] for entry in entries if 'project' in entry]
    return jobs, project[0]


def localrc_settings(job):
    """(where, variable) of every devstack_localrc entry of ``job``."""
    found = [('vars', name) for name in
             job.get('vars', {}).get('devstack_localrc', {})]
    # grenade's jobs: the old and new DevStacks' and the shared localrc
    for side, settings in job.get('vars', {}).get(
            'grenade_devstack_localrc', {}).items():
        found += [('vars.grenade_devstack_localrc.%s' % side, name)
                  for name in settings]
    for group, group_vars in job.get('group-vars', {}).items():
        found += [('group-vars.%s' % group, name) for name in
                  group_vars.get('devstack_localrc', {})]
    return found


def known_variables():
    settings = (REPO / 'devstack' / 'settings').read_text()
    ours = set(re.findall(r'^\s*(NOVA_EXT_\w+)=', settings, re.MULTILINE))
    devstack = set()
    for line in (REPO / 'tests' / 'devstack' /
                 'devstack-variables.txt').read_text().splitlines():
        name = line.split('#')[0].strip()
        if name:
            devstack.add(name)
    return ours, devstack


class ZuulJobsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.jobs, self.project = load_jobs()

    def test_every_localrc_variable_is_defined(self):
        ours, devstack = known_variables()
        unknown = ['%s %s: %s' % (name, where, variable)
                   for name, job in self.jobs.items()
                   for where, variable in localrc_settings(job)
                   if variable not in ours | devstack]
        self.assertEqual([], unknown)

    def test_the_tempest_job_switches_every_feature_on(self):
        ours, _devstack = known_variables()
        job = self.jobs['nova-ext-tempest']
        self.assertEqual('devstack-tempest', job['parent'])
        localrc = job['vars']['devstack_localrc']
        toggles = {name for name in ours if name.startswith(
            'NOVA_EXT_ENABLE_')}
        self.assertEqual(toggles, {name for name in localrc
                                   if name.startswith('NOVA_EXT_ENABLE_')})
        self.assertTrue(all(localrc[name] is True for name in toggles))
        self.assertIn('nova-ext', job['vars']['devstack_plugins'])
        regex = re.compile(job['vars']['tempest_test_regex'])
        self.assertTrue(regex.match(
            'nova_ext.tempest.tests.test_spread.SpreadTest.test_x'))
        self.assertTrue(regex.match(
            'tempest.api.compute.servers.test_server_group.'
            'ServerGroupTestJSON.test_create_delete_server_group'))
        self.assertFalse(regex.match('tempest.api.identity.v3.test_x'))

    def test_multinode_variant_spans_two_cells(self):
        job = self.jobs['nova-ext-tempest-multinode-multicell']
        self.assertEqual('nova-ext-tempest', job['parent'])
        self.assertEqual(2, job['vars']['devstack_localrc']['NOVA_NUM_CELLS'])
        subnode = job['group-vars']['subnode']['devstack_localrc']
        self.assertEqual(2, subnode['NOVA_CPU_CELL'])

    def test_grenade_job_upgrades_with_nova_ext_on_both_sides(self):
        job = self.jobs['nova-ext-grenade']
        self.assertEqual('grenade', job['parent'])
        self.assertIn('nova-ext', job['vars']['devstack_plugins'])
        self.assertTrue(job['vars']['devstack_services']['nova-ext'])
        shared = job['vars']['grenade_devstack_localrc']['shared']
        self.assertTrue(shared['NOVA_EXT_ENABLE_FILTERS'])
        self.assertTrue(shared['NOVA_EXT_ENABLE_QUOTA'])
        for queue in ('check', 'gate'):
            self.assertIn('nova-ext-grenade', self.project[queue]['jobs'])

    def test_tox_environments_the_jobs_call_exist(self):
        tox = configparser.ConfigParser()
        tox.read(REPO / 'tox.ini')
        envs = set()
        for section in tox.sections():
            name = section.split(':', 1)[-1]
            # [testenv:functional{,-py311}] is functional and
            # functional-py311
            match = re.match(r'(.*)\{(.*)\}$', name)
            if match:
                envs |= {match.group(1) + suffix
                         for suffix in match.group(2).split(',')}
            else:
                envs.add(name)
        called = {job['vars']['tox_envlist'] for job in self.jobs.values()
                  if job.get('parent') == 'openstack-tox'}
        # the project's jobs: openstack-tox-<env> runs tox -e <env>, and
        # the templates' docs and release-notes jobs run docs and
        # releasenotes
        for queue in ('check', 'gate'):
            called |= {job[len('openstack-tox-'):]
                       for job in self.project[queue]['jobs']
                       if isinstance(job, str)
                       and job.startswith('openstack-tox-')}
        called |= {'docs', 'releasenotes'}
        # [testenv] itself serves py311
        envs.add('py311')
        self.assertEqual(set(), called - envs,
                         'tox.ini lacks environments the jobs call')
