"""STwig exploration: MatchSTwig (Lin et al. 2014 Alg. 1) with binding-based pruning (§3.2).

For STwig ``(r; l_1..l_k)`` every data vertex ``v`` with r's label is a root; each leaf's
candidates ``T_i`` are v's neighbours with l_i's label, and the relation gains
``{v} x T_1 x ... x T_k``. Pruning (§3.2; leaf filtering as in Sun et al.): once a query vertex
is bound by an earlier STwig, a later STwig only takes data vertices in its *binding* (the
distinct values of its column in the latest relation holding it), for roots and leaves alike.
Earlier relations are never re-filtered, so R_1 is the largest.

Adjacency rows are sorted by (label, id), so ``T_i`` is one label range
(:func:`label_sorted_adjacency`); an odometer enumerates ``T_1 x ... x T_k`` (the injective
default rejects a leaf equal to an earlier leaf; ``homomorphic`` keeps every tuple); two passes
(count per root, prefix sum, fill) make exact int32 relations, R_1 attribute-major (§4.4), the
build relations row-major (§4.2), all of a query in one flat array. The CPU path (the paper's
placement, §4) first tries the whole query in one compiled call (:func:`_explore_query_cpu`,
:data:`FAST_STEPS` steps), then goes STwig by STwig in calls of a bounded number of steps that
resume a root cut short, so ``timeout_s`` is checked between calls; the GPU path (an addition to
the paper) runs the same per-root routine as a device function, one thread per root candidate.
Relations past ``max_relation_bytes`` stop the query as out-of-memory.
"""

from __future__ import annotations

import time

import numba
import numpy as np
from numba import njit

from common.engine.deadline import Deadline
from common.errors import DeviceOutOfMemory
from common.gpu.grid import grid_blocks
from common.gpu.pool import BufferPool
from common.gpu.runtime import cuda, jit
from common.gpu.scan import exclusive_scan
from common.graph.model import Graph
from common.graph.sorted_ranges import label_range

from .order import Twig

#: Largest number of leaves an STwig may have on the GPU path (per-thread local arrays).
MAX_LEAVES = 31
#: Steps of the first compiled call on the CPU path (a root and each odometer step cost one):
#: the deadline is checked between calls, whose budget doubles while a call takes under
#: ``CHUNK_SECONDS`` and halves above twice that. A hub root is cut between calls too (a call
#: per root chunk overran a 5 s deadline by over 10 minutes on one root).
FIRST_STEPS = 1 << 12
CHUNK_SECONDS = 0.01
#: Step budget of the one-call fast path (a few ms at most; the median HPRD query needs ~1e4).
FAST_STEPS = 1 << 18

# Columns of the STwig table of the fast path (int64, one row per STwig).
TW_ROOT, TW_NLEAVES, TW_LEAVES = 0, 1, 2
TWIG_FIELDS = TW_LEAVES + MAX_LEAVES
# Fields of the fast path's report (int64).
FAST_STATUS, FAST_TWIGS, FAST_ENTRIES, FAST_WANTED = range(4)
FAST_INFO = 4
# Values of FAST_STATUS: every STwig matched (or one relation empty), out of steps, too large.
FAST_DONE, FAST_OUT_OF_STEPS, FAST_TOO_LARGE = range(3)


_NO_OUTPUT = np.zeros(1, np.int32)


