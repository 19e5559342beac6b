#!/usr/bin/env bash
# The main job: an embedded Nova with nova-ext enabled runs a scenario and
# prints who landed where. Sets up .venv (pinned by constraints.txt) first.
#   ./sandbox.sh --help
set -euo pipefail
cd "$(dirname "$0")"
venv=$(tools/ensure-venv.sh)
exec "$venv/bin/python" -m nova_ext.cmd.sandbox "$@"
