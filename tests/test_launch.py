"""Quick kernel launches (common.gpu.launch): the same results as numba-cuda's own launches, whatever
arrays, views, dtypes, scalars and streams a call site passes. On a GPU this runs the quick path;
under the simulator ``jit`` is ``cuda.jit`` and the kernels still have to compute the same."""

import numpy as np
import pytest

from common.gpu import launch
from common.gpu.runtime import cuda, jit, simulator_active


@jit
def _axpy(out, x, a, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = out[i] + a * x[i]


@jit
def _sum_rows(table, sums):
    row = cuda.grid(1)
    if row < table.shape[0]:
        total = 0
        for j in range(table.shape[1]):
            total += table[row, j]
        sums[row] = total


def test_jit_is_a_quick_kernel_only_on_a_gpu():
    quick = not simulator_active() and launch.ENABLED
    assert isinstance(_axpy, launch.Kernel) is quick
    assert _axpy.py_func.__name__ == "_axpy"             # the dispatcher's attributes pass through


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_launches_compute_what_numpy_does_across_dtypes_views_and_scalars(dtype):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 50, 300).astype(dtype)
    out = rng.integers(0, 50, 300).astype(dtype)
    d_x, d_out = cuda.to_device(x), cuda.to_device(out)
    expected = out.copy()
    for a, n in ((3, 300), (np.int32(2), 200), (np.int64(5), 17), (1, 0)):
        _axpy[(n + 63) // 64 or 1, 64](d_out, d_x, a, n)
        expected[:n] += a * x[:n]
        np.testing.assert_array_equal(d_out.copy_to_host(), expected)
    # a strided view (a different overload: layout 'A') and a slice (a new array object, new pointer)
    _axpy[5, 64](d_out[1::2], d_x[::2], 2, 150)
    expected[1::2] += 2 * x[::2]
    _axpy[2, 64](d_out[100:], d_x[:200], 1, 100)
    expected[100:200] += x[:100]
    np.testing.assert_array_equal(d_out.copy_to_host(), expected)


def test_two_dimensional_arrays_streams_and_fresh_arrays():
    stream = cuda.stream()
    for rows in (1, 7, 40):
        table = np.arange(rows * 5, dtype=np.int64).reshape(rows, 5)
        d_sums = cuda.device_array(rows, np.int64)
        _sum_rows[1, 64, stream](cuda.to_device(table), d_sums)
        stream.synchronize()
        np.testing.assert_array_equal(d_sums.copy_to_host(), table.sum(axis=1))


def test_a_host_array_argument_still_works_through_numba():
    out = np.zeros(10, np.int32)
    _axpy[1, 32](out, np.arange(10, dtype=np.int32), 2, 10)          # numba copies in and back
    np.testing.assert_array_equal(out, 2 * np.arange(10))


def test_argument_types_are_numba_s_types():
    import numba

    args = (cuda.to_device(np.zeros((3, 2), np.int32)), cuda.to_device(np.zeros(4, np.uint32))[::2], 7,
            np.int32(3), 2.5, True)
    assert launch.argument_types(args) == tuple(numba.typeof(a) for a in args)


def test_back_to_back_launches_follow_each_changed_argument():
    """Repeated launches at one call site (the quick path repacks only what changed): scalars
    of the same and of other types, a new array of the same kind in place of a freed one, a view,
    and back to the first overload; every result as numpy computes it."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 9, 256).astype(np.int64)
    d_x = cuda.to_device(x)
    d_out = cuda.to_device(np.zeros(256, np.int64))
    expected = np.zeros(256, np.int64)
    for step, a in enumerate((1, 2, 2, np.int64(3), 4, np.int32(5), 6, 7)):
        n = 256 - 16 * step
        if step == 4:                          # a fresh output array replaces the old one
            d_out, expected = cuda.to_device(expected), expected.copy()
        if step == 6:                          # a fresh input array of the same kind
            x = x[::-1].copy()
            d_x = cuda.to_device(x)
        _axpy[(n + 63) // 64, 64](d_out, d_x, a, n)
        expected[:n] += a * x[:n]
        np.testing.assert_array_equal(d_out.copy_to_host(), expected)
    _axpy[2, 64](d_out[::2], d_x[::2], 1, 128)   # a strided view: another overload
    expected[::2] += x[::2]
    _axpy[4, 64](d_out, d_x, 1, 256)             # and back
    expected += x
    np.testing.assert_array_equal(d_out.copy_to_host(), expected)


def test_a_repacked_parameter_block_equals_a_fresh_pack(monkeypatch):
    """The quick path's bookkeeping without a GPU: a fake driver records the parameter block of
    every launch; after any sequence of launches (same arrays, new scalars, a new array of the
    same kind, a large int) it must equal the block packed from scratch for that launch's
    arguments, and a new argument kind must leave the quick path."""
    import ctypes
    from types import SimpleNamespace

    class FakeDeviceArray:               # numba's device array as the quick path sees it
        def __init__(self, pointer, size):
            self.__dict__["_launch_words"] = (0, "array(int64, 1d, C)", (0, 0, size, 8, pointer, size, 8))

    blocks, first = [], []

    def launch_kernel(handle, *grid_block_shared_stream_parameters_extra):
        blocks.append(bytes(entry.buffer))
        return (0,)                      # CUDA_SUCCESS

    monkeypatch.setattr(launch, "_DEVICE_ARRAY", FakeDeviceArray)
    monkeypatch.setattr(launch, "_NUMBA", SimpleNamespace(launch_kernel=launch_kernel))
    entry = launch._Parameters(1, ["q" * 7, "q" * 7, "q", "i"])
    kernel = object.__new__(launch.Kernel)
    kernel.__dict__.update(dispatcher=None, _last=None, _overloads={(0, 0, int, np.int32): entry},
                           _first_launch=lambda kinds, config, args: first.append(kinds))
    run = launch._Launch(kernel, (1, 1, 1), (32, 1, 1), 0, 0)

    def fresh(args):
        words = []
        for put, value in zip(entry.putters, args):
            put(value, words)
        buffer = ctypes.create_string_buffer(len(entry.buffer))
        entry.pack(buffer, 0, *words)
        return bytes(buffer)

    a, b, c = FakeDeviceArray(4096, 10), FakeDeviceArray(8192, 20), FakeDeviceArray(16384, 30)
    sequence = [(a, b, 5, np.int32(1)), (a, b, 6, np.int32(1)), (a, b, 6, np.int32(7)), (c, b, 6, np.int32(7)),
                (c, a, 2 ** 40, np.int32(7)), (c, a, -3, np.int32(-7)), (a, b, 5, np.int32(1))]
    for args in sequence:
        run(*args)
        assert blocks[-1] == fresh(args)
    assert len(blocks) == len(sequence) and not first
    run(a, b, 5, np.int64(1))            # another kind: numba's first launch, not the quick path
    assert first == [(0, 0, int, np.int64)] and len(blocks) == len(sequence)
    run(a, b, 9, np.int32(3))            # and back: a full pack
    assert blocks[-1] == fresh((a, b, 9, np.int32(3)))



@jit
def _total_minus_each(values, out, n):
    """out[0] = sum(values), a grid barrier, then out[i] = out[0] - values[i] for i > 0 (wrong
    without the barrier: some blocks would read out[0] before others have added to it)."""
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, n, stride):
        cuda.atomic.add(out, 0, values[i])
    cuda.cg.this_grid().sync()
    for i in range(start, n, stride):
        if i > 0:
            out[i] = out[0] - values[i]


def test_a_cooperative_kernel_launches_its_whole_grid_with_barriers():
    """A kernel with a grid barrier goes through the quick path (cuLaunchCooperativeKernel) on
    a GPU, its grid as large as ``resident_blocks`` allows (one block under the simulator);
    repeated launches with changed arguments keep the barrier's meaning."""
    rng = np.random.default_rng(3)
    for n in (1, 700, 3000 if simulator_active() else 300000):
        values = rng.integers(0, 100, n).astype(np.int64)
        d_values, d_out = cuda.to_device(values), cuda.to_device(np.zeros(n, np.int64))
        args = (d_values, d_out, n)
        blocks, resources = launch.resident_blocks(_total_minus_each, args, 128)
        assert (blocks == 1 and resources == {}) if simulator_active() else (
            blocks >= cuda.get_current_device().MULTIPROCESSOR_COUNT and resources["registers_per_thread"] > 0)
        _total_minus_each[min(blocks, -(-n // 128)), 128](*args)
        got = d_out.copy_to_host()
        assert got[0] == values.sum()
        np.testing.assert_array_equal(got[1:], values.sum() - values[1:])
