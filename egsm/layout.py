"""Fixed layout of the small per-query arrays every EGSM kernel reads.

Query metadata is one packed int64 array (``meta``), copied to the device in one transfer per
update; kernels index it by the constants below, so the kernels' argument types never change
and a warm run compiles nothing (no ``cuda.const`` arrays, which would recompile per
query). ``ctrl`` is one int64 array of device counters and flags, zeroed by one launch per query.
:func:`write_query_meta` (compiled host code) writes a query's part of ``meta``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from common.gpu.cudasim import WARP_SIZE as WARP
from common.gpu.runtime import simulator_active

#: Most query vertices: one bit per vertex in an int64 mask, one lane per vertex (paper §5.5).
MAXQ = 32
#: Most directed query edges (an undirected edge is two): K32 has 992.
MAXE = MAXQ * (MAXQ - 1)
#: Most enumeration stages (one per vertex group, plus the fallback).
MAXSTAGES = MAXQ + 2
BUCKET = 8          # cells per cuckoo bucket: 8 x 4-byte keys = one 32-byte transaction (§3.1)
EMPTY = -1          # empty cuckoo cell (vertex ids are non-negative int32)

# ---- meta (int64) ---------------------------------------------------------------------------
M_LAB = 0                      # label of query vertex u
M_DEG = M_LAB + MAXQ           # degree of u
M_ADJ = M_DEG + MAXQ           # neighbour bitmap of u
M_NLCOFF = M_ADJ + MAXQ        # NLC(u) entries [off[u], off[u+1]) (MAXQ + 1)
M_NLCLAB = M_NLCOFF + MAXQ + 1  # NLC labels (data label ids), sorted per u
M_NLCCNT = M_NLCLAB + MAXE     # NLC counts
M_EIDX = M_NLCCNT + MAXE       # directed edge id of (u, a) at u * MAXQ + a, -1 if none
M_ESRC = M_EIDX + MAXQ * MAXQ  # source of directed edge e
M_EDST = M_ESRC + MAXE         # destination of directed edge e
M_CBASE = M_EDST + MAXE        # first cuckoo cell of u's two tables (MAXQ + 1)
M_NB = M_CBASE + MAXQ + 1      # buckets per table of u
M_PBASE = M_NB + MAXQ          # first (edge, cell) pair of edge e (MAXE + 1)
M_SEED = M_PBASE + MAXE + 1    # hash seeds of table 0 and table 1
M_NQ = M_SEED + 2              # |V(Q)|
M_NE = M_NQ + 1                # number of directed edges
M_STAGEMASK = M_NE + 1         # mapped-vertex mask after each stage (MAXSTAGES)
M_DELTA = M_STAGEMASK + MAXSTAGES  # centres of the wedge filter's two passes: δ, reversed δ (2 MAXQ)
M_NPHASE = M_DELTA + 2 * MAXQ  # phases of the one-block wedge filter: runs of centres no two adjacent
M_PHASE = M_NPHASE + 1         # phase k = centres [M_PHASE + k, M_PHASE + k + 1) (2 MAXQ + 1)
META_SIZE = M_PHASE + 2 * MAXQ + 1

# ---- edge info (int64, 3 x MAXE), written on the device after compaction -------------------
EI_PROJSTART = 0               # start of the compacted keys pi_u R(u, u') in proj_keys
EI_CARD = MAXE                 # |pi_u R(u, u')|
EI_REL = 2 * MAXE              # |R(u, u')| (candidate edges)
EINFO_SIZE = 3 * MAXE

# ---- ctrl (int64) ---------------------------------------------------------------------------
C_COUNT = 0                    # embeddings found by the final stage
C_STOP = 1                     # set: every warp returns (limit reached or queue overflow)
C_OVERFLOW = 2                 # stage + 1 of the first stage whose output overflowed the queue
C_CUCKOO_FAIL = 3              # a cuckoo insertion passed MAX_CUCKOO_LOOP evictions
C_ERROR = 4                    # a group had no extendable vertex (a planning bug: the host raises)
C_SLOTS = 5                    # one-block compaction scan: live slots after pruning
C_KEYS = 6                     # one-block compaction scan: surviving keys
C_LEVEL3 = 7                   # one-block level-2 scan: level-3 total (slots before pruning)
C_ROWS = 8                     # rows written by stage s at C_ROWS + s
C_TASK = C_ROWS + MAXSTAGES    # task cursor of launch slot s at C_TASK + s
FALLBACK_SLOT = MAXSTAGES + 1  # task cursor of the fallback launch
# Look-forward load balancing, per launch slot s (at X + s): split records reserved, taken,
# finished, and main tasks finished (termination of the in-kernel task pool).
C_SPLIT_RES = C_TASK + MAXSTAGES + 2
C_SPLIT_TAKE = C_SPLIT_RES + MAXSTAGES + 2
C_REC_DONE = C_SPLIT_TAKE + MAXSTAGES + 2
C_MAIN_DONE = C_REC_DONE + MAXSTAGES + 2
CTRL_SIZE = C_MAIN_DONE + MAXSTAGES + 2

# ---- state (int64): ctrl then einfo in one device array, so one copy reads both ----------
S_CTRL = 0
S_EINFO = CTRL_SIZE
STATE_SIZE = S_EINFO + EINFO_SIZE

# ---- per-warp DFS level state (enumerate.py): int64 rows of a (LV_FIELDS, MAXQ) array per lane --
LV_U = 0          # query vertex extended at the level
LV_KIND = 1       # s_min is 0: a level-3 list N(M(a), a, u), 1: a projection π_u R(u, a)
LV_EDGE = 2       # directed edge of s_min
LV_START = 3      # first element of s_min (in nbr2 or proj_keys)
LV_LEN = 4        # elements of s_min (a split chunk: its end)
LV_SCAN = 5       # next element of s_min to test (a split chunk: its begin)
LV_BSIZE = 6      # survivors in the level's candidate buffer
LV_BPOS = 7       # next buffered survivor to extend
LV_FIELDS = 8

# ---- batched filter (engine._match_batch): per query of a batch ---------------------------
BATCH_MAX = 64    # queries per shared filter launch (their bitmaps: BATCH_MAX x |V(G)| int64)
#: Filter counters per query: |C(u)| at u, Σ_{v in C(u)} d(v) at MAXQ + u (the level-3 bound).
CAND_WIDTH = 2 * MAXQ

# ---- split records (int64, REC_WIDTH each): a prefix and a 32-aligned chunk of its s_min ----
R_FLAG, R_MAPPED, R_U, R_KIND, R_START, R_BEGIN, R_END, R_EDGE, R_M = range(9)
REC_WIDTH = R_M + MAXQ

#: Warps per block of the enumeration kernel: fixes its static shared memory (the candidate
#: buffers, 2 x MAXQ x 32 int32 per warp = 8 KB).
WARPS_PER_BLOCK = 1 if simulator_active() else 4
ENUM_THREADS = WARPS_PER_BLOCK * WARP
#: Threads of the one-block scans of the index (queries with at most SMALL_SCAN pairs).
SCAN_BLOCK = 64 if simulator_active() else 512
SMALL_SCAN = 64 * SCAN_BLOCK
#: Threads per block of the filter / index kernels (one thread per vertex, cell or pair).
BUILD_THREADS = 32 if simulator_active() else 256


@njit(cache=True, nogil=True)
def write_query_meta(offsets, neighbors, labels, meta):
    """Write a query's labels, degrees, neighbour masks, NLC (labels ascending per vertex) and
    directed edges (the CSR's order) into ``meta`` (zeroed, META_SIZE)."""
    nq = offsets.size - 1
    ne = neighbors.size
    meta[M_EIDX:M_EIDX + MAXQ * MAXQ] = -1
    entries = 0
    for u in range(nq):
        lo, hi = offsets[u], offsets[u + 1]
        meta[M_LAB + u] = labels[u]
        meta[M_DEG + u] = hi - lo
        meta[M_NLCOFF + u] = entries
        around = np.empty(hi - lo, np.int64)
        for i in range(lo, hi):
            a = neighbors[i]
            meta[M_ADJ + u] |= np.int64(1) << a
            meta[M_EIDX + u * MAXQ + a] = i
            meta[M_ESRC + i] = u
            meta[M_EDST + i] = a
            around[i - lo] = labels[a]
        around.sort()
        for i in range(around.size):
            if i == 0 or around[i] != around[i - 1]:
                meta[M_NLCLAB + entries] = around[i]
                entries += 1
            meta[M_NLCCNT + entries - 1] += 1
    meta[M_NLCOFF + nq] = entries
    meta[M_NQ] = nq
    meta[M_NE] = ne
