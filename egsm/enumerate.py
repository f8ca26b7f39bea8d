"""Hybrid BFS-DFS enumeration (paper §5.2-5.5, Algorithms 3 and 4).

One kernel, ``extend_kernel``, runs one stage: warps take tasks from a device cursor and extend
each depth-first through the stage's vertex group (ExtendDFS restricted to V_i). Stage 0 is
GetFirstMatches (a task is a chunk of 32 elements of the smallest π_{u0} R(u0, .)); later stages
take one queue row per task. A stage that is not the last appends its partial matches to the
cyclic queue (BFS between groups); the last one counts (and, with ``collect``, writes).

Per warp and level (Fig. 6): a 32-lane intersection batch over s_min fills the level's buffer with
survivors: x survives iff it is in N(M(u'), u', u) for every mapped neighbour u', a key of
CT(u, u'') for every unmapped one (look-ahead) and differs from every mapped data vertex.
SelectNext (§5.5) picks, by a warp min-reduction, the group's extendable vertex with the smallest
estimate; the ``Static`` variant takes the one with the most mapped neighbours (CuTS's rule).
Memory (§5.4): a stage whose queue reservation passes the free space sets the overflow flag, and
the host reruns it with the remaining vertices in one group (pure DFS). Load balancing (§5.6,
look-forward only): a level whose s_min has more than TH1 elements is published as 32-element
records in a device pool that idle warps of the same launch drain.

Code layout: ``extend_kernel`` is the task loop, ``extend_task`` ExtendDFS through the group; the
steps are named device functions (``queue_geometry``, ``load_*``, ``open_level``,
``test_candidate``, ``publish_split``, ``emit_embeddings``, ``emit_rows``). A warp's level state
is a (LV_FIELDS, MAXQ) array in shared memory, written by lane 0 between two warp barriers
(``set_level``, ``set_field``). With ``watch`` = 1 every stage polls ``ctrl[C_STOP]``, which
:class:`common.device.LaunchWatch` raises at the deadline. docs/decisions.md ("EGSM") gives the
choices where the paper is silent.
"""

from __future__ import annotations

from numba import int32, int64

from common.device import FULL_MASK, cuda, jit

from .cuckoo_trie import list_contains, lookup, pair_of
from .layout import (
    C_COUNT,
    C_ERROR,
    C_MAIN_DONE,
    C_OVERFLOW,
    C_REC_DONE,
    C_ROWS,
    C_SPLIT_RES,
    C_SPLIT_TAKE,
    C_STOP,
    C_TASK,
    EI_CARD,
    EI_PROJSTART,
    LV_BPOS,
    LV_BSIZE,
    LV_EDGE,
    LV_FIELDS,
    LV_KIND,
    LV_LEN,
    LV_SCAN,
    LV_START,
    LV_U,
    M_ADJ,
    M_CBASE,
    M_EIDX,
    M_ESRC,
    M_NQ,
    M_PBASE,
    M_STAGEMASK,
    MAXQ,
    R_BEGIN,
    R_EDGE,
    R_END,
    R_FLAG,
    R_KIND,
    R_M,
    R_MAPPED,
    R_START,
    R_U,
    REC_WIDTH,
    WARP,
    WARPS_PER_BLOCK,
)

NO_KEY = int64(1) << 62
SPIN_NS = 256          # back-off of a warp waiting for a split record being written
IDLE_MAX_NS = 4096     # longest back-off of a warp waiting for a record to be reserved, or the end
ABORT_POLL_INTERVAL = 4  # idle polls between reads of the stop, error and overflow flags
STOP_POLL_INTERVAL = 32  # polls between a warp's atomic reads of the stop flag (deadline watch)


@cuda.jit(device=True)
def smallest_set(meta, einfo, off2, sC, w, mapped, u):
    """(size, kind, start, edge) of the smallest set constraining u: kind 0 = the level-3 list
    N(M(a), a, u) of a mapped neighbour a, kind 1 = π_u R(u, a) of an unmapped neighbour a."""
    nq = meta[M_NQ]
    adj = meta[M_ADJ + u]
    best = NO_KEY
    kind = 0
    start = int64(0)
    edge = int64(-1)
    for a in range(nq):
        if not (adj >> a) & 1:
            continue
        if (mapped >> a) & 1:
            e = meta[M_EIDX + a * MAXQ + u]
            p = meta[M_PBASE + e] + sC[w, a] - meta[M_CBASE + a]
            s = off2[p]
            size = off2[p + 1] - s
            k = 0
        else:
            e = meta[M_EIDX + u * MAXQ + a]
            s = einfo[EI_PROJSTART + e]
            size = einfo[EI_CARD + e]
            k = 1
        if size < best:
            best = size
            kind = k
            start = s
            edge = e
    return best, kind, start, edge


