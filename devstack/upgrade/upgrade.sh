#!/usr/bin/env bash

# ``upgrade-nova-ext``: grenade's upgrade phase for nova-ext, in the form of
# grenade's projects/*/upgrade.sh. It runs after projects/60_nova's
# upgrade.sh, which installed the new Nova, synced Nova's databases and
# restarted Nova's services -- still with the old nova-ext in them: the
# mixed window doc/source/upgrades.rst describes. The steps are that page's:
#
# 1. install the new nova-ext into Nova's environment;
# 2. nova-ext-manage db sync (its tables, in Nova's API database);
# 3. nova-ext-manage driver install again where computes run nova-ext's
#    libvirt driver (the shim is a file in Nova's tree, and the new Nova is
#    another tree);
# 4. nova-ext-status upgrade check: a Failure stops the upgrade;
# 5. restart Nova's services so that they load the new nova-ext, and check
#    again: every check must pass once they have started.

echo "*********************************************************************"
echo "Begin $0"
echo "*********************************************************************"

# Clean up any resources that may be in use
cleanup() {
    set +o errexit

    echo "*********************************************************************"
    echo "ERROR: Abort $0"
    echo "*********************************************************************"

    # Kill ourselves to signal any calling process
    trap 2; kill -2 $$
}

trap cleanup SIGHUP SIGINT SIGTERM

# Keep track of the grenade directory
RUN_DIR=$(cd "$(dirname "$0")" && pwd)

# Source params
source "$GRENADE_DIR/grenaderc"

# Import common functions
source "$GRENADE_DIR/functions"

# This script exits on an error so that errors don't compound and you see
# only the first error that occurred.
set -o errexit

# Duplicate some setup bits from target DevStack, as projects/60_nova does
source "$TARGET_DEVSTACK_DIR/stackrc"
source "$TARGET_DEVSTACK_DIR/lib/tls"
source "$TARGET_DEVSTACK_DIR/lib/apache"
source "$TARGET_DEVSTACK_DIR/lib/nova"
source "$TARGET_DEVSTACK_DIR/lib/database"
source "$TARGET_DEVSTACK_DIR/lib/rpc_backend"

# nova-ext's DevStack plugin: its settings (NOVA_EXT_DIR, the feature
# toggles) and its functions (install_nova_ext, nova_ext_manage ...), the
# same code stack.sh ran on the old side. Sourced without a mode, it runs
# no phase.
source "$RUN_DIR/../settings"
source "$RUN_DIR/../plugin.sh"

# Print the commands being run so that we can see the command that triggers
# an error.  It is also useful for following allowing as the install occurs.
set -o xtrace

# Save current config files for posterity
[[ -d $SAVE_DIR/etc.nova-ext ]] || cp -pr "$NOVA_CONF_DIR" "$SAVE_DIR/etc.nova-ext"

# calls pre-upgrade hooks for within-$base before we upgrade
upgrade_project nova-ext "$RUN_DIR" "$BASE_DEVSTACK_BRANCH" "$BASE_DEVSTACK_BRANCH"

# 1. the new nova-ext, into Nova's environment
install_nova_ext

# calls upgrade-nova-ext for specific release
upgrade_project nova-ext "$RUN_DIR" "$BASE_DEVSTACK_BRANCH" "$TARGET_DEVSTACK_BRANCH"

# 2. nova-ext's schema, on the API node (as configure_nova_ext does)
if is_service_enabled n-api; then
    nova_ext_manage --config-file "$NOVA_CONF" db sync || die $LINENO "nova-ext-manage db sync failed"
fi

# 3. the driver shim, into the new Nova's tree
if nova_ext_libvirt_driver_here; then
    nova_ext_manage driver install || die $LINENO "nova-ext-manage driver install failed"
fi

# 4. The upgrade check has nova-status's return codes: 0 Success, 1
# Warning (here: the quota driver's activation is not proven until the
# services have restarted), 2 Failure, 255 the check itself failed.
function nova_ext_upgrade_check {
    local rc=0
    "$NOVA_BIN_DIR/nova-ext-status" --config-file "$NOVA_CONF" upgrade check || rc=$?
    return $rc
}

if is_service_enabled n-api n-cond n-sch; then
    rc=0
    nova_ext_upgrade_check || rc=$?
    if [[ $rc -ge 2 ]]; then
        die $LINENO "nova-ext-status upgrade check failed (exit $rc) before the restart"
    fi
fi

# 5. Nova's services again, now loading the new nova-ext (as
# projects/60_nova starts them)
stop_nova
start_nova_api
if [ "$(type -t start_nova_conductor)" ]; then
    run_process n-cond "$NOVA_BIN_DIR/nova-conductor --config-file $NOVA_CONF"
fi
start_nova_rest
start_nova_compute

expected_running_services="n-api n-cond "
if ! is_service_enabled ironic; then
    expected_running_services+=' n-cpu'
fi
# shellcheck disable=SC2086  # one argument per service
ensure_services_started $expected_running_services

# Each nova-api and conductor records its quota driver as it starts: the
# check turns to Success once they all have (a minute at most).
if is_service_enabled n-api n-cond n-sch; then
    for _attempt in $(seq 1 30); do
        rc=0
        nova_ext_upgrade_check || rc=$?
        [[ $rc -eq 0 ]] && break
        sleep 2
    done
    if [[ $rc -ne 0 ]]; then
        die $LINENO "nova-ext-status upgrade check still answers $rc after the restart"
    fi
fi

set +o xtrace
echo "*********************************************************************"
echo "SUCCESS: End $0"
echo "*********************************************************************"
