"""gMatch search kernels (paper Sec. 3.2-3.4, Alg. 2; digest Sec. 2, 3.2-3.4, 6).

Fine-grained model (:func:`fine_kernel`): a task is (partial match M, candidate v); a warp owns a
stack of |V(Q)| levels x 32 slots in SHARED memory. Slot k of level d holds the data vertex of the
k-th valid child produced by the last 32-task batch at level d and the slot of its parent in level
d-1; the task group of that child (its local candidate set LC for position d+1) is stored at level
d+1, entry k, as (source data vertex, length, skipped position): LC = the first ``length`` entries
of N(source), where source is the image of the backward neighbour of smallest degree, and the
length stops at the symmetry-breaking bound (adjacency lists are sorted, so the restriction
"f(u_{d+1}) < f(u_j)" truncates the list, the code's "reach_bound"). Partial matches are never
materialised: a lane rebuilds its own by following parent pointers, fused with validation
(injectivity, one binary search per other backward neighbour, candidate bit), and the same walk
computes the task group of the child. Each iteration fetches the next 32 tasks of the level's
virtual task pool through two cursors (task group, offset); with ``batch`` the 32 lanes may span
several task groups (batch exploration), without it they stay in one group (the paper's "Fine
(naive)"). A ballot gives the valid tasks; the warp descends (children compacted to slots
0..popc-1) or, when nothing is valid or the level is the last, counts and backtracks once the
level's cursor is exhausted. All control flow is warp-uniform: the stack top and cursors live in
shared memory, written by lane 0 between ``syncwarp`` calls.

Seeds: the stack's bottom level (position s-1, s = seed width) holds up to ``roots`` row indices
of the BFS seed pool (:mod:`gmatch.balance`); positions < s are read from the pool row. A warp
takes ``roots`` seeds per atomic fetch (the authors' bitmap build takes 4).

Work stealing (``stealing``; Sec. 3.6): an idle warp marks itself waiting in a per-block state
array; a busy warp that sees a waiter (one shared atomic read per iteration) looks for the
shallowest level with at least two untouched task groups, claims a waiter by CAS, copies the
levels below (lane-parallel, 32 slots per level) and hands over the upper half of that level's
task groups; the waiter's lane 0 polls its state with ``nanosleep`` back-off (32 ns to 1 us)
while its other lanes wait in a shuffle. CHOICE: stealing is
intra-block only, as in the authors' code; the paper's inter-block global mailbox is not built
(the seed pool is the only inter-block balance). Termination: a counter of waiting-or-exited
warps; when it reaches the block's warp count no work is left in the block.

Coarse-grained baseline (:func:`coarse_kernel`; Sec. 2, Alg. 1, STMatch-style unrolling): one warp
extends ``unroll`` partial matches at a time, materialising every valid child in a per-level
feasible-candidate buffer in GLOBAL memory of ``unroll * d_max`` entries, then loops over it.
``unroll=1`` is the paper's ``Naive``. Its execution-stack memory is O(|V(Q)| * unroll * d_max) per
warp, which is what the paper's memory figure contrasts with the fine model's shared-memory stack.

Idle rate (Tables 2/6): both kernels count warp iterations and lanes without a task per iteration
(one ballot each); idle rate = idle lanes / (32 * iterations), as the authors' IDLE_CNT build does.
Counts are unique embeddings (one per automorphism class); every counter is int64.
"""

from __future__ import annotations

import functools

from numba import int8, int32, int64

from common.device import cuda
from common.device_functions import contains, lower_bound

from .candidates import QP_BACKWARD, QP_RESTRICT, QP_SIZES

FULL = 0xFFFFFFFF
NO_BOUND = 0x7FFFFFFF
BIG_DEGREE = 0x7FFFFFFFFFFFFFFF

# ctrl (int64) slots, shared by the kernels and the engine
C_SEED, C_COUNT, C_STOP, C_ITERS, C_IDLE, C_STEALS, C_EMB = 0, 1, 2, 3, 4, 5, 6
CTRL_SIZE = 8


