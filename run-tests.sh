#!/usr/bin/env bash
# The whole nova-ext test suite, from a fresh clone: sets up .venv (pinned by
# constraints.txt), then lint, the sample-config check, release notes, and
# the unit and functional tests (Nova's own services started in-process) and
# the system tests (real Nova processes against the machine's MariaDB and
# RabbitMQ, which must be running: 127.0.0.1:3306 root, 127.0.0.1:5672 guest).
#
#   ./run-tests.sh                 everything (what CI runs)
#   ./run-tests.sh unit            one tier: lint, genconfig, releasenotes,
#                                  docs, unit, functional, system, bench,
#                                  loopback
#   ./run-tests.sh docs            doc/ and releasenotes/ built with Sphinx,
#                                  warnings as errors (tox -e docs and
#                                  tox -e releasenotes build the same)
#   ./run-tests.sh bench           smoke-runs every benchmark and figure
#                                  script of tools/ at a tiny size (each
#                                  must exit 0 and print its table), so
#                                  they cannot rot between measurements
#   ./run-tests.sh loopback        a real cloud (keystone, glance, placement,
#                                  Nova, 4 fake computes) driven by the
#                                  openstack CLI and our tempest plugin
#                                  (~5 minutes; doc/source/loopback-cloud.rst)
#   ./run-tests.sh functional tests.functional.test_weighers   a selection
#   NOVA_EXT_NOVA_RELEASE=2026.1 ./run-tests.sh unit   against Nova 33
#                                  (2026.1; default 2026.2, Nova 34)
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

# The documentation and the release notes, each built whole (-E: a
# fresh environment, so a warning of an unchanged page is not skipped)
# with warnings as errors; nothing is downloaded. ~10 s.
run_docs() {
    echo "== docs: benchmark tables match doc/source/results/*.json"
    python tools/render_results.py --check
    local book out
    for book in doc releasenotes; do
        echo "== docs: sphinx-build -W $book/source"
        out=$(sphinx-build -E -W --keep-going -q -b html \
              "$book/source" "$book/build/html" 2>&1) \
            || { echo "$out"; return 1; }
    done
}

run_releasenotes() {
    echo "== release notes: reno lint"
    local out
    # reno lists every note it scans: shown only when lint fails
    out=$(reno lint 2>&1) || { echo "$out"; return 1; }
}

# Each release keeps its own stestr repository, so that the two can run at
# the same time (./run-tests.sh all does). --repo-url names the directory
# that holds the .stestr repository, and stestr creates only the latter.
stestr_repo=.
if [ "${NOVA_EXT_NOVA_RELEASE:-2026.2}" != 2026.2 ]; then
    stestr_repo=.stestr-$NOVA_EXT_NOVA_RELEASE
    mkdir -p "$stestr_repo"
fi

run_stestr() {
    echo "== tests: $*"
    set +e
    stestr --repo-url "$stestr_repo" run \
        --concurrency "${NOVA_EXT_TEST_CONCURRENCY:-2}" "$@" 2>&1 \
        | grep -vE 'Warning|warnings.warn|import eventlet|^$'
    local rc=${PIPESTATUS[0]}
    set -e
    local passed failed last
    last=$(stestr --repo-url "$stestr_repo" last 2>/dev/null)
    passed=$(sed -n 's/^ - Passed: //p' <<<"$last")
    failed=$(sed -n 's/^ - Failed: //p' <<<"$last")
    echo "${passed:-0} passed, ${failed:-0} failed"
    if [ "$rc" -ne 0 ]; then
        # the names again at the very end: CI shows a log's tail only
        echo "failed tests ($*):"
        stestr --repo-url "$stestr_repo" failing --list 2>/dev/null \
            | sed 's/^/  FAILED /'
    fi
    return "$rc"
}

# One tools/ script at a tiny size: it must exit 0 and print the line
# of its table named by $1 (its header); with --json (most scripts) the
# file it writes must hold its figures and the run's "measured" block.
bench_one() {
    local table=$1 out rc json=""
    shift
    if [[ " $* " == *" --json "* ]]; then
        json=$(sed -n 's/.* --json \([^ ]*\).*/\1/p' <<<" $* ")
    fi
    echo "-- bench: $*"
    set +e
    out=$(PYTHONWARNINGS=ignore timeout 600 python "$@" 2>&1)
    rc=$?
    set -e
    if [ "$rc" -ne 0 ] || ! grep -q -- "$table" <<<"$out"; then
        echo "$out" | tail -30
        echo "FAILED (exit $rc; table header '$table' expected): $*" >&2
        return 1
    fi
    if [ -n "$json" ] && ! python -c '
import json, sys
document = json.load(open(sys.argv[1]))
assert document["measured"]["command"].startswith("python tools/"), document
assert len(document) > 1, "no figures besides measured"
' "$json"; then
        echo "FAILED (--json $json: no figures or no measured block): $*" >&2
        return 1
    fi
    grep -A4 -- "$table" <<<"$out"
}

