#!/usr/bin/env bash
# Build the papers' competitors (STMatch, T-DFS, BEEP, G2Miner from the gMatch snapshot's
# compared_system/, GSI from pkumod/GSI) for CUDA 13 / sm_90, from pristine sources that this
# repository never holds (docs/competitors.md).
#
#   bash experiments/competitors/build.sh --extract GMATCH_GIT GSI_GIT PYNAUTY_GIT   # once: sources
#   bash experiments/competitors/build.sh [SYSTEM ...]                                 # build
#
# --extract writes the pinned commits (git archive of three bare git directories, e.g. the search
# tool's fetch of github:w20chen/gMatch, github:pkumod/GSI, github:pdobsan/pynauty) into
# $COMPETITORS_SRC. The build copies them to $COMPETITORS_WORK/src, applies the fixes there (never
# to the sources) and builds each system with nvcc; per system it writes built / FAILED and the
# first error line to $COMPETITORS_WORK/status.txt.
#
# Environment: COMPETITORS_SRC (default <repo>/.competitors/src), COMPETITORS_WORK (default
# /tmp/competitors), CUDA_ARCH (default 90), JOBS (default 4), NVCC (default nvcc), GSI_DEVICE_DEBUG
# (0: GSI without the authors' -G).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SRC=${COMPETITORS_SRC:-$ROOT/.competitors/src}
WORK=${COMPETITORS_WORK:-/tmp/competitors}
ARCH=${CUDA_ARCH:-90}
JOBS=${JOBS:-4}
NVCC=${NVCC:-nvcc}
GMATCH_COMMIT=8acf4e52e1b1f125f9471c9455ffd7c70aace729     # w20chen/gMatch (MIT)
GSI_COMMIT=ae9a69232f2856f580bb68fe9daea46782111e88        # pkumod/GSI (GPL-3.0), newest stored
PYNAUTY_COMMIT=cb15f520d84ebbda0c4b32bf11fb3deed7ad946b    # pdobsan/pynauty: nauty 2.8.8 (Apache-2.0), for BEEP
# CUDA 13 removed cudaDeviceProp::clockRate (only printed by T-DFS and GSI): read the attribute
CLOCK_RATE='s/\([A-Za-z_.]*\)\.clockRate/[]{ int khz = 0; cudaDeviceGetAttribute(\&khz, cudaDevAttrClockRate, 0); return khz; }()/g'
MEMORY_CLOCK_RATE='s/\([A-Za-z_.]*\)\.memoryClockRate/[]{ int khz = 0; cudaDeviceGetAttribute(\&khz, cudaDevAttrMemoryClockRate, 0); return khz; }()/g'
# CUDA 13's cudaMemAdvise and cudaMemPrefetchAsync take a cudaMemLocation, not a device number
MEM_ADVISE='s#cudaMemAdviseSetReadMostly, dev_ /\*ignored\*/)#cudaMemAdviseSetReadMostly, cudaMemLocation{cudaMemLocationTypeDevice, dev_})#'
MEM_PREFETCH='s#cudaMemPrefetchAsync(gpu_data, N \* sizeof(T), _deviceId, _stream)#cudaMemPrefetchAsync(gpu_data, N * sizeof(T), cudaMemLocation{cudaMemLocationTypeDevice, _deviceId}, 0, _stream)#'
ALL="stmatch tdfs beep g2miner gsi"

say() { echo "competitors: $*"; }
die() { echo "competitors: ERROR: $*" >&2; exit 2; }