@cuda.jit(device=True)
def visit(vv, j, v, d, n, qp, offsets, neighbors, skip, ok, best_deg, bsrc, bskip, bound):
    """Fold the image ``vv`` of earlier position ``j`` into the check of candidate ``v`` at ``d``
    and into the task group of the child at ``d + 1``."""
    if vv == v:
        ok = False
    elif ((qp[QP_BACKWARD, d] >> j) & 1) != 0 and j != skip:
        if not contains(neighbors, offsets[vv], offsets[vv + 1], v):
            ok = False
    if d + 1 < n:
        if ((qp[QP_BACKWARD, d + 1] >> j) & 1) != 0:
            deg = offsets[vv + 1] - offsets[vv]
            if deg < best_deg:
                best_deg = deg
                bsrc = vv
                bskip = j
        if ((qp[QP_RESTRICT, d + 1] >> j) & 1) != 0 and vv < bound:
            bound = vv
    return ok, best_deg, bsrc, bskip, bound


@cuda.jit(device=True)
def group_length(offsets, neighbors, src, bound):
    """Length of LC = the prefix of N(src) below ``bound``."""
    lo = offsets[src]
    hi = offsets[src + 1]
    if bound != NO_BOUND:
        hi = lower_bound(neighbors, lo, hi, bound)
    return int32(hi - lo)


@cuda.jit(device=True)
def check_task(mv, par, wi, s, pool, width, offsets, neighbors, qp, n, d, v, parent, skip):
    """Validate candidate v at position d whose parent is slot ``parent`` of level d-1; returns
    (valid, child's LC source, its skipped position, its bound)."""
    ok = True
    best_deg = int64(BIG_DEGREE)
    bsrc = int32(-1)
    bskip = int32(-1)
    bound = int32(NO_BOUND)
    cur = int32(parent)
    j = d - 1
    while j >= s and ok:
        vv = mv[wi, j, cur]
        ok, best_deg, bsrc, bskip, bound = visit(vv, j, v, d, n, qp, offsets, neighbors, skip,
                                                 ok, best_deg, bsrc, bskip, bound)
        cur = int32(par[wi, j, cur])
        j -= 1
    if ok:
        row = int64(mv[wi, s - 1, cur]) * width
        while j >= 0 and ok:
            vv = pool[row + j]
            ok, best_deg, bsrc, bskip, bound = visit(vv, j, v, d, n, qp, offsets, neighbors, skip,
                                                     ok, best_deg, bsrc, bskip, bound)
            j -= 1
    if ok and d + 1 < n:
        if ((qp[QP_BACKWARD, d + 1] >> d) & 1) != 0:
            deg = offsets[v + 1] - offsets[v]
            if deg < best_deg:
                best_deg = deg
                bsrc = v
                bskip = d
        if ((qp[QP_RESTRICT, d + 1] >> d) & 1) != 0 and v < bound:
            bound = v
    return ok, bsrc, bskip, bound


@cuda.jit(device=True)
def group_of(mv, par, wi, s, pool, width, offsets, neighbors, qp, d, slot):
    """Task group (source, skipped position, length) for position d of the partial match that ends
    at slot ``slot`` of level d-1."""
    best_deg = int64(BIG_DEGREE)
    bsrc = int32(-1)
    bskip = int32(-1)
    bound = int32(NO_BOUND)
    back = qp[QP_BACKWARD, d]
    restr = qp[QP_RESTRICT, d]
    cur = int32(slot)
    j = d - 1
    while j >= 0:
        if j >= s:
            vv = mv[wi, j, cur]
            cur = int32(par[wi, j, cur])
        else:
            vv = pool[int64(mv[wi, s - 1, cur]) * width + j]
        if ((back >> j) & 1) != 0:
            deg = offsets[vv + 1] - offsets[vv]
            if deg < best_deg:
                best_deg = deg
                bsrc = vv
                bskip = j
        if ((restr >> j) & 1) != 0 and vv < bound:
            bound = vv
        j -= 1
    return bsrc, bskip, group_length(offsets, neighbors, bsrc, bound)


