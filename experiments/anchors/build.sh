#!/usr/bin/env bash
# experiments/anchors/build.sh (copied to .anchors/ by make authors) -- build the authors' own CUDA code of EGSM and gMatch on a
# CUDA 13 machine (H200, sm_90).  Run from anywhere; point ANCHORS_SRC at the extracted sources:
#
#     ANCHORS_SRC=$PWD/.anchors/src bash .anchors/build.sh     (make authors does this)
#
# The pristine sources carried in .anchors/src/{egsm,gmatch} are never edited:
# they are copied to $ANCHORS_WORK (default /tmp/anchors) and the CUDA 13 fixes
# are applied to that copy (see docs/authors.md for what and why).
#
# Environment knobs (all optional):
#   ANCHORS_SRC      source tree              (default: <repo>/.anchors/src)
#   ANCHORS_WORK     scratch/build tree       (default: /tmp/anchors)
#   JOBS             parallel build jobs      (default: 16)
#   CUDA_ARCH        SM architecture          (default: 90, i.e. H100/H200)
#   CUDA_HOME        CUDA toolkit root        (default: found from nvcc)
#   GMATCH_VARIANTS  gMatch variants to build (default: "bitmap", the one that
#                    anchors/run.sh gmatch uses; "bitmap hash_table neighbor"
#                    builds all three like the authors' compile.sh does;
#                    hash_table is needed by anchors/run.sh gmatch_hash)
#   FORCE=1          rebuild even if the stamp says the build is up to date
#   DRY_RUN=1        copy + patch + verify the patches, but do not configure/build
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
SRC=${ANCHORS_SRC:-$ROOT/.anchors/src}
WORK=${ANCHORS_WORK:-/tmp/anchors}
JOBS=${JOBS:-16}
ARCH=${CUDA_ARCH:-90}
GMATCH_VARIANTS=${GMATCH_VARIANTS:-bitmap}
LOGDIR=$WORK/logs

die() { echo "build.sh: ERROR: $*" >&2; exit 1; }
say() { echo "build.sh: $*"; }

[ -d "$SRC/egsm" ]   || die "missing $SRC/egsm (extract EGSM de854d58 there; see docs/authors.md)"
[ -d "$SRC/gmatch" ] || die "missing $SRC/gmatch (extract gMatch 8acf4e52 there; see docs/authors.md)"
command -v cmake >/dev/null || die "cmake not found in PATH"
command -v g++   >/dev/null || die "g++ not found in PATH"

# ---------------------------------------------------------------- CUDA toolkit
# Find the real toolkit root.  `dirname $(which nvcc)`/.. is wrong when nvcc in
# PATH is a wrapper script or a symlink outside the toolkit, so ask nvcc itself
# (its --dryrun prints "#$ TOP=<toolkit>/bin/..") and fall back to readlink and
# /usr/local/cuda.
has_rt() { [ -n "$1" ] && [ -f "$1/include/cuda_runtime.h" ] && [ -x "$1/bin/nvcc" ]; }
find_cuda_home() {
    local c
    for c in "${CUDA_HOME:-}" "${CUDA_PATH:-}"; do
        if has_rt "$c"; then (cd "$c" && pwd -P); return 0; fi
    done
    if command -v nvcc >/dev/null; then
        c=$(nvcc --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n1 || true)
        if has_rt "$c"; then (cd "$c" && pwd -P); return 0; fi
        c=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
        if has_rt "$c"; then (cd "$c" && pwd -P); return 0; fi
    fi
    for c in /usr/local/cuda /usr/local/cuda-13*; do
        if has_rt "$c"; then (cd "$c" && pwd -P); return 0; fi
    done
    return 1
}
CUDA_HOME=$(find_cuda_home) || die "cannot find a CUDA toolkit (nvcc + include/cuda_runtime.h); set CUDA_HOME"
NVCC=$CUDA_HOME/bin/nvcc
CUDA_INC=$CUDA_HOME/include
export CUDA_HOME CUDACXX=$NVCC PATH=$CUDA_HOME/bin:$PATH
NVCC_VER=$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
CMAKE_VER=$(cmake --version | sed -n '1s/.*version \([0-9.]*\).*/\1/p')
say "CUDA_HOME=$CUDA_HOME nvcc=$NVCC_VER cmake=$CMAKE_VER g++=$(g++ -dumpfullversion) arch=sm_$ARCH jobs=$JOBS"
case "$NVCC_VER" in 13.*) ;; *) say "WARNING: nvcc $NVCC_VER is not CUDA 13; the fixes were made for CUDA 13";; esac

