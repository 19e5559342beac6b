# SPDX-License-Identifier: Apache-2.0
"""Sphinx configuration of nova-ext's release notes (tox -e releasenotes,
./run-tests.sh docs): the notes of releasenotes/notes, as reno reads them
from git history, built with warnings as errors and nothing downloaded.
"""

extensions = [
    'openstackdocstheme',
    'reno.sphinxext',
]

openstackdocs_repo_name = 'openstack/nova-ext'
openstackdocs_bug_project = 'nova-ext'
openstackdocs_bug_tag = 'releasenotes'
openstackdocs_auto_name = False
openstackdocs_use_storyboard = False

project = 'nova-ext Release Notes'
copyright = 'nova-ext developers'
master_doc = 'index'
source_suffix = '.rst'
pygments_style = 'native'
html_theme = 'openstackdocs'
html_static_path = ['_static']
