#!/usr/bin/env bash
# The large scale's proof run: STwig's large set (Figs. 3a and 3d) on the GPUs lent, through Dask.
#   bash experiments/large_proof.sh            # run (or resume) into results/stwig_lin14/*.large.*
#   bash experiments/large_proof.sh recheck    # run Fig. 3a's two cells again into a fresh folder and
#                                              # print both calls' verdicts side by side
# Resumable: a call killed at its limit keeps every finished query (results/.partial/); run it again.
# GPUS picks the GPUs (default 0,1,2,3); PAPERS the sets (below); RERUN_CHANGED=1 sets aside the rows of
# results/ measured under other settings (or recording none) and runs them again (--rerun-changed);
# BUILD=0 skips building the authors' and competitors' binaries (below); GPUSM_COMMIT names the commit of
# a tree whose git metadata does not match it (below).
set -euo pipefail
cd "$(dirname "$0")/.."
GPUS=${GPUS:-0,1,2,3}
PY=${PYTHON:-python}
if [ "${1:-}" = recheck ]; then
    OUT=${RECHECK_OUT:-/tmp/gpusm-recheck}
    rm -rf "$OUT"
    "$PY" -m experiments stwig_lin14.fig3a_total stwig_lin14.fig3a_join_speedup stwig_lin14.fig3a_hash \
        --scale large --dask local-cuda --gpus "$GPUS" --out "$OUT" --quiet --yes
    "$PY" - "$OUT" <<'PY'
import json, sys
first = json.load(open("results/stwig_lin14/run.large.json"))["experiments"]
again = json.load(open(f"{sys.argv[1]}/stwig_lin14/run.large.json"))["experiments"]
same = True
for name, entry in again.items():
    for a, b in zip(first[name]["claims"], entry["claims"]):
        same &= a["verdict"] == b["verdict"]
        print(f"{name}: {a['verdict']!r} (committed) / {b['verdict']!r} (again): {b['claim']}")
print("same verdicts" if same else "VERDICTS DIFFER")
sys.exit(0 if same else 1)
PY
    exit
fi
# Every report names the commit measured (experiments/harness/report.py, commit()): a tree that differs
# from its git HEAD (uncommitted changes, or a device host's copy of a checkout whose .git is stale) must
# say which commit it is, GPUSM_COMMIT=<hash>, or the reports would name a dirty or wrong commit.
if [ -z "${GPUSM_COMMIT:-}" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null || echo unknown)" ]; then
    echo "large_proof: this tree differs from its git HEAD ($(git rev-parse --short HEAD 2>/dev/null || echo no git)):" \
         "commit it, or set GPUSM_COMMIT to the commit it is (a device host's copy of .git may be stale)" >&2
    exit 2
fi
# PAPERS picks the sets (default stwig_lin14, the proof; "all" runs every paper's large set, the large run)
PAPERS=${PAPERS:-stwig_lin14}
# The authors' and the competitors' columns: built first where there is a CUDA toolkit (BUILD=0 skips
# it, e.g. on a resumed call whose machine built them); without one their columns name the reason.
if [ "${BUILD:-1}" != 0 ] && [ "$PAPERS" != stwig_lin14 ]; then
    if command -v nvcc >/dev/null 2>&1; then
        make authors competitors || echo "large_proof: a build failed; its columns name the first error"
    else
        echo "large_proof: no CUDA toolkit (nvcc): the authors' and competitors' columns are not built"
    fi
fi
if [ "$PAPERS" = all ]; then
    "$PY" -m experiments --all --scale large --dask local-cuda --gpus "$GPUS" --quiet --yes ${RERUN_CHANGED:+--rerun-changed}
else
    for paper in $PAPERS; do
        "$PY" -m experiments --paper "$paper" --scale large --dask local-cuda --gpus "$GPUS" --quiet --yes \
            ${RERUN_CHANGED:+--rerun-changed}
    done
fi