if [ "${1:-}" = --extract ]; then
    [ $# -eq 4 ] || die "usage: $0 --extract GMATCH_GIT GSI_GIT PYNAUTY_GIT"
    rm -rf "$SRC" && mkdir -p "$SRC/gmatch" "$SRC/gsi" "$SRC/nauty"
    git --git-dir="$2" archive "$GMATCH_COMMIT" compared_system | tar -x -C "$SRC/gmatch" || die "gMatch $GMATCH_COMMIT"
    rm -rf "$SRC/gmatch/compared_system/EGSM"            # built by the anchors (../shared/anchors)
    rm -f "$SRC/gmatch/compared_system/TDFS/bliss/libbliss.a"   # prebuilt; the build makes it from bliss/
    git --git-dir="$3" archive "$GSI_COMMIT" | tar -x -C "$SRC/gsi" || die "GSI $GSI_COMMIT"
    git --git-dir="$4" archive "$PYNAUTY_COMMIT" src/nauty2_8_8 | tar -x -C "$SRC/nauty" --strip-components=2 \
        || die "pynauty $PYNAUTY_COMMIT"
    rm -f "$SRC"/nauty/*.ans "$SRC"/nauty/*.pdf "$SRC"/nauty/*-old   # test answers, papers, old copies: not in nauty.a
    say "sources of gMatch $GMATCH_COMMIT, GSI $GSI_COMMIT, nauty (pynauty $PYNAUTY_COMMIT) in $SRC"
    exit 0
fi

command -v "$NVCC" >/dev/null || { say "skipped: no CUDA toolkit ($NVCC not in PATH)"; exit 0; }
CS=$SRC/gmatch/compared_system
[ -d "$CS" ] && [ -d "$SRC/gsi" ] && [ -d "$SRC/nauty" ] || die "sources missing in $SRC: run $0 --extract ... (docs/competitors.md)"
SYSTEMS=${*:-$ALL}
mkdir -p "$WORK/logs"
touch "$WORK/status.txt"

# first_error LOG: the first line of a compiler or linker error in LOG
first_error() {
    local line
    line=$(grep -m1 '^self-test failed' "$1") ||
        line=$(grep -v '^checking ' "$1" | grep -m1 -E '(error|Error)[: ]|undefined reference|No such file|\*\*\*')
    if [ -n "$line" ]; then echo "$line"; else tail -n 1 "$1"; fi
}

# record SYSTEM RC BINARY...: one line of status.txt per system
record() {
    local sys=$1 rc=$2 log=$WORK/logs/$1.log; shift 2
    local b missing=
    for b in "$@"; do [ -x "$b" ] || missing="$missing $b"; done
    local line="$sys built $*"
    [ "$rc" = 0 ] && [ -z "$missing" ] || line="$sys FAILED $(first_error "$log")"
    (   # builds of several systems may run at once: one writer of status.txt at a time
        flock 9
        sed -i "/^$sys /d" "$WORK/status.txt"
        echo "$line" >> "$WORK/status.txt"
    ) 9>"$WORK/status.lock"
    say "${line/ FAILED / FAILED (log $log): }"
}

fresh() { rm -rf "$WORK/src/$1"; mkdir -p "$WORK/src"; cp -a "$2" "$WORK/src/$1"; cd "$WORK/src/$1" || exit 2; }

# STMatch copies a neighbour list into a stack slot of GRAPH_DEGREE vertices (src/config.h), fixed at
# compile time; gMatch's authors sized it to each graph's largest degree. One build per degree of
# STMATCH_DEGREES, side by side in copies of the tree, named bin/<config>_d<DEGREE>.exe; the engine
# takes the smallest that holds the data graph's largest degree. The stack is 4 x 2,624 warps x 15
# slots x 8 (unroll) x GRAPH_DEGREE bytes: 5.2 GB at 4,096, 82.5 GB at 65,536.
STMATCH_DEGREES=${STMATCH_DEGREES:-4096 16384 65536}

build_stmatch() {   # two configurations of the authors' config_for_ae (unlabelled, labelled) per degree
    fresh stmatch "$CS/STMatch"
    sed -i "s/-arch=compute_86/-arch=sm_$ARCH/" Makefile            # compute_86 only (PTX): native sm_90
    mkdir -p bin
    local degree rc=0
    for degree in $STMATCH_DEGREES; do
        (   rm -rf "../stmatch_d$degree" && cp -a . "../stmatch_d$degree" && cd "../stmatch_d$degree" &&
            sed -i "s/GRAPH_DEGREE = [0-9]*;/GRAPH_DEGREE = $degree;/" src/config.h &&
            make bin/fig_local_global_unroll.exe bin/table_edge_lb.exe > "build.log" 2>&1 &&
            mv bin/fig_local_global_unroll.exe "../stmatch/bin/fig_local_global_unroll_d$degree.exe" &&
            mv bin/table_edge_lb.exe "../stmatch/bin/table_edge_lb_d$degree.exe" ) &
    done
    for degree in $STMATCH_DEGREES; do wait -n || rc=1; done
    for degree in $STMATCH_DEGREES; do cat "../stmatch_d$degree/build.log" 2>/dev/null; done
    return $rc
}

build_tdfs() {
    fresh tdfs "$CS/TDFS"
    sed -i "s/-arch=sm_80 -gencode=arch=compute_80,code=sm_80/-arch=sm_$ARCH -gencode=arch=compute_$ARCH,code=sm_$ARCH/" Makefile
    # CUDA 13 removed cudaDeviceProp::clockRate (a statistics print): ask the attribute instead
    sed -i "$CLOCK_RATE" src/Ouroboros/include/Statistics.h
    sed -i 's/cudaSetDevice(1);/cudaSetDevice(0);/' cu_test.cu        # hard-coded second GPU -> the first visible
    # src/pattern.h uses uint32_t without <cstdint>, which g++ 13's headers no longer pull in: pre-include it
    sed -i 's/^OPTIONS = /OPTIONS = -include cstdint /' Makefile
    make -C bliss lib                                                 # rebuild the bundled prebuilt libbliss.a
    mkdir -p bin
    make bin/table_edge_ulb.exe bin/table_edge_lb.exe
}

build_beep() {
    fresh beep "$CS/BEEP"
    cp -a "$SRC/nauty" nauty                                          # the README's download, pinned
    # CCCL 3 (CUDA 13) removed cub::Max: its replacement cuda::maximum<>
    sed -i 's/cub::Max()/cuda::maximum<>{}/g' subgraph_matching/include/common_utils.cuh
    sed -i "$MEM_ADVISE" subgraph_matching/subgraph_matching.cuh
    sed -i "$MEM_PREFETCH" include/CGArray.cuh
    # its one driver call, cuMemGetInfo (a debug print of free memory), through the runtime's
    # cudaMemGetInfo: no link against the driver library (-lcuda), which a host without a GPU lacks
    sed -i 's/\bcuMemGetInfo(/cudaMemGetInfo(/g' subgraph_matching/subgraph_matching.cuh
    sed -i 's/ -lcuda / /' Makefile
    (cd nauty && ./configure && make nauty.a) || return 1
    make ARCH="$ARCH" build/exe/src/main.cu.exe
}

build_g2miner() {   # the GPU kernels of gMatch's Table 4 (P1-P4, P9): sgl_gpu_base (run_cmd.sh), tc_gpu_base, clique_gpu_base
    fresh g2miner "$CS/G2Miner"
    # src/sgl/Makefile includes ../common.mk, which the snapshot lacks: pangolin's, one level up
    sed -e "s/compute_70,code=sm_70/compute_$ARCH,code=sm_$ARCH/" -e 's#\.\./\.\./\.\./#../../#g' \
        -e 's#^VPATH=.*#VPATH=../common#' -e 's#^BIN=.*#BIN=../../bin#' src/pangolin/common.mk > src/common.mk
    printf '%%.o: %%.cc\n\t$(CXX) $(CXXFLAGS) $(INCLUDES) -c -o $@ $<\n%%.o: %%.cu\n\t$(NVCC) $(NVFLAGS) $(INCLUDES) -c -o $@ $<\n' \
        >> src/common.mk                                              # and its compile rules
    sed -i "$MEMORY_CLOCK_RATE" include/cutil_subset.h                # a device-query print; gone in CUDA 13
    mkdir -p bin
    (cd src/sgl && make sgl_gpu_base) || return 1
    # tc links the driver library (-lcuda) it never calls, absent without a GPU driver: the runtime only
    (cd src/triangle && make tc_gpu_base CUDA_LIB='-L$(CUDA_HOME)/lib64 -lcudart') || return 1
    (cd src/clique && make clique_gpu_base)
}

build_gsi() {
    fresh gsi "$SRC/gsi"
    rm -f objs/*.o GSI.exe                                            # the snapshot holds stale objects
    # sm_35 is gone from CUDA 13; CUB from the toolkit's CCCL, not ~/cub-1.8.0. -G (device debug) is
    # kept as the authors build it (GSI_DEVICE_DEBUG=0 drops it): their warp code shares shared
    # memory between lanes without __syncwarp (written for lockstep warps), and the optimised build
    # found no row of its own sample on an H200
    local debug="-G "
    [ "${GSI_DEVICE_DEBUG:-1}" = 0 ] && debug=
    sed -i -E "s#^NVCC = nvcc -arch=sm_35 (.*) -G (.*) -I ~/cudaToolkit/cub-1.8.0/#NVCC = nvcc -arch=sm_$ARCH \1 $debug\2#" Makefile
    # its hash() clashes with std::hash under 'using namespace std' on newer g++
    sed -i 's/\bhash(/gsi_hash(/g' graph/Graph.cpp
    # util/Util.h includes the readline headers but nothing calls readline (nor links it): drop them
    sed -i '/#include <readline\//d' util/Util.h
    sed -i "$CLOCK_RATE" match/Match.cu                                  # as T-DFS: clockRate is gone
    # the warp shuffles without a mask were removed for sm_70+: the _sync forms over the full warp
    sed -i -E 's/__shfl(_up|_down|_xor)?\(/__shfl\1_sync(0xffffffff, /g' match/Match.cu
    # main/run.cpp loads the data graph once and matches the query file's queries in turn, timing
    # them together (match used); each query's own time printed beside it (query used), over the
    # same span of the loop, so that one process times a query's repeats (docs/competitors.md)
    sed -i -E 's#^([[:space:]]*)Match m\(query_list\[i\], data_graph\);#\1long gpusm_q0 = Util::get_cur_time();\n&#' main/run.cpp
    sed -i -E 's#^([[:space:]]*)delete\[\] final_result;#&\n\1cerr<<"query used: "<<(Util::get_cur_time()-gpusm_q0)<<" ms"<<endl;#' main/run.cpp
    [ "$(grep -c 'gpusm_q0' main/run.cpp)" = 2 ] || { echo "the per-query time did not apply to main/run.cpp"; return 1; }
    # main/run.cpp reaches CCCL through match/Match.h, whose device intrinsics only nvcc's device
    # pass declares: compile it as CUDA
    mv main/run.cpp main/run.cu && sed -i 's#main/run\.cpp#main/run.cu#g' Makefile
    make -j"$JOBS" GSI.exe || return 1
    # where a GPU is at hand, the build must find its own sample query (a directed triangle) in its
    # own sample data graph (the same triangle): a build whose kernels do not run counts 0 rows
    nvidia-smi -L >/dev/null 2>&1 || return 0
    local rows
    local out
    out=$(timeout 60 ./GSI.exe data/data.g data/triangle.g /dev/null 0 2>&1)
    rows=$(echo "$out" | sed -n 's/^result: \([0-9]*\) .*/\1/p' | tail -n 1)
    [ -n "$rows" ] && [ "$rows" -gt 0 ] && echo "$out" | grep -q '^query used: [0-9]* ms' && return 0
    echo "self-test failed: GSI.exe finds ${rows:-no result} rows of its own data/triangle.g in its own data/data.g (a triangle), or prints no query used: T ms"
    return 1
}