def label_sorted_adjacency(data: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, neighbours, neighbour labels) with each row sorted by (label, id)."""
    rows = np.repeat(np.arange(data.num_vertices, dtype=np.int64), data.degrees)
    nbr_labels = data.labels[data.neighbors]
    order = np.lexsort((data.neighbors, nbr_labels, rows))
    adj = np.ascontiguousarray(data.neighbors[order], dtype=np.int32)
    return (np.ascontiguousarray(data.offsets, dtype=np.int64), adj,
            np.ascontiguousarray(nbr_labels[order], dtype=np.int32))


def _match_root(v, nleaves, leaf_label, leaf_qv, leaf_bound, bitmap, homomorphic,
                lo_buf, hi_buf, idx_buf, off, adj, adjlab, write, out, out_row, row_stride,
                col_stride, work):
    """Matches of one STwig rooted at data vertex ``v``: counts them and, with ``write``, stores
    them from row ``out_row`` of ``out`` (element (row, col) at row*row_stride + col*col_stride).
    Compiled both with ``numba.njit`` (CPU) and as a CUDA device function (GPU).

    ``work`` = (steps left, saved level, saved count): with steps >= 0 each odometer step spends
    one; at 0 the odometer (``idx_buf``) is left as it is, the level and count are saved and the
    partial count returned; a call with a saved level >= 0 resumes there. Steps < 0: no bound."""
    if nleaves == 0:
        if write:
            out[out_row * row_stride] = v
        return 1
    start = off[v]
    stop = off[v + 1]
    for i in range(nleaves):
        first, last = label_range(adjlab, start, stop, leaf_label[i])
        if first == last:
            return 0
        lo_buf[i] = first
        hi_buf[i] = last
    count = 0
    level = 0
    if work[1] >= 0:
        level = work[1]
        count = work[2]
        work[1] = -1
    else:
        idx_buf[0] = lo_buf[0] - 1
    while level >= 0:
        if work[0] == 0:
            work[1] = level
            work[2] = count
            return count
        if work[0] > 0:
            work[0] -= 1
        p = idx_buf[level] + 1
        end = hi_buf[level]
        while p < end:
            w = adj[p]
            ok = leaf_bound[level] == 0 or bitmap[leaf_qv[level], w] != 0
            if ok and not homomorphic:
                for j in range(level):
                    if adj[idx_buf[j]] == w:
                        ok = False
                        break
            if ok:
                break
            p += 1
        if p >= end:
            level -= 1
            continue
        idx_buf[level] = p
        if level == nleaves - 1:
            if write:
                base = (out_row + count) * row_stride
                out[base] = v
                for j in range(nleaves):
                    out[base + (j + 1) * col_stride] = adj[idx_buf[j]]
            count += 1
        else:
            level += 1
            idx_buf[level] = lo_buf[level] - 1
    return count


_match_root_cpu = njit(nogil=True, cache=True)(_match_root)
_match_root_gpu = cuda.jit(device=True)(_match_root)


@njit(nogil=True, cache=True)
def _explore_roots_cpu(roots, first, root_qv, root_bound, nleaves, leaf_label, leaf_qv,
                       leaf_bound, bitmap, homomorphic, off, adj, adjlab, write, out, offsets,
                       row_stride, col_stride, work, lo_buf, hi_buf, idx_buf):
    """Count (``write`` False: offsets[r] = count) or fill the matches of roots from ``first``
    until ``work[0]`` steps are spent (a root costs one step, and each odometer step one): the
    next root to take and the count of the roots finished. A root cut short keeps its state in
    ``work`` and ``idx_buf`` (:func:`_match_root`) and is resumed by the next call."""
    total = 0
    r = first
    while r < roots.size:
        v = roots[r]
        c = 0
        if work[1] >= 0 or root_bound == 0 or bitmap[root_qv, v] != 0:
            c = _match_root_cpu(v, nleaves, leaf_label, leaf_qv, leaf_bound, bitmap, homomorphic,
                                lo_buf, hi_buf, idx_buf, off, adj, adjlab, write, out,
                                offsets[r] if write else 0, row_stride, col_stride, work)
            if work[1] >= 0:
                return r, total
        if not write:
            offsets[r] = c
        total += c
        r += 1
        if work[0] > 0:
            work[0] -= 1
        if work[0] == 0:
            break
    return r, total


@njit(nogil=True, cache=True)
def _bind_columns_cpu(bitmap, bound, twig_tab, t, rel, total, row_stride, col_stride, distinct):
    """Bindings of STwig ``t``'s query vertices from its relation (one bitmap row each, rebuilt),
    their distinct-value counts in ``distinct[t]``; returns the steps spent (rows x columns)."""
    k = twig_tab[t, TW_NLEAVES]
    for c in range(k + 1):
        x = twig_tab[t, TW_ROOT] if c == 0 else twig_tab[t, TW_LEAVES + c - 1]
        bitmap[x, :] = 0
        seen = 0
        for i in range(total):
            v = rel[i * row_stride + c * col_stride]
            if bitmap[x, v] == 0:
                bitmap[x, v] = 1
                seen += 1
        distinct[t, c] = seen
        bound[x] = 1
    return (k + 1) * total


@njit(nogil=True, cache=True)
def _explore_query_cpu(twig_tab, query_labels, vertices_by_label, label_offsets, bitmap, bound,
                       homomorphic, off, adj, adjlab, steps, max_entries, rows, distinct, info):
    """MatchSTwig for every STwig of a query in one call of at most ``steps`` steps: returns the
    flat relation array (R_1 attribute-major, then R_2.. row-major; ``info[FAST_ENTRIES]`` used)
    with ``rows[t]``, ``distinct[t, c]`` and the bindings of the finished STwigs
    (``info[FAST_TWIGS]``). ``info[FAST_STATUS]``: FAST_DONE (all, or an empty relation),
    FAST_OUT_OF_STEPS (STwig ``info[FAST_TWIGS]`` was cut: redo it) or FAST_TOO_LARGE (past
    ``max_entries``; ``info[FAST_WANTED]`` entries asked for)."""
    lo_buf = np.empty(MAX_LEAVES, np.int64)
    hi_buf = np.empty(MAX_LEAVES, np.int64)
    idx_buf = np.empty(MAX_LEAVES, np.int64)
    leaf_label = np.empty(MAX_LEAVES, np.int32)
    leaf_qv = np.empty(MAX_LEAVES, np.int32)
    leaf_bound = np.empty(MAX_LEAVES, np.uint8)
    work = np.empty(3, np.int64)
    out = np.empty(4096, np.int32)
    used = 0
    left = steps
    info[FAST_STATUS] = FAST_OUT_OF_STEPS
    for t in range(twig_tab.shape[0]):
        info[FAST_TWIGS] = t
        info[FAST_ENTRIES] = used
        root = twig_tab[t, TW_ROOT]
        k = twig_tab[t, TW_NLEAVES]
        for i in range(k):
            qv = twig_tab[t, TW_LEAVES + i]
            leaf_qv[i] = qv
            leaf_label[i] = query_labels[qv]
            leaf_bound[i] = bound[qv]
        lab = query_labels[root]
        roots = vertices_by_label[label_offsets[lab]:label_offsets[lab + 1]]
        offsets = np.zeros(roots.size + 1, np.int64)
        total = 0
        for write in (False, True):
            if left <= 0:
                return out
            work[0] = left
            work[1] = -1
            work[2] = 0
            arity = k + 1
            base = used
            rs, cs = (1, total) if t == 0 else (arity, 1)
            r, got = _explore_roots_cpu(roots, 0, root, bound[root], k, leaf_label, leaf_qv,
                                        leaf_bound, bitmap, homomorphic, off, adj, adjlab, write,
                                        out[base:], offsets[:roots.size] if not write else offsets,
                                        rs, cs, work, lo_buf, hi_buf, idx_buf)
            if r < roots.size or work[1] >= 0:
                return out
            left = work[0]
            if not write:
                total = got
                for i in range(roots.size - 1, -1, -1):
                    offsets[i + 1] = offsets[i]
                offsets[0] = 0
                for i in range(roots.size):
                    offsets[i + 1] += offsets[i]
                if used + arity * total > max_entries:
                    info[FAST_STATUS] = FAST_TOO_LARGE
                    info[FAST_WANTED] = arity * total
                    return out
                if used + arity * total > out.size:
                    grown = np.empty(max(used + arity * total, 2 * out.size), np.int32)
                    grown[:used] = out[:used]
                    out = grown
        rows[t] = total
        used += (k + 1) * total
        info[FAST_ENTRIES] = used
        if total == 0:
            info[FAST_TWIGS] = t + 1
            info[FAST_STATUS] = FAST_DONE
            return out
        rs, cs = (1, total) if t == 0 else (k + 1, 1)
        left -= _bind_columns_cpu(bitmap, bound, twig_tab, t, out[used - (k + 1) * total:used],
                                  total, rs, cs, distinct)
    info[FAST_TWIGS] = twig_tab.shape[0]
    info[FAST_STATUS] = FAST_DONE
    return out


def twig_table(twigs: list[Twig]) -> np.ndarray:
    """The STwigs as rows (root, leaf count, leaves...) of TWIG_FIELDS int64."""
    tab = np.zeros((len(twigs), TWIG_FIELDS), np.int64)
    for t, twig in enumerate(twigs):
        tab[t, TW_ROOT] = twig.root
        tab[t, TW_NLEAVES] = len(twig.leaves)
        tab[t, TW_LEAVES:TW_LEAVES + len(twig.leaves)] = twig.leaves
    return tab


@jit
def _explore_roots_gpu(vertices, first, nroots, root_qv, root_bound, nleaves, leaf_args, t,
                       bitmap, homomorphic, off, adj, adjlab, write, rel, base, offsets,
                       row_stride, col_stride):
    """One thread per root candidate ``vertices[first + r]``: count (offsets[r] = count) or
    fill from ``rel[base]``, as the CPU routine; ``leaf_args[t]``: leaf labels, vertices and
    bound flags of STwig ``t`` (rows of MAX_LEAVES)."""
    leaf_label = leaf_args[t, 0]
    leaf_qv = leaf_args[t, 1]
    leaf_bound = leaf_args[t, 2]
    out = rel[base:]
    lo_buf = cuda.local.array(MAX_LEAVES, numba.int64)
    hi_buf = cuda.local.array(MAX_LEAVES, numba.int64)
    idx_buf = cuda.local.array(MAX_LEAVES, numba.int64)
    work = cuda.local.array(3, numba.int64)
    work[0] = -1                                    # no step bound: a thread runs its roots whole
    work[1] = -1
    work[2] = 0
    r = cuda.grid(1)
    step = cuda.gridsize(1)
    while r < nroots:
        v = vertices[first + r]
        c = 0
        if root_bound == 0 or bitmap[root_qv, v] != 0:
            c = _match_root_gpu(v, nleaves, leaf_label, leaf_qv, leaf_bound, bitmap, homomorphic,
                                lo_buf, hi_buf, idx_buf, off, adj, adjlab, write, out,
                                offsets[r] if write else 0, row_stride, col_stride, work)
        if not write:
            offsets[r] = c
        r += step


@jit
def _clear_columns_gpu(bitmap, twig_tab, t):
    """Zero the binding rows of STwig ``t``'s query vertices (before they are rebuilt)."""
    n = bitmap.shape[1]
    cols = twig_tab[t, TW_NLEAVES] + 1
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < cols * n:
        c = i // n
        x = twig_tab[t, TW_ROOT] if c == 0 else twig_tab[t, TW_LEAVES + c - 1]
        bitmap[x, i - c * n] = 0
        i += step


