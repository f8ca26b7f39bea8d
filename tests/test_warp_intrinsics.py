"""Warp intrinsics, checked against NumPy on a GPU and under the simulator (common.gpu.cudasim).

Each kernel runs several rounds with fresh values, so a lane that read a value from an earlier
call, or a missing synchronisation, gives a wrong answer. Kernels use two blocks of two warps
unless the test is about partial warps or masks.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _extras import unavailable
from common.gpu.runtime import cuda

FULL = 0xFFFFFFFF
ROUNDS = 3
BLOCKS, THREADS = 2, 64
N = BLOCKS * THREADS


def _rng(seed):
    return np.random.default_rng(seed)


def _by_warp(a):
    """View the last axis of ``a`` as (warps, 32)."""
    return a.reshape(a.shape[:-1] + (-1, 32))


@cuda.jit
def _reduce_down(values, out):
    i = cuda.grid(1)
    for r in range(values.shape[0]):
        v = values[r, i]
        offset = 16
        while offset > 0:
            v += cuda.shfl_down_sync(FULL, v, offset)
            offset //= 2
        if cuda.laneid == 0:
            out[r, i // 32] = v


def test_shfl_down_reduction_over_rounds():
    values = _rng(1).integers(-1000, 1000, (ROUNDS, N)).astype(np.int64)
    out = np.zeros((ROUNDS, N // 32), np.int64)
    _reduce_down[BLOCKS, THREADS](values, out)
    np.testing.assert_array_equal(out, _by_warp(values).sum(axis=-1))


@cuda.jit
def _scan_up(values, out):
    i = cuda.grid(1)
    lane = cuda.laneid
    for r in range(values.shape[0]):
        v = values[r, i]
        delta = 1
        while delta < 32:
            up = cuda.shfl_up_sync(FULL, v, delta)
            if lane >= delta:
                v += up
            delta *= 2
        out[r, i] = v


def test_shfl_up_inclusive_scan_over_rounds():
    values = _rng(2).integers(-50, 50, (ROUNDS, N)).astype(np.int32)
    out = np.zeros_like(values)
    _scan_up[BLOCKS, THREADS](values, out)
    np.testing.assert_array_equal(_by_warp(out), np.cumsum(_by_warp(values), axis=-1))


@cuda.jit
def _xor_max(values, out):
    i = cuda.grid(1)
    for r in range(values.shape[0]):
        v = values[r, i]
        m = 1
        while m < 32:
            v = max(v, cuda.shfl_xor_sync(FULL, v, m))
            m *= 2
        out[r, i] = v


def test_shfl_xor_butterfly_gives_every_lane_the_max():
    values = _rng(3).standard_normal((ROUNDS, N))
    out = np.zeros_like(values)
    _xor_max[BLOCKS, THREADS](values, out)
    expected = np.repeat(_by_warp(values).max(axis=-1), 32, axis=-1)
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def _gather(values, sources, out):
    i = cuda.grid(1)
    for r in range(values.shape[0]):
        out[r, i] = cuda.shfl_sync(FULL, values[r, i], sources[r, i])


def test_shfl_sync_gathers_from_a_source_lane_that_changes():
    rng = _rng(4)
    values = rng.integers(0, 1 << 40, (ROUNDS, N)).astype(np.int64)
    # Round 0 broadcasts one lane, later rounds gather per lane; sources >= 32 wrap (src & 31).
    sources = rng.integers(0, 64, (ROUNDS, N)).astype(np.int32)
    sources[0] = 45
    out = np.zeros_like(values)
    _gather[BLOCKS, THREADS](values, sources, out)
    base = (np.arange(N) // 32) * 32
    expected = values[np.arange(ROUNDS)[:, None], base + (sources & 31)]
    np.testing.assert_array_equal(out, expected)
    assert (out[0].reshape(-1, 32) == out[0].reshape(-1, 32)[:, :1]).all()


@cuda.jit
def _compact(values, threshold, out, counts):
    i = cuda.grid(1)
    w = i // 32
    kept = 0
    for r in range(values.shape[0]):
        v = values[r, i]
        keep = v > threshold
        ballot = cuda.ballot_sync(FULL, keep)
        if keep:
            out[w, kept + cuda.popc(ballot & cuda.lanemask_lt())] = v
        kept += cuda.popc(ballot)
    if cuda.laneid == 0:
        counts[w] = kept


def test_ballot_popc_compaction_in_a_loop():
    values = _rng(5).integers(0, 100, (ROUNDS, N)).astype(np.int32)
    out = np.full((N // 32, ROUNDS * 32), -1, np.int32)
    counts = np.zeros(N // 32, np.int32)
    _compact[BLOCKS, THREADS](values, 60, out, counts)
    for w in range(N // 32):
        lanes = values[:, w * 32:(w + 1) * 32]
        expected = lanes[lanes > 60]               # round-major, lane order within a round
        assert counts[w] == expected.size
        np.testing.assert_array_equal(out[w, :expected.size], expected)


@cuda.jit
def _odd_and_low_lanes(values, pair_sums, odd_ballots, low_sums):
    i = cuda.grid(1)
    lane = cuda.laneid
    v = values[i]
    if lane % 2 == 1:
        pair_sums[i] = v + cuda.shfl_xor_sync(0xAAAAAAAA, v, 2)
        odd_ballots[i] = cuda.ballot_sync(0xAAAAAAAA, v % 2 == 0)
    else:
        cuda.syncwarp(0x55555555)
    if lane < 16:
        offset = 8
        while offset > 0:
            v += cuda.shfl_down_sync(0xFFFF, v, offset)
            offset //= 2
        if lane == 0:
            low_sums[i // 32] = v


def test_partial_masks_odd_lanes_and_first_sixteen():
    values = _rng(6).integers(0, 1000, N).astype(np.int64)
    pair_sums = np.zeros(N, np.int64)
    odd_ballots = np.zeros(N, np.uint32)
    low_sums = np.zeros(N // 32, np.int64)
    _odd_and_low_lanes[BLOCKS, THREADS](values, pair_sums, odd_ballots, low_sums)
    lane = np.arange(N) % 32
    odd = lane % 2 == 1
    np.testing.assert_array_equal(pair_sums[odd], values[odd] + values[np.arange(N) ^ 2][odd])
    for w in range(N // 32):
        seg = values[w * 32:(w + 1) * 32]
        bits = sum(1 << k for k in range(1, 32, 2) if seg[k] % 2 == 0)
        assert (odd_ballots[w * 32:(w + 1) * 32][1::2] == bits).all()
        assert low_sums[w] == seg[:16].sum()


@cuda.jit
def _partial_warp(values, scans, ballots, active):
    i = cuda.threadIdx.x
    lane = cuda.laneid
    mask = cuda.activemask()
    v = values[i]
    delta = 1
    while delta < 32:
        up = cuda.shfl_up_sync(mask, v, delta)
        if lane >= delta:
            v += up
        delta *= 2
    scans[i] = v
    ballots[i] = cuda.ballot_sync(mask, values[i] % 3 == 0)
    active[i] = mask


def test_partial_last_warp_of_48_threads():
    values = _rng(7).integers(0, 100, 48).astype(np.int64)
    scans = np.zeros(48, np.int64)
    ballots = np.zeros(48, np.uint32)
    active = np.zeros(48, np.uint32)
    _partial_warp[1, 48](values, scans, ballots, active)
    np.testing.assert_array_equal(scans[:32], np.cumsum(values[:32]))
    np.testing.assert_array_equal(scans[32:], np.cumsum(values[32:]))
    for lo, hi in ((0, 32), (32, 48)):
        bits = sum(1 << (k - lo) for k in range(lo, hi) if values[k] % 3 == 0)
        assert (ballots[lo:hi] == bits).all()
    assert (active[:32] == FULL).all() and (active[32:] == 0xFFFF).all()


@cuda.jit
def _after_exit(values, ballots, reversed_, synced):
    i = cuda.threadIdx.x
    if i >= 20:
        return
    cuda.syncwarp(FULL)                         # lanes 20-31 have exited: must not wait for them
    ballots[i] = cuda.ballot_sync(FULL, values[i] > 0)
    reversed_[i] = cuda.shfl_sync(FULL, values[i], 19 - i)
    synced[i] = cuda.all_sync(FULL, values[i] > -1000)


def test_exited_lanes_drop_out_of_full_masks():
    values = _rng(8).integers(-5, 5, 32).astype(np.int64)
    ballots = np.zeros(32, np.uint32)
    reversed_ = np.zeros(32, np.int64)
    synced = np.zeros(32, np.int32)
    _after_exit[1, 32](values, ballots, reversed_, synced)
    bits = sum(1 << k for k in range(20) if values[k] > 0)
    assert (ballots[:20] == bits).all() and (ballots[20:] == 0).all()
    np.testing.assert_array_equal(reversed_[:20], values[19::-1])
    assert (synced[:20] == 1).all() and (synced[20:] == 0).all()


@cuda.jit
def _ballot_2d(values, out):
    x, y = cuda.threadIdx.x, cuda.threadIdx.y
    out[y, x] = cuda.ballot_sync(FULL, values[y, x] > 0)


def test_warps_of_a_2d_block_follow_linear_thread_ids():
    """Block (16, 5): warp k holds linear ids 32k..32k+31 (x fastest); the third has 16 lanes."""
    values = _rng(12).integers(-3, 3, (5, 16)).astype(np.int64)
    out = np.zeros((5, 16), np.uint32)
    _ballot_2d[1, (16, 5)](values, out)
    flat, got = values.ravel() > 0, out.ravel()
    for lo in range(0, 80, 32):
        bits = sum(1 << (k - lo) for k in range(lo, min(lo + 32, 80)) if flat[k])
        assert (got[lo:lo + 32] == bits).all()


@cuda.jit
def _votes(preds, out_all, out_any, out_eq):
    i = cuda.grid(1)
    for r in range(preds.shape[0]):
        p = preds[r, i] != 0
        out_all[r, i] = cuda.all_sync(FULL, p)
        out_any[r, i] = cuda.any_sync(FULL, p)
        out_eq[r, i] = cuda.eq_sync(FULL, p)


def test_all_any_eq_votes():
    rng = _rng(9)
    preds = np.ones((5, N), np.int32)
    preds[1, 37] = 0                                      # one false lane in warp 1
    preds[2] = 0                                          # all false
    preds[3] = rng.integers(0, 2, N)
    preds[4, :32] = 0                                     # warp 0 false, others true
    out_all, out_any, out_eq = (np.full(preds.shape, -1, np.int32) for _ in range(3))
    _votes[BLOCKS, THREADS](preds, out_all, out_any, out_eq)
    w = _by_warp(preds != 0)
    for got, want in ((out_all, w.all(-1)), (out_any, w.any(-1)),
                      (out_eq, w.all(-1) | ~w.any(-1))):
        np.testing.assert_array_equal(got, np.repeat(want, 32, axis=-1).astype(np.int32))


@cuda.jit
def _match(values, out_any, out_all, out_pred):
    i = cuda.grid(1)
    out_any[i] = cuda.match_any_sync(FULL, values[i])
    mask, pred = cuda.match_all_sync(FULL, values[i])
    out_all[i] = mask
    out_pred[i] = pred


def test_match_any_and_match_all():
    values = np.concatenate([np.arange(32) % 5, np.full(32, 7)]).astype(np.int64)
    out_any, out_all = np.zeros(64, np.uint32), np.zeros(64, np.uint32)
    out_pred = np.full(64, -1, np.int32)
    _match[1, 64](values, out_any, out_all, out_pred)
    for i in range(64):
        base = i // 32 * 32
        same = values[base:base + 32] == values[i]
        assert out_any[i] == sum(1 << k for k in range(32) if same[k])
    assert (out_all[:32] == 0).all() and (out_pred[:32] == 0).all()
    assert (out_all[32:] == FULL).all() and (out_pred[32:] == 1).all()


@cuda.jit
def _exchange(values, out):
    slots = cuda.shared.array(64, np.int64)
    t = cuda.threadIdx.x
    lane = cuda.laneid
    i = cuda.grid(1)
    for r in range(values.shape[0]):
        slots[t] = values[r, i]
        cuda.syncwarp(FULL)
        out[r, i] = slots[t - lane + (lane + 1) % 32]
        cuda.syncwarp(FULL)


def test_syncwarp_orders_shared_memory_between_lanes():
    values = _rng(10).integers(0, 1 << 30, (6, N)).astype(np.int64)
    out = np.zeros_like(values)
    _exchange[BLOCKS, THREADS](values, out)
    np.testing.assert_array_equal(_by_warp(out), np.roll(_by_warp(values), -1, axis=-1))


@cuda.jit
def _block_votes(preds, counts, alls, anys, rotated):
    slots = cuda.shared.array(64, np.int32)
    t = cuda.threadIdx.x
    for r in range(preds.shape[0]):
        slots[t] = preds[r, t]
        p = preds[r, t]
        counts[r, t] = cuda.syncthreads_count(p)
        alls[r, t] = cuda.syncthreads_and(p)
        anys[r, t] = cuda.syncthreads_or(p)
        rotated[r, t] = slots[(t + 33) % 64]            # written by the other warp
        cuda.syncthreads()


def test_block_barriers_across_warps():
    """syncthreads and its counting forms, which the simulator's block runner implements."""
    preds = _rng(13).integers(0, 2, (4, 64)).astype(np.int32)
    preds[1] = 1
    preds[2] = 0
    counts, alls, anys, rotated = (np.full((4, 64), -1, np.int32) for _ in range(4))
    _block_votes[1, 64](preds, counts, alls, anys, rotated)
    np.testing.assert_array_equal(counts, np.repeat(preds.sum(1, keepdims=True), 64, 1))
    np.testing.assert_array_equal(alls, np.repeat(preds.all(1, keepdims=True), 64, 1))
    np.testing.assert_array_equal(anys, np.repeat(preds.any(1, keepdims=True), 64, 1))
    np.testing.assert_array_equal(rotated, np.roll(preds, -33, axis=1))


