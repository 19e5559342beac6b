#!/usr/bin/env bash
# The whole nova-ext test suite, from a fresh clone: sets up .venv (pinned by
# constraints.txt), then lint, the sample-config check, release notes, and
# the unit and functional tests (Nova's own services started in-process) and
# the system tests (real Nova processes against the machine's MariaDB and
# RabbitMQ, which must be running: 127.0.0.1:3306 root, 127.0.0.1:5672 guest).
#
#   ./run-tests.sh                 everything (what CI runs)
#   ./run-tests.sh unit            one tier: lint, genconfig, releasenotes,
#                                  unit, functional, system, loopback
#   ./run-tests.sh loopback        a real cloud (keystone, glance, placement,
#                                  Nova, 3 fake computes) driven by the
#                                  openstack CLI and our tempest plugin
#                                  (~5 minutes; doc/source/loopback-cloud.rst)
#   ./run-tests.sh functional tests.functional.test_weighers   a selection
set -euo pipefail
cd "$(dirname "$0")"
venv=$(tools/ensure-venv.sh)
export PATH="$venv/bin:$PATH"

tier=${1:-all}
shift || true

run_lint() {
    echo "== lint: flake8 + hacking"
    flake8 nova_ext tests tools
}

run_genconfig() {
    echo "== etc/nova-ext.conf.sample is what oslo-config-generator writes"
    tools/check-sample-config.sh
}

run_releasenotes() {
    echo "== release notes: reno lint"
    reno lint >/dev/null
}

run_stestr() {
    echo "== tests: $*"
    set +e
    stestr run --concurrency "${NOVA_EXT_TEST_CONCURRENCY:-2}" "$@" 2>&1 \
        | grep -vE 'Warning|warnings.warn|import eventlet|^$'
    local rc=${PIPESTATUS[0]}
    set -e
    local passed failed
    passed=$(stestr last 2>/dev/null | sed -n 's/^ - Passed: //p')
    failed=$(stestr last 2>/dev/null | sed -n 's/^ - Failed: //p')
    echo "${passed:-0} passed, ${failed:-0} failed"
    return "$rc"
}

run_loopback() {
    # tests/loopback is left out of discovery unless this is set: it takes
    # minutes and brings up a whole cloud
    NOVA_EXT_LOOPBACK=1 NOVA_EXT_TEST_CONCURRENCY=1 \
        run_stestr "${1:-tests.loopback}" "${@:2}"
    local report
    report=$(ls -td .loopback-runs/*/ 2>/dev/null | head -1)report.txt
    if [ -f "$report" ]; then cat "$report"; fi
}

case "$tier" in
    lint) run_lint ;;
    genconfig) run_genconfig ;;
    releasenotes) run_releasenotes ;;
    unit) run_stestr tests.unit "$@" ;;
    functional) run_stestr "${1:-tests.functional}" "${@:2}" ;;
    system) run_stestr "${1:-tests.system}" "${@:2}" ;;
    loopback) run_loopback "$@" ;;
    all)
        run_lint
        run_genconfig
        run_releasenotes
        run_stestr tests
        run_loopback
        ;;
    *) echo "unknown tier: $tier (lint|genconfig|releasenotes|unit|functional|system|loopback|all)" >&2
       exit 2 ;;
esac