ver_lt() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$1" ]; }

# ---------------------------------------------------------------- up-to-date?
stamp_of() {
    { cd "$SRC" && find egsm gmatch -type f -print0 | sort -z | xargs -0 sha1sum
      sha1sum "$SELF"
      echo "$CUDA_HOME $NVCC_VER $CMAKE_VER $ARCH $GMATCH_VARIANTS"; } | sha1sum | cut -d' ' -f1
}
STAMP=$(stamp_of)
EGSM_BIN=$WORK/src/egsm/build/EGSM
GM_BIN=$WORK/src/gmatch/bitmap/build/SubgraphMatching

list_bins() {
    say "binaries:"
    local b v
    for b in "$EGSM_BIN" "$GM_BIN" \
             "$WORK/src/gmatch/hash_table/build/SubgraphMatching" \
             "$WORK/src/gmatch/neighbor/build/SubgraphMatching_labeled" \
             "$WORK/src/gmatch/neighbor/build/SubgraphMatching_unlabeled"; do
        if [ -x "$b" ]; then echo "  OK           $b"; continue; fi
        v=${b#"$WORK/src/gmatch/"}; v=${v%%/*}      # gMatch variant ('' for EGSM)
        case "$b" in
            "$WORK/src/gmatch/"*) case " $GMATCH_VARIANTS " in
                                      *" $v "*) echo "  MISSING      $b";;
                                      *)        echo "  not built    $b (GMATCH_VARIANTS lacks $v)";;
                                  esac;;
            *)                    echo "  MISSING      $b";;
        esac
    done
}

if [ "${FORCE:-0}" != 1 ] && [ "${DRY_RUN:-0}" != 1 ] && [ -f "$WORK/stamp" ] \
   && [ "$(cat "$WORK/stamp")" = "$STAMP" ] && [ -x "$EGSM_BIN" ] && [ -x "$GM_BIN" ]; then
    say "up to date (stamp $STAMP); FORCE=1 to rebuild"
    list_bins
    exit 0
fi

# ---------------------------------------------------------------- fresh copy
rm -rf "$WORK/src" "$LOGDIR" "$WORK/stamp"
mkdir -p "$WORK" "$LOGDIR"
cp -a "$SRC" "$WORK/src"
E=$WORK/src/egsm
G=$WORK/src/gmatch

# ---------------------------------------------------------------- EGSM fixes
# 1. the bundled CUB 1.x (egsm/cub) does not compile with CUDA 13 / CCCL 3; delete
#    it so that `#include <cub/cub.cuh>` resolves to the toolkit's CCCL (nvcc adds
#    -isystem <cuda>/include/cccl by itself).
rm -rf "$E/cub"
# 2. CUDA 13 dropped sm_70 (Volta): pinned CUDA_ARCHITECTURES "70" -> $ARCH.
sed -i -E "s/(CUDA_ARCHITECTURES[[:space:]]+)\"70\"/\1\"$ARCH\"/g" "$E/CMakeLists.txt"
# 3. hard-coded CUDA 11.7 include dir (main.cpp is compiled by g++ and includes
#    <cuda_runtime.h>) -> this toolkit's include dir.
sed -i "s#/usr/local/cuda-11\.7/include#$CUDA_INC#g" "$E/CMakeLists.txt"

