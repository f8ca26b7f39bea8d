#!/usr/bin/env bash
# experiments/anchors/run.sh (copied to .anchors/ by make authors) -- run one of the authors' binaries (built by build.sh)
# over every query graph of a folder and write one CSV row per query.
#
# usage:
#   bash anchors/run.sh ENGINE DATA QUERY_DIR EXPECTED_FILE OUTCSV [TIMEOUT_S] [QUERY ...]
#
#   ENGINE         egsm | gmatch (bitmap variant) | gmatch_hash (hash_table variant)
#   DATA           data graph, text format 't N M / v id label deg / e u v'
#   QUERY_DIR      folder of query graphs (*.graph, or any regular file)
#   EXPECTED_FILE  expected match counts, one of
#                    'name:count' or 'name count' per line (name with or without
#                    .graph; e.g. data/hprd/expected_counts_1_100.txt, data/yeast/expected_counts.txt)
#                    one integer per line = counts of Q_0, Q_1, ... in that order
#                    (data/gmatch_test/expected_counts.txt is name count)
#                  or '-' / 'none' for no expected counts
#   OUTCSV         output CSV (overwritten; APPEND=1 appends without a header)
#   TIMEOUT_S      per-query time limit in seconds (default 30), enforced with timeout(1)
#   QUERY ...      optional query names (Q_3 or Q_3.graph) or @FILE (one name a line);
#                  default: every file in QUERY_DIR, in natural (sort -V) order
#
# CSV columns: engine,dataset,query,count,expected,correct,rc,wall_ms,pre_ms,join_ms
#   count    match count printed by the binary (empty if none printed)
#   correct  yes | no | noexp (no expected count) | timeout | error | unsupported
#   rc       exit status of the binary (124/137 = killed by timeout; 'skip' = not run)
#   wall_ms  wall clock of the whole process as measured by this script (includes
#            loading the data graph, CUDA context creation, ...)
#   pre_ms   binary's own preprocessing time, host ms:
#              egsm:   'Build Cuckoo Tries, time (ms): H(host), ...' + 'Filtering, time (ms): H(host), ...'
#              gmatch: '# Preparation, time (ms): H(host), ...'
#   join_ms  binary's own enumeration time, host ms (the line the authors' scripts read):
#              egsm:   'Total join time (ms): H(host) K(kernel)'
#              gmatch: '# Processing, time (ms): H(host), K(kernel)'
#                      (if absent -- early exit when the first edge has no match --
#                       '# Subgraph Matching Finished' total minus Preparation)
#
# Environment: EGSM_BIN, GMATCH_BIN, GMATCH_HASH_BIN (binary paths; defaults under
#   ANCHORS_WORK=/tmp/anchors), DATASET (name for the CSV; default from DATA),
#   ENGINE_ARGS (extra binary arguments, e.g. '--gpu 1' / '--device 1'),
#   LOGDIR (per-query stdout+stderr logs; default OUTCSV minus .csv plus .logs; 'none' = keep none),
#   NO_LIMITS=1 (run queries beyond the engines' size limits anyway), APPEND=1.
#
# Self-test of the output parsers:  bash anchors/run.sh --parse ENGINE LOGFILE
#   prints 'count=.. pre_ms=.. join_ms=..'.
set -uo pipefail

WORK=${ANCHORS_WORK:-/tmp/anchors}

# ----------------------------------------------------------------- parsing
# strip ANSI colour codes (gMatch prints "\033[41;37m\nResult: %llu\n\033[0m\n") and CRs
clean() { sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e 's/\r$//' "$1"; }

# last_num FILE ERE : the first capture group of the last line matching ERE
last_num() { clean "$1" | sed -nE "s/$2/\1/p" | tail -n 1; }

