#!/bin/bash
# Runs one phase of devstack/plugin.sh outside DevStack, for
# tests/unit/test_devstack_plugin.py:
#
#   NOVA_EXT_HARNESS_DIR=/tmp/x tests/devstack/harness.sh stack post-config
#   NOVA_EXT_HARNESS_DIR=/tmp/x tests/devstack/harness.sh devstack create_nova_conf
#
# It defines the DevStack functions the plugin calls, with DevStack's
# documented behaviour (implemented here, not copied), points DevStack's
# variables into $NOVA_EXT_HARNESS_DIR, sources devstack/settings after
# setting NOVA_FILTERS as lib/nova does, then sources plugin.sh as
# stack.sh's run_phase does. "devstack <step>" instead replays the few lines
# of lib/nova and lib/tempest that write what the plugin later edits.
#
# With HARNESS_DEVSTACK_DIR naming a DevStack checkout, DevStack's own
# functions (its "functions" file: functions-common, inc/ini-config,
# inc/python) and stackrc are sourced instead, and only what would touch
# the machine or end the stack is replaced (pip_install, setup_develop,
# safe_chown, die, warn, echo_summary). ENABLED_SERVICES, when the test
# sets none, is then stackrc's default; without a checkout it is the
# "default" names of tests/devstack/devstack-services.txt, which
# tools/devstack_services.py wrote from stackrc.
#
# pip_install, setup_develop and safe_chown only record their arguments (and
# the content of -r files) in $NOVA_EXT_HARNESS_DIR/calls.log: nova-ext is
# already installed in the test environment, and the tests must not touch
# PyPI. warn and die record too, so tests can tell a warned-about failure
# from success.
#
# Variables the tests may set: ENABLED_SERVICES, DISABLED_SERVICES (what
# local.conf's disable_service leaves), VIRT_DRIVER, GLOBAL_VENV,
# CELLSV2_SETUP, USE_VENV, OFFLINE, TEMPEST_PLUGINS, NOVA_BIN_DIR (default:
# this checkout's .venv/bin), HARNESS_TEMPEST_PYTHON, HARNESS_DEVSTACK_DIR,
# NOVA_EXT_DIR and the other NOVA_EXT_* settings.
set -o errexit -o pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HARNESS_DIR=${NOVA_EXT_HARNESS_DIR:?set NOVA_EXT_HARNESS_DIR to a scratch directory}
CALLS=$HARNESS_DIR/calls.log
DEVSTACK_DIR=${HARNESS_DEVSTACK_DIR:-}

if [[ -n "$DEVSTACK_DIR" ]]; then
    # As stack.sh: its functions, then stackrc (which keeps an
    # ENABLED_SERVICES already set, as local.conf's would be). Without
    # nounset, as stack.sh runs unless NOUNSET is set: DevStack's functions
    # read variables nothing sets (DISABLED_SERVICES).
    # shellcheck disable=SC2034  # DevStack's files read it
    TOP_DIR=$DEVSTACK_DIR
    # shellcheck source=/dev/null
    source "$DEVSTACK_DIR/functions"
    # shellcheck source=/dev/null
    source "$DEVSTACK_DIR/stackrc"
else
    # stackrc's default, as tools/devstack_services.py read it
    ENABLED_SERVICES=${ENABLED_SERVICES:-$(awk '$2 == "default" { print $1 }' \
        "$TOP/tests/devstack/devstack-services.txt" | paste -sd, -)}
    # the plugin must not read a variable DevStack may leave unset
    set -o nounset
fi

# --- functions-common / functions -----------------------------------------

function die {
    local line=$1
    shift
    echo "[ERROR] ${BASH_SOURCE[1]}:$line $*" >&2
    echo "die $*" >> "$CALLS"
    exit 1
}

# Returns the status of the command before it, as DevStack's does: under
# errexit, "cmd || warn ..." stops the stack.
function warn {
    local exitcode=$?
    local line=$1
    shift
    echo "[WARNING] ${BASH_SOURCE[1]}:$line $*" >&2
    echo "warn $*" >> "$CALLS"
    return $exitcode
}