@jit
def _bind_columns_gpu(bitmap, twig_tab, t, rel, nrows, row_stride, col_stride, distinct, slot):
    """bitmap[x, v] = 1 for every value v of every column x of STwig ``t``'s relation;
    distinct[slot + c] counts column c's values (the first thread to set a bit counts it)."""
    cols = twig_tab[t, TW_NLEAVES] + 1
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < cols * nrows:
        c = i // nrows
        r = i - c * nrows
        x = twig_tab[t, TW_ROOT] if c == 0 else twig_tab[t, TW_LEAVES + c - 1]
        if cuda.atomic.exch(bitmap, (x, rel[r * row_stride + c * col_stride]), numba.int32(1)) == 0:
            cuda.atomic.add(distinct, slot + c, numba.int32(1))
        i += step


def twig_arguments(twig: Twig, labels: np.ndarray, bound: np.ndarray):
    """(root label, root bound flag, leaf labels int32, leaf vertices int32, leaf bound flags uint8)."""
    leaves = np.asarray(twig.leaves, dtype=np.int32)
    return (int(labels[twig.root]), int(bound[twig.root]),
            np.ascontiguousarray(labels[leaves], dtype=np.int32), leaves,
            np.ascontiguousarray(bound[leaves], dtype=np.uint8))


