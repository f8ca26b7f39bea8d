"""EGSM's Cuckoo trie level 1 in the simulator: every inserted key is found in one of its two
buckets, evictions keep keys findable, absent keys are not found, and an over-full table raises
the failure flag the host rebuilds on. Also the data-side NLC lists and the filtering order."""

from __future__ import annotations

import numpy as np

from common.gpu.copies import fill
from common.gpu.runtime import cuda
from common.graph.bitmasks import masks_of
from common.graph.generate import rmat, uniform_labels
from egsm import layout as L
from egsm.cuckoo_trie import insert_kernel, lookup
from egsm.filter import filtering_order, neighbour_label_counts, prune_phases


@cuda.jit
def lookup_kernel(keys, meta, probe, out):
    i = cuda.grid(1)
    if i < probe.size:
        out[i] = lookup(keys, meta, 0, probe[i])


def _build(num_keys: int, buckets: int, seeds=(12345, 987)):
    n = num_keys + 20
    masks = np.zeros(n, np.int64)
    masks[:num_keys] = 1                                   # keys 0..num_keys-1 belong to u = 0
    meta = np.zeros(L.META_SIZE, np.int64)
    meta[L.M_NQ] = 1
    meta[L.M_NB] = buckets
    meta[L.M_CBASE + 1] = 2 * L.BUCKET * buckets
    meta[L.M_SEED:L.M_SEED + 2] = seeds
    d_keys = cuda.device_array(2 * L.BUCKET * buckets, np.int32)
    fill(d_keys, L.EMPTY)
    d_ctrl = cuda.to_device(np.zeros(L.CTRL_SIZE, np.int64))
    d_meta = cuda.to_device(meta)
    insert_kernel[2, 32](n, 0, cuda.to_device(masks), d_meta, d_keys, d_ctrl)
    probe = np.arange(n, dtype=np.int32)
    out = cuda.device_array(n, np.int64)
    lookup_kernel[1, 64](d_keys, d_meta, cuda.to_device(probe), out)
    return d_keys.copy_to_host(), out.copy_to_host(), d_ctrl.copy_to_host()[L.C_CUCKOO_FAIL]


def test_every_key_found_under_high_load():
    num_keys, buckets = 40, 3                              # 40 keys in 48 cells: evictions happen
    keys, cells, failed = _build(num_keys, buckets)
    assert failed == 0
    stored = keys[keys != L.EMPTY]
    assert sorted(stored.tolist()) == list(range(num_keys))
    assert all(keys[cells[k]] == k for k in range(num_keys))
    assert np.all(cells[num_keys:] == -1)
    assert len(set(cells[:num_keys].tolist())) == num_keys


def test_overfull_table_sets_failure_flag():
    _, _, failed = _build(60, 3)                           # 60 keys cannot fit in 48 cells
    assert failed == 1


def test_neighbour_label_counts_match_python():
    g = rmat(30, 80, seed=3, labels=uniform_labels(30, 4, seed=2))
    off, lab, cnt = neighbour_label_counts(g)
    for v in range(g.num_vertices):
        row = g.neighbors[g.offsets[v]:g.offsets[v + 1]]
        want = np.unique(g.labels[row], return_counts=True)
        assert np.array_equal(lab[off[v]:off[v + 1]], want[0])
        assert np.array_equal(cnt[off[v]:off[v + 1]], want[1])


def test_filtering_order_is_bfs_from_max_degree():
    adj = [[1], [0, 2, 3], [1, 4], [1], [2]]
    order = filtering_order(masks_of(adj))
    assert order.tolist() == [1, 0, 2, 3, 4]


def test_prune_phases_are_maximal_runs_of_independent_centres():
    adj = [[1], [0, 2, 3], [1, 4], [1], [2]]                 # a tree: 1 is the hub
    centres = [1, 0, 2, 3, 4] + [4, 3, 2, 0, 1]
    bounds = prune_phases(masks_of(adj), np.array(centres)).tolist()
    phases = [centres[a:b] for a, b in zip(bounds, bounds[1:])]
    assert phases == [[1], [0, 2, 3], [4], [4, 3], [2, 0], [1]]
    for a, b in zip(bounds, bounds[1:]):
        phase = centres[a:b]
        assert len(set(phase)) == len(phase)
        assert not any(v in adj[u] for u in phase for v in phase)
        if b < len(centres):                                 # the next centre conflicts
            nxt = centres[b]
            assert nxt in phase or any(v in adj[nxt] for v in phase)