@cuda.jit(device=True)
def select_next(meta, einfo, off2, sC, w, mapped, remaining, adaptive):
    """The next query vertex of the group (SelectNext), the same in every lane."""
    lane = cuda.laneid
    key = NO_KEY
    if lane < meta[M_NQ] and (remaining >> lane) & 1:
        adj = meta[M_ADJ + lane]
        if adj & mapped:
            if adaptive:
                size, kind, start, edge = smallest_set(meta, einfo, off2, sC, w, mapped, lane)
                key = size * 64 + lane
            else:
                nmapped = 0
                for a in range(MAXQ):
                    if (adj & mapped) >> a & 1:
                        nmapped += 1
                key = int64(MAXQ - nmapped) * 64 + lane
    offset = 16
    while offset > 0:
        other = cuda.shfl_xor_sync(FULL_MASK, key, offset)
        if other < key:
            key = other
        offset >>= 1
    if key == NO_KEY:
        return -1
    return int32(key & 63)


@cuda.jit(device=True)
def test_candidate(meta, keys, off2, nbr2, proj_keys, sM, sC, w, mapped, u, kind, start, edge,
                   idx, length):
    """(ok, x, cell) for element ``idx`` of s_min as a candidate of u."""
    if idx >= length:
        return False, int32(-1), int32(-1)
    if kind == 0:
        x = nbr2[start + idx]
    else:
        x = proj_keys[start + idx]
    cell = lookup(keys, meta, u, x)
    if cell < 0:
        return False, x, int32(-1)
    local = cell - meta[M_CBASE + u]
    nq = meta[M_NQ]
    adj = meta[M_ADJ + u]
    for a in range(nq):
        if not (adj >> a) & 1:
            continue
        if (mapped >> a) & 1:
            e = meta[M_EIDX + a * MAXQ + u]
            if kind == 0 and e == edge:
                continue
            p = meta[M_PBASE + e] + sC[w, a] - meta[M_CBASE + a]
            if not list_contains(nbr2, off2[p], off2[p + 1], x):
                return False, x, int32(cell)
        else:
            p = pair_of(meta, u, a, local)
            if off2[p + 1] == off2[p]:
                return False, x, int32(cell)
    for a in range(nq):
        if (mapped >> a) & 1 and sM[w, a] == x:
            return False, x, int32(cell)
    return True, x, int32(cell)


@cuda.jit(device=True)
def stopped(ctrl, fallback, watch, polls):
    """Should the warp leave (limit reached, queue overflow, or the host's deadline)? Lane 0
    decides, every lane gets the answer; ``polls`` counts the warp's calls."""
    flag = 0
    if cuda.laneid == 0:
        if ctrl[C_STOP] != 0 or (not fallback and ctrl[C_OVERFLOW] != 0):
            flag = 1
        elif watch != 0 and polls % STOP_POLL_INTERVAL == 0 and cuda.atomic.add(ctrl, C_STOP, 0) != 0:
            flag = 1
    return cuda.shfl_sync(FULL_MASK, flag, 0) != 0


@cuda.jit(device=True)
def aborted(ctrl, fallback):
    """Is a stop, error or (outside the fallback) overflow flag up? Atomic reads: a plain load
    could be hoisted out of a spin loop."""
    return (cuda.atomic.add(ctrl, C_STOP, 0) != 0 or cuda.atomic.add(ctrl, C_ERROR, 0) != 0
            or (not fallback and cuda.atomic.add(ctrl, C_OVERFLOW, 0) != 0))


@cuda.jit(device=True)
def stage_finished(ctrl, slot, ntasks, reserved):
    """Has every main task and every one of the ``reserved`` split records finished, with no
    record reserved since? (Read after ``reserved``: then no record can come any more.)"""
    return (cuda.atomic.add(ctrl, C_MAIN_DONE + slot, 0) >= ntasks
            and cuda.atomic.add(ctrl, C_REC_DONE + slot, 0) == reserved
            and cuda.atomic.add(ctrl, C_SPLIT_RES + slot, 0) == reserved)


