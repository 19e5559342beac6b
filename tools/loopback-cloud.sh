#!/usr/bin/env bash
# Bring the loopback cloud up by hand (keystone, glance, placement, Nova's
# services, four fake computes in two cells; nova-ext enabled) and keep it
# until Ctrl-C, which stops every service and drops its databases and RabbitMQ vhost.
# Prints the OS_* exports for the openstack CLI.
#
#   tools/loopback-cloud.sh              just the cloud
#   tools/loopback-cloud.sh --steps      plus racks, flavors, a spread group
#   tools/loopback-cloud.sh --tempest    plus nova-ext's tempest plugin
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(tools/ensure-venv.sh)
exec "$venv/bin/python" -m tests.loopback.loopback "$@"