@cuda.jit(device=True)
def write_embedding(mv, par, wi, s, pool, width, d, v, parent, emb, pos):
    """Write the full match ending with v at position d (parent slot ``parent``) to emb[pos]."""
    emb[pos, d] = v
    cur = int32(parent)
    j = d - 1
    while j >= 0:
        if j >= s:
            emb[pos, j] = mv[wi, j, cur]
            cur = int32(par[wi, j, cur])
        else:
            emb[pos, j] = pool[int64(mv[wi, s - 1, cur]) * width + j]
        j -= 1


@cuda.jit(device=True)
def leaf_output(ok, mask, lane, mv, par, wi, s, pool, width, d, v, parent, ctrl, emb, emb_cap,
                limit_unique):
    """Count the valid leaves of one batch (immediately, when a limit is set) and write them out."""
    found = cuda.popc(mask)
    if emb_cap > 0:
        base = int64(0)
        if lane == 0 and found > 0:
            base = cuda.atomic.add(ctrl, C_EMB, found)
        base = cuda.shfl_sync(FULL, base, 0)
        if ok:
            pos = base + cuda.popc(mask & cuda.lanemask_lt())
            if pos < emb_cap:
                write_embedding(mv, par, wi, s, pool, width, d, v, parent, emb, pos)
    if limit_unique > 0 and lane == 0 and found > 0:
        old = cuda.atomic.add(ctrl, C_COUNT, found)
        if old + found >= limit_unique:
            cuda.atomic.exch(ctrl, C_STOP, 1)
        return int64(0)
    return int64(found)


@cuda.jit(device=True)
def stopped(ctrl, lane, limit_unique):
    flag = int64(0)
    if limit_unique > 0 and lane == 0:
        flag = cuda.atomic.add(ctrl, C_STOP, 0)
    return cuda.shfl_sync(FULL, flag, 0) != 0