function echo_summary {
    echo "summary: $*"
}

if [[ -z "$DEVSTACK_DIR" ]]; then

# trueorfalse default VARNAME: True/False from the variable's value, the
# default for anything unrecognised (unset included).
function trueorfalse {
    local default=$1
    local name=${2:?trueorfalse needs a variable name}
    case "${!name:-}" in
        1 | [yY]es | YES | [tT]rue | TRUE) echo True ;;
        0 | [nN]o | NO | [fF]alse | FALSE) echo False ;;
        *) echo "$default" ;;
    esac
}

# is_service_enabled SERVICE...: true when any is in ENABLED_SERVICES;
# "nova" stands for any n-* service, as in DevStack.
function is_service_enabled {
    local service
    for service in "$@"; do
        [[ ",$ENABLED_SERVICES," == *",$service,"* ]] && return 0
        [[ "$service" == nova && ",$ENABLED_SERVICES" == *",n-"* ]] && return 0
    done
    return 1
}

# enable_service SERVICE...: adds to ENABLED_SERVICES, except a service
# local.conf disabled (DISABLED_SERVICES), which stays off.
function enable_service {
    local service
    for service in "$@"; do
        if [[ ",${DISABLED_SERVICES:-}," == *",$service,"* ]]; then
            echo "[WARNING] not enabling $service: disabled" >&2
            continue
        fi
        is_service_enabled "$service" || ENABLED_SERVICES="${ENABLED_SERVICES:+$ENABLED_SERVICES,}$service"
    done
}

function disable_service {
    local service
    for service in "$@"; do
        DISABLED_SERVICES="${DISABLED_SERVICES:+$DISABLED_SERVICES,}$service"
        ENABLED_SERVICES=$(echo ",$ENABLED_SERVICES," | sed -e "s/,$service,/,/g" -e 's/^,//' -e 's/,$//')
    done
}

fi

function safe_chown {
    echo "safe_chown $*" >> "$CALLS"
}

# --- inc/python -----------------------------------------------------------

# As DevStack's: nothing at all with OFFLINE=True; into PIP_VIRTUAL_ENV
# when that is set (recorded as "[venv DIR]").
function pip_install {
    local arg previous=""
    [[ "${OFFLINE:-False}" == "True" ]] && return 0
    echo "pip_install ${PIP_VIRTUAL_ENV:+[venv $PIP_VIRTUAL_ENV] }$*" >> "$CALLS"
    for arg in "$@"; do
        if [[ "$previous" == "-r" ]]; then
            sed 's/^/    /' "$arg" >> "$CALLS"
        fi
        previous=$arg
    done
}

function setup_develop {
    echo "setup_develop $*" >> "$CALLS"
}

if [[ -z "$DEVSTACK_DIR" ]]; then

# --- inc/ini-config -------------------------------------------------------
# Sections are [name] lines; options "name = value" lines up to the next
# section. A multi-valued option is the same name on several lines.

