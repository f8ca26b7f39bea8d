"""common.gpu.runtime, common.gpu.scan and common.gpu.device_functions against NumPy, on a GPU or under the
simulator (tests/conftest.py picks)."""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest

from common.errors import DeviceOutOfMemory
from common.gpu.budget import DeviceMemoryBudget
from common.gpu.copies import download, fill, upload
from common.gpu.device_functions import (
    contains,
    hash32,
    hash32_host,
    intersect,
    intersect_walk,
    lower_bound,
    warp_max,
    warp_seek,
    warp_sum,
)
from common.gpu.pool import BufferPool
from common.gpu.runtime import cuda, device_info, gpu_available, kernel_resources, simulator_active
from common.gpu.scan import SCAN_TILE, ScanWorkspace, exclusive_scan, warp_inclusive_scan
from common.gpu.timers import PhaseTimer


def _exclusive(a, dtype):
    out = np.zeros(a.size, dtype)
    out[1:] = np.cumsum(a.astype(np.int64))[:-1]
    return out


# ---------------------------------------------------------------------------------------------
# exclusive_scan

# SCAN_TILE**2 + 7 needs three levels (two rounds of tile totals) on the GPU and the simulator.
SIZES = [0, 1, 31, 32, 33, 1000, 5000, SCAN_TILE * SCAN_TILE + 7]


@pytest.mark.parametrize("n", SIZES)
def test_exclusive_scan_int64_in_place(n):
    a = np.random.default_rng(n).integers(-1000, 1000, n).astype(np.int64)
    d = cuda.to_device(a)
    total = exclusive_scan(d)
    assert total == int(a.sum())
    np.testing.assert_array_equal(d.copy_to_host(), _exclusive(a, np.int64))


@pytest.mark.slow_cases("5000")
@pytest.mark.parametrize("n", [33, 1000, 5000])
def test_exclusive_scan_int32_counts_to_int64_offsets(n):
    a = np.random.default_rng(n + 1).integers(0, 1 << 20, n).astype(np.int32)
    d_in, d_out = cuda.to_device(a), cuda.device_array(n, np.int64)
    assert exclusive_scan(d_in, d_out) == int(a.astype(np.int64).sum())
    np.testing.assert_array_equal(d_out.copy_to_host(), _exclusive(a, np.int64))
    np.testing.assert_array_equal(d_in.copy_to_host(), a)          # input untouched


@pytest.mark.slow
def test_exclusive_scan_int32_in_place_with_a_reused_workspace():
    workspace = ScanWorkspace(5000, np.int32)
    rng = np.random.default_rng(7)
    stream = cuda.stream()
    for n in (5000, 1000, 64, 1):
        a = rng.integers(-100, 100, n).astype(np.int32)
        d = cuda.to_device(a)
        assert exclusive_scan(d, stream=stream, workspace=workspace) == int(a.sum())
        np.testing.assert_array_equal(d.copy_to_host(), _exclusive(a, np.int32))


def test_exclusive_scan_of_a_prefix_leaves_the_rest_alone():
    a = np.random.default_rng(3).integers(0, 100, 3000).astype(np.int64)
    d_in, d_out = cuda.to_device(a), cuda.to_device(np.full(3000, -7, np.int64))
    workspace = ScanWorkspace(3000, np.int64)
    assert exclusive_scan(d_in, d_out, workspace=workspace, n=1100) == int(a[:1100].sum())
    out = d_out.copy_to_host()
    np.testing.assert_array_equal(out[:1100], _exclusive(a[:1100], np.int64))
    assert (out[1100:] == -7).all()
    assert exclusive_scan(d_in, d_out, workspace=workspace, n=40, want_total=False) is None
    np.testing.assert_array_equal(d_out.copy_to_host()[:40], _exclusive(a[:40], np.int64))
    with pytest.raises(ValueError, match="3001 elements"):
        exclusive_scan(d_in, d_out, workspace=workspace, n=3001)


