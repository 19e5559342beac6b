#!/bin/bash
# shellcheck shell=bash
# nova-ext DevStack plugin (doc/source/devstack.rst).
#
# DevStack sources this file as ``plugin.sh <mode> [<phase>]`` with its own
# functions and lib/nova's variables (NOVA_CONF, NOVA_BIN_DIR ...) defined,
# and devstack/settings already read. Every edit of a Nova or tempest
# configuration file goes through ``nova-ext-manage configure``, the same
# command operators use, so DevStack clouds are configured the way the docs
# say.

_XTRACE_NOVA_EXT=$(set +o | grep xtrace)
set -o xtrace

# nova-ext-manage lands next to nova-manage: in the environment DevStack
# installed Nova into.
function nova_ext_manage {
    "$NOVA_BIN_DIR/nova-ext-manage" "$@"
}

# The configure flags of the features switched on for this node, in the
# global array NOVA_EXT_FLAGS. $1 is "nova", "cell-conductor" (the feature
# switches alone) or "tempest": for tempest the libvirt driver counts only
# when computes report failure domains, which is what its tests check.
function nova_ext_feature_flags {
    local target=$1
    NOVA_EXT_FLAGS=()
    [[ "$NOVA_EXT_ENABLE_FILTERS" == "True" ]] && NOVA_EXT_FLAGS+=(--filters)
    if [[ "$NOVA_EXT_ENABLE_WEIGHERS" == "True" ]]; then
        NOVA_EXT_FLAGS+=(--weighers)
        if [[ "$target" == "nova" ]]; then
            NOVA_EXT_FLAGS+=(--set "nova_ext.bin_packing_weight_multiplier=$NOVA_EXT_BIN_PACKING_WEIGHT_MULTIPLIER")
        fi
    fi
    # Request filters run in nova-scheduler, activated there by the engine
    # plugin (?plugin=nova_ext) that "configure --request-filters" puts on
    # its [api_database] connection, whatever the filters and weighers
    # toggles say. A node without n-sch (DevStack's name for
    # nova-scheduler: stackrc, lib/nova's run_process) gets none; tempest's
    # flags follow the toggle: they describe the cloud's scheduler,
    # wherever it runs.
    if [[ "$NOVA_EXT_ENABLE_REQUEST_FILTERS" == "True" ]] && \
            { [[ "$target" == "tempest" ]] || is_service_enabled n-sch; }; then
        NOVA_EXT_FLAGS+=(--request-filters)
    fi
    [[ "$NOVA_EXT_ENABLE_QUOTA" == "True" ]] && NOVA_EXT_FLAGS+=(--quota)
    if nova_ext_libvirt_driver_here; then
        if [[ "$target" == "nova" ]]; then
            NOVA_EXT_FLAGS+=(--libvirt-driver)
            if [[ -n "$NOVA_EXT_FAILURE_DOMAIN" ]]; then
                NOVA_EXT_FLAGS+=(--failure-domain "$NOVA_EXT_FAILURE_DOMAIN")
            fi
        elif [[ -n "$NOVA_EXT_FAILURE_DOMAIN" ]]; then
            NOVA_EXT_FLAGS+=(--libvirt-driver)
        fi
    fi
    return 0
}

# The driver is loaded by nova-compute only: a controller without n-cpu
# keeps Nova's compute_driver and an untouched Nova tree.
function nova_ext_libvirt_driver_here {
    [[ "$NOVA_EXT_ENABLE_LIBVIRT_DRIVER" == "True" ]] && is_service_enabled n-cpu
}

# pip_install into the environment Nova runs from: with USE_VENV=True,
# lib/nova's own virtualenv (PROJECT_VENV[nova], whose bin is
# $NOVA_BIN_DIR), where nova-ext-manage and the driver shim must land too.
function nova_ext_pip_install {
    if [[ "$(trueorfalse False USE_VENV)" == "True" ]]; then
        PIP_VIRTUAL_ENV=${PROJECT_VENV[nova]:-${NOVA_DIR:-$DEST/nova}.venv} pip_install "$@"
    else
        pip_install "$@"
    fi
}

# Whether lib/tempest installs nova-ext's tempest plugin into tempest's
# venv itself: TEMPEST_PLUGINS names this checkout.
function nova_ext_in_tempest_plugins {
    [[ " ${TEMPEST_PLUGINS:-} " == *" $NOVA_EXT_DIR "* ]]
}