@functools.lru_cache(maxsize=None)
def fine_kernel(levels: int, warps: int, batch: bool, stealing: bool, roots: int):
    """The fine-grained DFS kernel for stacks of ``levels`` levels and ``warps`` warps per block."""
    L, W, R = levels, warps, roots

    @cuda.jit
    def fine_dfs(offsets, neighbors, cand_mask, qp, pool, width, seed_lo, seed_hi, ctrl, emb,
                 emb_cap, limit_unique):
        mv = cuda.shared.array((W, L, 32), int32)
        par = cuda.shared.array((W, L, 32), int8)
        gsrc = cuda.shared.array((W, L, 32), int32)
        glen = cuda.shared.array((W, L, 32), int32)
        gskip = cuda.shared.array((W, L, 32), int8)
        cg = cuda.shared.array((W, L), int32)
        co = cuda.shared.array((W, L), int32)
        ng = cuda.shared.array((W, L), int32)
        top = cuda.shared.array(W, int32)
        wstate = cuda.shared.array(W, int32)       # 0 busy, 1 waiting, 3 claimed, 2 work handed over
        waiting = cuda.shared.array(2, int32)      # [0] waiting warps, [1] waiting or exited warps

        tid = cuda.threadIdx.x
        wi = tid // 32
        lane = tid % 32
        n = qp[QP_SIZES, 0]
        s = width
        if tid < W:
            wstate[tid] = 0
        if tid == 0:
            waiting[0] = 0
            waiting[1] = 0
        if lane == 0:
            top[wi] = s - 1
        cuda.syncthreads()

        found = int64(0)
        iters = int64(0)
        idle = int64(0)
        steals = int64(0)
        done_by_stop = False
        while True:
            cuda.syncwarp()
            if stopped(ctrl, lane, limit_unique):
                done_by_stop = True
                break
            d = top[wi]
            if d < s:
                # ---- take seeds from the pool
                base = int64(0)
                if lane == 0:
                    base = cuda.atomic.add(ctrl, C_SEED, R)
                base = cuda.shfl_sync(FULL, base, 0) + seed_lo
                cnt = min(int64(R), seed_hi - base)
                if cnt > 0:
                    if lane < cnt:
                        mv[wi, s - 1, lane] = int32(base + lane)
                        src, skip, ln = group_of(mv, par, wi, s, pool, width, offsets, neighbors, qp, s, lane)
                        gsrc[wi, s, lane] = src
                        gskip[wi, s, lane] = skip
                        glen[wi, s, lane] = ln
                    if lane == 0:
                        cg[wi, s] = 0
                        co[wi, s] = 0
                        ng[wi, s] = int32(cnt)
                        top[wi] = s
                    continue
                if not stealing:
                    break
                # ---- idle: wait for a busy warp of the block to hand over work
                if lane == 0:
                    cuda.atomic.exch(wstate, wi, 1)
                    cuda.atomic.add(waiting, 0, 1)
                    cuda.atomic.add(waiting, 1, 1)
                # lane 0 polls alone (back-off 32 ns .. 1 us); the other lanes wait in the shuffle
                st = int32(0)
                if lane == 0:
                    pause = 32
                    while True:
                        st = cuda.atomic.add(wstate, wi, 0)
                        if st == 2 or cuda.atomic.add(waiting, 1, 0) >= W:
                            break
                        cuda.nanosleep(pause)
                        if pause < 1024:
                            pause *= 2
                st = cuda.shfl_sync(FULL, st, 0)
                if st != 2:
                    break
                cuda.threadfence_block()
                if lane == 0:
                    cuda.atomic.exch(wstate, wi, 0)
                continue

            if stealing:
                # ---- hand half of a level's untouched task groups to a waiting warp
                want = int32(0)
                if lane == 0:
                    want = cuda.atomic.add(waiting, 0, 0)
                want = cuda.shfl_sync(FULL, want, 0)
                if want > 0:
                    lvl = int32(-1)
                    target = int32(-1)
                    if lane == 0:
                        for t in range(s, d + 1):
                            if ng[wi, t] - cg[wi, t] - 1 >= 2:
                                lvl = t
                                break
                        if lvl >= 0:
                            for i in range(W):
                                if i != wi and cuda.atomic.cas(wstate, i, 1, 3) == 1:
                                    target = i
                                    break
                            if target >= 0:
                                cuda.atomic.sub(waiting, 0, 1)
                                cuda.atomic.sub(waiting, 1, 1)
                    lvl = cuda.shfl_sync(FULL, lvl, 0)
                    target = cuda.shfl_sync(FULL, target, 0)
                    if target >= 0:
                        for j in range(s - 1, lvl):
                            mv[target, j, lane] = mv[wi, j, lane]
                            par[target, j, lane] = par[wi, j, lane]
                        gsrc[target, lvl, lane] = gsrc[wi, lvl, lane]
                        glen[target, lvl, lane] = glen[wi, lvl, lane]
                        gskip[target, lvl, lane] = gskip[wi, lvl, lane]
                        cuda.threadfence_block()        # every lane's copies, before the hand-over
                        cuda.syncwarp()
                        if lane == 0:
                            for j in range(s, lvl):
                                cg[target, j] = ng[wi, j]
                                co[target, j] = 0
                                ng[target, j] = ng[wi, j]
                            total = ng[wi, lvl]
                            mid = total - (total - cg[wi, lvl] - 1) // 2
                            cg[target, lvl] = mid
                            co[target, lvl] = 0
                            ng[target, lvl] = total
                            top[target] = lvl
                            ng[wi, lvl] = mid
                            steals += 1
                            cuda.threadfence_block()
                            cuda.atomic.exch(wstate, target, 2)
                        cuda.syncwarp()

            # ---- fetch up to 32 tasks from the virtual task pool of level d
            g0 = cg[wi, d]
            o0 = co[wi, d]
            groups = ng[wi, d]
            g = g0
            r = o0 + lane
            if batch:
                while g < groups and r >= glen[wi, d, g]:
                    r -= glen[wi, d, g]
                    g += 1
            elif g < groups and r >= glen[wi, d, g]:
                g = groups
            has = g < groups
            # cursor after this batch (lane 31 walks to task 32, then broadcasts)
            ng_g = g0
            ng_o = o0 + 32
            if lane == 31:
                if batch:
                    ng_g = g
                    ng_o = r + 1
                    while ng_g < groups and ng_o >= glen[wi, d, ng_g]:
                        ng_o -= glen[wi, d, ng_g]
                        ng_g += 1
                elif g0 < groups and ng_o >= glen[wi, d, g0]:
                    ng_g = g0 + 1
                    ng_o = 0
                    while ng_g < groups and glen[wi, d, ng_g] == 0:
                        ng_g += 1
            ng_g = cuda.shfl_sync(FULL, ng_g, 31)
            ng_o = cuda.shfl_sync(FULL, ng_o, 31)

            v = int32(-1)
            ok = False
            nsrc = int32(-1)
            nskip = int32(-1)
            nbound = int32(NO_BOUND)
            if has:
                v = neighbors[offsets[gsrc[wi, d, g]] + r]
                if ((cand_mask[v] >> d) & 1) != 0:
                    ok, nsrc, nskip, nbound = check_task(mv, par, wi, s, pool, width, offsets, neighbors,
                                                         qp, n, d, v, g, gskip[wi, d, g])
            mask = cuda.ballot_sync(FULL, ok)
            busy = cuda.ballot_sync(FULL, has)
            if lane == 0:
                iters += 1
                idle += 32 - cuda.popc(busy)
            descend = False
            if d == n - 1:
                found += leaf_output(ok, mask, lane, mv, par, wi, s, pool, width, d, v, g, ctrl, emb,
                                     emb_cap, limit_unique)
            else:
                descend = mask != 0
            cuda.syncwarp()
            if lane == 0:
                cg[wi, d] = ng_g
                co[wi, d] = ng_o
            if descend:
                if ok:
                    k = cuda.popc(mask & cuda.lanemask_lt())
                    mv[wi, d, k] = v
                    par[wi, d, k] = g
                    gsrc[wi, d + 1, k] = nsrc
                    gskip[wi, d + 1, k] = nskip
                    glen[wi, d + 1, k] = group_length(offsets, neighbors, nsrc, nbound)
                if lane == 0:
                    cg[wi, d + 1] = 0
                    co[wi, d + 1] = 0
                    ng[wi, d + 1] = cuda.popc(mask)
                    top[wi] = d + 1
            elif lane == 0 and ng_g >= groups:
                t = d - 1
                while t >= s and cg[wi, t] >= ng[wi, t]:
                    t -= 1
                top[wi] = t

        if lane == 0:
            if done_by_stop and stealing:
                cuda.atomic.exch(wstate, wi, 4)
                cuda.atomic.add(waiting, 1, 1)
            cuda.atomic.add(ctrl, C_COUNT, found)
            cuda.atomic.add(ctrl, C_ITERS, iters)
            cuda.atomic.add(ctrl, C_IDLE, idle)
            cuda.atomic.add(ctrl, C_STEALS, steals)

    return fine_dfs


