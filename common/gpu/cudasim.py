"""Warp-level intrinsics for Numba's CUDA simulator (docs/design.md, "GPU, simulator and CPU").

numba-cuda 0.30.4's simulator runs each CUDA thread of a block as one Python thread and swaps the
``cuda`` name in a kernel's globals for a per-launch ``FakeCUDAModule``, which has no
``syncwarp``, ``shfl_*_sync``, ``all/any/eq_sync``, ``ballot_sync``, ``match_any/all_sync``,
``activemask``, ``lanemask_lt`` or ``nanosleep``. :func:`install` adds them with the GPU's
semantics, so kernels call them the ordinary way (``cuda.shfl_down_sync(...)``):

* Lanes form warps of 32 by linear thread id (x fastest); a partial last warp's missing lanes
  count as exited. A call with mask ``M`` is a rendezvous of exactly the non-exited lanes in
  ``M``; a caller outside ``M``, mixed intrinsics in one rendezvous, or a cycle in which every
  live lane waits raises :class:`WarpSyncError` instead of hanging.
* Shuffles follow PTX ``shfl.sync`` with numba-cuda's operands; reading a lane outside the
  rendezvous (undefined on the GPU) returns NaN or :data:`UNDEFINED_INT`, so a result that uses
  it is wrong rather than silently right.
* ``activemask()`` returns the warp's non-exited lanes (simulated threads never run in lock
  step: take masks from ``ballot_sync``). Masks come back as ``np.uint32``.

Also covered: ``nanosleep`` (yields), ``cuda.popc`` of a negative value (two's complement width),
``cuda.shared.array(0, np.int32)`` (dynamic shared memory with a NumPy dtype), and
``cuda.cg.this_grid().sync()`` with more than one block, which raises (the simulator runs blocks
one after another). A block's threads run as greenlets in the launching thread, switching at
warp intrinsics, barriers and ``nanosleep`` (see "Lanes, warps and blocks" below).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import deque

import numpy as np

FULL_MASK = 0xFFFFFFFF
WARP_SIZE = 32
UNDEFINED_INT = -0x2BADBAD  # what a shuffle from a lane that is not taking part returns (ints)


class WarpSyncError(RuntimeError):
    """A warp intrinsic was used in a way that is undefined or deadlocks on the GPU."""


def simulator_active() -> bool:
    """True when numba.cuda is Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` at import)."""
    from numba.cuda.core import config

    return bool(config.ENABLE_CUDASIM)


# ---------------------------------------------------------------------------------------------
# Lanes, warps and blocks. The simulator starts one Python thread per CUDA thread of every block
# and busy-polls them; a warp rendezvous then costs a round of operating-system thread switches
# under the GIL. Here a block's threads are greenlets (the greenlet package) run by one scheduler
# in the launching thread: a lane runs until it finishes or waits (a warp intrinsic, the block
# barrier, nanosleep), and the lane that completes a rendezvous or a barrier makes its waiters
# runnable again. When no lane can run while some wait, the block is deadlocked, and the error
# says which lanes wait where. Semantics are the simulator's: exited threads leave the barrier
# and every mask, and the first failure ends the block and is re-raised with its thread's ids.


class _Call:
    """One rendezvous: the lanes of one mask meeting in one intrinsic."""

    __slots__ = ("op", "mask", "arrived", "values", "args", "results")

    def __init__(self, op: str, mask: int):
        self.op, self.mask = op, mask
        self.arrived = 0
        self.values: list = [None] * WARP_SIZE     # by lane
        self.args: list = [None] * WARP_SIZE
        self.results: list = [None] * WARP_SIZE


class _Warp:
    def __init__(self, block: "_Block", index: int, size: int):
        self.block, self.index, self.size = block, index, size
        self.exists = (1 << size) - 1
        self.exited = 0
        self.pending: dict[int, _Call] = {}     # mask -> rendezvous still gathering lanes
        self.waiting: dict[int, _Call] = {}     # lane -> rendezvous it is blocked in

    def live(self) -> int:
        return self.exists & ~self.exited

    def try_complete(self, call: _Call) -> bool:
        """Finish ``call`` if every non-exited lane of its mask has arrived: resolve it and make
        the lanes that wait in it runnable."""
        if call.mask & self.live() & ~call.arrived:
            return False
        _RESOLVE[call.op](call)
        del self.pending[call.mask]
        base = self.index * WARP_SIZE
        for lane in _lanes(call.arrived):
            if self.waiting.pop(lane, None) is not None:
                self.block.runnable.append(self.block.lanes[base + lane])
        return True

    def describe_deadlock(self) -> str:
        """Where the warp's live lanes wait ("" when none waits in a warp intrinsic)."""
        if not self.waiting:
            return ""
        groups: dict[str, list[int]] = {}
        for lane in _lanes(self.live()):
            call = self.waiting.get(lane)
            if call is not None:
                where = f"{call.op}(mask={call.mask:#010x})"
            elif self.block.lanes[self.index * WARP_SIZE + lane] in self.block.at_barrier:
                where = "syncthreads()"
            else:
                continue
            groups.setdefault(where, []).append(lane)
        desc = "; ".join(f"lanes {_ranges(lanes)} in {where}" for where, lanes in groups.items())
        return (f"warp {self.index} deadlocked: {desc} (every lane named in a mask must call the "
                "same intrinsic with the same mask)")


class _Lane:
    """One simulated CUDA thread: what numba-cuda's FakeCUDAModule reads from
    ``threading.current_thread()`` (ids, barrier methods), run as a greenlet."""

    def __init__(self, block: "_Block", manager, grid_point, point, thread_id: int):
        self.block, self._manager = block, manager
        self.blockIdx = _kernelapi.Dim3(*grid_point)
        self.threadIdx = _kernelapi.Dim3(*point)
        self.thread_id = thread_id
        self.warp = block.warp(thread_id // WARP_SIZE)
        self.lane = thread_id % WARP_SIZE
        self.exception = None
        self.glet = None

    def wait(self) -> None:
        """Run the next runnable lane until another lane makes this one runnable again. A lane
        that has not started yet is started by the scheduler (a greenlet starts on the stack of
        the one that switches to it), as is everything when no lane is runnable."""
        runnable = self.block.runnable
        if runnable and runnable[0].glet:
            runnable.popleft().glet.switch()
        else:
            self.glet.parent.switch()

    def syncthreads(self) -> None:
        block = self.block
        block.at_barrier.append(self)
        if len(block.at_barrier) == block.live:
            block.release_barrier(running=self)
        else:
            self.wait()

    def _sync_reduce(self, value, reduce):
        idx = self.threadIdx.x, self.threadIdx.y, self.threadIdx.z
        self._manager.block_state[idx] = value
        self.syncthreads()
        result = reduce(self._manager.block_state)
        self.syncthreads()
        return result

    def syncthreads_count(self, value):
        return self._sync_reduce(value, np.count_nonzero)

    def syncthreads_and(self, value):
        return self._sync_reduce(value, lambda state: 1 if np.all(state) else 0)

    def syncthreads_or(self, value):
        return self._sync_reduce(value, lambda state: 1 if np.any(state) else 0)

    def run(self, job) -> None:
        try:
            job()
        except Exception as e:                  # the simulator's message: the thread's ids first
            tid, ctaid = f"tid={list(self.threadIdx)}", f"ctaid={list(self.blockIdx)}"
            msg = f"{tid} {ctaid}" if str(e) == "" else f"{tid} {ctaid}: {e}"
            self.exception = (type(e)(msg), e.__traceback__)
            self.block.failed = self
        self.block.exit(self)


class _Block:
    def __init__(self, manager):
        dims = manager._block_dim
        self.nthreads = int(dims[0]) * int(dims[1]) * int(dims[2])
        self.warps: dict[int, _Warp] = {}
        self.lanes: list[_Lane] = []
        self.runnable: deque[_Lane] = deque()
        self.at_barrier: list[_Lane] = []       # lanes waiting in syncthreads
        self.live = 0                           # lanes that have not finished
        self.failed: _Lane | None = None        # the first lane that raised

    def warp(self, index: int) -> _Warp:
        warp = self.warps.get(index)
        if warp is None:
            size = min(WARP_SIZE, self.nthreads - index * WARP_SIZE)
            warp = self.warps[index] = _Warp(self, index, size)
        return warp

    def release_barrier(self, running: _Lane | None = None) -> None:
        """Every live lane is at syncthreads: the waiting ones (all but ``running``, the lane
        that completed the barrier and goes on) become runnable."""
        waiting, self.at_barrier = self.at_barrier, []
        self.runnable.extend(lane for lane in waiting if lane is not running)

    def exit(self, lane: _Lane) -> None:
        """A lane finished: it leaves its warp's masks and the barrier count."""
        self.live -= 1
        warp = lane.warp
        warp.exited |= 1 << lane.lane
        for call in list(warp.pending.values()):
            warp.try_complete(call)
        if self.at_barrier and len(self.at_barrier) == self.live:
            self.release_barrier()

    def deadlock(self) -> str:
        for warp in self.warps.values():
            message = warp.describe_deadlock()
            if message:
                return message
        return (f"block deadlocked: {len(self.at_barrier)} of {self.live} live threads wait in "
                "syncthreads() and the others cannot run")


_kernelapi = _kernel = None   # numba.cuda.simulator's kernelapi and kernel, once installed
greenlet = None               # the greenlet package, imported by install() (the simulator only)
_NumbaType = _signature = None


def _current_lane():
    return getattr(greenlet.getcurrent(), "sim_lane", None)


class _LaneThreading:
    """``threading`` as numba-cuda's kernelapi sees it: ``current_thread()`` is the running lane."""

    def __getattr__(self, name):
        return getattr(threading, name)

    @staticmethod
    def current_thread():
        lane = _current_lane()
        return lane if lane is not None else threading.current_thread()


def _here():
    """(warp, lane index, lane) of the calling simulated thread."""
    lane = _current_lane()
    if lane is None:
        raise WarpSyncError("warp intrinsics can only be called from inside a simulated kernel")
    return lane.warp, lane.lane, lane


@functools.lru_cache(maxsize=4096)
def _lanes(bits: int) -> tuple[int, ...]:
    """The lanes whose bits are set, in order."""
    return tuple(lane for lane in range(WARP_SIZE) if bits >> lane & 1)


def _ranges(lanes: list[int]) -> str:
    out, start = [], lanes[0]
    for prev, cur in zip(lanes, lanes[1:] + [None], strict=True):
        if cur != prev + 1:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = cur
    return ",".join(out)


def _collective(op: str, mask, value=None, arg=None):
    warp, lane, here = _here()
    mask = int(mask) & FULL_MASK
    bit = 1 << lane
    if not mask & bit:
        raise WarpSyncError(f"{op}: lane {lane} of warp {warp.index} called with mask "
                            f"{mask:#010x}, which does not include the calling lane")
    call = warp.pending.get(mask)
    if call is None:
        call = warp.pending[mask] = _Call(op, mask)
    elif call.op != op:
        raise WarpSyncError(
            f"lane {lane} of warp {warp.index} called {op}(mask={mask:#010x}) while lanes "
            f"{_ranges(list(_lanes(call.arrived)))} wait in {call.op} with the same mask")
    call.arrived |= bit
    call.values[lane] = value
    call.args[lane] = arg
    if not warp.try_complete(call):
        warp.waiting[lane] = call
        here.wait()
    return call.results[lane]


def _run_block(self, grid_point, *args):
    """BlockManager.run with the block's threads as greenlets (see above)."""
    block = _Block(self)

    if self._debug:
        def job():
            with np.errstate(divide="raise"):
                self._f(*args)
    else:
        def job():
            self._f(*args)

    dims = self._block_dim
    for point in np.ndindex(*dims):
        thread_id = int(point[0] + dims[0] * (point[1] + dims[1] * point[2]))
        block.lanes.append(_Lane(block, self, grid_point, point, thread_id))
    block.lanes.sort(key=lambda lane: lane.thread_id)
    block.live = len(block.lanes)
    scheduler = greenlet.getcurrent()
    for lane in block.lanes:
        lane.glet = greenlet.greenlet(functools.partial(lane.run, job), parent=scheduler)
        lane.glet.sim_lane = lane
    block.runnable.extend(block.lanes)
    while block.live and block.failed is None:
        if not block.runnable:
            message = block.deadlock()
            _end(block)
            raise WarpSyncError(message)
        block.runnable.popleft().glet.switch()
    if block.failed is not None:
        _end(block)
        raise block.failed.exception[0].with_traceback(block.failed.exception[1])


def _end(block: _Block) -> None:
    """End every lane still waiting (none will be resumed)."""
    block.runnable.clear()
    for lane in block.lanes:
        if not lane.glet.dead:
            lane.glet.throw(greenlet.GreenletExit)


# ---------------------------------------------------------------------------------------------
# Calls inside a launch. numba-cuda's simulator swaps a device function's module globals to the
# launch's fake ``cuda`` module on every call (a scan of the module's globals each time), wraps
# every array argument in an indexing proxy, and imports inside every numba type cast such as
# ``int64(x)``. Here a device function's module is swapped once per launch and restored when the
# launch ends, kernels index the NumPy arrays themselves, and a type cast calls its conversion
# directly; what the kernels compute is unchanged.

_held_swaps: list = []                  # the running launch's swapped modules (one launch at a time)


def _launch_kernel(original):
    def call(self, *args):
        if self._device or _kernel._kernel_context is not None:
            fn = self.fn
            if _held_swaps and not _kernelapi._swap_refcount.get(id(fn.__globals__)):
                swap = _kernelapi.swapped_cuda_module(fn, _kernel._get_kernel_context())
                swap.__enter__()
                _held_swaps[-1].append(swap)
            if _held_swaps:
                return fn(*args)
            return original(self, *args)
        _held_swaps.append([])
        try:
            return original(self, *args)
        finally:
            for swap in reversed(_held_swaps.pop()):
                swap.__exit__(None, None, None)
    return call


_SCALARS = (int, float, complex, np.generic)


def _type_call(self, *args):
    """numba's Type.__call__ (a cast of one value, else a signature) without its import."""
    if len(args) == 1 and (isinstance(args[0], _SCALARS) or not isinstance(args[0], _NumbaType)):
        return self.cast_python_value(args[0])
    return _signature(self, *args)


# ---------------------------------------------------------------------------------------------
# What each intrinsic computes once its rendezvous is complete


def _resolve_sync(call: _Call) -> None:
    for lane in _lanes(call.arrived):
        call.results[lane] = None


def _undefined_like(value):
    """What a lane gets from a shuffle source that is not taking part: undefined on the GPU, a
    conspicuous poison here (NaN, or UNDEFINED_INT) so results built on it show up wrong."""
    if isinstance(value, (float, np.floating)):
        return type(value)(np.nan)
    if isinstance(value, np.integer):
        return type(value)(UNDEFINED_INT)
    return UNDEFINED_INT


def _shuffle(source_of):
    def resolve(call: _Call) -> None:
        for lane in _lanes(call.arrived):
            src = source_of(lane, int(call.args[lane]) & 31)
            if (call.arrived >> src) & 1:
                call.results[lane] = call.values[src]
            else:
                call.results[lane] = _undefined_like(call.values[lane])
    return resolve


def _src_up(lane: int, b: int) -> int:
    return lane - b if lane - b >= 0 else lane


def _src_down(lane: int, b: int) -> int:
    return lane + b if lane + b < WARP_SIZE else lane


def _vote(reduce):
    def resolve(call: _Call) -> None:
        preds = [bool(call.values[lane]) for lane in _lanes(call.arrived)]
        result = reduce(preds)
        for lane in _lanes(call.arrived):
            call.results[lane] = result
    return resolve


def _resolve_ballot(call: _Call) -> None:
    bits = 0
    for lane in _lanes(call.arrived):
        if call.values[lane]:
            bits |= 1 << lane
    for lane in _lanes(call.arrived):
        call.results[lane] = np.uint32(bits)


def _resolve_match_any(call: _Call) -> None:
    for lane in _lanes(call.arrived):
        bits = 0
        for other in _lanes(call.arrived):
            if call.values[other] == call.values[lane]:
                bits |= 1 << other
        call.results[lane] = np.uint32(bits)


def _resolve_match_all(call: _Call) -> None:
    values = [call.values[lane] for lane in _lanes(call.arrived)]
    same = all(v == values[0] for v in values)
    result = (np.uint32(call.arrived if same else 0), same)
    for lane in _lanes(call.arrived):
        call.results[lane] = result


_RESOLVE = {
    "syncwarp": _resolve_sync,
    "shfl_sync": _shuffle(lambda lane, b: b),
    "shfl_up_sync": _shuffle(_src_up),
    "shfl_down_sync": _shuffle(_src_down),
    "shfl_xor_sync": _shuffle(lambda lane, b: lane ^ b),
    "all_sync": _vote(all),
    "any_sync": _vote(any),
    "eq_sync": _vote(lambda preds: all(preds) or not any(preds)),
    "ballot_sync": _resolve_ballot,
    "match_any_sync": _resolve_match_any,
    "match_all_sync": _resolve_match_all,
}


# ---------------------------------------------------------------------------------------------
# The methods installed on FakeCUDAModule (signatures as in numba-cuda's stubs)


def _syncwarp(self, mask=FULL_MASK):
    _collective("syncwarp", mask)


def _shfl_sync(self, mask, value, src_lane):
    return _collective("shfl_sync", mask, value, src_lane)


def _shfl_up_sync(self, mask, value, delta):
    return _collective("shfl_up_sync", mask, value, delta)


def _shfl_down_sync(self, mask, value, delta):
    return _collective("shfl_down_sync", mask, value, delta)


def _shfl_xor_sync(self, mask, value, lane_mask):
    return _collective("shfl_xor_sync", mask, value, lane_mask)


def _all_sync(self, mask, predicate):
    return _collective("all_sync", mask, predicate)


def _any_sync(self, mask, predicate):
    return _collective("any_sync", mask, predicate)


def _eq_sync(self, mask, predicate):
    return _collective("eq_sync", mask, predicate)


def _ballot_sync(self, mask, predicate):
    return _collective("ballot_sync", mask, predicate)


def _match_any_sync(self, mask, value):
    return _collective("match_any_sync", mask, value)


def _match_all_sync(self, mask, value):
    return _collective("match_all_sync", mask, value)


def _activemask(self):
    warp, _, _ = _here()
    return np.uint32(warp.live())


def _lanemask_lt(self):
    _, lane, _ = _here()
    return np.uint32((1 << lane) - 1)


def _nanosleep(self, ns):
    lane = _here()[2]
    lane.block.runnable.append(lane)
    lane.wait()


def _popc(self, val):
    width = val.dtype.itemsize * 8 if isinstance(val, np.integer) else 64
    return bin(int(val) & ((1 << width) - 1)).count("1")


def _shared_array(self, shape, dtype, alignment=None):
    """Shared arrays as the simulator makes them, but accepting NumPy dtypes everywhere."""
    from numba.cuda import types
    from numba.cuda.np import numpy_support

    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    dtype = numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else np.dtype(dtype)
    if shape == 0:                              # dynamic shared memory: one buffer per launch
        count = self._dynshared_size // dtype.itemsize
        return np.frombuffer(self._dynshared.data, dtype=dtype, count=count)
    caller = sys._getframe(1)                   # static: one array per source line, per launch
    key = (caller.f_code.co_filename, caller.f_lineno)
    array = self._allocations.get(key)
    if array is None:
        array = self._allocations.setdefault(key, np.empty(shape, dtype))
    return array


def _grid_sync(self):
    thread = _here()[2]
    grid = thread._manager._grid_dim
    if int(grid[0]) * int(grid[1]) * int(grid[2]) > 1:
        raise WarpSyncError("cuda.cg.this_grid().sync() across several blocks cannot be "
                            "simulated (blocks run one after another); size cooperative grids "
                            "with max_cooperative_grid_blocks, which is 1 under the simulator")
    thread.syncthreads()


_METHODS = {
    "syncwarp": _syncwarp, "shfl_sync": _shfl_sync, "shfl_up_sync": _shfl_up_sync,
    "shfl_down_sync": _shfl_down_sync, "shfl_xor_sync": _shfl_xor_sync,
    "all_sync": _all_sync, "any_sync": _any_sync, "eq_sync": _eq_sync,
    "ballot_sync": _ballot_sync, "match_any_sync": _match_any_sync,
    "match_all_sync": _match_all_sync, "activemask": _activemask,
    "lanemask_lt": _lanemask_lt, "nanosleep": _nanosleep, "popc": _popc,
}


#: numba-cuda releases this module's simulator patch was written and tested against: [low, high).
#: pyproject.toml pins numba-cuda to the same range; tests/test_packaging.py checks both.
NUMBA_CUDA_TESTED = ("0.30.4", "0.31")

#: The simulator internals the patch replaces or reads, by class: (module, class, attributes);
#: an attribute in ``__init__``'s source is one the constructor sets.
_PATCHED = (
    ("kernelapi", "FakeCUDAModule", ()),
    ("kernelapi", "FakeCUDAShared", ("array", "__init__:_allocations", "__init__:_dynshared_size",
                                     "__init__:_dynshared")),
    ("kernelapi", "GridGroup", ("sync",)),
    ("kernelapi", "Dim3", ()),
    ("kernelapi", "FakeCUDAModule", ("threadIdx", "blockIdx", "syncthreads")),
    ("kernel", "FakeCUDAKernel", ("__call__", "__init__:_device", "__init__:fn")),
    ("kernel", "BlockManager", ("run", "__init__:_block_dim", "__init__:_grid_dim", "__init__:_debug",
                                "__init__:_f")),
)


def patch_problems() -> list[str]:
    """Why the simulator patch may not fit the installed numba-cuda ([] when it fits): a version
    outside :data:`NUMBA_CUDA_TESTED`, or a patched class or attribute that is gone."""
    import importlib
    import importlib.metadata
    import inspect

    version = importlib.metadata.version("numba-cuda")
    problems = []

    def key(v: str) -> tuple:
        return tuple(int(x) for x in v.split(".")[:3] if x.isdigit())

    low, high = NUMBA_CUDA_TESTED
    if not key(low) <= key(version) < key(high):
        problems.append(f"numba-cuda {version} is outside the range the simulator patch was tested "
                        f"with (>={low},<{high})")
    for module_name, class_name, attributes in _PATCHED:
        module = importlib.import_module(f"numba.cuda.simulator.{module_name}")
        cls = getattr(module, class_name, None)
        if cls is None:
            problems.append(f"numba-cuda {version}: numba.cuda.simulator.{module_name}.{class_name} is gone")
            continue
        for attribute in attributes:
            method, _, field = attribute.partition(":")
            if field:
                source = inspect.getsource(getattr(cls, method))
                if f"self.{field}" not in source:
                    problems.append(f"numba-cuda {version}: {class_name}.__init__ no longer sets {field}")
            elif not hasattr(cls, method):
                problems.append(f"numba-cuda {version}: {class_name}.{method} is gone")
    return problems


def install() -> bool:
    """Add the intrinsics to the simulator (idempotent). Returns whether the simulator is active;
    with a real GPU this does nothing."""
    if not simulator_active():
        return False
    from numba.cuda.simulator import kernel, kernelapi

    module = kernelapi.FakeCUDAModule
    if getattr(module, "_gpusm_installed", False):
        return True
    for name, method in _METHODS.items():
        setattr(module, name, method)
    kernelapi.FakeCUDAShared.array = _shared_array
    kernelapi.GridGroup.sync = _grid_sync

    global _kernelapi, _kernel, _NumbaType, _signature, greenlet
    import greenlet
    from numba.core.types.abstract import Type
    from numba.core.typing import signature

    if "threading" not in vars(kernelapi):
        raise RuntimeError("numba-cuda's simulator no longer reads threads through kernelapi.threading")
    _kernelapi, _kernel, _NumbaType, _signature = kernelapi, kernel, Type, signature
    kernelapi.threading = _LaneThreading()
    kernel.FakeCUDAKernel.__call__ = _launch_kernel(kernel.FakeCUDAKernel.__call__)
    kernel.FakeWithinKernelCUDAArray = lambda array: array._ary
    Type.__call__ = _type_call
    kernel.BlockManager.run = _run_block
    module._gpusm_installed = True
    return True


__all__ = [
    "FULL_MASK", "UNDEFINED_INT", "WARP_SIZE", "WarpSyncError", "install", "simulator_active",
]