@cuda.jit(device=True)
def wait_record(ctrl, split, slot, idx, ntasks, epoch, fallback):
    """Lane 0 waits until split record ``idx`` is published (True) or no record can come any
    more (False): the stage finished with none reserved at or after ``idx``. A record reserved
    but not yet published is polled every ``SPIN_NS``; while none is reserved at ``idx`` the
    pause doubles up to ``IDLE_MAX_NS`` and the flags are read every ``ABORT_POLL_INTERVAL``
    polls, so that the warps left without work do not flood the counters' atomics the working
    warps need."""
    status = 0
    if cuda.laneid == 0:
        pause = SPIN_NS
        polls = 0
        while status == 0:
            if polls % ABORT_POLL_INTERVAL == 0 and aborted(ctrl, fallback):
                status = 2
                break
            polls += 1
            reserved = cuda.atomic.add(ctrl, C_SPLIT_RES + slot, 0)
            if idx < reserved:
                if cuda.atomic.add(split, idx * REC_WIDTH + R_FLAG, 0) == epoch:
                    status = 1
                pause = SPIN_NS                             # being written: look again soon
            elif stage_finished(ctrl, slot, ntasks, reserved):
                status = 2
            if status == 0:
                cuda.nanosleep(pause)
                pause = min(2 * pause, IDLE_MAX_NS)
    return cuda.shfl_sync(FULL_MASK, status, 0) == 1


@cuda.jit(device=True)
def queue_geometry(meta, ctrl, stage, qcap, out_mask):
    """Where stage ``stage`` reads and writes the cyclic queue: it writes right after its input,
    the output of stage - 1. Returns (input width, input rows, input start, output start, output
    width, most output rows that fit)."""
    acc = int64(0)
    for j in range(stage - 1):
        acc += ctrl[C_ROWS + j] * cuda.popc(meta[M_STAGEMASK + j])
    w_in = int64(0)
    in_rows = int64(0)
    in_start = int64(0)
    if stage > 0:
        w_in = cuda.popc(meta[M_STAGEMASK + stage - 1])
        in_rows = ctrl[C_ROWS + stage - 1]
        in_start = acc % qcap
        acc += in_rows * w_in
    w_out = int64(cuda.popc(out_mask))
    return w_in, in_rows, in_start, acc % qcap, w_out, (qcap - in_rows * w_in) // w_out


@cuda.jit(device=True)
def take_task(ctrl, counter):
    """Lane 0 takes the next index of device counter ``counter``; every lane gets it."""
    t = int64(0)
    if cuda.laneid == 0:
        t = cuda.atomic.add(ctrl, counter, 1)
    return cuda.shfl_sync(FULL_MASK, t, 0)


@cuda.jit(device=True)
def set_level(lv, depth, u, kind, start, length, scan, edge):
    """Level ``depth`` extends u over s_min = (kind, start, length) of edge ``edge`` from element
    ``scan`` (lane 0's values; the warp's shared state, written between two warp barriers)."""
    cuda.syncwarp(FULL_MASK)
    if cuda.laneid == 0:
        lv[LV_U, depth] = u
        lv[LV_KIND, depth] = kind
        lv[LV_EDGE, depth] = edge
        lv[LV_START, depth] = start
        lv[LV_LEN, depth] = length
        lv[LV_SCAN, depth] = scan
        lv[LV_BSIZE, depth] = 0
        lv[LV_BPOS, depth] = 0
    cuda.syncwarp(FULL_MASK)


@cuda.jit(device=True)
def set_field(lv, field, depth, value):
    """lv[field, depth] = lane 0's ``value``, between two warp barriers."""
    cuda.syncwarp(FULL_MASK)
    if cuda.laneid == 0:
        lv[field, depth] = value
    cuda.syncwarp(FULL_MASK)


@cuda.jit(device=True)
def map_vertex(keys, meta, sM, sC, w, u, v):
    """M(u) = v in the warp's partial match, with v's cuckoo cell in u's level 1."""
    sM[w, u] = v
    sC[w, u] = lookup(keys, meta, u, v)


