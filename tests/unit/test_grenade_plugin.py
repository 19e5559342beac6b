# SPDX-License-Identifier: Apache-2.0
"""The grenade plugin (devstack/upgrade/), in grenade's documented form
(grenade's PLUGINS.rst and projects/*/).

grenade sources ``settings`` with its own ``register_project_for_upgrade``
(which derives the plugin directory from the caller's file) and
``devstack_localrc``; it calls ``upgrade.sh`` and ``shutdown.sh`` with no
argument and ``resources.sh`` with a phase (``create``, ``verify
pre-upgrade|post-upgrade``, ``verify_noapi pre-upgrade``, ``destroy``,
``force_destroy``). Those functions are defined here as grenade's
inc/plugin and inc/upgrade define them, around the real files.
"""

import os
import re
import subprocess
import sys

import testtools

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
UPGRADE = os.path.join(TOP, 'devstack', 'upgrade')
SCRIPTS = ['settings', 'upgrade.sh', 'shutdown.sh', 'resources.sh']
BIN = os.path.dirname(sys.executable)
PHASES = ['create', 'verify', 'verify_noapi', 'destroy', 'force_destroy']

# grenade's inc/plugin and inc/upgrade, as far as settings uses them
GRENADE_SETTINGS_HARNESS = r'''
declare -A PLUGIN_DIR
UPGRADE_PROJECTS=""
LOCALRC=""
GRENADE_USE_EXTERNAL_DEVSTACK=${GRENADE_USE_EXTERNAL_DEVSTACK:-False}
BASE_DEVSTACK_BRANCH=stable/2026.1
TARGET_DEVSTACK_BRANCH=master
function register_project_for_upgrade {
    local project=$1
    local settings_file=$(caller | awk '{print $2}')
    UPGRADE_PROJECTS+=" $project"
    PLUGIN_DIR[$project]=$(dirname $settings_file)
}
function devstack_localrc {
    if [ "${GRENADE_USE_EXTERNAL_DEVSTACK}" == "True" ]; then
        return
    fi
    local where=$1
    shift
    LOCALRC+="$where: $*"$'\n'
}
source "$1"
echo "projects:$UPGRADE_PROJECTS"
echo "dir:${PLUGIN_DIR[nova-ext]}"
printf '%s' "$LOCALRC"
'''


class GrenadePluginTest(testtools.TestCase):

    def test_every_file_grenade_uses_is_there_and_parses(self):
        for name in SCRIPTS:
            path = os.path.join(UPGRADE, name)
            self.assertTrue(os.path.isfile(path), path)
            subprocess.run(['bash', '-n', path], check=True)
            if name.endswith('.sh'):
                # grenade runs them as programs
                self.assertTrue(os.access(path, os.X_OK), path)

    def test_shellcheck(self):
        # SC1090/SC1091: grenade's and DevStack's files, sourced from
        # $GRENADE_DIR and $TARGET_DEVSTACK_DIR, exist only in a grenade run
        result = subprocess.run(
            [os.path.join(BIN, 'shellcheck'), '-s', 'bash',
             '-e', 'SC1090,SC1091'] +
            [os.path.join(UPGRADE, name) for name in SCRIPTS],
            capture_output=True, text=True, cwd=TOP)
        self.assertEqual(0, result.returncode, result.stdout)

    def settings(self, external):
        return subprocess.run(
            ['bash', '-c', GRENADE_SETTINGS_HARNESS, 'harness',
             os.path.join(UPGRADE, 'settings')],
            env=dict(os.environ, GRENADE_USE_EXTERNAL_DEVSTACK=external),
            capture_output=True, text=True, check=True).stdout.splitlines()

    def test_settings_register_nova_ext_in_its_plugin_directory(self):
        lines = self.settings('True')
        self.assertEqual(['projects: nova-ext', 'dir:' + UPGRADE], lines)

    def test_settings_enable_the_devstack_plugin_on_both_sides(self):
        lines = self.settings('False')
        self.assertEqual(
            ['base: enable_plugin nova-ext '
             'https://opendev.org/openstack/nova-ext stable/2026.1',
             'target: enable_plugin nova-ext '
             'https://opendev.org/openstack/nova-ext master'], lines[2:])

    def test_resources_answers_every_phase_grenade_calls(self):
        with open(os.path.join(UPGRADE, 'resources.sh')) as f:
            text = f.read()
        dispatched = re.findall(r'^    "(\w+)"\)\n\s+(?:set \+o errexit\n'
                                r'\s+)?(\w+)', text, re.MULTILINE)
        self.assertEqual(sorted(PHASES),
                         sorted(phase for phase, _ in dispatched))
        for _phase, function in dispatched:
            self.assertRegex(text, r'\nfunction %s \{' % function)

    def test_upgrade_runs_the_documented_steps_in_order(self):
        with open(os.path.join(UPGRADE, 'upgrade.sh')) as f:
            text = f.read()
        steps = ['install_nova_ext', 'db sync', 'driver install',
                 'nova_ext_upgrade_check ||', 'stop_nova',
                 'start_nova_compute', 'ensure_services_started',
                 'nova_ext_upgrade_check ||']
        positions = []
        start = text.index('set -o xtrace')
        for step in steps:
            position = text.index(step, start)
            positions.append(position)
            start = position + 1
        self.assertEqual(sorted(positions), positions)
        # the scheduler service is n-sch in DevStack
        self.assertNotIn('n-sched', text)