def test_exclusive_scan_rejects_bad_arguments():
    small = ScanWorkspace(10, np.int64)
    with pytest.raises(ValueError, match="does not fit"):
        exclusive_scan(cuda.to_device(np.ones(100, np.int64)), workspace=small)
    with pytest.raises(ValueError, match="does not fit"):
        exclusive_scan(cuda.to_device(np.ones(5, np.int32)), workspace=small)
    with pytest.raises(TypeError, match="int32/int64"):
        exclusive_scan(cuda.to_device(np.ones(5, np.float64)))
    with pytest.raises(TypeError, match="int32/int64"):
        exclusive_scan(cuda.to_device(np.ones((2, 3), np.int64)))
    with pytest.raises(ValueError, match="elements"):
        exclusive_scan(cuda.to_device(np.ones(5, np.int64)), cuda.device_array(4, np.int64))
    with pytest.raises(TypeError, match="int32 or int64"):
        ScanWorkspace(10, np.float32)


@cuda.jit
def _warp_scan_prefix(values, out, lanes):
    lane = cuda.threadIdx.x
    if lane < lanes:
        out[lane] = warp_inclusive_scan((1 << lanes) - 1, values[lane])


def test_warp_inclusive_scan_over_a_prefix_mask():
    values = np.random.default_rng(3).integers(-9, 9, 32).astype(np.int64)
    out = np.zeros(32, np.int64)
    _warp_scan_prefix[1, 32](values, out, 20)
    np.testing.assert_array_equal(out[:20], np.cumsum(values[:20]))
    assert (out[20:] == 0).all()


# ---------------------------------------------------------------------------------------------
# device_functions


@cuda.jit
def _searches(arr, lo, hi, keys, bounds, present):
    i = cuda.grid(1)
    if i < keys.size:
        bounds[i] = lower_bound(arr, lo, hi, keys[i])
        present[i] = contains(arr, lo, hi, keys[i])


