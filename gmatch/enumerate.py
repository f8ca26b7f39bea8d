"""gMatch search kernels (paper Sec. 3.2-3.4, Alg. 2; docs/papers.md).

Fine-grained model (:func:`fine_kernel`): a task is (partial match M, candidate x); a warp owns a
stack of levels x 32 slots in shared memory. Slot k of level d holds the index of the k-th valid
child of the last 32-task batch at level d and the slot of its parent; the child's task group
(its local candidates for position d+1) is the shortest row over the backward neighbours'
images, cut at the symmetry-breaking bound (rows are sorted: the authors' "reach_bound"). Each
iteration fetches the next 32 tasks of the level's virtual task pool (with ``batch`` across task
groups: batch exploration); a ballot gives the valid ones; the warp descends or backtracks, all
control flow warp-uniform. Partial matches are never materialised: a lane follows parent
pointers, except that the last level's tasks read the tests a partial match of the level above
wrote once (its checks row, ``leaf_checks``). The graph read is chosen at compile time
(:func:`search_functions`): the candidate graph in compact indices (:mod:`gmatch.filter`, the
authors' bitmap build) or the data graph (every task also tests its LDF/NLF bit). Seeds come
from the BFS seed pool (:mod:`gmatch.balance`).

Work stealing (Sec. 3.6): in-block (``STEAL_BLOCK``, the authors' code) hands the upper half of a
busy warp's shallowest splittable level to a waiting warp through shared memory; across blocks
(``STEAL_GLOBAL``, the default: the paper's global queue, which the authors' code does not build)
idle warps post their ids in a 32-slot global mailbox and get the levels through a global
hand-over record; ``STEAL_MAILBOX`` sends every hand-over through global memory (an ablation).
A level is splittable with two untouched task groups or (``split_groups``) one group with
``SPLIT_TASKS`` untouched tasks, a hub's row, whose upper half is given away. Count-only searches
over the candidate graph count their trailing positions instead of enumerating them: countable
leaves (:func:`search_functions` ``leaf_product``) or the last position (``count_position``);
each leaf step is a kernel of its own (:func:`fine_kernel` ``leaves``).
Coarse-grained baseline (:func:`coarse_kernel`; Sec. 2, Alg. 1, STMatch-style): a warp extends
``unroll`` partial matches at a time through global feasible-candidate buffers (``unroll=1``:
Naive). Both kernels poll the stop flag ``ctrl[C_STOP]`` (a limit, or the host's deadline) and
count idle lanes per iteration (Tables 2/6: idle lanes / (32 x iterations), as the authors'
IDLE_CNT build). Counts are unique embeddings; docs/decisions.md ("gMatch's search kernels")
gives the choices where the paper is silent.
"""

from __future__ import annotations

import functools
import types

from numba import int8, int32, int64
from numba import uint32 as u32  # array indices: Numba skips the negative-index wraparound for unsigned ones
from numba import uint64 as u64

from common.gpu.cudasim import FULL_MASK as FULL
from common.gpu.device_functions import contains, lower_bound
from common.gpu.runtime import cuda, jit

from .filter import (
    QP_BACKWARD,
    QP_CBASE,
    QP_CCOUNT,
    QP_CSIZE,
    QP_GLOW,
    QP_LEAFPAR,
    QP_RESTRICT,
    QP_SAME,
    QP_SIZES,
    QP_WORDS,
)
from .order import MAX_QUERY_VERTICES as MAX_LEVELS  # positions of a query

NO_BOUND = 0x7FFFFFFF
BIG_DEGREE = 0x7FFFFFFFFFFFFFFF

# ctrl (int64) slots, shared by the kernels and the engine
C_SEED, C_COUNT, C_STOP, C_ITERS, C_IDLE, C_STEALS, C_EMB = 0, 1, 2, 3, 4, 5, 6
C_GSTEALS, C_BUSY, C_DONE, C_POSTED = 7, 8, 9, 10
C_FINISHED = 11               # warps of the query that left with no stop flag raised (fine kernel)
C_SEED_LO, C_SEED_HI, C_LIMIT = 12, 13, 14    # the query's seed range and unique-match limit (set by the host)
C_COUNT_HI = 15               # high word of the 128-bit count (C_COUNT, read as unsigned, the low one)
C_CAND = 16                   # 32 slots: |C(d)| per position, copied from the filter's counts (fine kernel)
C_COUNT_BIG = C_CAND + 32     # nonzero: a count past the 128-bit words (at least BIG_COUNT unique matches)
CTRL_SIZE = C_COUNT_BIG + 1

# The count is exact in 128 bits (ctrl[C_COUNT_HI] * 2^64 + unsigned ctrl[C_COUNT]): a lane's own
# sum and a leaf product stay below COUNT_LIMB (int64 adds cannot overflow), a product that passes
# it goes to the control row at once in two limbs of base 2^62 (:func:`add_big_count`, rare path).
COUNT_LIMB = 1 << 62
SMALL_FACTOR = 1 << 31        # a product below it times a count (< 2^31) stays below COUNT_LIMB
BIG_COUNT = 1 << 124          # the lower bound a C_COUNT_BIG flag stands for

# what a valid lane at the last enumerated level does (``fine_kernel``'s ``leaves``, compile time):
# add one match; add the product of its countable leaves (:func:`search_functions` leaf_product);
# add the count of the last position (last_product, ``qp[QP_SIZES, 5]``); write its match and/or
# count it under a limit (leaf_output: ``collect`` or ``limit``)
LEAF_ONE, LEAF_PRODUCT, LEAF_LAST, LEAF_OUTPUT = 0, 1, 2, 3

# work-stealing scopes (``fine_kernel``'s ``stealing``)
STEAL_NONE, STEAL_BLOCK, STEAL_GLOBAL, STEAL_MAILBOX = 0, 1, 2, 3
MAILBOX = 32                  # global mailbox slots: mail[0:MAILBOX] (waiter id or -1)
POST_AFTER = 2                # poll rounds an idle warp waits for its own block before posting
POST_EVERY = 4                # then one CAS on one mailbox slot (the next one) every POST_EVERY rounds
GLOBAL_CHECK_INTERVAL = 16    # iterations between a busy warp's looks at the global mailbox
SPLIT_TASKS = 64              # untouched tasks of one task group worth splitting between two warps
STOP_POLL_INTERVAL = 32       # iterations between a warp's looks at the stop flag (deadline watch)
LEAF_CHECKS = 2               # tests per partial match the last level's checks row holds (``leaf_checks``)
# warp states in the block's shared wstate (block scope stealing)
B_BUSY, B_WAITING, B_GIFT, B_CLAIMED, B_EXITED = 0, 1, 2, 3, 4
# warp states in mail[MAILBOX + global warp id] (global scope)
W_BUSY, W_WAITING, W_SHARED_GIFT, W_CLAIMED, W_EXITED, W_GLOBAL_GIFT, W_TERMINATE = 0, 1, 2, 3, 4, 5, 6


def xfer_words(levels: int) -> int:
    """int32 words of one warp's global hand-over record: mi and par of every level, the task
    groups (source, length, skip) of the split level, (level, first group, groups, first
    offset) and the last level's checks rows."""
    return 2 * levels * 32 + 3 * 32 + 4 + LEAF_CHECKS * 32


# rows of the per-block shared copy ``sq`` of the query plan (see :func:`load_plan`)
S_BACK, S_RESTR, S_SAME, S_WORDS, S_CBASE, S_CSIZE, S_LEAFPAR, S_GLOW = range(8)
SQ_ROWS = 8


@cuda.jit(device=True)
def load_plan(qp, sq, tid):
    """Threads 0..31 copy the plan rows the search reads per task into shared memory."""
    if tid < 32:
        sq[S_BACK, u32(tid)] = qp[QP_BACKWARD, u32(tid)]
        sq[S_RESTR, u32(tid)] = qp[QP_RESTRICT, u32(tid)]
        sq[S_SAME, u32(tid)] = qp[QP_SAME, u32(tid)]
        sq[S_WORDS, u32(tid)] = qp[QP_WORDS, u32(tid)]
        sq[S_CBASE, u32(tid)] = qp[QP_CBASE, u32(tid)]
        sq[S_CSIZE, u32(tid)] = qp[QP_CSIZE, u32(tid)]
        sq[S_LEAFPAR, u32(tid)] = qp[QP_LEAFPAR, u32(tid)]
        sq[S_GLOW, u32(tid)] = qp[QP_GLOW, u32(tid)]