run_bench() {
    echo "== bench: every benchmark and figure script, tiny sizes"
    local failed=0 out
    out=$(mktemp -d)
    bench_one 'upstream ms/req' tools/benchmark_scheduler.py \
        --hosts 40 --rounds 1 --requests 2 --json "$out/s.json" || failed=1
    bench_one 'upstream ms/req' tools/benchmark_scheduler.py \
        --hosts 40 --max-placement-results 20 --no-group --rounds 1 \
        --requests 2 || failed=1
    bench_one 'p50 ms' tools/scheduler_curve.py --hosts 40 --cap 20 \
        --rounds 1 --requests 2 --png "$out/curve.png" \
        --json "$out/curve.json" || failed=1
    bench_one 'median ms' tools/benchmark_request_filters.py \
        --hosts 10 --requests 2 --json "$out/rf.json" || failed=1
    bench_one 'cpu p50 ms' tools/benchmark_placement.py \
        --providers 40 --rounds 2 --json "$out/p.json" || failed=1
    bench_one 'median ms' tools/benchmark_request_filters.py \
        --scenario failure_domain --hosts 8 --rack-size 2 --requests 2 \
        --json "$out/fd.json" || failed=1
    bench_one 'per_flavor ms' tools/benchmark_quota.py \
        --sizes 10 --repeat 2 --json "$out/q.json" || failed=1
    bench_one 'x upstream' tools/benchmark_spread_lock.py \
        --requests 2 --threads 2 --json "$out/l.json" || failed=1
    bench_one 'extra ms' tools/benchmark_spread_constraints.py \
        --hosts 40 --requests 2 --rounds 1 --json "$out/c.json" || failed=1
    bench_one 'mean over seeds' tools/simulator_figures.py \
        --cluster tests/bench/cluster-tiny.yaml --seeds 1 \
        --configs nova-defaults nova-ext-bin-packing \
        --json "$out/sim.json" || failed=1
    bench_one '% of bound per seed' tools/packing_replay.py \
        --cluster tests/bench/cluster-tiny.yaml --seeds 1 || failed=1
    # a real multi-process Nova (MariaDB, RabbitMQ): one small burst that
    # must refuse exactly the members that do not fit, off and on
    bench_one 'hold/member' tools/benchmark_burst.py --bursts 4 --computes 4 \
        --schedulers 1 --shapes 'spread refuses K' \
        --json "$out/b.json" || failed=1
    # the benchmark page's tables render from what the scripts wrote
    echo "-- bench: tools/render_results.py on these runs' --json files"
    mkdir "$out/results"
    local from to from_to
    for from_to in s:scheduler-spread-40 curve:scheduler-curve p:placement \
            q:quota-tiny l:spread-lock c:spread-constraints sim:packing-tiny \
            b:burst; do
        from=${from_to%%:*} to=${from_to#*:}
        if [ -f "$out/$from.json" ]; then
            cp "$out/$from.json" "$out/results/$to.json"
        fi
    done
    python tools/render_results.py --results "$out/results" >/dev/null \
        || { echo "FAILED: tools/render_results.py" >&2; failed=1; }
    rm -rf "$out"
    return "$failed"
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
    docs) run_docs ;;
    unit) run_stestr "${1:-tests.unit}" "${@:2}" ;;
    functional) run_stestr "${1:-tests.functional}" "${@:2}" ;;
    system) run_stestr "${1:-tests.system}" "${@:2}" ;;
    bench) run_bench ;;
    loopback) run_loopback "$@" ;;
    all)
        if [ "${NOVA_EXT_NOVA_RELEASE:-2026.2}" = 2026.2 ]; then
            # The other release's venv is mostly downloads: built while
            # this one's tests run, ready for its tiers at the end.
            mkdir -p .test-logs
            NOVA_EXT_NOVA_RELEASE=2026.1 tools/ensure-venv.sh \
                >.test-logs/venv-2026.1.out 2>&1 &
            other_venv=$!
        fi
        run_lint
        run_genconfig
        run_releasenotes
        run_docs
        run_stestr tests
        if [ "${NOVA_EXT_NOVA_RELEASE:-2026.2}" != 2026.2 ]; then
            run_bench
            run_loopback
            exit
        fi
        # The loopback cloud mostly waits on its services' processes:
        # meanwhile the benchmarks' smoke runs, then the other supported
        # release runs its own venv's unit and functional tiers (system
        # and loopback run on 2026.2 only).
        mkdir -p .test-logs
        loopback_log=.test-logs/loopback-tier.out
        echo "== loopback tier in the background (output: $loopback_log)"
        set -m  # its own process group, to stop it whole on an early exit
        run_loopback >"$loopback_log" 2>&1 &
        loopback=$!
        set +m
        trap 'kill -TERM -- -$loopback 2>/dev/null' EXIT
        rc=0
        run_bench || rc=1
        echo "== Nova 2026.1 (constraints-2026.1.txt)"
        wait "$other_venv" || { cat .test-logs/venv-2026.1.out; rc=1; }
        NOVA_EXT_NOVA_RELEASE=2026.1 "$0" unit || rc=1
        NOVA_EXT_NOVA_RELEASE=2026.1 "$0" functional || rc=1
        wait "$loopback" || rc=1
        trap - EXIT
        echo "== loopback tier"
        cat "$loopback_log"
        exit "$rc"
        ;;
    *) echo "unknown tier: $tier (lint|genconfig|releasenotes|docs|unit|functional|system|bench|loopback|all)" >&2
       exit 2 ;;
esac