# parse_output ENGINE LOGFILE -> sets P_COUNT P_PRE P_JOIN (empty when not printed)
parse_output() {
    local engine=$1 log=$2 total
    P_COUNT='' P_PRE='' P_JOIN=''
    [ -f "$log" ] || return 0
    case "$engine" in
    egsm)
        # std::cout << "# Matches: " << res_size << "\nEnd." << std::endl;            (main.cpp)
        P_COUNT=$(last_num "$log" '^# Matches: ([0-9]+)[[:space:]]*$')
        # PRINT_LOCAL_TIME(name): name << ", time (ms): " << H << "(host), " << K << "(kernel)\n"
        #   PRINT_LOCAL_TIME("Build Cuckoo Tries"); PRINT_LOCAL_TIME("Filtering");   (main.cpp)
        P_PRE=$(clean "$log" | sed -nE 's/^(Build Cuckoo Tries|Filtering), time \(ms\): ([0-9]+)\(host\).*$/\2/p' \
                | awk 'NF{s+=$1; n++} END{if(n) print s}')
        # PRINT_TOTAL_TIME(name): name << " time (ms): " << H << "(host) " << K << "(kernel)\n"
        #   PRINT_TOTAL_TIME("Total join");                                          (execution/execution.cu)
        P_JOIN=$(last_num "$log" '^Total join time \(ms\): ([0-9]+)\(host\) [0-9]+\(kernel\).*$')
        ;;
    gmatch|gmatch_hash)
        # printf("\033[41;37m\nResult: %llu\n\033[0m\n", ret);                           (main.cu)
        P_COUNT=$(last_num "$log" '^Result: ([0-9]+)[[:space:]]*$')
        # PRINT_LOCAL_TIME(name): "# " << name << ", time (ms): " << H << "(host), " << K << "(kernel)\n"
        #   PRINT_LOCAL_TIME("Preparation");                                          (main.cu)
        P_PRE=$(last_num "$log" '^# Preparation, time \(ms\): ([0-9]+)\(host\).*$')
        #   PRINT_TOTAL_TIME("Processing");                                           (join_bfs_dfs.cu)
        P_JOIN=$(last_num "$log" '^# Processing, time \(ms\): ([0-9]+)\(host\).*$')
        if [ -z "$P_JOIN" ] && [ -n "$P_PRE" ]; then
            #   PRINT_TOTAL_TIME("Subgraph Matching Finished");  = Preparation + search (main.cu)
            total=$(last_num "$log" '^# Subgraph Matching Finished, time \(ms\): ([0-9]+)\(host\).*$')
            [ -n "$total" ] && P_JOIN=$((total - P_PRE))
        fi
        ;;
    *) echo "run.sh: unknown engine '$engine'" >&2; return 1;;
    esac
    return 0
}

if [ "${1:-}" = "--parse" ]; then
    [ $# -eq 3 ] || { echo "usage: $0 --parse ENGINE LOGFILE" >&2; exit 2; }
    parse_output "$2" "$3" || exit 2
    echo "count=$P_COUNT pre_ms=$P_PRE join_ms=$P_JOIN"
    exit 0
fi

# ----------------------------------------------------------------- arguments
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 5 ] || usage
ENGINE=$1 DATA=$2 QDIR=$3 EXPF=$4 OUTCSV=$5
TIMEOUT_S=${6:-30}
shift $(( $# >= 6 ? 6 : 5 ))

case "$ENGINE" in
    egsm)        BIN=${EGSM_BIN:-$WORK/src/egsm/build/EGSM};                              MAXV=16 MAXE=32;;
    gmatch)      BIN=${GMATCH_BIN:-$WORK/src/gmatch/bitmap/build/SubgraphMatching};       MAXV=16 MAXE=;;
    gmatch_hash) BIN=${GMATCH_HASH_BIN:-$WORK/src/gmatch/hash_table/build/SubgraphMatching}; MAXV=16 MAXE=;;
    *) echo "run.sh: ENGINE must be egsm, gmatch or gmatch_hash (got '$ENGINE')" >&2; exit 2;;
esac
[ -x "$BIN" ]  || { echo "run.sh: binary not found: $BIN (run make authors first)" >&2; exit 2; }
[ -f "$DATA" ] || { echo "run.sh: data graph not found: $DATA" >&2; exit 2; }
[ -d "$QDIR" ] || { echo "run.sh: query folder not found: $QDIR" >&2; exit 2; }
case "$TIMEOUT_S" in ''|*[!0-9.]*) echo "run.sh: TIMEOUT_S must be a number (got '$TIMEOUT_S')" >&2; exit 2;; esac
command -v timeout >/dev/null || { echo "run.sh: timeout(1) not found" >&2; exit 2; }

