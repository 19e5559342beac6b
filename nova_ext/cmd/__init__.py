# SPDX-License-Identifier: Apache-2.0
"""nova-ext command-line tools."""
