# SPDX-License-Identifier: Apache-2.0
"""nova-ext plugins running in nova-api."""