if [ -n "${DATASET:-}" ]; then
    DS=$DATASET
else
    DS=$(basename "$DATA"); DS=${DS%.graph}
    # data/gmatch_test/data.graph -> gmatch_test
    [ "$DS" = data ] && DS=$(basename "$(dirname "$DATA")")
fi

# ----------------------------------------------------------------- expected counts
qkey() { local n; n=$(basename "$1"); echo "${n%.graph}"; }

declare -A EXP=()
load_expected() {
    local f=$1 line name cnt idx=0 fmt=
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line%$'\r'}
        line=${line#"${line%%[![:space:]]*}"}; line=${line%"${line##*[![:space:]]}"}   # trim
        [ -z "$line" ] && continue
        case "$line" in \#*) continue;; esac
        if [[ $line =~ ^[0-9]+$ ]]; then
            [ "$fmt" = named ] && { echo "run.sh: $f mixes formats at '$line'" >&2; return 1; }
            fmt=positional
            EXP["Q_$idx"]=$line
            idx=$((idx + 1))
        elif [[ $line =~ ^([^[:space:]:]+)[[:space:]]*[:[:space:]][[:space:]]*([0-9]+)$ ]]; then
            [ "$fmt" = positional ] && { echo "run.sh: $f mixes formats at '$line'" >&2; return 1; }
            fmt=named
            name=$(qkey "${BASH_REMATCH[1]}") cnt=${BASH_REMATCH[2]}
            EXP["$name"]=$cnt
        else
            echo "run.sh: cannot parse line of $f: '$line'" >&2; return 1
        fi
    done < "$f"
    echo "run.sh: ${#EXP[@]} expected counts ($fmt) from $f" >&2
}
case "$EXPF" in
    -|none|'') ;;
    *) [ -f "$EXPF" ] || { echo "run.sh: expected file not found: $EXPF" >&2; exit 2; }
       load_expected "$EXPF" || exit 2;;
esac

