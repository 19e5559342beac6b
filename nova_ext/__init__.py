# SPDX-License-Identifier: Apache-2.0
"""nova-ext: an extension pack for an unmodified upstream Nova 34."""