@functools.lru_cache(maxsize=None)
def coarse_kernel(warps: int, unroll: int):
    """The coarse-grained DFS kernel (Naive for ``unroll=1``, Unroll-k otherwise)."""
    W, K, L = warps, unroll, 32

    @cuda.jit
    def coarse_dfs(offsets, neighbors, cand_mask, qp, pool, width, seed_lo, seed_hi, ctrl, emb,
                   emb_cap, limit_unique, fc_v, fc_p):
        pos = cuda.shared.array((W, L), int32)
        size = cuda.shared.array((W, L), int32)
        top = cuda.shared.array(W, int32)
        csrc = cuda.shared.array((W, K), int32)
        clen = cuda.shared.array((W, K), int32)
        cskip = cuda.shared.array((W, K), int32)

        tid = cuda.threadIdx.x
        wi = tid // 32
        lane = tid % 32
        gw = cuda.blockIdx.x * W + wi
        n = qp[QP_SIZES, 0]
        s = width
        if lane == 0:
            top[wi] = s - 1
        found = int64(0)
        iters = int64(0)
        idle = int64(0)
        while True:
            cuda.syncwarp()
            if stopped(ctrl, lane, limit_unique):
                break
            d = top[wi]
            if d < s:
                base = int64(0)
                if lane == 0:
                    base = cuda.atomic.add(ctrl, C_SEED, K)
                base = cuda.shfl_sync(FULL, base, 0) + seed_lo
                cnt = min(int64(K), seed_hi - base)
                if cnt <= 0:
                    break
                if lane < cnt:
                    fc_v[gw, s - 1, lane] = int32(base + lane)
                if lane == 0:
                    pos[wi, s - 1] = 0
                    size[wi, s - 1] = int32(cnt)
                    top[wi] = s
                continue
            p0 = pos[wi, d - 1]
            cnt = min(K, size[wi, d - 1] - p0)
            if cnt <= 0:
                cuda.syncwarp()
                if lane == 0:
                    top[wi] = d - 1
                continue
            if lane < cnt:
                src, skip, ln = group_of(fc_v, fc_p, gw, s, pool, width, offsets, neighbors, qp, d, p0 + lane)
                csrc[wi, lane] = src
                cskip[wi, lane] = skip
                clen[wi, lane] = ln
            cuda.syncwarp()
            total = int64(0)
            for i in range(cnt):
                total += clen[wi, i]
            out = int32(0)
            b = int64(0)
            while b < total:
                g = 0
                r = b + lane
                while g < cnt and r >= clen[wi, g]:
                    r -= clen[wi, g]
                    g += 1
                has = g < cnt
                v = int32(-1)
                ok = False
                if has:
                    v = neighbors[offsets[csrc[wi, g]] + r]
                    if ((cand_mask[v] >> d) & 1) != 0:
                        ok, nsrc, nskip, nbound = check_task(fc_v, fc_p, gw, s, pool, width, offsets,
                                                             neighbors, qp, n, d, v, p0 + g, cskip[wi, g])
                mask = cuda.ballot_sync(FULL, ok)
                busy = cuda.ballot_sync(FULL, has)
                if lane == 0:
                    iters += 1
                    idle += 32 - cuda.popc(busy)
                if d == n - 1:
                    found += leaf_output(ok, mask, lane, fc_v, fc_p, gw, s, pool, width, d, v, p0 + g,
                                         ctrl, emb, emb_cap, limit_unique)
                    if stopped(ctrl, lane, limit_unique):
                        break
                elif ok:
                    k = out + cuda.popc(mask & cuda.lanemask_lt())
                    fc_v[gw, d, k] = v
                    fc_p[gw, d, k] = p0 + g
                out += cuda.popc(mask)
                b += 32
            cuda.syncwarp()
            if lane == 0:
                pos[wi, d - 1] = p0 + cnt
                if d < n - 1 and out > 0:
                    pos[wi, d] = 0
                    size[wi, d] = out
                    top[wi] = d + 1
        if lane == 0:
            cuda.atomic.add(ctrl, C_COUNT, found)
            cuda.atomic.add(ctrl, C_ITERS, iters)
            cuda.atomic.add(ctrl, C_IDLE, idle)

    return coarse_dfs


@cuda.jit
def reset_ctrl(ctrl, seed_cursor_only):
    """Zero the control block before the first launch of a query; between the chunks of one
    query only the seed cursor is reset (counts and statistics accumulate)."""
    i = cuda.grid(1)
    if i < ctrl.size and (i == C_SEED or not seed_cursor_only):
        ctrl[i] = 0
