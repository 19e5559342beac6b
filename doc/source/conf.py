# SPDX-License-Identifier: Apache-2.0
"""Sphinx configuration of nova-ext's documentation (tox -e docs,
./run-tests.sh docs).

Built with warnings as errors. Nothing is downloaded while building: no
intersphinx, and openstackdocstheme reads the page dates from git.
"""

import os
import sys

# tools/render_results.py is imported by the results extension
TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
sys.path.insert(0, os.path.join(TOP, 'tools'))

extensions = [
    'openstackdocstheme',
    # .. show-options:: nova_ext (doc/source/reference/config.rst)
    'oslo_config.sphinxext',
    # _static/nova-ext.conf.sample, generated at build time
    'oslo_config.sphinxconfiggen',
    # .. show-policy:: (doc/source/reference/policy.rst)
    'oslo_policy.sphinxext',
    # _static/nova-ext.policy.yaml.sample
    'oslo_policy.sphinxpolicygen',
    # .. release-notes:: (doc/source/reference/release-notes.rst)
    'reno.sphinxext',
]

config_generator_config_file = os.path.join(
    TOP, 'etc', 'nova-ext-config-generator.conf')
sample_config_basename = '_static/nova-ext'
policy_generator_config_file = os.path.join(
    TOP, 'etc', 'nova-ext-policy-generator.conf')
sample_policy_basename = '_static/nova-ext'

# openstackdocstheme
openstackdocs_repo_name = 'openstack/nova-ext'
openstackdocs_bug_project = 'nova-ext'
openstackdocs_bug_tag = 'doc'
openstackdocs_auto_name = False
openstackdocs_use_storyboard = False

project = 'nova-ext'
copyright = 'nova-ext developers'
master_doc = 'index'
source_suffix = '.rst'
exclude_patterns = ['results/*.rst']
pygments_style = 'native'
html_theme = 'openstackdocs'
html_static_path = ['_static']
# The sample files generated above are in _static; keep them out of the
# page sources.
html_extra_path = []