@cuda.jit
def _gaps(values, popcounts, mirrored):
    """Simulator gaps: popc of negative int32, nanosleep, dynamic shared memory (NumPy dtype)."""
    buf = cuda.shared.array(0, np.int32)
    lane = cuda.threadIdx.x
    popcounts[lane] = cuda.popc(values[lane])
    buf[lane] = values[lane]
    cuda.nanosleep(100)
    cuda.syncwarp(FULL)
    mirrored[lane] = buf[31 - lane]


def test_popc_nanosleep_and_dynamic_shared_memory():
    values = _rng(11).integers(-(1 << 31), 1 << 31, 32).astype(np.int32)
    values[:3] = (-1, -8, 0)
    popcounts, mirrored = np.zeros(32, np.int32), np.zeros(32, np.int32)
    _gaps[1, 32, 0, 32 * 4](values, popcounts, mirrored)
    np.testing.assert_array_equal(popcounts, [bin(int(v) & FULL).count("1") for v in values])
    np.testing.assert_array_equal(mirrored, values[::-1])


# Simulator diagnostics: kernels that are wrong on purpose. They deadlock or read undefined values
# on a GPU, so they always run in a child process with the simulator on.

_DIAGNOSTICS = r'''
import json
import numpy as np
from common.gpu.runtime import cuda
from common.gpu.cudasim import UNDEFINED_INT, WarpSyncError

FULL = 0xFFFFFFFF

@cuda.jit
def mismatched_intrinsics(out):
    if cuda.threadIdx.x < 16:
        out[0] = cuda.shfl_sync(FULL, 1, 0)
    else:
        out[1] = cuda.ballot_sync(FULL, True)

@cuda.jit
def warp_op_against_syncthreads(out):
    if cuda.threadIdx.x < 16:
        out[0] = cuda.shfl_sync(FULL, 1, 0)
    else:
        cuda.syncthreads()

@cuda.jit
def cyclic_masks(out):
    t = cuda.threadIdx.x
    if t == 0:
        cuda.syncwarp(0b011)
    elif t == 1:
        cuda.syncwarp(0b110)
    elif t == 2:
        cuda.syncwarp(0b101)

@cuda.jit
def caller_not_in_mask(out):
    cuda.syncwarp(0xFFFF0000)

@cuda.jit
def grid_sync_two_blocks(out):
    cuda.cg.this_grid().sync()

@cuda.jit
def reads_outside_mask(out):
    lane = cuda.threadIdx.x
    if lane < 16:
        out[lane] = cuda.shfl_down_sync(0xFFFF, lane * 10, 8)

report = {}
for name, kernel, grid, threads in [
        ("mismatch", mismatched_intrinsics, 1, 32),
        ("syncthreads", warp_op_against_syncthreads, 1, 32),
        ("cycle", cyclic_masks, 1, 32),
        ("not_in_mask", caller_not_in_mask, 1, 32),
        ("grid_sync", grid_sync_two_blocks, 2, 32)]:
    try:
        kernel[grid, threads](np.zeros(2, np.int64))
        report[name] = "no error"
    except WarpSyncError as exc:
        report[name] = str(exc)
out = np.zeros(16, np.int64)
reads_outside_mask[1, 32](out)
report["outside"] = out.tolist()
report["undefined"] = UNDEFINED_INT
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def diagnostics():
    if importlib.util.find_spec("greenlet") is None:      # on a GPU, only these tests need the simulator
        unavailable("needs greenlet, the simulator's threads (a base dependency: make install)")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", _DIAGNOSTICS], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_simulator_reports_mismatched_intrinsics(diagnostics):
    message = diagnostics["mismatch"]                # either group may arrive first
    assert "(mask=0xffffffff) while lanes" in message and "with the same mask" in message
    assert "shfl_sync" in message and "ballot_sync" in message


@pytest.mark.slow
def test_simulator_reports_deadlocks(diagnostics):
    assert "deadlocked" in diagnostics["syncthreads"]
    assert "lanes 0-15 in shfl_sync(mask=0xffffffff)" in diagnostics["syncthreads"]
    assert "lanes 16-31 in syncthreads()" in diagnostics["syncthreads"]
    for mask in ("0x00000003", "0x00000006", "0x00000005"):
        assert mask in diagnostics["cycle"]


@pytest.mark.slow
def test_simulator_rejects_caller_outside_mask_and_multi_block_grid_sync(diagnostics):
    assert "does not include the calling lane" in diagnostics["not_in_mask"]
    assert "max_cooperative_grid_blocks" in diagnostics["grid_sync"]


@pytest.mark.slow
def test_simulator_poisons_reads_from_lanes_outside_the_mask(diagnostics):
    out = diagnostics["outside"]
    assert out[:8] == [10 * (lane + 8) for lane in range(8)]
    assert out[8:] == [diagnostics["undefined"]] * 8