class CpuExplorer:
    """MatchSTwig on the CPU for a prepared data graph (the paper's placement of this step)."""

    def __init__(self, data: Graph):
        self.off, self.adj, self.adjlab = label_sorted_adjacency(data)
        self.vertices_by_label = np.ascontiguousarray(data.vertices_by_label, dtype=np.int32)
        self.label_offsets = data.label_offsets
        self.n = data.num_vertices

    def explore(self, twigs: list[Twig], query_labels: np.ndarray, *, homomorphic: bool,
                deadline: Deadline, max_bytes: int):
        """(relations, R_1 entries, rows, distinct): R_1..R_n in one flat int32 array (R_1
        attribute-major, the others row-major, in STwig order), each relation's rows (0 past an
        empty one: the query then stops, its answer empty) and, per relation up to the first
        empty one, the distinct values of each column."""
        nq = query_labels.size
        bitmap = np.zeros((nq, self.n), np.uint8)
        bound = np.zeros(nq, np.uint8)
        rows = np.zeros(len(twigs), np.int64)
        distinct = np.zeros((len(twigs), MAX_LEAVES + 1), np.int64)
        info = np.zeros(FAST_INFO, np.int64)
        labels = np.ascontiguousarray(query_labels, dtype=np.int64)
        flat = _explore_query_cpu(twig_table(twigs), labels, self.vertices_by_label,
                                  self.label_offsets, bitmap, bound, bool(homomorphic), self.off,
                                  self.adj, self.adjlab, FAST_STEPS, max_bytes // 4, rows, distinct,
                                  info)
        done, used = int(info[FAST_TWIGS]), int(info[FAST_ENTRIES])
        if info[FAST_STATUS] == FAST_TOO_LARGE:
            raise DeviceOutOfMemory(4 * int(info[FAST_WANTED]), 4 * used, max_bytes,
                                    f"STwig relation R_{done + 1} (max_relation_bytes)", "host")
        deadline.check()
        pieces = [flat[:used]]
        if info[FAST_STATUS] == FAST_OUT_OF_STEPS:
            pieces += self._explore_resumable(twigs, done, query_labels, bitmap, bound, rows,
                                              distinct, homomorphic, deadline, max_bytes, 4 * used)
        relations = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        per_twig = []
        for t, twig in enumerate(twigs):
            if rows[t] == 0:
                break
            per_twig.append([int(v) for v in distinct[t, :len(twig.columns)]])
        return relations, len(twigs[0].columns) * int(rows[0]), [int(r) for r in rows], per_twig

    def _explore_resumable(self, twigs, first, query_labels, bitmap, bound, rows, distinct,
                           homomorphic, deadline, max_bytes, used_bytes) -> list[np.ndarray]:
        """STwigs ``first``.. in compiled calls of a bounded number of steps (a query the fast
        path could not finish): their relations, stopping after an empty one."""
        relations: list[np.ndarray] = []
        for t in range(first, len(twigs)):
            twig = twigs[t]
            root_label, root_bound, leaf_label, leaf_qv, leaf_bound = twig_arguments(
                twig, query_labels, bound)
            roots = self.vertices_by_label[self.label_offsets[root_label]:
                                           self.label_offsets[root_label + 1]]
            arity = len(twig.columns)
            counts = np.zeros(roots.size, np.int64)
            args = (twig.root, root_bound, len(twig.leaves), leaf_label, leaf_qv, leaf_bound,
                    bitmap, bool(homomorphic), self.off, self.adj, self.adjlab)

            def too_large(n, t=t, arity=arity):
                if used_bytes + 4 * arity * n > max_bytes:
                    raise DeviceOutOfMemory(4 * arity * n, used_bytes, max_bytes,
                                            f"STwig relation R_{t + 1} (max_relation_bytes)", "host")

            total = _explore_bounded(roots, args, False, _NO_OUTPUT, counts, (0, 0), deadline,
                                     too_large)
            offsets = np.zeros(roots.size + 1, np.int64)
            np.cumsum(counts, out=offsets[1:])
            rel = np.empty(arity * total, np.int32)
            strides = (1, total) if t == 0 else (arity, 1)
            _explore_bounded(roots, args, True, rel, offsets, strides, deadline)
            used_bytes += rel.nbytes
            relations.append(rel)
            rows[t] = total
            if total == 0:
                break
            _bind_columns_cpu(bitmap, bound, twig_table(twigs), t, rel, total, *strides, distinct)
            deadline.check()
        return relations