function install_nova_ext {
    # OFFLINE=True: DevStack installs nothing (pip_install returns at
    # once); nova-ext must already be in Nova's environment, which
    # stack.sh keeps (it does not rebuild Nova's environment).
    if [[ "$(trueorfalse False OFFLINE)" != "True" ]]; then
        install_nova_ext_packages
    fi
    if [[ ! -x "$NOVA_BIN_DIR/nova-ext-manage" ]]; then
        die $LINENO "nova-ext is not installed in Nova's environment ($NOVA_BIN_DIR has no nova-ext-manage): with OFFLINE=True install it beforehand (pip install -e $NOVA_EXT_DIR with that environment's pip) or stack with OFFLINE=False"
    fi
    # Tempest's venv is another matter: lib/tempest's install_tempest
    # rebuilds it (tox -r) on every stack.sh, OFFLINE or not, so nothing
    # installed there beforehand survives. Offline, the one way in is
    # TEMPEST_PLUGINS, which lib/tempest installs after the rebuild; say so
    # now rather than after the whole stack.
    if [[ "$(trueorfalse False OFFLINE)" == "True" ]] && \
            is_service_enabled tempest && ! nova_ext_in_tempest_plugins; then
        die $LINENO "OFFLINE=True with tempest: add nova-ext to TEMPEST_PLUGINS in local.conf (TEMPEST_PLUGINS=\"--no-deps $NOVA_EXT_DIR\"); lib/tempest rebuilds tempest's venv on every stack.sh"
    fi
}