@cuda.jit(device=True)
def load_split_record(split, idx, keys, meta, sM, sC, w, lv):
    """Task = split record ``idx``: its prefix becomes the partial match, its chunk of s_min
    level 0. Records are read with atomics (L1 may hold a stale line). Returns the mapped mask."""
    r = idx * REC_WIDTH
    mapped = cuda.atomic.add(split, r + R_MAPPED, 0)
    lane = cuda.laneid
    cuda.syncwarp(FULL_MASK)
    if lane < meta[M_NQ] and (mapped >> lane) & 1:
        map_vertex(keys, meta, sM, sC, w, lane, int32(cuda.atomic.add(split, r + R_M + lane, 0)))
    cuda.syncwarp(FULL_MASK)
    set_level(lv, 0, cuda.atomic.add(split, r + R_U, 0), cuda.atomic.add(split, r + R_KIND, 0),
              cuda.atomic.add(split, r + R_START, 0), cuda.atomic.add(split, r + R_END, 0),
              cuda.atomic.add(split, r + R_BEGIN, 0), cuda.atomic.add(split, r + R_EDGE, 0))
    return mapped


@cuda.jit(device=True)
def load_first_chunk(meta, einfo, first_edge, t, lv):
    """GetFirstMatches task t: elements [32 t, 32 t + 32) of π_{u0} R(u0, first_edge)."""
    set_level(lv, 0, meta[M_ESRC + first_edge], 1, einfo[EI_PROJSTART + first_edge],
              min(einfo[EI_CARD + first_edge], (t + 1) * WARP), t * WARP, first_edge)


@cuda.jit(device=True)
def load_queue_row(queue, row_start, qcap, keys, meta, sM, sC, w, mapped):
    """Task = one queue row: the data vertices of ``mapped`` in ascending query-vertex order."""
    lane = cuda.laneid
    cuda.syncwarp(FULL_MASK)
    if lane < meta[M_NQ] and (mapped >> lane) & 1:
        col = cuda.popc(mapped & ((int64(1) << lane) - 1))
        map_vertex(keys, meta, sM, sC, w, lane, queue[(row_start + col) % qcap])
    cuda.syncwarp(FULL_MASK)


@cuda.jit(device=True)
def open_level(meta, einfo, off2, sC, w, mapped, group_mask, adaptive, lv, depth):
    """SelectNext the level's vertex and its s_min; the vertex, or -1 (a planning error)."""
    u = select_next(meta, einfo, off2, sC, w, mapped, group_mask & ~mapped, adaptive)
    if u < 0:
        return -1
    size, kind, start, edge = smallest_set(meta, einfo, off2, sC, w, mapped, u)
    set_level(lv, depth, u, kind, start, size, 0, edge)
    return u


@cuda.jit(device=True)
def publish_split(ctrl, split, slot, split_cap, epoch, sM, w, nq, mapped, lv, depth):
    """Look-forward: publish level ``depth`` as 32-element chunk records for idle warps (one CAS
    reserves them all); on success the warp leaves the level to them (its length becomes 0)."""
    size = lv[LV_LEN, depth]
    chunks = (size + WARP - 1) // WARP
    first = int64(-1)
    if cuda.laneid == 0:
        old = cuda.atomic.add(ctrl, C_SPLIT_RES + slot, 0)
        while old + chunks <= split_cap:
            prev = cuda.atomic.cas(ctrl, C_SPLIT_RES + slot, old, old + chunks)
            if prev == old:
                first = old
                break
            old = prev
    first = cuda.shfl_sync(FULL_MASK, first, 0)
    if first < 0:
        return                                     # the pool is full: the warp keeps the level
    for j in range(cuda.laneid, chunks, WARP):
        r = (first + j) * REC_WIDTH
        split[r + R_MAPPED] = mapped
        split[r + R_U] = lv[LV_U, depth]
        split[r + R_KIND] = lv[LV_KIND, depth]
        split[r + R_START] = lv[LV_START, depth]
        split[r + R_BEGIN] = j * WARP
        split[r + R_END] = min(size, (j + 1) * WARP)
        split[r + R_EDGE] = lv[LV_EDGE, depth]
        for q in range(nq):
            split[r + R_M + q] = sM[w, q]
        cuda.threadfence()                         # the record before its flag
        split[r + R_FLAG] = epoch
    set_field(lv, LV_LEN, depth, 0)