@cuda.jit(device=True)
def has_bit(mask, j):
    """Is bit j (0..31) of a position mask set?"""
    return (u32(u32(mask) >> (u32(j) & 31)) & 1) != 0


@cuda.jit(device=True)
def walk_up(mi, par, w, s, pool, width, j, cur, need, prow, in_pool):
    """One step up a partial match from position j (slot ``cur`` of level j while j >= s, the
    seed row at ``prow`` of the pool below s): (j's image, 0 on the stack where ``need`` lacks
    j; the slot of level j-1; the pool row; whether the walk has reached the pool)."""
    xj = int32(0)
    if j >= s:
        if has_bit(need, j):
            xj = mi[u32(w), u32(j), u32(cur)]
        cur = int32(par[u32(w), u32(j), u32(cur)])
    else:
        if not in_pool:
            prow = u64(mi[u32(w), u32(s - 1), u32(cur)]) * u64(width)
            in_pool = True
        xj = pool[prow + u64(j)]
    return xj, cur, prow, in_pool


@cuda.jit(device=True)
def add_count(ctrl, x):
    """Add 0 <= x < 2^63 to the query's 128-bit count: the low word ctrl[C_COUNT] wraps as an
    unsigned one, and the add that wraps it carries one into ctrl[C_COUNT_HI]."""
    old = cuda.atomic.add(ctrl, C_COUNT, x)
    if old < 0 and x > -(old + 1):              # old (unsigned) + x reached 2^64
        cuda.atomic.add(ctrl, C_COUNT_HI, 1)


@cuda.jit(device=True)
def mul_limbs(hi, lo, c):
    """(hi * 2^62 + lo) * c in limbs of base 2^62 (0 <= lo < 2^62, 0 <= c < 2^31), int64 only;
    hi = -1 when the product reaches 2^124."""
    a = lo >> 31
    b = lo & (SMALL_FACTOR - 1)
    ac = a * c                                  # < 2^62
    low = ((ac & (SMALL_FACTOR - 1)) << 31) + b * c   # < 2^63
    up = (ac >> 31) + (low >> 62)
    low = low & (COUNT_LIMB - 1)
    if c != 0 and hi > (COUNT_LIMB - 1 - up) // c:
        return int64(-1), low
    return hi * c + up, low


@cuda.jit(device=True)
def add_big_count(ctrl, hi, lo):
    """Add hi * 2^62 + lo (limbs of :func:`mul_limbs`; hi = -1: past 2^124) to the 128-bit count;
    a count that passes the words raises ctrl[C_COUNT_BIG] instead."""
    if hi < 0:
        cuda.atomic.exch(ctrl, C_COUNT_BIG, 1)
        return
    add_count(ctrl, lo)
    k = hi & 3
    while k > 0:
        add_count(ctrl, int64(COUNT_LIMB))
        k -= 1
    top = hi >> 2
    if top > 0:
        old = cuda.atomic.add(ctrl, C_COUNT_HI, top)
        if old + top >= COUNT_LIMB:
            cuda.atomic.exch(ctrl, C_COUNT_BIG, 1)