function install_nova_ext_packages {
    # setup_develop would let pip resolve nova-ext's Nova requirement
    # (requirements.txt: a range of supported releases) against the
    # editable Nova in $NOVA_DIR, whose version carries git suffixes
    # (35.0.0.devN on master) and may fall outside it, and replace it with
    # a release from PyPI. So: nova-ext's dependencies other than Nova,
    # then nova-ext editable without dependencies.
    local reqs
    reqs=$(mktemp)
    grep -vE '^[[:space:]]*nova([^a-zA-Z0-9_.-]|$)' "$NOVA_EXT_DIR/requirements.txt" > "$reqs"
    nova_ext_pip_install -r "$reqs"
    rm -f "$reqs"
    nova_ext_pip_install --no-deps -e "$NOVA_EXT_DIR"
    # As setup_package: pip ran as root there, and later runs as the stack
    # user must be able to rewrite the metadata.
    local egg_info
    if [[ "${GLOBAL_VENV:-True}" == "False" ]]; then
        for egg_info in "$NOVA_EXT_DIR"/*.egg-info; do
            if [[ -d "$egg_info" ]]; then
                safe_chown -R "$STACK_USER" "$egg_info"
            fi
        done
    fi
}

function configure_nova_ext {
    nova_ext_feature_flags nova
    if [[ ${#NOVA_EXT_FLAGS[@]} -gt 0 ]]; then
        # nova-api, nova-scheduler and the (super)conductor read $NOVA_CONF,
        # and start_nova_compute copies it to $NOVA_CPU_CONF after this
        # phase.
        nova_ext_manage configure nova --config-file "$NOVA_CONF" "${NOVA_EXT_FLAGS[@]}" \
            || die $LINENO "nova-ext-manage configure nova failed"
        # Each cell's conductor reads only its nova_cellN.conf; the role
        # table in nova-ext-manage says what it needs (today nothing: Nova
        # checks quota in nova-api and the superconductor, and a cell
        # conductor has no API database for the limits).
        local cell_conf
        # the features alone: no --set or --failure-domain, which are the
        # scheduler's and the compute's
        nova_ext_feature_flags cell-conductor
        for cell_conf in "${NOVA_CONF_DIR:-$(dirname "$NOVA_CONF")}"/nova_cell*.conf; do
            [[ -f "$cell_conf" ]] || continue
            nova_ext_manage configure nova --config-file "$cell_conf" --role cell-conductor "${NOVA_EXT_FLAGS[@]}" \
                || die $LINENO "nova-ext-manage configure nova failed on $cell_conf"
        done
    fi
    # As init_nova: the API database is created on the API node only.
    # nova-ext's tables: the per-flavor limits, and the spread ledger the
    # failure-domain filter's turns write in nova-scheduler.
    if [[ "$NOVA_EXT_ENABLE_QUOTA" == "True" || "$NOVA_EXT_ENABLE_FILTERS" == "True" ]] \
            && is_service_enabled n-api; then
        nova_ext_manage --config-file "$NOVA_CONF" db sync \
            || die $LINENO "nova-ext-manage db sync failed"
    fi
    if nova_ext_libvirt_driver_here; then
        nova_ext_manage driver install \
            || die $LINENO "nova-ext-manage driver install failed"
    fi
}

# Services run now. Each check runs where what it reads is: the quota
# check and the upgrade check read Nova's databases, named only in the
# nova.conf of nodes running nova-api, nova-conductor or nova-scheduler
# (lib/nova writes no database URL on a compute-only node); the driver
# check reads the compute's own file. A problem found is a warning in the
# stack log, not a failed stack: processes may still be starting.
function check_nova_ext {
    if [[ "$NOVA_EXT_ENABLE_QUOTA" == "True" ]] && is_service_enabled n-api; then
        # "|| warn" would stop stack.sh: warn returns the failed status.
        if ! nova_ext_manage --config-file "$NOVA_CONF" quota check; then
            warn $LINENO "nova-ext: a nova-api or nova-conductor did not activate the quota driver (table above)"
        fi
    fi
    # The upgrade check (doc/source/upgrades.rst): release, Nova internals,
    # driver shim, nova-ext's tables, quota activation, aggregate metadata.
    if is_service_enabled n-api n-cond n-sch; then
        if ! "$NOVA_BIN_DIR/nova-ext-status" --config-file "$NOVA_CONF" upgrade check; then
            warn $LINENO "nova-ext: nova-ext-status upgrade check found a problem (table above)"
        fi
    fi
    if nova_ext_libvirt_driver_here; then
        if ! nova_ext_manage --config-file "${NOVA_CPU_CONF:-$NOVA_CONF}" driver check; then
            warn $LINENO "nova-ext: nova-ext-manage driver check found a problem (above)"
        fi
    fi
    return 0
}

# Tempest runs from its own virtualenv (lib/tempest's tox venv), which must
# hold nova-ext's tempest plugin. lib/tempest installs TEMPEST_PLUGINS there
# before this phase, with their dependencies (for nova-ext: Nova from PyPI);
# when nova-ext is not among them it is installed here without dependencies
# -- the plugin needs only tempest.
function install_nova_ext_tempest_plugin {
    local venv=${TEMPEST_VENV:-$TEMPEST_DIR/.tox/tempest}
    # Offline, install_nova_ext made sure TEMPEST_PLUGINS names nova-ext.
    if ! nova_ext_in_tempest_plugins; then
        [[ -x "$venv/bin/pip" ]] || die $LINENO "no tempest virtualenv at $venv (set TEMPEST_VENV)"
        "$venv/bin/pip" install --no-deps -e "$NOVA_EXT_DIR" \
            || die $LINENO "installing nova-ext's tempest plugin into $venv failed"
    fi
    if ! "$venv/bin/python" -c 'import nova_ext.tempest.plugin' 2>/dev/null; then
        die $LINENO "nova-ext's tempest plugin is not in tempest's environment $venv: add it to TEMPEST_PLUGINS in local.conf (TEMPEST_PLUGINS=\"--no-deps $NOVA_EXT_DIR\")"
    fi
}

function configure_tempest_for_nova_ext {
    install_nova_ext_tempest_plugin
    nova_ext_feature_flags tempest
    if [[ ${#NOVA_EXT_FLAGS[@]} -gt 0 ]]; then
        nova_ext_manage configure tempest --config-file "$TEMPEST_CONFIG" "${NOVA_EXT_FLAGS[@]}" \
            || die $LINENO "nova-ext-manage configure tempest failed"
    fi
    # The spread tests ask for the level this cloud declares domains at
    # (their default, rack, may not be it).
    if [[ -n "$NOVA_EXT_FAILURE_DOMAIN" ]]; then
        iniset "$TEMPEST_CONFIG" nova_ext spread_level "${NOVA_EXT_FAILURE_DOMAIN%%:*}"
    fi
}

# Undo every flag, whatever the toggles say now: they may have changed
# since the stack.
function clean_nova_ext {
    if [[ -f "$NOVA_CONF" ]]; then
        # --undo takes out only the values configure wrote: the same
        # --set and --failure-domain values as at stack time.
        local undo_values=(--set "nova_ext.bin_packing_weight_multiplier=$NOVA_EXT_BIN_PACKING_WEIGHT_MULTIPLIER")
        if [[ -n "$NOVA_EXT_FAILURE_DOMAIN" ]]; then
            undo_values+=(--failure-domain "$NOVA_EXT_FAILURE_DOMAIN")
        fi
        if ! nova_ext_manage configure nova --config-file "$NOVA_CONF" --all --undo \
                "${undo_values[@]}"; then
            warn $LINENO "nova-ext-manage configure nova --undo failed"
        fi
    fi
    # The shim is a file in Nova's checkout, which clean.sh keeps.
    if ! nova_ext_manage driver remove; then
        warn $LINENO "nova-ext-manage driver remove failed"
    fi
    return 0
}

if is_service_enabled nova-ext; then
    if [[ "$1" == "stack" && "${2:-}" == "install" ]]; then
        echo_summary "Installing nova-ext"
        install_nova_ext
    elif [[ "$1" == "stack" && "${2:-}" == "post-config" ]]; then
        echo_summary "Configuring Nova for nova-ext"
        configure_nova_ext
    elif [[ "$1" == "stack" && "${2:-}" == "extra" ]]; then
        echo_summary "Checking nova-ext"
        check_nova_ext
    elif [[ "$1" == "stack" && "${2:-}" == "test-config" ]]; then
        if is_service_enabled tempest; then
            echo_summary "Configuring tempest for nova-ext"
            configure_tempest_for_nova_ext
        fi
    fi

    # unstack: stopping Nova is DevStack's job, and the configuration must
    # survive for the next stack.sh to read. Nothing to do.

    if [[ "$1" == "clean" ]]; then
        clean_nova_ext
    fi
fi

$_XTRACE_NOVA_EXT