def _explore_bounded(roots, args, write, out, offsets, strides, deadline, check=None) -> int:
    """One pass (count or fill) over ``roots`` in compiled calls of a bounded number of steps
    (:data:`FIRST_STEPS`, adapted as :data:`CHUNK_SECONDS` says); after each call ``check(rows
    so far)`` runs and the deadline is checked. Returns the rows of the pass."""
    k = max(args[2], 1)
    buffers = tuple(np.empty(k, np.int64) for _ in range(3))
    work = np.array([0, -1, 0], np.int64)
    r, steps, total = 0, FIRST_STEPS, 0
    while r < roots.size:
        work[0] = steps
        began = time.perf_counter()
        r, done = _explore_roots_cpu(roots, r, *args, write, out, offsets, *strides, work, *buffers)
        took = time.perf_counter() - began
        total += done
        if check is not None:
            check(total + (work[2] if work[1] >= 0 else 0))
        deadline.check()
        if took < CHUNK_SECONDS:
            steps = min(2 * steps, 1 << 40)
        elif took > 2 * CHUNK_SECONDS:
            steps = max(FIRST_STEPS, steps // 2)
    return total



class GpuExplorer:
    """MatchSTwig as CUDA kernels (``exploration="gpu"``): one thread per root candidate counts
    its matches, a device scan turns counts into offsets, the same threads write them, and two
    kernels rebuild the bindings of the STwig's query vertices. The relations stay on the device
    in the pooled buffer ``relations`` (the flat layout of :meth:`CpuExplorer.explore`); the
    STwigs' leaf arguments go up in one copy per query."""

    def __init__(self, data: Graph, budget, pool: BufferPool):
        off, adj, adjlab = label_sorted_adjacency(data)
        self.off = budget.to_device(off, "stwig adjacency offsets")
        self.adj = budget.to_device(adj, "stwig adjacency")
        self.adjlab = budget.to_device(adjlab, "stwig adjacency labels")
        self.vertices_by_label = budget.to_device(data.vertices_by_label.astype(np.int32),
                                                  "stwig label index")
        self.label_offsets = data.label_offsets
        self.n = data.num_vertices
        self.pool = pool
        self.max_roots = max(int(data.label_frequencies.max(initial=1)), 1)
        self.pool.scan(self.max_roots)

    def explore(self, twigs: list[Twig], query_labels: np.ndarray, *, homomorphic: bool,
                deadline: Deadline, max_bytes: int, timer):
        """(relations (device), rows, distinct) as :meth:`STwigPipeline._explore`."""
        from common.gpu.copies import fill

        from .join import JOIN_THREADS

        nq, nt = query_labels.size, len(twigs)
        slots = sum(len(t.columns) for t in twigs)
        # One upload: per STwig its leaf labels, leaf vertices and leaf bound flags (rows of
        # MAX_LEAVES), then the distinct-value counters (zero), then the STwig table.
        bound = np.zeros(nq, np.uint8)
        host = np.zeros(3 * nt * MAX_LEAVES + slots + nt * TWIG_FIELDS, np.int32)
        leaf_args = host[:3 * nt * MAX_LEAVES].reshape(nt, 3, MAX_LEAVES)
        root_bound = []
        for t, twig in enumerate(twigs):
            _, rb, leaf_label, leaf_qv, leaf_bound = twig_arguments(twig, query_labels, bound)
            k = len(twig.leaves)
            leaf_args[t, 0, :k], leaf_args[t, 1, :k], leaf_args[t, 2, :k] = leaf_label, leaf_qv, leaf_bound
            root_bound.append(rb)
            bound[list(twig.columns)] = 1
        host[3 * nt * MAX_LEAVES + slots:] = twig_table(twigs).reshape(-1)
        with timer.phase("filter"):
            d_host = self.pool.upload("exploration arguments", host)
            d_leaf = d_host[:3 * nt * MAX_LEAVES].reshape(nt, 3, MAX_LEAVES)
            distinct = d_host[3 * nt * MAX_LEAVES:3 * nt * MAX_LEAVES + slots]
            d_twigs = d_host[3 * nt * MAX_LEAVES + slots:].reshape(nt, TWIG_FIELDS)
            bitmap = self.pool.get("bindings", (nq, self.n), np.int32)
            fill(bitmap, 0)
            scan = self.pool.scan(self.max_roots)
            counts = self.pool.get("root counts", self.max_roots, np.int64)
            rows = [0] * nt
            slot, used = 0, 0
            threads = JOIN_THREADS
            rel = self.pool.get("relations", 1, np.int32)
            for t, twig in enumerate(twigs):
                label = int(query_labels[twig.root])
                first, last = int(self.label_offsets[label]), int(self.label_offsets[label + 1])
                nroots = last - first
                arity, k = len(twig.columns), len(twig.leaves)
                blocks = grid_blocks(nroots, threads)
                args = (self.vertices_by_label, first, nroots, twig.root, root_bound[t], k, d_leaf, t,
                        bitmap, bool(homomorphic), self.off, self.adj, self.adjlab)
                _explore_roots_gpu[blocks, threads](*args, False, rel, 0, counts, 0, 0)
                total = exclusive_scan(counts, workspace=scan, n=nroots) if nroots else 0
                if 4 * (used + arity * total) > max_bytes:
                    raise DeviceOutOfMemory(4 * arity * total, 4 * used, max_bytes,
                                            f"STwig relation R_{t + 1} (max_relation_bytes)")
                deadline.check()
                rel = self.pool.get("relations", used + arity * total, np.int32, keep=used)
                rows[t] = total
                if total == 0:
                    break
                strides = (1, total) if t == 0 else (arity, 1)
                _explore_roots_gpu[blocks, threads](*args, True, rel, used, counts, *strides)
                grid = grid_blocks(arity * self.n, threads)
                _clear_columns_gpu[grid, threads](bitmap, d_twigs, t)
                grid = grid_blocks(arity * total, threads)
                _bind_columns_gpu[grid, threads](bitmap, d_twigs, t, rel[used:], total, *strides,
                                                 distinct, slot)
                used += arity * total
                slot += arity
            counted = distinct.copy_to_host()
        per_twig, start = [], 0
        for t, twig in enumerate(twigs):
            if rows[t] == 0:
                break
            per_twig.append([int(v) for v in counted[start:start + len(twig.columns)]])
            start += len(twig.columns)
        return rel, rows, per_twig