def test_searches_match_searchsorted():
    rng = np.random.default_rng(11)
    arr = np.unique(rng.integers(0, 1000, 300)).astype(np.int32)
    lo, hi = 10, arr.size - 20
    keys = np.concatenate([rng.choice(arr, 40), rng.integers(-5, 1005, 40),
                           arr[[0, lo, hi - 1, hi]]]).astype(np.int32)
    bounds, present = (np.zeros(keys.size, np.int64) for _ in range(2))
    _searches[(keys.size + 31) // 32, 32](arr, lo, hi, keys, bounds, present)
    expected_bounds = lo + np.searchsorted(arr[lo:hi], keys, side="left")
    np.testing.assert_array_equal(bounds, expected_bounds)
    hit = (expected_bounds < hi) & (arr[np.minimum(expected_bounds, arr.size - 1)] == keys)
    np.testing.assert_array_equal(present, hit.astype(np.int64))
    assert hit.any() and (~hit).any()


@cuda.jit
def _warp_seeks(arr, los, his, keys, found):
    """A warp per query: found[q] = warp_seek(arr, los[q], his[q], keys[q]), every lane's answer."""
    q = cuda.blockIdx.x
    got = warp_seek(arr, los[q], his[q], keys[q])
    agree = cuda.all_sync(0xFFFFFFFF, got == cuda.shfl_sync(0xFFFFFFFF, got, 0))
    if cuda.laneid == 0:
        found[q] = got if agree else -1


def test_warp_seek_matches_searchsorted_near_and_far():
    """Answers 0-40,000 entries past lo (one round, the grown and the shrunk windows), past hi,
    at lo, keys absent and present, empty and one-entry ranges."""
    rng = np.random.default_rng(12)
    arr = np.unique(rng.integers(0, 1 << 22, 60_000)).astype(np.int32)
    cases = [(0, arr.size, arr[d]) for d in (0, 1, 31, 32, 33, 1023, 1024, 1025, 5000, 40_000)]
    cases += [(100, 50_000, arr[100] - 1), (100, 50_000, arr[60] + 0), (100, 50_000, arr[50_000] + 1),
              (7, 7, 5), (7, 8, arr[7]), (7, 8, arr[7] + 1), (3, 35_000, arr[20_000] + 1)]
    cases += [(lo, lo + n, rng.integers(0, 1 << 22)) for lo, n in zip(rng.integers(0, 20_000, 16),
                                                                          rng.integers(1, 40_000, 16))]
    los, his, keys = (np.array(c, dt) for c, dt in zip(zip(*cases), (np.int64, np.int64, np.int32)))
    found = np.zeros(los.size, np.int64)
    _warp_seeks[los.size, 32](arr, los, his, keys, found)
    expected = [lo + np.searchsorted(arr[lo:hi], k, side="left") for lo, hi, k in zip(los, his, keys)]
    np.testing.assert_array_equal(found, expected)


@cuda.jit
def _warp_reductions(values, out):
    w = cuda.grid(1) // 32
    x = values[w * 32 + cuda.laneid]
    total = warp_sum(x)
    largest = warp_max(x)
    if cuda.laneid == 0:
        out[w, 0] = total
        out[w, 1] = largest


def test_warp_sum_and_max_reach_lane_zero():
    """Each warp's sum and maximum of 32 int64 values, negatives and values past 2^32 included."""
    rng = np.random.default_rng(5)
    values = rng.integers(-(1 << 40), 1 << 40, 3 * 32).astype(np.int64)
    values[64:96] = rng.integers(-50, 0, 32)                  # a warp of negatives only
    out = np.zeros((3, 2), np.int64)
    _warp_reductions[1, 96](values, out)
    np.testing.assert_array_equal(out[:, 0], values.reshape(3, 32).sum(axis=1))
    np.testing.assert_array_equal(out[:, 1], values.reshape(3, 32).max(axis=1))


@cuda.jit
def _intersections(values, offsets, pairs, counts, out, out_offsets):
    i = cuda.grid(1)
    if i < pairs.shape[0]:
        a, b = pairs[i, 0], pairs[i, 1]
        a_lo, a_hi, b_lo, b_hi = offsets[a], offsets[a + 1], offsets[b], offsets[b + 1]
        counts[i, 0] = intersect_walk(values, a_lo, a_hi, values, b_lo, b_hi, None, 0, False)   # merge
        counts[i, 1] = intersect_walk(values, a_lo, a_hi, values, b_lo, b_hi, None, 0, True)    # search
        counts[i, 2] = intersect(values, a_lo, a_hi, values, b_lo, b_hi, None, 0)
        base = out_offsets[i]
        counts[i, 3] = intersect_walk(values, a_lo, a_hi, values, b_lo, b_hi, out[0], base, False)
        counts[i, 4] = intersect_walk(values, a_lo, a_hi, values, b_lo, b_hi, out[1], base, True)
        counts[i, 5] = intersect(values, a_lo, a_hi, values, b_lo, b_hi, out[2], base)


def test_intersections_match_intersect1d():
    rng = np.random.default_rng(12)
    sizes = [0, 1, 3, 8, 40, 300, 500, 2, 60]
    sets = [np.unique(rng.integers(0, 700, s)).astype(np.int32) for s in sizes]
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(np.int64)
    values = np.concatenate(sets).astype(np.int32)
    pairs = np.array([(a, b) for a in range(len(sets)) for b in range(len(sets))], np.int64)
    expected = [np.intersect1d(sets[a], sets[b]) for a, b in pairs]
    sizes_out = np.array([len(e) for e in expected])
    out_offsets = np.concatenate([[0], np.cumsum(sizes_out)]).astype(np.int64)
    counts = np.zeros((len(pairs), 6), np.int64)
    out = np.full((3, max(1, out_offsets[-1])), -1, np.int32)
    _intersections[(len(pairs) + 31) // 32, 32](values, offsets, pairs, counts, out, out_offsets)
    np.testing.assert_array_equal(counts, np.repeat(sizes_out[:, None], 6, axis=1))
    for row in out:
        np.testing.assert_array_equal(row[:out_offsets[-1]], np.concatenate(expected))
    assert sizes_out.max() > 20 and (sizes_out == 0).any()


def _murmur2_reference(data: bytes, seed: int) -> int:
    """MurmurHash2 (32-bit) over bytes, written from the algorithm's definition."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (seed ^ len(data)) & mask
    for j in range(0, len(data) - len(data) % 4, 4):
        k = int.from_bytes(data[j:j + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = data[len(data) - len(data) % 4:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    return h ^ (h >> 15)


@cuda.jit
def _hashes(keys, seed, out):
    i = cuda.grid(1)
    if i < keys.size:
        out[i] = hash32(keys[i], seed)


@pytest.mark.parametrize("seed", [0, 0x9747B28C])
def test_hash32_device_host_and_reference_agree(seed):
    keys = np.concatenate([[0, 1, -1, 2**31 - 1, -(2**31)],
                           np.random.default_rng(seed % 1000).integers(-(2**31), 2**31, 59)]
                          ).astype(np.int32)
    device = np.zeros(keys.size, np.uint32)
    _hashes[2, 32](keys, seed, device)
    host = np.array([hash32_host(k, seed) for k in keys], np.uint32)
    reference = [_murmur2_reference(int(k).to_bytes(4, "little", signed=True), seed)
                 for k in keys]
    np.testing.assert_array_equal(device, reference)
    np.testing.assert_array_equal(host, reference)
    assert len(set(reference)) == len(set(keys.tolist()))


# ---------------------------------------------------------------------------------------------
# DeviceMemoryBudget, fill


def test_budget_accounts_allocations_and_raises_with_the_label():
    budget = DeviceMemoryBudget(limit_bytes=1000)
    a = budget.device_array(100, np.int32, what="candidates")
    b = budget.to_device(np.arange(100, dtype=np.int32), what="signatures")
    assert (budget.in_use, budget.peak) == (800, 800)
    assert budget.live() == {"candidates": 400, "signatures": 400}
    np.testing.assert_array_equal(b.copy_to_host(), np.arange(100))
    with pytest.raises(DeviceOutOfMemory, match="for edge table") as err:
        budget.device_array((10, 10), np.int64, what="edge table")
    assert (err.value.requested, err.value.in_use, err.value.limit) == (800, 800, 1000)
    assert budget.in_use == 800
    budget.free(a)
    assert (budget.in_use, budget.peak) == (400, 800)
    with pytest.raises(KeyError):
        budget.free(a)
    budget.reset_peak()
    assert budget.peak == 400
    with budget.scope():
        scratch = budget.device_array(500, np.uint8, what="scratch")
        assert budget.in_use == 900
    assert (budget.in_use, budget.peak) == (400, 900)
    with pytest.raises(KeyError):
        budget.free(scratch)
    del b
    gc.collect()
    assert budget.in_use == 0


def test_budget_converts_a_real_out_of_memory():
    budget = DeviceMemoryBudget(limit_bytes=1 << 62)
    with pytest.raises(DeviceOutOfMemory, match="for huge"):
        budget.device_array(1 << 55, np.int64, what="huge")          # 256 PiB
    assert budget.in_use == 0


def test_budget_default_limit_and_validation():
    budget = DeviceMemoryBudget()
    if simulator_active():
        assert budget.limit is None
    else:
        assert 0 < budget.limit <= device_info()["total_memory"]
    with pytest.raises(ValueError):
        DeviceMemoryBudget(limit_bytes=-1)


def test_zeros_and_fill():
    budget = DeviceMemoryBudget(limit_bytes=1 << 20)
    z = budget.zeros((3, 50), np.int64, what="counters")
    np.testing.assert_array_equal(z.copy_to_host(), np.zeros((3, 50)))
    fill(z, 7)
    np.testing.assert_array_equal(z.copy_to_host(), np.full((3, 50), 7))
    assert budget.in_use == 3 * 50 * 8


def test_upload_and_download_round_trip_whole_and_leading_parts():
    d = cuda.to_device(np.zeros((4, 5), np.int32))
    upload(d, np.arange(20, dtype=np.int32).reshape(4, 5))            # a 2-D array, whole
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(20).reshape(4, 5))
    upload(d, np.full(7, -1, np.int32))                               # the first 7 elements
    expected = np.arange(20).reshape(4, 5)
    expected.reshape(-1)[:7] = -1
    np.testing.assert_array_equal(d.copy_to_host(), expected)
    out = download(d, np.empty((2, 3), np.int32))                     # the first 6, shaped
    np.testing.assert_array_equal(out, expected.reshape(-1)[:6].reshape(2, 3))
    assert download(d, np.empty(0, np.int32)).size == 0


def test_upload_and_download_reject_mismatched_arrays():
    d = cuda.to_device(np.zeros(6, np.int64))
    with pytest.raises(TypeError, match="dtype int32"):
        upload(d, np.zeros(6, np.int32))
    with pytest.raises(ValueError, match="7 elements do not fit"):
        download(d, np.empty(7, np.int64))
    with pytest.raises(ValueError, match="contiguous"):
        download(d, np.empty((3, 4), np.int64)[:, :2])
    with pytest.raises(ValueError, match="3 elements do not fit a device array of 6 at element 4"):
        upload(d, np.ones(3, np.int64), start=4)
    np.testing.assert_array_equal(d.copy_to_host(), np.zeros(6))     # nothing was written


def test_upload_at_an_offset_writes_only_its_range():
    d = cuda.to_device(np.zeros(6, np.int64))
    upload(d, np.array([7, 8], np.int64), start=3)
    np.testing.assert_array_equal(d.copy_to_host(), [0, 0, 0, 7, 8, 0])


@pytest.mark.parametrize("dtype,value", [(np.int64, 0), (np.int64, -1), (np.int64, 5), (np.int32, -1),
                                         (np.float64, 0.5), (np.int8, 3)])
def test_fill_sets_the_first_count_elements(dtype, value):
    d = cuda.to_device(np.full(10, 9, dtype))
    fill(d, value, count=4)                 # on a GPU: a memset for 0 and -1, else a launch
    np.testing.assert_array_equal(d.copy_to_host(), np.array([value] * 4 + [9] * 6, dtype))
    fill(d, value)
    np.testing.assert_array_equal(d.copy_to_host(), np.full(10, value, dtype))
    with pytest.raises(ValueError, match="fill count 11 outside"):
        fill(d, value, count=11)


# ---------------------------------------------------------------------------------------------
# PhaseTimer, device_info, kernel_resources


def test_phase_timer_accumulates_non_negative_phases():
    timer = PhaseTimer()
    d = cuda.device_array(256, np.int32)
    with timer.phase("fill"):
        fill(d, 1)
    for _ in range(2):
        with timer.phase("sleep"):
            time.sleep(0.01)
    timer.add("host", 0.5)
    seconds = timer.seconds
    assert set(seconds) == {"fill", "sleep", "host"}
    assert seconds["fill"] >= 0.0 and seconds["sleep"] >= 0.015 and seconds["host"] == 0.5
    timer.reset()
    assert timer.seconds == {}


def test_device_info_describes_the_device():
    info = device_info()
    assert info["simulator"] is simulator_active()
    assert info["available"] and info["numba_cuda"]
    assert gpu_available() is (not simulator_active())
    if simulator_active():
        assert info["name"] == "Numba CUDA simulator"
    else:
        assert info["total_memory"] >= info["free_memory"] > 0
        assert info["multiprocessors"] > 0 and info["compute_capability"] >= (7, 0)


@cuda.jit
def _staged_copy(src, dst):
    buf = cuda.shared.array(128, np.int32)
    t = cuda.threadIdx.x
    buf[t] = src[t]
    cuda.syncthreads()
    dst[t] = buf[127 - t]


def test_kernel_resources():
    src = cuda.to_device(np.arange(128, dtype=np.int32))
    dst = cuda.device_array(128, np.int32)
    _staged_copy[1, 128](src, dst)
    np.testing.assert_array_equal(dst.copy_to_host(), np.arange(128)[::-1])
    resources = kernel_resources(_staged_copy, src, dst)
    if simulator_active():
        assert resources == {}
    else:
        assert resources["registers_per_thread"] > 0
        assert resources["shared_bytes_per_block"] == 128 * 4
        assert resources["local_bytes_per_thread"] >= 0
        assert resources["max_threads_per_block"] >= 128


def _query_on(pool, budget, sizes):
    """One 'query' of a pooled engine: reset the peak, ask for buffers of these sizes."""
    budget.reset_peak()
    for name, size in sizes.items():
        pool.get(name, size, np.int32)
    return budget.peak


def test_buffer_pool_peak_is_the_query_s_own_demand():
    budget = DeviceMemoryBudget(None)
    kept = budget.device_array(100, np.int32, "prepared state")       # 400 B for every query
    pool = BufferPool(budget, prefix="test ")
    small = {"rows": 10, "keys": 5}
    first = _query_on(pool, budget, small)
    assert first == 400 + 15 * 4
    _query_on(pool, budget, {"rows": 1000, "keys": 700})             # grows the buffers
    assert budget.in_use >= 400 + 1700 * 4
    assert _query_on(pool, budget, small) == first                   # same query, same peak
    pool.free_all()
    assert budget.in_use == 400 and budget.peak >= 400
    del kept


def test_buffer_pool_scan_workspace_counts_as_far_as_the_query_s_scans_need_it():
    from common.gpu.scan import workspace_bytes

    budget = DeviceMemoryBudget(None)
    pool = BufferPool(budget)

    def scans(*sizes):
        budget.reset_peak()
        for size in sizes:
            pool.scan(size)
        return budget.peak

    small = scans(100)
    assert small == workspace_bytes(100) > 0
    assert scans(10_000_000) >= workspace_bytes(10_000_000) > small      # grows the workspace
    assert scans(100) == small and budget.in_use >= workspace_bytes(10_000_000)
    pool.free_all()
    assert budget.in_use == 0 and scans() == 0


def test_buffer_pool_reuses_grows_keeps_and_checks_the_limit():
    budget = DeviceMemoryBudget(4096)
    pool = BufferPool(budget, growth=2.0)
    a = pool.get("a", 10, np.int64)
    a.copy_to_device(np.arange(10, dtype=np.int64))
    assert pool.get("a", 8, np.int64).size == 10                     # reused, not reallocated
    b = pool.get("a", 12, np.int64, keep=10)                         # grown x2, first 10 kept
    assert b.size == 20 and np.array_equal(b[:10].copy_to_host(), np.arange(10))
    view = pool.upload("h", np.arange(6, dtype=np.int32).reshape(2, 3))
    assert view.shape == (2, 3) and np.array_equal(view.copy_to_host(), np.arange(6).reshape(2, 3))
    with pytest.raises(DeviceOutOfMemory, match="big"):
        pool.get("big", 10_000, np.int64)
    workspace = pool.scan(5000)
    assert pool.scan(100) is workspace and pool.scan(6000) is not workspace
    pool.free_all()
    assert budget.in_use == 0


def test_buffer_pool_views_are_made_once_per_buffer_and_shape():
    pool = BufferPool(DeviceMemoryBudget(None), growth=2.0)
    view = pool.get("rows", (4, 3), np.int32)
    assert pool.get("rows", (4, 3), np.int32) is view                # no new slice per query
    assert pool.get("rows", (2, 3), np.int32).shape == (2, 3)
    grown = pool.get("rows", (10, 3), np.int32)                      # a new buffer: new views
    assert pool.get("rows", (4, 3), np.int32) is not view and grown.shape == (10, 3)
    first = pool.upload("plan", np.arange(6, dtype=np.int64).reshape(3, 2))
    again = pool.upload("plan", np.arange(6, 12, dtype=np.int64).reshape(3, 2))
    assert again is first and np.array_equal(again.copy_to_host(), np.arange(6, 12).reshape(3, 2))
    pool.free("plan")
    assert np.array_equal(pool.upload("plan", np.arange(6, dtype=np.int64).reshape(3, 2)).copy_to_host(),
                          np.arange(6).reshape(3, 2))