STMATCH_BINS=$(for d in $STMATCH_DEGREES; do
    echo "$WORK/src/stmatch/bin/fig_local_global_unroll_d$d.exe $WORK/src/stmatch/bin/table_edge_lb_d$d.exe"; done)
declare -A BINS=(
    [stmatch]="$STMATCH_BINS"
    [tdfs]="$WORK/src/tdfs/bin/table_edge_ulb.exe $WORK/src/tdfs/bin/table_edge_lb.exe"
    [beep]="$WORK/src/beep/build/exe/src/main.cu.exe"
    [g2miner]="$WORK/src/g2miner/bin/sgl_gpu_base $WORK/src/g2miner/bin/tc_gpu_base $WORK/src/g2miner/bin/clique_gpu_base"
    [gsi]="$WORK/src/gsi/GSI.exe")

say "nvcc $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm_$ARCH, work $WORK"
for sys in $SYSTEMS; do
    [ -n "${BINS[$sys]:-}" ] || die "unknown system '$sys' (one of: $ALL)"
    say "building $sys (log $WORK/logs/$sys.log)"
    ( "build_$sys" ) > "$WORK/logs/$sys.log" 2>&1
    # shellcheck disable=SC2086
    record "$sys" $? ${BINS[$sys]}
done
say "status ($WORK/status.txt):"
cat "$WORK/status.txt"
