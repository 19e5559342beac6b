# SPDX-License-Identifier: Apache-2.0
from tests import hypothesis_profiles  # noqa: F401 (registers the profiles)
from tests import logs

logs.route_nova_logs()
