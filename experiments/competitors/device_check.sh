#!/usr/bin/env bash
# The papers' external systems on a GPU, in one device call (docs/competitors.md, "To check on a GPU"):
#
#   bash experiments/competitors/device_check.sh [build] [check] [bench]     (default: all three)
#
#   build   make authors (EGSM, gMatch) and make competitors (STMatch, T-DFS, BEEP, G2Miner, GSI),
#           the five competitors built side by side; prints status.txt
#   check   each external binary's count against cpu's on two small graphs, with the verdict
#           (equal / per subgraph / differs): BEEP's count semantics, G2Miner's total_num per subgraph
#   bench   python -m experiments.bench.competitors: every system on GitHub P1-P9, rw12 and HPRD
#
# Carry .anchors, .competitors and .whl (their sources: docs/competitors.md, docs/authors.md). Logs and
# CSVs go to $OUT (default results/competitors_check); the last lines printed are the short tables. A
# system that fails to build or run is reported and the script goes on. Budget: BENCH_BUDGET_S (default
# 150 s of the bench) and BENCH_TIMEOUT_S (default 5 s a query); with the builds (~2-4 min) and the
# checks (~1 min) the whole fits about 6 minutes. BENCH_RESUME=CSV carries over an earlier bench's rows
# (--resume), BENCH_SETS limits the sets. Stages can run in separate calls on a warm machine
# (the builds stay under /tmp/anchors and /tmp/competitors).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-results/competitors_check}
BENCH_BUDGET_S=${BENCH_BUDGET_S:-150}
BENCH_TIMEOUT_S=${BENCH_TIMEOUT_S:-5}
export COMPETITORS_WORK=${COMPETITORS_WORK:-/tmp/competitors} ANCHORS_WORK=${ANCHORS_WORK:-/tmp/anchors}
export NUMBA_ENABLE_CUDASIM=0 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -z "${PY:-}" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
mkdir -p "$OUT"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build check bench)
began=$(date +%s)
say() { echo "== device_check [$(( $(date +%s) - began )) s]: $*"; }

if ! "$PY" -c "import numpy" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
    say "installing the carried wheels (.whl) for $PY"
    "$PY" -m pip install --quiet --no-index --find-links .whl .whl/*.whl > "$OUT/pip.log" 2>&1 || say "pip failed (see $OUT/pip.log)"
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

# all_built: this machine already holds every build (status.txt: five systems built, binaries present)
all_built() {
    local status=$COMPETITORS_WORK/status.txt b
    [ -f "$status" ] && [ "$(grep -c ' built ' "$status")" -eq 5 ] || return 1
    for b in $(sed -n 's/^[a-z0-9]* built //p' "$status") "$ANCHORS_WORK"/src/egsm/build/EGSM \
             "$ANCHORS_WORK"/src/gmatch/bitmap/build/SubgraphMatching; do
        [ -x "$b" ] || return 1
    done
}

build() {
    if [ "${KEEP_BUILT:-0}" = 1 ] && all_built; then
        say "KEEP_BUILT=1: this machine's builds are kept (status.txt below)"
        cp "$COMPETITORS_WORK/status.txt" "$OUT/status.txt"
        return
    fi
    say "make authors (log $OUT/authors.log)"
    make authors > "$OUT/authors.log" 2>&1 || say "make authors failed: $(grep -m1 -iE 'error|fail' "$OUT/authors.log")"
    say "make competitors, the five side by side (logs $OUT/build-*.log, $COMPETITORS_WORK/logs)"
    local sys
    for sys in beep tdfs stmatch g2miner gsi; do         # BEEP, the longest compile, first
        make competitors SYSTEMS="$sys" > "$OUT/build-$sys.log" 2>&1 &
    done
    wait
    cp "$COMPETITORS_WORK/status.txt" "$OUT/status.txt" 2>/dev/null
    cp -r "$COMPETITORS_WORK/logs" "$OUT/competitor-logs" 2>/dev/null
    say "status.txt:"
    cat "$COMPETITORS_WORK/status.txt" 2>/dev/null || say "no status.txt (make competitors did not run: see $OUT/build-*.log)"
    ls -l "$ANCHORS_WORK"/src/egsm/build/EGSM "$ANCHORS_WORK"/src/gmatch/bitmap/build/SubgraphMatching 2>&1
}

check() {
    say "counts against cpu on small graphs (log $OUT/check.log, $OUT/check.csv)"
    timeout 240 "$PY" -m experiments.bench.competitors --check --out "$OUT/check.csv" > "$OUT/check.log" 2>&1
    say "check exit $? (1: some count differs)"
}

bench() {
    say "the bench: budget ${BENCH_BUDGET_S} s, ${BENCH_TIMEOUT_S} s a query (log $OUT/bench.log, $OUT/bench.csv)"
    timeout $(( BENCH_BUDGET_S + 120 )) "$PY" -m experiments.bench.competitors --timeout-s "$BENCH_TIMEOUT_S" \
        --budget-s "$BENCH_BUDGET_S" --repeats 3 ${BENCH_RESUME:+--resume "$BENCH_RESUME"} ${BENCH_SETS:+--sets "$BENCH_SETS"} \
        --out "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
    say "bench exit $? (1: a wrong count; 124: killed past its budget)"
}

for stage in "${stages[@]}"; do
    case $stage in
        build|check|bench) "$stage" ;;
        *) echo "unknown stage $stage (build, check, bench)" >&2; exit 2 ;;
    esac
done
say "done; the tables:"
[ -f "$OUT/status.txt" ] && { echo "-- build status"; cut -c1-200 "$OUT/status.txt"; }
[ -f "$OUT/check.log" ] && { echo "-- check (verdict per system and query)"; grep -v '^check: ' "$OUT/check.log" | tail -n 40; }
[ -f "$OUT/bench.log" ] && { echo "-- bench"; grep -v ' done$' "$OUT/bench.log" | tail -n 30; }
exit 0
