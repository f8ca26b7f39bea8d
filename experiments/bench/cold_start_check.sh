#!/usr/bin/env bash
# The kernel disk cache checked on a GPU: `experiments/bench/cold_start_check.sh [tests] [warmup] [demo] [bench]`
# (default: all four, ~10 minutes; each stage alone fits a 10-minute call).
#   tests   the cache's tests on the GPU (a second process compiles nothing; corrupt files recompile)
#   warmup  `gpusm warmup` of every GPU engine on an empty cache, then again on the filled one
#   demo    `gpusm demo` on an empty cache, then on the filled one
#   bench   python -m experiments.bench.cold_start --out $OUT (default results/cold_start)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-results/cold_start}
export NUMBA_ENABLE_CUDASIM=0
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(tests warmup demo bench)
timed() {   # timed LABEL COMMAND...: run it, then print LABEL and its wall seconds
    local label=$1 began ended
    shift
    began=$(date +%s.%N)
    "$@"
    ended=$(date +%s.%N)
    echo "== $label: $("$PY" -c "print(round($ended - $began, 1))") s"
}
for stage in "${stages[@]}"; do
    case $stage in
        tests) timed "cache tests" "$PY" -m pytest -p no:xdist -q tests/test_kernel_cache.py tests/test_cold_start.py ;;
        warmup)
            cache=$(mktemp -d)
            NUMBA_CACHE_DIR=$cache timed "gpusm warmup, empty cache" "$PY" -m experiments.gpusm warmup
            NUMBA_CACHE_DIR=$cache timed "gpusm warmup, filled cache" "$PY" -m experiments.gpusm warmup
            rm -rf "$cache" ;;
        demo)
            cache=$(mktemp -d)
            NUMBA_CACHE_DIR=$cache timed "gpusm demo, empty cache" "$PY" -m experiments.gpusm demo
            NUMBA_CACHE_DIR=$cache timed "gpusm demo, filled cache" "$PY" -m experiments.gpusm demo
            rm -rf "$cache" ;;
        bench) mkdir -p "$OUT"; timed "cold-start benchmark" "$PY" -m experiments.bench.cold_start --out "$OUT" ;;
        *) echo "unknown stage $stage (tests, warmup, demo, bench)" >&2; exit 2 ;;
    esac
done