@cuda.jit(device=True)
def emit_embeddings(ctrl, emb, emb_cap, limit, sM, w, nq, u, x, ok, n, rank):
    """Last stage: count the batch's n full matches (stop at the limit) and write the ones that
    fit in the embeddings buffer."""
    pos = int64(0)
    if cuda.laneid == 0:
        pos = cuda.atomic.add(ctrl, C_COUNT, n)
        if limit > 0 and pos + n >= limit:
            ctrl[C_STOP] = 1
    pos = cuda.shfl_sync(FULL_MASK, pos, 0)
    if ok and pos + rank < emb_cap:
        r = pos + rank
        for q in range(nq):
            emb[r * nq + q] = x if q == u else sM[w, q]


@cuda.jit(device=True)
def emit_rows(ctrl, queue, qcap, stage, max_rows, out_start, w_out, out_mask, sM, w, nq, u, x,
              ok, n, rank):
    """Stage before the last (BFS between groups): append the batch's n partial matches to the
    queue, or raise the overflow flag (the host then reruns the stage depth-first)."""
    pos = int64(0)
    if cuda.laneid == 0:
        pos = cuda.atomic.add(ctrl, C_ROWS + stage, n)
        if pos + n > max_rows:
            cuda.atomic.cas(ctrl, C_OVERFLOW, 0, stage + 1)
    pos = cuda.shfl_sync(FULL_MASK, pos, 0)
    if ok and pos + n <= max_rows:
        base = out_start + (pos + rank) * w_out
        col = 0
        for q in range(nq):
            if (out_mask >> q) & 1:
                queue[(base + col) % qcap] = x if q == u else sM[w, q]
                col += 1


@jit
def extend_kernel(meta, einfo, keys, off2, nbr2, proj_keys, queue, ctrl, emb, emb_cap, split,
                  split_cap, split_threshold, epoch, stage, slot, first_edge, num_tasks,
                  group_mask, mapped_before, final, fallback, limit, adaptive, watch):
    """Run one stage (see the module docstring); ``stage == 0`` reads tasks from
    π_{u0} R(u0, first_edge) in chunks of 32, later stages from the queue rows of stage - 1;
    with ``split_threshold > 0``, a level whose s_min is larger is split into 32-element chunk
    records that any warp of the launch takes once the main tasks are used up; ``watch`` != 0:
    the host may raise the stop flag at a deadline."""
    sM = cuda.shared.array((WARPS_PER_BLOCK, MAXQ), int32)
    sC = cuda.shared.array((WARPS_PER_BLOCK, MAXQ), int32)
    buf_v = cuda.shared.array((WARPS_PER_BLOCK, MAXQ, WARP), int32)
    buf_c = cuda.shared.array((WARPS_PER_BLOCK, MAXQ, WARP), int32)
    levels = cuda.shared.array((WARPS_PER_BLOCK, LV_FIELDS, MAXQ), int64)
    w = cuda.threadIdx.x // WARP
    lv = levels[w]                          # the warp's DFS level state (module docstring)
    nq = meta[M_NQ]
    qcap = queue.size
    if not fallback and ctrl[C_OVERFLOW] != 0:
        return
    out_mask = mapped_before | group_mask
    w_in, in_rows, in_start, out_start, w_out, max_rows = queue_geometry(meta, ctrl, stage, qcap,
                                                                         out_mask)
    ntasks = num_tasks if stage == 0 else in_rows
    polls = int64(0)

    while True:
        t = take_task(ctrl, C_TASK + slot)
        polls += 1
        if stopped(ctrl, fallback, watch, polls):
            break
        is_record = t >= ntasks
        mapped = mapped_before
        if is_record:
            if split_threshold <= 0:
                break
            idx = take_task(ctrl, C_SPLIT_TAKE + slot)
            if not wait_record(ctrl, split, slot, idx, ntasks, epoch, fallback):
                break
            mapped = load_split_record(split, idx, keys, meta, sM, sC, w, lv)
        elif stage == 0:
            load_first_chunk(meta, einfo, first_edge, t, lv)
        else:
            load_queue_row(queue, in_start + t * w_in, qcap, keys, meta, sM, sC, w, mapped)
            if open_level(meta, einfo, off2, sC, w, mapped, group_mask, adaptive, lv, 0) < 0:
                ctrl[C_ERROR] = 1
                break
        polls = extend_task(meta, einfo, keys, off2, nbr2, proj_keys, queue, qcap, ctrl, emb,
                            emb_cap, split, split_cap, split_threshold, epoch, stage, slot,
                            group_mask, final, fallback, limit, adaptive, watch, sM, sC, buf_v,
                            buf_c, lv, w, nq, mapped, max_rows, out_start, w_out, out_mask, polls)
        if cuda.laneid == 0:
            if is_record:
                cuda.atomic.add(ctrl, C_REC_DONE + slot, 1)
            else:
                cuda.atomic.add(ctrl, C_MAIN_DONE + slot, 1)