@functools.lru_cache(maxsize=None)
def search_functions(cg: bool):
    """The per-task device functions over the graph tuple G = (off, ent, bitmap, cset, eg, cand).

    ``cg`` (compile time): G is the candidate graph in compact indices (a partial match holds
    candidate indices; the task group of position d given the index x of position j's image is row
    ``eg[32 d + j] + x`` of (off, ent); adjacency is one bit of ``bitmap``; ``cset`` maps indices to
    data vertices). Otherwise G is the data graph's CSR (indices are data vertices, a task group
    is an adjacency list, adjacency a binary search) and ``cand`` holds the LDF/NLF bits."""

    @cuda.jit(device=True)
    def real_id(G, sq, d, x):
        """Data vertex of index x at position d."""
        if cg:
            return G[3][u64(u32(sq[S_CBASE, u32(d)] + x))]
        return x

    @cuda.jit(device=True)
    def row_of(G, d, j, xj):
        """Row listing the candidates of position d adjacent to xj (the image of position j)."""
        if cg:
            return G[4][u64(d * 32 + j)] + xj
        return xj

    @cuda.jit(device=True)
    def row_length(G, row):
        return int32(G[0][u64(row + 1)] - G[0][u64(row)])

    @cuda.jit(device=True)
    def group_start(G, key):
        """Where the entries of a stored task group begin (CG mode stores the start itself)."""
        if cg:
            return key
        return G[0][u64(key)]

    @cuda.jit(device=True)
    def adjacency_key(G, sq, d, j, xj):
        """What testing adjacency to xj (the image of position j) reads for a candidate of
        position d: the first bitmap word of xj's row (candidate graph), or xj itself."""
        if cg:
            return int32(u32(G[4][u64(1024 + d * 32 + j)]) + u32(xj) * u32(sq[S_WORDS, u32(d)]))
        return xj

    @cuda.jit(device=True)
    def adjacent_to_key(G, key, x):
        """Is index x adjacent to the image whose :func:`adjacency_key` is ``key``?"""
        if cg:
            word = G[2][u64(u32(key)) + (u32(x) >> 5)]
            return ((word >> (u32(x) & 31)) & 1) != 0
        return contains(G[1], G[0][u64(key)], G[0][u64(key + 1)], x)

    @cuda.jit(device=True)
    def adjacent(G, sq, d, j, xj, x):
        """Is index x (position d) adjacent to index xj (position j)?"""
        return adjacent_to_key(G, adjacency_key(G, sq, d, j, xj), x)

    @cuda.jit(device=True)
    def validate(mi, par, w, s, pool, width, G, sq, d, x, parent, skip):
        """Is candidate x valid at position d (parent slot ``parent`` of level d-1)? Checks
        adjacency to every backward neighbour but ``skip`` (whose row supplied x) and
        injectivity against the earlier positions with d's label; the walk up the parent
        pointers stops at the lowest position it needs."""
        back = sq[S_BACK, u32(d)]
        same = int32(sq[S_SAME, u32(d)] & ~back)   # an image x is adjacent to differs from x (no self-loops)
        adj = back                       # the rows x must be in: every backward neighbour's but skip's
        if skip >= 0:
            adj = int32(back & ~(int32(1) << skip))
        need = int32(adj | same)
        if need == 0:
            return True                  # x came from the only row it had to be in
        lo = int32(cuda.ffs(need) - 1)   # the lowest position still to check
        rx = int32(-1)
        if same != 0:
            rx = real_id(G, sq, d, x)
        cur = int32(parent)
        j = int32(d - 1)
        while j >= s and j >= lo:
            if has_bit(need, j):
                xj = mi[u32(w), u32(j), u32(cur)]
                if has_bit(adj, j) and not adjacent(G, sq, d, j, xj, x):
                    return False
                if has_bit(same, j) and real_id(G, sq, j, xj) == rx:
                    return False
            cur = int32(par[u32(w), u32(j), u32(cur)])
            j = int32(j - 1)
        if j >= lo:
            prow = u64(mi[u32(w), u32(s - 1), u32(cur)]) * u64(width)
            while j >= lo:
                xj = pool[prow + u64(j)]
                if has_bit(adj, j) and not adjacent(G, sq, d, j, xj, x):
                    return False
                if has_bit(same, j) and real_id(G, sq, j, xj) == rx:
                    return False
                j = int32(j - 1)
        return True

    @cuda.jit(device=True)
    def group(mi, par, w, s, pool, width, G, sq, e, slot):
        """Task group of position e for the partial match ending at slot ``slot`` of level e-1:
        (key, skip, length) = the shortest row over e's backward neighbours, cut at the
        symmetry-breaking bound."""
        back = sq[S_BACK, u32(e)]
        restr = sq[S_RESTR, u32(e)]
        lo = sq[S_GLOW, u32(e)]
        best = int32(NO_BOUND)
        key = int32(-1)
        skip = int32(-1)
        bound = int32(NO_BOUND)
        need = int32(back | restr)
        cur = int32(slot)
        j = int32(e - 1)
        prow = u64(0)
        in_pool = False
        while j >= lo:
            xj, cur, prow, in_pool = walk_up(mi, par, w, s, pool, width, j, cur, need, prow, in_pool)
            if has_bit(back, j):
                row = row_of(G, e, j, xj)
                length = row_length(G, row)
                if length < best:
                    best = length
                    key = int32(G[0][u64(row)]) if cg else int32(row)
                    skip = j
            if has_bit(restr, j):
                rv = real_id(G, sq, j, xj)
                if rv < bound:
                    bound = rv
            j = int32(j - 1)
        if key < 0:
            return key, skip, int32(0)
        if bound != NO_BOUND:
            start = group_start(G, key)
            cut = bound
            if cg:
                cb = sq[S_CBASE, u32(e)]
                cut = lower_bound(G[3], cb, cb + sq[S_CSIZE, u32(e)], bound) - cb
            best = int32(lower_bound(G[1], start, start + best, cut) - start)
        return key, skip, best

    @cuda.jit(device=True)
    def leaf_checks(mi, par, w, s, pool, width, G, sq, e, slot, skip, checks):
        """checks[w, slot]: what :func:`validate_leaf` tests a candidate of position e against,
        for the partial match ending at slot ``slot`` of level e-1 whose task group came from
        position ``skip``'s row: the :func:`adjacency_key` of every other backward neighbour's
        image (descending positions), then the data vertex of every earlier non-adjacent position
        with e's label. One walk up the parent pointers per partial match instead of one per task."""
        back = sq[S_BACK, u32(e)]
        adj = back
        if skip >= 0:
            adj = int32(back & ~(int32(1) << skip))
        same = int32(sq[S_SAME, u32(e)] & ~back)
        need = int32(adj | same)
        if need == 0:
            return
        lo = int32(cuda.ffs(need) - 1)
        ka = int32(0)
        ks = int32(cuda.popc(adj))
        cur = int32(slot)
        j = int32(e - 1)
        prow = u64(0)
        in_pool = False
        while j >= lo:
            xj, cur, prow, in_pool = walk_up(mi, par, w, s, pool, width, j, cur, need, prow, in_pool)
            if has_bit(adj, j):
                checks[u32(w), u32(slot), u32(ka)] = adjacency_key(G, sq, e, j, xj)
                ka = int32(ka + 1)
            if has_bit(same, j):
                checks[u32(w), u32(slot), u32(ks)] = real_id(G, sq, j, xj)
                ks = int32(ks + 1)
            j = int32(j - 1)

    @cuda.jit(device=True)
    def validate_leaf(G, sq, w, d, x, parent, skip, checks):
        """:func:`validate` from the parent's :func:`leaf_checks` row: no walk up the stack."""
        back = sq[S_BACK, u32(d)]
        adj = back
        if skip >= 0:
            adj = int32(back & ~(int32(1) << skip))
        tests = int32(cuda.popc(adj))
        k = int32(0)
        while k < tests:
            if not adjacent_to_key(G, checks[u32(w), u32(parent), u32(k)], x):
                return False
            k = int32(k + 1)
        same = int32(sq[S_SAME, u32(d)] & ~back)
        if same != 0:
            rx = real_id(G, sq, d, x)
            tests = int32(tests + cuda.popc(same))
            while k < tests:
                if checks[u32(w), u32(parent), u32(k)] == rx:
                    return False
                k = int32(k + 1)
        return True

    @cuda.jit(device=True)
    def restriction_bound(G, sq, img, low, d, t):
        """The symmetry-breaking bound of position t: the least real id among the images
        ``img[low..d]`` of its restricting positions (``S_RESTR``), or ``NO_BOUND``."""
        restr = sq[S_RESTR, u32(t)]
        bound = int32(NO_BOUND)
        for c in range(low, d + 1):
            if ((restr >> c) & 1) != 0:
                rv = real_id(G, sq, c, img[u32(c)])
                if rv < bound:
                    bound = rv
        return bound

    @cuda.jit(device=True)
    def count_position(G, sq, img, low, d, t, bound):
        """Matches of counted position t given the images ``img[low..d]`` of the positions before
        it (candidate graph only): the length of its one parent's row (``S_LEAFPAR``: a countable
        leaf's, or the last position's one backward neighbour) below ``bound`` (its
        :func:`restriction_bound`, a rank cut: C(t) is sorted), minus the same-label images in that
        row (injectivity). A countable leaf has no restriction: its callers pass the constant
        ``NO_BOUND``, which the compiler folds, so the leaves' kernel carries no cut."""
        same = sq[S_SAME, u32(t)]
        p = sq[S_LEAFPAR, u32(t)]
        xp = img[u32(p)]
        row = row_of(G, t, p, xp)
        total = int64(row_length(G, row))
        if bound != NO_BOUND:
            cb = sq[S_CBASE, u32(t)]
            cut = int32(lower_bound(G[3], cb, cb + sq[S_CSIZE, u32(t)], bound) - cb)
            start = G[0][u64(row)]
            total = int64(lower_bound(G[1], start, start + total, cut) - start)
        if same != 0 and total > 0:
            cb = sq[S_CBASE, u32(t)]
            ce = cb + sq[S_CSIZE, u32(t)]
            for c in range(low, d + 1):
                if ((same >> c) & 1) != 0:
                    v = real_id(G, sq, c, img[u32(c)])
                    if v < bound:
                        r = lower_bound(G[3], cb, ce, v)
                        if r < ce and G[3][u64(r)] == v and adjacent(G, sq, t, p, xp, r - cb):
                            total -= 1
        return total

    @cuda.jit(device=True)
    def gather_images(img, mi, par, w, s, pool, width, low, d, x, parent):
        """img[low..d]: the images of positions low..d of the partial match that ends with x at
        position d (parent slot ``parent`` of level d-1), up the stack's parent pointers and then
        from the seed's pool row."""
        img[u32(d)] = x
        cur = int32(parent)
        j = d - 1
        prow = int64(-1)
        while j >= low:
            if j >= s:
                img[u32(j)] = mi[u32(w), u32(j), u32(cur)]
                cur = int32(par[u32(w), u32(j), u32(cur)])
            else:
                if prow < 0:
                    prow = int64(mi[u32(w), u32(s - 1), u32(cur)]) * width
                img[u32(j)] = pool[u64(prow + j)]
            j -= 1

    @cuda.jit(device=True)
    def leaf_product(mi, par, w, s, pool, width, G, sq, ne, n, low, d, x, parent, ctrl):
        """Matches of the trailing countable leaves (positions ne..n-1) given the partial match
        that ends with x at position d (candidate graph only): the product over the leaves of
        :func:`count_position`. A product
        that passes 2^62 is added to ``ctrl``'s count here (0 returned)."""
        img = cuda.local.array(MAX_LEVELS, int32)        # images of positions low..d
        gather_images(img, mi, par, w, s, pool, width, low, d, x, parent)
        total = int64(1)
        big = False                                      # the product in limbs (hi, total)
        hi = int64(0)
        for t in range(ne, n):
            count = count_position(G, sq, img, low, d, t, int32(NO_BOUND))
            if not big and total < SMALL_FACTOR:
                total *= count
            else:                                        # rare: past 2^31, on in 128 bits
                big = True
                if count == 0:                           # a zero factor: no product at all
                    hi, total = int64(0), int64(0)
                elif hi >= 0:
                    hi, total = mul_limbs(hi, total, int64(count))
        if big and hi != 0:                              # hi = -1: past 2^124
            add_big_count(ctrl, hi, total)
            return int64(0)
        return total

    @cuda.jit(device=True)
    def last_product(mi, par, w, s, pool, width, G, sq, n, low, d, x, parent):
        """The count of the last position (:func:`count_position`) given the partial match that
        ends with x at position d = n - 2 (candidate graph only)."""
        img = cuda.local.array(MAX_LEVELS, int32)        # images of positions low..d
        gather_images(img, mi, par, w, s, pool, width, low, d, x, parent)
        t = n - 1
        return count_position(G, sq, img, low, d, t, restriction_bound(G, sq, img, low, d, t))

    @cuda.jit(device=True)
    def write_embedding(mi, par, w, s, pool, width, G, sq, d, x, parent, emb, pos):
        """Write the full match ending with x at position d (data vertices) to emb[pos]."""
        emb[u64(pos), u64(d)] = real_id(G, sq, d, x)
        cur = int32(parent)
        j = d - 1
        while j >= 0:
            if j >= s:
                emb[u64(pos), u64(j)] = real_id(G, sq, j, mi[u32(w), u32(j), u32(cur)])
                cur = int32(par[u32(w), u32(j), u32(cur)])
            else:
                emb[u64(pos), u64(j)] = real_id(G, sq, j, pool[int64(mi[u32(w), u32(s - 1), u32(cur)]) * width + j])
            j -= 1

    @cuda.jit(device=True)
    def leaf_output(ok, mask, lane, mi, par, w, s, pool, width, G, sq, d, x, parent, ctrl, emb,
                    emb_cap, limit_unique):
        """Leaves of one batch when they must be enumerated (``collect`` or ``limit``): write
        them out and count them at once with a limit (raising the stop flag when it is reached);
        returns what lane 0 adds to its own count otherwise."""
        if emb_cap > 0:
            at = warp_append(ok, ctrl, C_EMB, lane)
            if ok and at < emb_cap:
                write_embedding(mi, par, w, s, pool, width, G, sq, d, x, parent, emb, at)
        found = cuda.popc(mask)
        if lane != 0 or found == 0:
            return int64(0)
        if limit_unique > 0:
            old = cuda.atomic.add(ctrl, C_COUNT, found)
            if old + found >= limit_unique:
                cuda.atomic.exch(ctrl, C_STOP, 1)
            return int64(0)
        return int64(found)

    return types.SimpleNamespace(real_id=real_id, row_of=row_of, row_length=row_length,
                                 group_start=group_start, adjacent=adjacent, validate=validate,
                                 group=group, leaf_product=leaf_product, last_product=last_product,
                                 leaf_output=leaf_output, leaf_checks=leaf_checks,
                                 validate_leaf=validate_leaf)