function ini_has_option {
    local file=$1 section=$2 option=$3
    [[ -f "$file" ]] || return 1
    awk -v s="[$section]" -v o="$option" '
        /^\[/ { in_s = ($0 == s); next }
        in_s && $0 ~ "^" o "[ \t]*=" { found = 1 }
        END { exit !found }' "$file"
}

# iniget_multiline FILE SECTION OPTION: every value, one per line.
function iniget_multiline {
    local file=$1 section=$2 option=$3
    [[ -f "$file" ]] || return 0
    awk -v s="[$section]" -v o="$option" '
        /^\[/ { in_s = ($0 == s); next }
        in_s && $0 ~ "^" o "[ \t]*=" {
            sub("^" o "[ \t]*=[ \t]*", ""); print }' "$file"
}

# iniget FILE SECTION OPTION: the first value.
function iniget {
    iniget_multiline "$@" | head -n 1
}

function inidelete {
    local file=$1 section=$2 option=$3 tmp
    [[ -f "$file" ]] || return 0
    tmp=$(mktemp)
    awk -v s="[$section]" -v o="$option" '
        /^\[/ { in_s = ($0 == s) }
        !(in_s && $0 ~ "^" o "[ \t]*=") { print }' "$file" > "$tmp"
    cat "$tmp" > "$file"
    rm -f "$tmp"
}

# iniset_multiline FILE SECTION OPTION VALUE...: one line per value, in
# place of whatever the option held; section created when missing.
function iniset_multiline {
    local file=$1 section=$2 option=$3 tmp
    shift 3
    mkdir -p "$(dirname "$file")"
    touch "$file"
    inidelete "$file" "$section" "$option"
    if ! grep -qxF "[$section]" "$file"; then
        printf '\n[%s]\n' "$section" >> "$file"
    fi
    tmp=$(mktemp)
    # Values through the environment: awk -v would interpret backslashes.
    INI_VALUES="$(printf '%s\n' "$@")" awk -v s="[$section]" -v o="$option" '
        { print }
        $0 == s {
            n = split(ENVIRON["INI_VALUES"], v, "\n")
            for (i = 1; i <= n; i++) if (v[i] != "") print o " = " v[i]
        }' "$file" > "$tmp"
    cat "$tmp" > "$file"
    rm -f "$tmp"
}

# iniset FILE SECTION OPTION VALUE: a single line, in place of the first
# earlier one (later ones dropped), else first in the section.
function iniset {
    local file=$1 section=$2 option=$3 value=$4 tmp
    if ! ini_has_option "$file" "$section" "$option"; then
        iniset_multiline "$file" "$section" "$option" "$value"
        return
    fi
    tmp=$(mktemp)
    INI_VALUE=$value awk -v s="[$section]" -v o="$option" '
        /^\[/ { in_s = ($0 == s) }
        in_s && $0 ~ "^" o "[ \t]*=" {
            if (!done) print o " = " ENVIRON["INI_VALUE"]
            done = 1
            next
        }
        { print }' "$file" > "$tmp"
    cat "$tmp" > "$file"
    rm -f "$tmp"
}

# iniadd FILE SECTION OPTION VALUE...: appends values to a multi-valued
# option.
function iniadd {
    local file=$1 section=$2 option=$3 values=()
    shift 3
    mapfile -t values < <(iniget_multiline "$file" "$section" "$option")
    iniset_multiline "$file" "$section" "$option" "${values[@]}" "$@"
}

fi

# --- stackrc, lib/nova, lib/tempest variables ------------------------------

DEST=$HARNESS_DIR/opt/stack
DATA_DIR=$DEST/data
mkdir -p "$DEST" "$DATA_DIR"
# enable_plugin clones the plugin to $DEST/<name>; here, this checkout.
[[ -e "$DEST/nova-ext" ]] || ln -s "$TOP" "$DEST/nova-ext"
VIRT_DRIVER=${VIRT_DRIVER:-libvirt}
GLOBAL_VENV=${GLOBAL_VENV:-True}
STACK_USER=${STACK_USER:-stack}
CELLSV2_SETUP=${CELLSV2_SETUP:-superconductor}
NOVA_BIN_DIR=${NOVA_BIN_DIR:-$TOP/.venv/bin}
NOVA_CONF_DIR=$HARNESS_DIR/etc/nova
NOVA_CONF=$NOVA_CONF_DIR/nova.conf
NOVA_CPU_CONF=$NOVA_CONF_DIR/nova-cpu.conf
TEMPEST_DIR=$DEST/tempest
TEMPEST_CONFIG=$TEMPEST_DIR/etc/tempest.conf
NOVA_DIR=$DEST/nova
declare -A PROJECT_VENV
if [[ "${USE_VENV:-False}" == "True" ]]; then
    PROJECT_VENV[nova]=$NOVA_DIR.venv
fi
# lib/tempest's tox venv: its pip records what it is asked to install; its
# python is HARNESS_TEMPEST_PYTHON (default: this checkout's venv, where
# nova-ext's tempest plugin imports).
TEMPEST_VENV_BIN=$TEMPEST_DIR/.tox/tempest/bin
mkdir -p "$TEMPEST_VENV_BIN"
printf '#!/bin/sh\necho "tempest-venv pip $*" >> "%s"\n' "$CALLS" > "$TEMPEST_VENV_BIN/pip"
chmod +x "$TEMPEST_VENV_BIN/pip"
# (a script, not a symlink: a venv's python found through a symlink
# elsewhere does not know its venv)
printf '#!/bin/sh\nexec "%s" "$@"\n' "${HARNESS_TEMPEST_PYTHON:-$TOP/.venv/bin/python3}" > "$TEMPEST_VENV_BIN/python"
chmod +x "$TEMPEST_VENV_BIN/python"
NOVA_FILTERS="ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,SameHostFilter,DifferentHostFilter"
mkdir -p "$NOVA_CONF_DIR" "$TEMPEST_DIR/etc"

function database_connection_url {
    echo "sqlite:///$DATA_DIR/$1.sqlite"
}

# The lines of lib/nova's create_nova_conf and init_nova, the hypervisor
# plugin and lib/tempest's configure_tempest that produce what the plugin
# reads or edits.
function devstack_step {
    case "$1" in
        create_nova_conf)
            rm -f "$NOVA_CONF"
            iniset "$NOVA_CONF" DEFAULT debug True
            iniset "$NOVA_CONF" filter_scheduler enabled_filters "$NOVA_FILTERS"
            iniset "$NOVA_CONF" scheduler workers 2
            # lib/nova's own test, spelling included: n-sched matches no
            # DevStack service, so a scheduler-only node gets no database
            # URL from lib/nova (local.conf's post-config must add it)
            if is_service_enabled n-api n-cond n-sched n-spice n-novnc n-sproxy; then
                if [[ "$CELLSV2_SETUP" == "singleconductor" ]]; then
                    iniset "$NOVA_CONF" database connection "$(database_connection_url nova_cell1)"
                else
                    iniset "$NOVA_CONF" database connection "$(database_connection_url nova_cell0)"
                    iniset "$NOVA_CONF" filter_scheduler track_instance_changes False
                fi
                iniset "$NOVA_CONF" api_database connection "$(database_connection_url nova_api)"
            fi
            if is_service_enabled n-cond; then
                iniset "$NOVA_CONF_DIR/nova_cell1.conf" database connection "$(database_connection_url nova_cell1)"
                iniset "$NOVA_CONF_DIR/nova_cell1.conf" conductor workers 2
            fi
            if [[ "$VIRT_DRIVER" == "libvirt" ]]; then
                iniset "$NOVA_CONF" DEFAULT compute_driver libvirt.LibvirtDriver
            fi
            ;;
        init_nova)
            "$NOVA_BIN_DIR/nova-manage" --config-file "$NOVA_CONF" api_db sync
            ;;
        start_nova_compute)
            cp "$NOVA_CONF" "$NOVA_CPU_CONF"
            inidelete "$NOVA_CPU_CONF" database connection
            inidelete "$NOVA_CPU_CONF" api_database connection
            ;;
        configure_tempest)
            rm -f "$TEMPEST_CONFIG"
            iniset "$TEMPEST_CONFIG" compute image_ref 00000000-0000-0000-0000-000000000001
            if [[ -n "$NOVA_FILTERS" ]]; then
                iniset "$TEMPEST_CONFIG" compute-feature-enabled scheduler_enabled_filters "$NOVA_FILTERS"
            fi
            ;;
        *)
            die $LINENO "unknown devstack step $1"
            ;;
    esac
}

# --- run ------------------------------------------------------------------

# errexit as in stack.sh; nounset as in stack.sh with NOUNSET set.
# shellcheck source=SCRIPTDIR/../../devstack/settings
source "$TOP/devstack/settings"
if [[ "$1" == "devstack" ]]; then
    devstack_step "$2"
else
    # shellcheck source=SCRIPTDIR/../../devstack/plugin.sh
    source "$TOP/devstack/plugin.sh" "$@"
fi
