# SPDX-License-Identifier: Apache-2.0
"""The scripts of tools/ (not a package) as modules, for the tests that
check what they compute or parse.
"""

import importlib.util
import os

TOOLS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'tools')


def load(name):
    """tools/``name``.py, executed as a fresh module named ``name``."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(TOOLS, name + '.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
