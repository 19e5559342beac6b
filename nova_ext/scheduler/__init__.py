# SPDX-License-Identifier: Apache-2.0
"""nova-ext scheduler plugins: filters and weighers."""