@cuda.jit(device=True)
def extend_task(meta, einfo, keys, off2, nbr2, proj_keys, queue, qcap, ctrl, emb, emb_cap, split,
                split_cap, split_threshold, epoch, stage, slot, group_mask, final, fallback, limit,
                adaptive, watch, sM, sC, buf_v, buf_c, lv, w, nq, mapped, max_rows, out_start,
                w_out, out_mask, polls):
    """ExtendDFS of one task through the group (Algorithm 4 restricted to V_i): at each level,
    one 32-lane intersection batch over s_min fills the level's buffer, its survivors are
    extended one by one; the last level emits (rows or embeddings). Returns the poll count."""
    lane = cuda.laneid
    lower = (int64(1) << lane) - 1
    last = cuda.popc(group_mask & ~mapped) - 1
    depth = 0
    while depth >= 0:
        if depth == last or lv[LV_BPOS, depth] >= lv[LV_BSIZE, depth]:
            if lv[LV_SCAN, depth] >= lv[LV_LEN, depth]:     # level exhausted: backtrack
                depth -= 1
                if depth >= 0:
                    mapped &= ~(int64(1) << lv[LV_U, depth])
                continue
            polls += 1
            if stopped(ctrl, fallback, watch, polls):    # polled once per batch
                break
            u = lv[LV_U, depth]
            scan = lv[LV_SCAN, depth]
            ok, x, cell = test_candidate(meta, keys, off2, nbr2, proj_keys, sM, sC, w, mapped, u,
                                         lv[LV_KIND, depth], lv[LV_START, depth],
                                         lv[LV_EDGE, depth], scan + lane, lv[LV_LEN, depth])
            ballot = int64(cuda.ballot_sync(FULL_MASK, ok)) & 0xFFFFFFFF
            n = int64(cuda.popc(ballot))
            rank = cuda.popc(ballot & lower)
            if depth < last:                             # fill the level's buffer
                if ok:
                    buf_v[w, depth, rank] = x
                    buf_c[w, depth, rank] = cell
                cuda.syncwarp(FULL_MASK)
                if lane == 0:
                    lv[LV_SCAN, depth] = scan + WARP
                    lv[LV_BSIZE, depth] = n
                    lv[LV_BPOS, depth] = 0
                cuda.syncwarp(FULL_MASK)
                continue
            set_field(lv, LV_SCAN, depth, scan + WARP)
            if n > 0 and final:
                emit_embeddings(ctrl, emb, emb_cap, limit, sM, w, nq, u, x, ok, n, rank)
            elif n > 0:
                emit_rows(ctrl, queue, qcap, stage, max_rows, out_start, w_out, out_mask, sM, w,
                          nq, u, x, ok, n, rank)
            continue
        # extend the next buffered candidate of this level
        b = lv[LV_BPOS, depth]
        u = lv[LV_U, depth]
        set_field(lv, LV_BPOS, depth, b + 1)
        sM[w, u] = buf_v[w, depth, b]
        sC[w, u] = buf_c[w, depth, b]
        cuda.syncwarp(FULL_MASK)
        mapped |= int64(1) << u
        depth += 1
        if open_level(meta, einfo, off2, sC, w, mapped, group_mask, adaptive, lv, depth) < 0:
            ctrl[C_ERROR] = 1
            break
        if split_threshold > 0 and lv[LV_LEN, depth] > split_threshold:
            publish_split(ctrl, split, slot, split_cap, epoch, sM, w, nq, mapped, lv, depth)
    return polls


__all__ = ["extend_kernel", "extend_task", "select_next", "smallest_set", "test_candidate"]
