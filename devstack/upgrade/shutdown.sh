#!/bin/bash
# nova-ext's grenade shutdown phase. nova-ext has no process of its own: it
# runs inside nova-api, nova-conductor, nova-scheduler and nova-compute,
# which projects/60_nova's shutdown.sh stops right after this script
# (grenade shuts the projects down in the reverse of their order). What
# is left to do here is to record which nova-ext the old side ran and the
# revision its tables are at, for upgrade.sh's log and the verify phases.

set -o errexit

source "$GRENADE_DIR/grenaderc"
source "$GRENADE_DIR/functions"

source "$BASE_DEVSTACK_DIR/functions"
source "$BASE_DEVSTACK_DIR/stackrc"
source "$BASE_DEVSTACK_DIR/lib/tls"
source "$BASE_DEVSTACK_DIR/lib/apache"
source "$BASE_DEVSTACK_DIR/lib/nova"

set -o xtrace

NOVA_EXT_BIN_DIR=${NOVA_BIN_DIR:-$(dirname "$(command -v nova-manage)")}
resource_save nova-ext base_version "$("$NOVA_EXT_BIN_DIR/python" -c 'from importlib import metadata; print(metadata.version("nova-ext"))' 2>/dev/null || echo unknown)"