@cuda.jit(device=True)
def warp_append(ok, counter, slot, lane):
    """Warp-aggregated append: the warp's ``ok`` lanes reserve consecutive positions with one
    atomic add on counter[slot]; returns this lane's position (meaningful where ``ok``)."""
    mask = cuda.ballot_sync(FULL, ok)
    base = int64(0)
    if lane == 0 and mask != 0:
        base = cuda.atomic.add(counter, slot, cuda.popc(mask))
    base = cuda.shfl_sync(FULL, base, 0)
    return base + cuda.popc(mask & cuda.lanemask_lt())


@cuda.jit(device=True)
def claim_seeds(ctrl, lane, count, seed_lo, seed_hi):
    """The warp's next ``count`` seeds of [seed_lo, seed_hi): one atomic on the pool cursor by
    lane 0, broadcast; returns (first seed, how many; <= 0 once the pool is exhausted)."""
    base = int64(0)
    if lane == 0:
        base = cuda.atomic.add(ctrl, C_SEED, count)
    base = cuda.shfl_sync(FULL, base, 0) + seed_lo
    return base, min(int64(count), seed_hi - base)


@cuda.jit(device=True)
def stopped(ctrl, halt, lane, limit_unique, watch, polls):
    """Has the query's stop flag (``ctrl[C_STOP]``: its limit is reached) or the launch's halt
    flag (``halt[0]``: the host's deadline; in a single-query launch the same word) been raised?
    Polled (lane 0, L2 atomics, one shuffle) at every call when a limit is set, every
    ``STOP_POLL_INTERVAL`` calls (``polls``, warp-uniform, counts them) when only the host's
    deadline watch is on; otherwise no work at all."""
    if limit_unique > 0 or (watch != 0 and (polls & (STOP_POLL_INTERVAL - 1)) == 0):
        flag = int32(0)
        if lane == 0:
            if limit_unique > 0:
                flag = int32(cuda.atomic.add(ctrl, C_STOP, 0))
            if flag == 0 and watch != 0:
                flag = int32(cuda.atomic.add(halt, 0, 0))
        return cuda.shfl_sync(FULL, flag, 0) != 0
    return False


@cuda.jit(device=True)
def broadcast_termination(mail, total_warps, lane):
    """Wake every waiting warp of the grid with the terminate state (lane-parallel)."""
    i = lane
    while i < total_warps:
        cuda.atomic.cas(mail, MAILBOX + i, W_WAITING, W_TERMINATE)
        i += 32
    cuda.syncwarp()


@cuda.jit(device=True)
def leave_busy(mail, ctrl, gid):
    """Lane 0 of a warp that stops being busy (its state already written): returns 1 when it was
    the last busy warp and the first to see it (it must broadcast termination), 2 when the search
    is over, 0 when others still work."""
    cuda.threadfence()
    old = cuda.atomic.sub(ctrl, C_BUSY, 1)
    cuda.threadfence()
    if old == 1:
        if cuda.atomic.exch(ctrl, C_DONE, 1) == 0:
            return int32(1)
        return int32(2)
    if cuda.atomic.add(ctrl, C_DONE, 0) != 0:
        return int32(2)
    return int32(0)