# ---------------------------------------------------------------- gMatch fixes
for v in bitmap hash_table neighbor; do
    d=$G/$v
    # 1. `#define ceil_div(a, b)` in helper.h is a function-like macro that
    #    expands inside CCCL's own cuda::ceil_div (CUDA 13 headers) and breaks
    #    them; rename the macro and its uses (word-bounded, so idempotent).
    sed -i 's/\bceil_div\b/gm_ceil_div/g' "$d"/*.h "$d"/*.cu
    # 2. CUDA_ARCHITECTURES "native" (needs a GPU visible at configure time) -> $ARCH
    sed -i -E "s/(CUDA_ARCHITECTURES[[:space:]]+)\"native\"/\1\"$ARCH\"/g" "$d/CMakeLists.txt"
    # 3. cmake_minimum_required(3.26) is only needed for "native"; allow older cmake.
    if ver_lt "$CMAKE_VER" 3.26; then
        sed -i -E 's/cmake_minimum_required\(VERSION 3\.26\)/cmake_minimum_required(VERSION 3.18)/' "$d/CMakeLists.txt"
    fi
done

# ---------------------------------------------------------------- verify fixes
fail=0
[ ! -e "$E/cub" ] || { echo "  bundled cub still present"; fail=1; }
grep -q 'cuda-11\.7' "$E/CMakeLists.txt" && { echo "  cuda-11.7 path still in EGSM CMakeLists"; fail=1; }
grep -q "include_directories($CUDA_INC)" "$E/CMakeLists.txt" || { echo "  EGSM include fix not applied"; fail=1; }
for f in "$E/CMakeLists.txt" "$G"/{bitmap,hash_table,neighbor}/CMakeLists.txt; do
    if grep -E 'CUDA_ARCHITECTURES' "$f" | grep -vq "\"$ARCH\""; then
        echo "  arch pin other than $ARCH left in $f:"; grep -n 'CUDA_ARCHITECTURES' "$f"; fail=1
    fi
done
if grep -rnE '(^|[^_[:alnum:]])ceil_div([^_[:alnum:]]|$)' "$G"/{bitmap,hash_table,neighbor}; then
    echo "  ceil_div not renamed"; fail=1
fi
[ "$fail" = 0 ] || die "patch verification failed"
say "fixes applied under $WORK/src (egsm: cub removed, arch $ARCH, include $CUDA_INC; gmatch: ceil_div->gm_ceil_div, arch $ARCH)"

if [ "${DRY_RUN:-0}" = 1 ]; then say "DRY_RUN=1: not building"; exit 0; fi

# ---------------------------------------------------------------- build
# build_one NAME SRC_DIR [CMAKE_ARGS...]: configure + build in SRC_DIR/build, all
# output to $LOGDIR/NAME.log; returns cmake's status.  The projects are built
# concurrently (each with --parallel $JOBS): none of them alone has enough
# translation units to keep 16 cores busy.
build_one() {
    local name=$1 dir=$2 log=$LOGDIR/$1.log t0=$SECONDS rc=0
    shift 2
    {
        cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release \
              -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$ARCH" "$@" &&
        cmake --build "$dir/build" --parallel "$JOBS"
    } >"$log" 2>&1 || rc=$?
    echo "$((SECONDS - t0))" > "$LOGDIR/$name.seconds"
    return "$rc"
}

for v in $GMATCH_VARIANTS; do [ -d "$G/$v" ] || die "unknown gMatch variant '$v'"; done
names=(egsm) pids=()
say "building egsm (log: $LOGDIR/egsm.log)"
build_one egsm "$E" & pids+=($!)
for v in $GMATCH_VARIANTS; do
    say "building gmatch-$v (log: $LOGDIR/gmatch-$v.log)"
    # gMatch uses find_package(CUDA) (FindCUDA), which wants the toolkit root
    build_one "gmatch-$v" "$G/$v" -DCUDA_TOOLKIT_ROOT_DIR="$CUDA_HOME" & pids+=($!)
    names+=("gmatch-$v")
done
failed=()
for i in "${!pids[@]}"; do
    if wait "${pids[$i]}"; then
        say "built ${names[$i]} in $(cat "$LOGDIR/${names[$i]}.seconds" 2>/dev/null) s"
    else
        failed+=("${names[$i]}")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    for n in "${failed[@]}"; do
        log=$LOGDIR/$n.log
        echo "==================== $n BUILD FAILED; last 40 lines of $log:" >&2
        tail -n 40 "$log" >&2
        echo "==================== first error lines of $log (parallel jobs may have printed after them):" >&2
        grep -nE '(error|Error|ERROR)([: ]|$)|fatal' "$log" | head -n 15 >&2 || true
        echo "==================== end of $n" >&2
    done
    list_bins >&2
    die "build failed: ${failed[*]} (logs in $LOGDIR)"
fi

[ -x "$EGSM_BIN" ] || die "EGSM binary missing after build: $EGSM_BIN"
case " $GMATCH_VARIANTS " in
    *" bitmap "*) [ -x "$GM_BIN" ] || die "gMatch bitmap binary missing after build: $GM_BIN";;
esac
# sanity: every nvcc line must have generated code for sm_$ARCH only
for n in "${names[@]}"; do
    archs=$(grep -oE 'arch=compute_[0-9]+,code=\[?[a-z_0-9,]+\]?' "$LOGDIR/$n.log" | sort -u | tr '\n' ' ')
    say "$n device code: ${archs:-none found in log}"
    case "$archs" in *"compute_$ARCH,code=[compute_$ARCH,sm_$ARCH]"*) ;; *) die "$n was not compiled for sm_$ARCH";; esac
done
echo "$STAMP" > "$WORK/stamp"
list_bins
say "done"
