# SPDX-License-Identifier: Apache-2.0
from tests import logs

logs.route_nova_logs()