@functools.lru_cache(maxsize=None)
def fine_kernel(levels: int, warps: int, batch: bool, stealing: int, roots: int, indexed: bool,
                idle_stats: bool = False, max_registers: int | None = None, leaves: int = LEAF_OUTPUT,
                split_groups: bool = True, leaf_checks: bool = True):
    """The fine-grained DFS kernel for stacks of ``levels`` levels and ``warps`` warps per block;
    ``stealing`` is STEAL_NONE, STEAL_BLOCK, STEAL_GLOBAL or STEAL_MAILBOX (the global scheme with
    every hand-over through the mailbox and global memory, no shared-memory fast path);
    ``indexed``: the graph tuple is the candidate graph (see :func:`search_functions`);
    ``idle_stats`` compiles in the idle-lane count (two ballots per iteration);
    ``max_registers`` caps registers per thread (None: the compiler's choice); ``leaves``
    (LEAF_ONE, LEAF_PRODUCT, LEAF_LAST or LEAF_OUTPUT) is what a valid lane of the last enumerated
    level does, compiled alone so that a search carries only its own leaf step (the others' live
    values spill registers); the first three count only; ``split_groups`` lets a warp
    give away half of one task group's untouched tasks (:func:`splittable`), not only whole groups;
    ``leaf_checks`` (candidate graph only): the last enumerated level tests its tasks against a
    row of checks written once per partial match of the level above (:func:`search_functions`
    ``leaf_checks``) where they fit ``LEAF_CHECKS`` entries, instead of walking up the stack per
    task."""
    L, W, R = levels, warps, roots
    fn = search_functions(indexed)
    validate, group, leaf_product, last_product, leaf_output, group_start = (
        fn.validate, fn.group, fn.leaf_product, fn.last_product, fn.leaf_output, fn.group_start)
    write_checks, validate_leaf = fn.leaf_checks, fn.validate_leaf
    CHECKS = leaf_checks and indexed              # the data graph's adjacency test is a search: no rows
    KC = LEAF_CHECKS if CHECKS else 1
    LEAVES = leaves
    COUNT_LAST = leaves == LEAF_LAST
    SPLIT = split_groups
    IDLE = idle_stats
    CHECK_BIT = not indexed                       # data-graph mode: test the LDF/NLF bit per task
    STEAL = stealing != STEAL_NONE
    GLOBAL = stealing == STEAL_GLOBAL or stealing == STEAL_MAILBOX
    LOCAL_FAST = stealing != STEAL_MAILBOX        # in-block hand-over through shared memory
    POST = POST_AFTER if LOCAL_FAST else 0
    XG = 2 * L * 32               # xfer: task groups of the split level
    XH = XG + 3 * 32              # xfer: header (level, first group, groups, first offset)
    XC = XH + 4                   # xfer: the last level's checks rows

    cap = {} if max_registers is None else {"max_registers": max_registers}

    # The warp's stack (shared memory), passed to the steps below as one tuple:
    # mi/par: child index and parent slot per (level, slot); gsrc/glen/gskip: task group per
    # (level, entry); cg/co/ng: the level's cursor (group, offset) and group count; top: stack top;
    # checks: per slot of level last-1, the tests of its children at the last level (``checked``:
    # the last level where it is in the stack and its tests fit a row, else -1).

    @cuda.jit(device=True)
    def take_seeds(S, wi, lane, s, pool, width, G, sq, ctrl, seed_lo, seed_hi, checked):
        """Fetch the next ``R`` seeds into the stack's bottom level (their task groups at level
        s); False when the pool is exhausted."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        base, cnt = claim_seeds(ctrl, lane, R, seed_lo, seed_hi)
        if cnt <= 0:
            return False
        if lane < cnt:
            mi[u32(wi), u32(s - 1), u32(lane)] = int32(base + lane)
            src, skip, ln = group(mi, par, wi, s, pool, width, G, sq, s, lane)
            if CHECKS and s == checked:
                write_checks(mi, par, wi, s, pool, width, G, sq, s, lane, skip, checks)
            if CHECK_BIT and width == 1 and (G[5][pool[u64(base + lane)]] & 1) == 0:
                ln = int32(0)                      # a label-range seed that fails LDF/NLF
            gsrc[u32(wi), u32(s), u32(lane)] = src
            gskip[u32(wi), u32(s), u32(lane)] = skip
            glen[u32(wi), u32(s), u32(lane)] = ln
        if lane == 0:
            cg[u32(wi), u32(s)] = 0
            co[u32(wi), u32(s)] = 0
            ng[u32(wi), u32(s)] = int32(cnt)
            top[u32(wi)] = s
        return True

    @cuda.jit(device=True)
    def receive_global_gift(S, wi, lane, gid, s, xfer, checked):
        """Copy a hand-over record written by another SM into this warp's stack; the record is
        read with L2 atomics, never from this SM's (non-coherent) L1."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        cuda.threadfence()
        lvl = cuda.atomic.add(xfer, (gid, XH), 0)
        for j in range(s - 1, lvl):
            mi[u32(wi), u32(j), u32(lane)] = cuda.atomic.add(xfer, (gid, j * 32 + lane), 0)
            par[u32(wi), u32(j), u32(lane)] = int8(cuda.atomic.add(xfer, (gid, (L + j) * 32 + lane), 0))
        gsrc[u32(wi), u32(lvl), u32(lane)] = cuda.atomic.add(xfer, (gid, XG + lane), 0)
        glen[u32(wi), u32(lvl), u32(lane)] = cuda.atomic.add(xfer, (gid, XG + 32 + lane), 0)
        gskip[u32(wi), u32(lvl), u32(lane)] = int8(cuda.atomic.add(xfer, (gid, XG + 64 + lane), 0))
        if CHECKS and lvl == checked:
            for k in range(KC):
                checks[u32(wi), u32(lane), u32(k)] = cuda.atomic.add(xfer, (gid, XC + k * 32 + lane), 0)
        cuda.syncwarp()
        if lane == 0:
            for j in range(s, lvl):
                cg[u32(wi), u32(j)] = 0
                co[u32(wi), u32(j)] = 0
                ng[u32(wi), u32(j)] = 0
            cg[u32(wi), u32(lvl)] = cuda.atomic.add(xfer, (gid, XH + 1), 0)
            co[u32(wi), u32(lvl)] = cuda.atomic.add(xfer, (gid, XH + 3), 0)
            ng[u32(wi), u32(lvl)] = cuda.atomic.add(xfer, (gid, XH + 2), 0)
            top[u32(wi)] = lvl

    @cuda.jit(device=True)
    def wait_global(S, wi, lane, gid, s, total_warps, mail, ctrl, xfer, waiting, checked):
        """Idle warp, global scope: wait for a warp of this block, then post in the global
        mailbox; True once work was handed over, False when no warp of the grid is busy."""
        verdict = int32(0)
        if lane == 0:
            cuda.atomic.exch(mail, MAILBOX + gid, W_WAITING)
            cuda.atomic.add(waiting, 0, 1)
            verdict = leave_busy(mail, ctrl, gid)
        verdict = cuda.shfl_sync(FULL, verdict, 0)
        if verdict == 1:
            broadcast_termination(mail, total_warps, lane)
        st = int32(W_TERMINATE)
        if lane == 0 and verdict == 0:             # lane 0 polls alone; the others wait in the shuffle
            slot = -1
            pause = 32
            rounds = 0
            while True:
                st = cuda.atomic.add(mail, MAILBOX + gid, 0)
                if st == W_SHARED_GIFT or st == W_GLOBAL_GIFT or st == W_TERMINATE:
                    break
                if (slot < 0 and st == W_WAITING and rounds >= POST
                        and (rounds - POST) % POST_EVERY == 0):
                    i = (gid + (rounds - POST) // POST_EVERY) % MAILBOX
                    if cuda.atomic.cas(mail, i, -1, gid) == -1:
                        slot = i
                        cuda.atomic.add(ctrl, C_POSTED, 1)
                cuda.nanosleep(pause)
                if pause < 1024:
                    pause *= 2
                rounds += 1
            if slot >= 0 and cuda.atomic.cas(mail, slot, gid, -1) == gid:
                cuda.atomic.sub(ctrl, C_POSTED, 1)
        if lane == 0:
            cuda.atomic.sub(waiting, 0, 1)
        st = cuda.shfl_sync(FULL, st, 0)
        if st == W_TERMINATE:
            return False
        if st == W_GLOBAL_GIFT:
            receive_global_gift(S, wi, lane, gid, s, xfer, checked)
        else:
            cuda.threadfence_block()
        if lane == 0:
            cuda.atomic.exch(mail, MAILBOX + gid, W_BUSY)
        return True

    @cuda.jit(device=True)
    def wait_block(wi, lane, wstate, waiting):
        """Idle warp, block scope: True once a busy warp of the block handed work over, False
        when every warp of the block waits or has exited (lane 0 polls with back-off 32 ns ..
        1 us; the other lanes wait in the shuffle)."""
        if lane == 0:
            cuda.atomic.exch(wstate, wi, B_WAITING)
            cuda.atomic.add(waiting, 0, 1)
            cuda.atomic.add(waiting, 1, 1)
        st = int32(0)
        if lane == 0:
            pause = 32
            while True:
                st = cuda.atomic.add(wstate, wi, 0)
                if st == B_GIFT or cuda.atomic.add(waiting, 1, 0) >= W:
                    break
                cuda.nanosleep(pause)
                if pause < 1024:
                    pause *= 2
        st = cuda.shfl_sync(FULL, st, 0)
        if st != B_GIFT:
            return False
        cuda.threadfence_block()
        if lane == 0:
            cuda.atomic.exch(wstate, wi, B_BUSY)
        return True

    @cuda.jit(device=True)
    def splittable(S, wi, t):
        """Can level t give work away: at least two untouched task groups, or one group (the
        current one) with at least ``SPLIT_TASKS`` untouched tasks (a hub's row)?"""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        g = cg[u32(wi), u32(t)]
        if ng[u32(wi), u32(t)] - g - 1 >= 2:
            return True
        if not SPLIT:
            return False
        return g < ng[u32(wi), u32(t)] and glen[u32(wi), u32(t), u32(g)] - co[u32(wi), u32(t)] >= SPLIT_TASKS

    @cuda.jit(device=True)
    def split_point(S, wi, t):
        """Lane 0 of the giver: where level t is cut, as (first group, first offset, groups) of the
        part given away; the giver keeps the rest (its group count or current group shortened).
        Two or more untouched groups: the upper half of them; else the upper half of the current
        group's untouched tasks."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        total = ng[u32(wi), u32(t)]
        g = cg[u32(wi), u32(t)]
        if total - g - 1 >= 2:
            mid = int32(total - (total - g - 1) // 2)
            ng[u32(wi), u32(t)] = mid
            return mid, int32(0), int32(total)
        cut = int32(co[u32(wi), u32(t)] + (glen[u32(wi), u32(t), u32(g)] - co[u32(wi), u32(t)] + 1) // 2)
        glen[u32(wi), u32(t), u32(g)] = cut
        return int32(g), cut, int32(g + 1)

    @cuda.jit(device=True)
    def find_waiter(S, wi, gid, s, d, iters, mail, ctrl, wstate, waiting):
        """Lane 0 of a busy warp: the shallowest level with at least two untouched task groups
        and a waiting warp claimed for it (a warp of this block first, then, global scope, one
        posted in the mailbox); returns (level, target, remote) with target -1 for none."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        lvl = int32(-1)
        target = int32(-1)
        remote = int32(0)
        want = int32(0)
        if LOCAL_FAST:
            want = cuda.atomic.add(waiting, 0, 0)
        posted = int64(0)
        if GLOBAL and iters % GLOBAL_CHECK_INTERVAL == 0:
            posted = cuda.atomic.add(ctrl, C_POSTED, 0)
        if want > 0 or posted > 0:
            for t in range(s, d + 1):
                if splittable(S, wi, t):
                    lvl = t
                    break
        if lvl >= 0 and want > 0:
            for i in range(W):
                if i == wi:
                    continue
                if GLOBAL:
                    if cuda.atomic.cas(mail, MAILBOX + cuda.blockIdx.x * W + i,
                                       W_WAITING, W_CLAIMED) == W_WAITING:
                        target = i
                        cuda.atomic.add(ctrl, C_BUSY, 1)
                        break
                elif cuda.atomic.cas(wstate, i, B_WAITING, B_CLAIMED) == B_WAITING:
                    target = i
                    cuda.atomic.sub(waiting, 0, 1)
                    cuda.atomic.sub(waiting, 1, 1)
                    break
        if GLOBAL and lvl >= 0 and target < 0 and posted > 0:
            for k in range(MAILBOX):
                i = (gid + k) % MAILBOX
                t = cuda.atomic.add(mail, i, 0)
                if t >= 0 and cuda.atomic.cas(mail, i, t, -1) == t:
                    cuda.atomic.sub(ctrl, C_POSTED, 1)
                    if cuda.atomic.cas(mail, MAILBOX + t, W_WAITING, W_CLAIMED) == W_WAITING:
                        cuda.atomic.add(ctrl, C_BUSY, 1)
                        if LOCAL_FAST and t // W == cuda.blockIdx.x:
                            target = t % W
                        else:
                            target = t
                            remote = 1
                        break
        return lvl, target, remote

    @cuda.jit(device=True)
    def give_remote(S, wi, lane, s, lvl, target, mail, xfer, checked):
        """Hand the prefix levels and the upper half of level ``lvl``'s untouched work
        (:func:`split_point`) to a warp of another block through its global record."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        for j in range(s - 1, lvl):
            xfer[u64(target), u64(j * 32 + lane)] = mi[u32(wi), u32(j), u32(lane)]
            xfer[u64(target), u64((L + j) * 32 + lane)] = par[u32(wi), u32(j), u32(lane)]
        xfer[u64(target), u64(XG + lane)] = gsrc[u32(wi), u32(lvl), u32(lane)]
        xfer[u64(target), u64(XG + 32 + lane)] = glen[u32(wi), u32(lvl), u32(lane)]
        xfer[u64(target), u64(XG + 64 + lane)] = gskip[u32(wi), u32(lvl), u32(lane)]
        if CHECKS and lvl == checked:
            for k in range(KC):
                xfer[u64(target), u64(XC + k * 32 + lane)] = checks[u32(wi), u32(lane), u32(k)]
        cuda.syncwarp()                             # copied before lane 0 may shorten a group
        if lane == 0:
            first, offset, groups = split_point(S, wi, lvl)
            xfer[u64(target), XH] = lvl
            xfer[u64(target), u64(XH + 1)] = first
            xfer[u64(target), u64(XH + 2)] = groups
            xfer[u64(target), u64(XH + 3)] = offset
        cuda.threadfence()                          # every lane's copies, before the hand-over
        cuda.syncwarp()
        if lane == 0:
            cuda.atomic.exch(mail, MAILBOX + target, W_GLOBAL_GIFT)
        cuda.syncwarp()

    @cuda.jit(device=True)
    def give_local(S, wi, lane, s, lvl, target, mail, wstate, checked):
        """Hand the prefix levels and the upper half of level ``lvl``'s untouched work
        (:func:`split_point`) to warp ``target`` of this block through shared memory."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        for j in range(s - 1, lvl):
            mi[u32(target), u32(j), u32(lane)] = mi[u32(wi), u32(j), u32(lane)]
            par[u32(target), u32(j), u32(lane)] = par[u32(wi), u32(j), u32(lane)]
        gsrc[u32(target), u32(lvl), u32(lane)] = gsrc[u32(wi), u32(lvl), u32(lane)]
        glen[u32(target), u32(lvl), u32(lane)] = glen[u32(wi), u32(lvl), u32(lane)]
        gskip[u32(target), u32(lvl), u32(lane)] = gskip[u32(wi), u32(lvl), u32(lane)]
        if CHECKS and lvl == checked:
            for k in range(KC):
                checks[u32(target), u32(lane), u32(k)] = checks[u32(wi), u32(lane), u32(k)]
        cuda.threadfence_block()                    # every lane's copies, before the hand-over
        cuda.syncwarp()
        if lane == 0:
            for j in range(s, lvl):
                cg[u32(target), u32(j)] = ng[u32(wi), u32(j)]
                co[u32(target), u32(j)] = 0
                ng[u32(target), u32(j)] = ng[u32(wi), u32(j)]
            first, offset, groups = split_point(S, wi, lvl)
            cg[u32(target), u32(lvl)] = first
            co[u32(target), u32(lvl)] = offset
            ng[u32(target), u32(lvl)] = groups
            top[u32(target)] = lvl
            cuda.threadfence_block()
            if GLOBAL:
                cuda.atomic.exch(mail, MAILBOX + cuda.blockIdx.x * W + target, W_SHARED_GIFT)
            else:
                cuda.atomic.exch(wstate, target, B_GIFT)
        cuda.syncwarp()

    @cuda.jit(device=True)
    def next_tasks(S, wi, lane, d):
        """This lane's task of the next 32 of level d's virtual task pool (group g, offset r; batch
        exploration lets the 32 span groups) and the level's cursor after them (lane 31 walks
        to task 32 and broadcasts); returns (g, r, has task, next group, next offset)."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        g0 = cg[u32(wi), u32(d)]
        o0 = co[u32(wi), u32(d)]
        groups = ng[u32(wi), u32(d)]
        g = g0
        r = int32(o0 + lane)
        if batch:
            while g < groups and r >= glen[u32(wi), u32(d), u32(g)]:
                r = int32(r - glen[u32(wi), u32(d), u32(g)])
                g = int32(g + 1)
        elif g < groups and r >= glen[u32(wi), u32(d), u32(g)]:
            g = groups
        ng_g = g0
        ng_o = int32(o0 + 32)
        if lane == 31:
            if batch:
                ng_g = g
                ng_o = int32(r + 1)
                while ng_g < groups and ng_o >= glen[u32(wi), u32(d), u32(ng_g)]:
                    ng_o = int32(ng_o - glen[u32(wi), u32(d), u32(ng_g)])
                    ng_g = int32(ng_g + 1)
            elif g0 < groups and ng_o >= glen[u32(wi), u32(d), u32(g0)]:
                ng_g = int32(g0 + 1)
                ng_o = int32(0)
                while ng_g < groups and glen[u32(wi), u32(d), u32(ng_g)] == 0:
                    ng_g = int32(ng_g + 1)
        ng_g = cuda.shfl_sync(FULL, ng_g, 31)
        ng_o = cuda.shfl_sync(FULL, ng_o, 31)
        return g, r, g < groups, ng_g, ng_o

    @cuda.jit(device=True)
    def descend(S, wi, lane, s, d, ok, mask, x, g, pool, width, G, sq, checked):
        """Push the valid children (compacted to slots 0..popc-1) as level d, each with its task
        group for position d+1."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        if ok:                                      # the lane reads back only its own slot k
            k = cuda.popc(mask & cuda.lanemask_lt())
            mi[u32(wi), u32(d), u32(k)] = x
            par[u32(wi), u32(d), u32(k)] = g
            nsrc, nskip, nlen = group(mi, par, wi, s, pool, width, G, sq, d + 1, k)
            if CHECKS and d + 1 == checked:
                write_checks(mi, par, wi, s, pool, width, G, sq, d + 1, k, nskip, checks)
            gsrc[u32(wi), u32(d + 1), u32(k)] = nsrc
            gskip[u32(wi), u32(d + 1), u32(k)] = nskip
            glen[u32(wi), u32(d + 1), u32(k)] = nlen
        if lane == 0:
            cg[u32(wi), u32(d + 1)] = 0
            co[u32(wi), u32(d + 1)] = 0
            ng[u32(wi), u32(d + 1)] = cuda.popc(mask)
            top[u32(wi)] = d + 1

    @cuda.jit(device=True)
    def validate_tasks(S, wi, d, g, r, has, s, pool, width, G, sq, checked):
        """Each lane's task of the 32 fetched (group g, offset r): its data vertex x and whether
        it extends the partial match (LDF/NLF bit on the data graph, then the edges back to the
        matched positions, or the parent's checks row at the checked level); (x, ok)."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        x = int32(-1)
        ok = False
        if has:
            x = G[1][u64(group_start(G, gsrc[u32(wi), u32(d), u32(g)]) + r)]
            ok = True
            if CHECK_BIT:
                ok = ((G[5][u64(x)] >> d) & 1) != 0
            if ok:
                if CHECKS and d == checked:
                    ok = validate_leaf(G, sq, wi, d, x, g, gskip[u32(wi), u32(d), u32(g)], checks)
                else:
                    ok = validate(mi, par, wi, s, pool, width, G, sq, d, x, g, gskip[u32(wi), u32(d), u32(g)])
        return x, ok

    @cuda.jit(device=True)
    def leaf_step(S, wi, lane, s, d, ok, mask, x, g, ne, n, low, pool, width, G, sq, ctrl, emb,
                  emb_cap, limit_unique):
        """The valid lanes of the last enumerated level: count (one each, a product of the
        counted positions, or with ``LEAF_LAST`` the count of position n - 1) or write their
        matches; returns the matches this lane counted."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        found = int64(0)
        if COUNT_LAST:
            if ok:
                found = last_product(mi, par, wi, s, pool, width, G, sq, n, low, d, x, g)
        elif LEAVES == LEAF_PRODUCT:
            if ok:
                found = leaf_product(mi, par, wi, s, pool, width, G, sq, ne, n, low, d, x, g, ctrl)
        elif LEAVES == LEAF_OUTPUT:
            found = leaf_output(ok, mask, lane, mi, par, wi, s, pool, width, G, sq, d, x, g, ctrl,
                                emb, emb_cap, limit_unique)
        elif ok:
            found = int64(1)
        return found

    @cuda.jit(device=True)
    def backtrack(S, wi, s, d):
        """Level d is exhausted: the stack's top goes back to the deepest level with tasks left
        (below s: the warp is out of work). One lane calls."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        t = d - 1
        while t >= s and cg[u32(wi), u32(t)] >= ng[u32(wi), u32(t)]:
            t -= 1
        top[u32(wi)] = t

    @cuda.jit(device=True)
    def extend(S, wi, lane, s, d, last, ne, n, low, pool, width, G, sq, ctrl, emb,
               emb_cap, limit_unique, checked):
        """One warp iteration at level d (Alg. 2): fetch 32 tasks (:func:`next_tasks`), validate
        them (:func:`validate_tasks`), ballot; at the last enumerated level count or write the
        leaves (:func:`leaf_step`; ``LEAF_LAST``: count position n - 1 at level n - 2), else
        descend with the valid children (:func:`descend`); backtrack once the level is exhausted
        (:func:`backtrack`). Returns (matches this lane counted, lanes without a task)."""
        mi, par, gsrc, glen, gskip, cg, co, ng, top, checks = S
        g, r, has, ng_g, ng_o = next_tasks(S, wi, lane, d)
        x, ok = validate_tasks(S, wi, d, g, r, has, s, pool, width, G, sq, checked)
        mask = cuda.ballot_sync(FULL, ok)
        idle = int64(0)
        if IDLE:
            idle = 32 - cuda.popc(cuda.ballot_sync(FULL, has))
        found = int64(0)
        go_down = False
        if d == last:
            found = leaf_step(S, wi, lane, s, d, ok, mask, x, g, ne, n, low, pool, width, G, sq, ctrl, emb,
                              emb_cap, limit_unique)
        else:
            go_down = mask != 0
        cuda.syncwarp()
        if lane == 0:
            cg[u32(wi), u32(d)] = ng_g
            co[u32(wi), u32(d)] = ng_o
        if go_down:
            descend(S, wi, lane, s, d, ok, mask, x, g, pool, width, G, sq, checked)
        elif lane == 0 and ng_g >= ng[u32(wi), u32(d)]:
            backtrack(S, wi, s, d)
        return found, idle

    @cuda.jit(device=True)
    def start_block(qp, sq, ctrl, tid, wi, lane, s, last, top, wstate, waiting):
        """The block's start: the query's plan to shared memory, its candidate counts to the
        control row, every warp busy with an empty stack; returns the level whose tasks read
        checks rows (-1: none)."""
        load_plan(qp, sq, tid)
        checked = int32(-1)
        if CHECKS and last >= s:
            back_last = qp[QP_BACKWARD, u32(last)]
            if cuda.popc(back_last) - 1 + cuda.popc(qp[QP_SAME, u32(last)] & ~back_last) <= KC:
                checked = int32(last)
        if tid < 32:
            ctrl[u32(C_CAND + tid)] = qp[QP_CCOUNT, u32(tid)]      # every block of q writes the same values
        if tid < W:
            wstate[tid] = B_BUSY
        if tid == 0:
            waiting[0] = 0
            waiting[1] = 0
        if lane == 0:
            top[u32(wi)] = s - 1
            if GLOBAL:
                cuda.atomic.add(ctrl, C_BUSY, 1)
        cuda.syncthreads()
        return checked

    @cuda.jit(device=True)
    def find_work(S, wi, lane, gid, s, total_warps, pool, width, G, sq, ctrl, seed_lo, seed_hi, mail, xfer,
                  wstate, waiting, checked):
        """An empty stack: take the next seeds, else wait for a hand-over (in the grid or the
        block); False when the search is over for this warp."""
        if take_seeds(S, wi, lane, s, pool, width, G, sq, ctrl, seed_lo, seed_hi, checked):
            return True
        if not STEAL:
            return False
        if GLOBAL:
            return wait_global(S, wi, lane, gid, s, total_warps, mail, ctrl, xfer, waiting, checked)
        return wait_block(wi, lane, wstate, waiting)

    @cuda.jit(device=True)
    def share_work(S, wi, lane, gid, s, d, iters, mail, ctrl, xfer, wstate, waiting, checked):
        """Give half of a level to a waiting warp, if one waits (:func:`find_waiter`): through
        the mailbox to another SM, or in the block; (hand-overs in the block, to other SMs),
        counted by lane 0."""
        lvl, target, remote = int32(-1), int32(-1), int32(0)
        if lane == 0:
            lvl, target, remote = find_waiter(S, wi, gid, s, d, iters, mail, ctrl, wstate, waiting)
        target = cuda.shfl_sync(FULL, target, 0)
        local_gift = int64(0)
        remote_gift = int64(0)
        if target >= 0:                         # warp-uniform: the rest only for a hand-over
            lvl = cuda.shfl_sync(FULL, lvl, 0)
            remote = cuda.shfl_sync(FULL, remote, 0)
            if remote != 0:
                give_remote(S, wi, lane, s, lvl, target, mail, xfer, checked)
                if lane == 0:
                    remote_gift = int64(1)
            else:
                give_local(S, wi, lane, s, lvl, target, mail, wstate, checked)
                if lane == 0:
                    local_gift = int64(1)
        return local_gift, remote_gift

    @cuda.jit(device=True)
    def terminate(ctrl, mail, wstate, waiting, wi, lane, gid, total_warps, done_by_stop, found, iters, idle,
                  steals, gsteals):
        """The warp leaves the search: stopped under global stealing, it leaves the busy count
        (the last one out tells every warp to end); its matches and statistics go to the
        control row."""
        if GLOBAL and done_by_stop:
            verdict = int32(0)
            if lane == 0:
                cuda.atomic.exch(mail, MAILBOX + gid, W_EXITED)
                verdict = leave_busy(mail, ctrl, gid)
            verdict = cuda.shfl_sync(FULL, verdict, 0)
            if verdict == 1:
                broadcast_termination(mail, total_warps, lane)
        if found != 0:                                  # every lane counted its own matches
            add_count(ctrl, found)
        if lane == 0:
            if not done_by_stop:
                cuda.atomic.add(ctrl, C_FINISHED, 1)
            if done_by_stop and STEAL and not GLOBAL:
                cuda.atomic.exch(wstate, wi, B_EXITED)
                cuda.atomic.add(waiting, 1, 1)
            cuda.atomic.add(ctrl, C_ITERS, iters)
            cuda.atomic.add(ctrl, C_IDLE, idle)
            cuda.atomic.add(ctrl, C_STEALS, steals)
            cuda.atomic.add(ctrl, C_GSTEALS, gsteals)

    @jit(**cap)
    def fine_dfs(off, ent, bitmap, cset, eg, cands, qps, pool, width, ctrls, emb, emb_cap, watch,
                 halt, mail, xfer, block_query):
        """The fine-grained DFS (gMatch §3): each warp takes seeds, extends its stack one level
        per iteration, descends and backtracks, gives work to waiting warps and takes theirs
        when empty, until the seeds and every stack are exhausted or the search is stopped."""
        # the block's query: its LDF/NLF bits, plan, control row (seed range, limit, counters)
        q = block_query[cuda.blockIdx.x]
        qp = qps[q]
        ctrl = ctrls[q]
        seed_lo = ctrl[C_SEED_LO]
        seed_hi = ctrl[C_SEED_HI]
        limit_unique = ctrl[C_LIMIT]
        G = (off, ent, bitmap, cset, eg, cands[q])
        sq = cuda.shared.array((SQ_ROWS, 32), int32)
        S = (cuda.shared.array((W, L, 32), int32),         # mi
             cuda.shared.array((W, L, 32), int8),          # par
             cuda.shared.array((W, L, 32), int32),         # gsrc
             cuda.shared.array((W, L, 32), int32),         # glen
             cuda.shared.array((W, L, 32), int8),          # gskip
             cuda.shared.array((W, L), int32),             # cg
             cuda.shared.array((W, L), int32),             # co
             cuda.shared.array((W, L), int32),             # ng
             cuda.shared.array(W, int32),                  # top
             cuda.shared.array((W, 32, KC), int32))        # checks
        top = S[8]
        wstate = cuda.shared.array(W, int32)       # block scope: B_BUSY, B_WAITING, B_CLAIMED, B_GIFT, B_EXITED
        waiting = cuda.shared.array(2, int32)      # [0] waiting warps, [1] waiting or exited warps

        tid = cuda.threadIdx.x
        wi = int32(tid // 32)
        lane = int32(tid % 32)
        gid = cuda.blockIdx.x * W + wi             # global warp id (global scope)
        total_warps = cuda.gridDim.x * W
        n = qp[QP_SIZES, 0]
        ne = qp[QP_SIZES, 2]                       # positions enumerated (the rest are counted)
        low = qp[QP_SIZES, 3]                      # lowest position a counted one depends on
        last = ne - 1
        s = int32(width)
        checked = start_block(qp, sq, ctrl, tid, wi, lane, s, last, top, wstate, waiting)

        found = int64(0)
        iters = int64(0)
        idle = int64(0)
        steals = int64(0)
        gsteals = int64(0)
        done_by_stop = False
        while True:
            cuda.syncwarp()
            if stopped(ctrl, halt, lane, limit_unique, watch, iters):
                done_by_stop = True
                break
            d = top[u32(wi)]
            if d < s:                                   # out of work: seeds, else stealing
                if find_work(S, wi, lane, gid, s, total_warps, pool, width, G, sq, ctrl, seed_lo, seed_hi, mail,
                             xfer, wstate, waiting, checked):
                    continue
                break
            if STEAL:                                   # a waiting warp gets half of a level
                local_gift, remote_gift = share_work(S, wi, lane, gid, s, d, iters, mail, ctrl, xfer, wstate,
                                                     waiting, checked)
                steals += local_gift
                gsteals += remote_gift
            more, empty = extend(S, wi, lane, s, d, last, ne, n, low, pool, width, G,
                                 sq, ctrl, emb, emb_cap, limit_unique, checked)
            found += more
            if LEAVES == LEAF_PRODUCT or COUNT_LAST:     # products (< 2^62 each) keep the sum below 2^63
                if found >= COUNT_LIMB:
                    add_count(ctrl, found)
                    found = int64(0)
            idle += empty
            iters += 1
        terminate(ctrl, mail, wstate, waiting, wi, lane, gid, total_warps, done_by_stop, found, iters, idle,
                  steals, gsteals)

    return fine_dfs


@functools.lru_cache(maxsize=None)
def coarse_kernel(warps: int, unroll: int, indexed: bool):
    """The coarse-grained DFS kernel (Naive for ``unroll=1``, Unroll-k otherwise) over the data
    graph or, ``indexed``, the candidate graph (see :func:`search_functions`)."""
    W, K, L = warps, unroll, 32
    fn = search_functions(indexed)
    validate, group, leaf_output, group_start = fn.validate, fn.group, fn.leaf_output, fn.group_start
    CHECK_BIT = not indexed

    @jit
    def coarse_dfs(off, ent, bitmap, cset, eg, cand, qp, pool, width, seed_lo, seed_hi,
                   ctrl, emb, emb_cap, limit_unique, watch, halt, fc_v, fc_p):
        G = (off, ent, bitmap, cset, eg, cand)
        sq = cuda.shared.array((SQ_ROWS, 32), int32)
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
        s = int32(width)
        load_plan(qp, sq, tid)
        if lane == 0:
            top[wi] = s - 1
        cuda.syncthreads()
        found = int64(0)
        iters = int64(0)
        idle = int64(0)
        polls = int64(0)              # calls of stopped(): its poll interval counts these
        halted = False
        while True:
            cuda.syncwarp()
            polls += 1
            if stopped(ctrl, halt, lane, limit_unique, watch, polls):
                break
            d = top[wi]
            if d < s:
                base, cnt = claim_seeds(ctrl, lane, K, seed_lo, seed_hi)
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
                src, skip, ln = group(fc_v, fc_p, gw, s, pool, width, G, sq, d, p0 + lane)
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
                    v = ent[group_start(G, csrc[wi, g]) + r]
                    ok = True
                    if CHECK_BIT:
                        ok = ((cand[v] >> d) & 1) != 0
                    if ok:
                        ok = validate(fc_v, fc_p, gw, s, pool, width, G, sq, d, v, p0 + g,
                                      cskip[wi, g])
                mask = cuda.ballot_sync(FULL, ok)
                busy = cuda.ballot_sync(FULL, has)
                if lane == 0:
                    iters += 1
                    idle += 32 - cuda.popc(busy)
                if d == n - 1:
                    found += leaf_output(ok, mask, lane, fc_v, fc_p, gw, s, pool, width, G, sq, d, v,
                                         p0 + g, ctrl, emb, emb_cap, limit_unique)
                elif ok:
                    k = out + cuda.popc(mask & cuda.lanemask_lt())
                    fc_v[gw, d, k] = v
                    fc_p[gw, d, k] = p0 + g
                out += cuda.popc(mask)
                b += 32
                # poll at every level: one partial match's lists (a hub's) can take many batches
                polls += 1
                if stopped(ctrl, halt, lane, limit_unique, watch, polls):
                    halted = True
                    break
            if halted:
                break
            cuda.syncwarp()
            if lane == 0:
                pos[wi, d - 1] = p0 + cnt
                if d < n - 1 and out > 0:
                    pos[wi, d] = 0
                    size[wi, d] = out
                    top[wi] = d + 1
        if lane == 0:
            add_count(ctrl, found)
            cuda.atomic.add(ctrl, C_ITERS, iters)
            cuda.atomic.add(ctrl, C_IDLE, idle)

    return coarse_dfs


@jit
def start_search(ctrls, seed_lo, seed_hi, limit, mail, clear_mail):
    """Before a one-query launch: control row 0 zeroed but for the query's seed range and
    unique-match limit (one launch of scalar arguments instead of a copy of the row and a reset
    launch), and with ``clear_mail`` the global mailbox emptied and every warp marked busy
    (global stealing)."""
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    j = i
    while j < CTRL_SIZE:
        value = 0
        if j == C_SEED_LO:
            value = seed_lo
        elif j == C_SEED_HI:
            value = seed_hi
        elif j == C_LIMIT:
            value = limit
        ctrls[0, j] = value
        j += stride
    if clear_mail:
        while i < mail.size:
            mail[i] = -1 if i < MAILBOX else W_BUSY
            i += stride