# ----------------------------------------------------------------- query list
QUERIES=()
if [ $# -gt 0 ]; then
    for a in "$@"; do
        if [[ $a == @* ]]; then
            [ -f "${a#@}" ] || { echo "run.sh: list file not found: ${a#@}" >&2; exit 2; }
            while IFS= read -r l || [ -n "$l" ]; do
                l=$(printf '%s' "${l%$'\r'}" | tr -d '[:space:]'); [ -n "$l" ] && QUERIES+=("$l")
            done < "${a#@}"
        else
            QUERIES+=("$a")
        fi
    done
    resolved=()
    for q in "${QUERIES[@]}"; do
        if   [ -f "$QDIR/$q" ];       then resolved+=("$QDIR/$q")
        elif [ -f "$QDIR/$q.graph" ]; then resolved+=("$QDIR/$q.graph")
        else echo "run.sh: query '$q' not found in $QDIR" >&2; exit 2; fi
    done
    QUERIES=("${resolved[@]}")
else
    while IFS= read -r f; do QUERIES+=("$QDIR/$f"); done < <(
        find "$QDIR" -maxdepth 1 -type f ! -name '.*' -printf '%f\n' | sort -V)
fi
[ ${#QUERIES[@]} -gt 0 ] || { echo "run.sh: no queries in $QDIR" >&2; exit 2; }

# ----------------------------------------------------------------- output
mkdir -p "$(dirname "$OUTCSV")"
HEADER=engine,dataset,query,count,expected,correct,rc,wall_ms,pre_ms,join_ms
if [ "${APPEND:-0}" = 1 ] && [ -s "$OUTCSV" ]; then :; else echo "$HEADER" > "$OUTCSV"; fi
LOGDIR=${LOGDIR:-${OUTCSV%.csv}.logs}
if [ "$LOGDIR" = none ]; then TMPLOG=$(mktemp); trap 'rm -f "$TMPLOG"' EXIT; else mkdir -p "$LOGDIR"; fi

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# shellcheck disable=SC2206
EXTRA=(${ENGINE_ARGS:-})

echo "run.sh: $ENGINE on $DS: ${#QUERIES[@]} queries, timeout ${TIMEOUT_S}s, bin $BIN -> $OUTCSV" >&2
n=0 n_yes=0 n_no=0 n_to=0 n_err=0 n_skip=0 n_noexp=0 t_all=$(now_ms)
for qf in "${QUERIES[@]}"; do
    q=$(qkey "$qf")
    exp=${EXP[$q]-}
    n=$((n + 1))
    log=${TMPLOG:-$LOGDIR/$q.log}
    count='' pre='' join='' wall='' rc=''

    # size limits: EGSM exits on >16 vertices / >32 edges; gMatch has QVMAX 16
    # (fixed-size shared arrays, no check) so larger queries would be undefined.
    qv='' qe='' skip=''
    read -r _t qv qe _ < "$qf" || true
    if [ "${NO_LIMITS:-0}" != 1 ]; then
        if [[ $qv =~ ^[0-9]+$ ]] && [ "$qv" -gt "$MAXV" ]; then skip=1; fi
        if [ -n "$MAXE" ] && [[ $qe =~ ^[0-9]+$ ]] && [ "$qe" -gt "$MAXE" ]; then skip=1; fi
    fi
    if [ -n "$skip" ]; then
        rc=skip correct=unsupported
        n_skip=$((n_skip + 1))
        echo "$ENGINE,$DS,$q,,$exp,$correct,$rc,,," >> "$OUTCSV"
        printf '%-28s unsupported (|V|=%s |E|=%s)\n' "$q" "$qv" "$qe" >&2
        continue
    fi

    if [ "$ENGINE" = egsm ]; then args=(-q "$qf" -d "$DATA"); else args=(-d "$DATA" -q "$qf"); fi
    t0=$(now_ms)
    timeout -k 10 "$TIMEOUT_S" "$BIN" "${args[@]}" ${EXTRA[@]+"${EXTRA[@]}"} > "$log" 2>&1 < /dev/null
    rc=$?
    wall=$(( $(now_ms) - t0 ))
    parse_output "$ENGINE" "$log"
    count=$P_COUNT pre=$P_PRE join=$P_JOIN

    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        correct=timeout; n_to=$((n_to + 1))
    elif [ "$rc" != 0 ] && grep -q 'The query graph should have at most 16 vertices and 32 edges' "$log"; then
        correct=unsupported; n_skip=$((n_skip + 1))      # EGSM's own check (graph/graph.cpp), NO_LIMITS=1
    elif [ "$rc" != 0 ] || [ -z "$count" ]; then
        correct=error; n_err=$((n_err + 1))
    elif [ -z "$exp" ]; then
        correct=noexp; n_noexp=$((n_noexp + 1))
    elif [ "$count" = "$exp" ]; then
        correct=yes; n_yes=$((n_yes + 1))
    else
        correct=no; n_no=$((n_no + 1))
    fi
    echo "$ENGINE,$DS,$q,$count,$exp,$correct,$rc,$wall,$pre,$join" >> "$OUTCSV"
    printf '%-28s %-8s count=%s expected=%s rc=%s wall=%sms pre=%sms join=%sms\n' \
        "$q" "$correct" "${count:--}" "${exp:--}" "$rc" "$wall" "${pre:--}" "${join:--}" >&2
    if [ "$correct" = error ] && [ -z "${TMPLOG:-}" ]; then
        echo "    last lines of $log:" >&2; tail -n 3 "$log" | sed 's/^/    | /' >&2
    fi
done
echo "run.sh: $ENGINE on $DS: $n queries: $n_yes correct, $n_no wrong, $n_noexp no-expected, $n_to timeout, $n_err error, $n_skip unsupported; $(( ($(now_ms) - t_all) / 1000 )) s total -> $OUTCSV" >&2
