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
one after another). Blocks run on a pool of reusable simulated threads.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np

FULL_MASK = 0xFFFFFFFF
WARP_SIZE = 32
_POLL_S = 0.05          # how often a waiting lane re-checks for deadlock or an aborted block
UNDEFINED_INT = -0x2BADBAD  # what a shuffle from a lane that is not taking part returns (ints)


class WarpSyncError(RuntimeError):
    """A warp intrinsic was used in a way that is undefined or deadlocks on the GPU."""


def simulator_active() -> bool:
    """True when numba.cuda is Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` at import)."""
    from numba.cuda.core import config

    return bool(config.ENABLE_CUDASIM)


# ---------------------------------------------------------------------------------------------
# Per-block, per-warp rendezvous state


class _Call:
    """One rendezvous: the lanes of one mask meeting in one intrinsic."""

    __slots__ = ("op", "mask", "arrived", "values", "args", "results", "done")

    def __init__(self, op: str, mask: int):
        self.op, self.mask = op, mask
        self.arrived = 0
        self.values: dict[int, object] = {}
        self.args: dict[int, object] = {}
        self.results: dict[int, object] = {}
        self.done = False


class _Warp:
    def __init__(self, block: "_Block", index: int, size: int):
        self.block, self.index, self.size = block, index, size
        self.cond = threading.Condition()
        self.exists = (1 << size) - 1
        self.exited = 0
        self.pending: dict[int, _Call] = {}     # mask -> rendezvous still gathering lanes
        self.waiting: dict[int, _Call] = {}     # lane -> rendezvous it is blocked in
        self.deadlock = ""                      # why the warp is stuck, once detected

    def live(self) -> int:
        return self.exists & ~self.exited

    def try_complete(self, call: _Call) -> None:
        """Finish ``call`` if every non-exited lane of its mask has arrived (lock held)."""
        if (call.mask & self.live()) & ~call.arrived:
            return
        _RESOLVE[call.op](call)
        call.done = True
        del self.pending[call.mask]
        for lane in _lanes(call.arrived):
            self.waiting.pop(lane, None)
        self.cond.notify_all()

    def check_deadlock(self) -> None:
        """Raise if every live lane is blocked in a warp intrinsic or in syncthreads (lock held);
        the first lane to see it records why, and every waiting lane raises the same error."""
        if self.deadlock:
            raise WarpSyncError(self.deadlock)
        blocked = {}
        for lane in _lanes(self.live()):
            if lane in self.waiting:
                call = self.waiting[lane]
                blocked[lane] = f"{call.op}(mask={call.mask:#010x})"
                continue
            thread = self.block.threads.get(self.index * WARP_SIZE + lane)
            if thread is None or not thread.syncthreads_blocked:
                return                          # this lane still runs and may arrive
            blocked[lane] = "syncthreads()"
        groups: dict[str, list[int]] = {}
        for lane, where in blocked.items():
            groups.setdefault(where, []).append(lane)
        desc = "; ".join(f"lanes {_ranges(lanes)} in {where}" for where, lanes in groups.items())
        self.deadlock = (f"warp {self.index} deadlocked: {desc} (every lane named in a mask must "
                         "call the same intrinsic with the same mask)")
        self.cond.notify_all()
        raise WarpSyncError(self.deadlock)


class _Block:
    def __init__(self, manager):
        dims = manager._block_dim
        self.nthreads = int(dims[0]) * int(dims[1]) * int(dims[2])
        self.lock = threading.Lock()
        self.threads: dict[int, object] = {}    # linear thread id -> BlockThread
        self.warps: dict[int, _Warp] = {}
        self.cond = threading.Condition()       # the block runner waits on this
        self.live = 0                           # started threads that have not finished
        self.at_barrier: list = []              # threads waiting in syncthreads

    def warp(self, index: int) -> _Warp:
        warp = self.warps.get(index)
        if warp is None:
            with self.lock:
                warp = self.warps.get(index)
                if warp is None:
                    size = min(WARP_SIZE, self.nthreads - index * WARP_SIZE)
                    warp = self.warps[index] = _Warp(self, index, size)
        return warp


_registry_lock = threading.Lock()


def _block_of(manager) -> _Block:
    block = getattr(manager, "_gpusm_block", None)
    if block is None:
        with _registry_lock:
            block = getattr(manager, "_gpusm_block", None)
            if block is None:
                block = manager._gpusm_block = _Block(manager)
    return block


def _here():
    """(warp, lane, thread) of the calling simulated thread."""
    thread = threading.current_thread()
    manager = getattr(thread, "_manager", None)
    if manager is None:
        raise WarpSyncError("warp intrinsics can only be called from inside a simulated kernel")
    tid = thread.thread_id
    return _block_of(manager).warp(tid // WARP_SIZE), tid % WARP_SIZE, thread


def _lanes(bits: int):
    lane = 0
    while bits:
        if bits & 1:
            yield lane
        bits >>= 1
        lane += 1


def _ranges(lanes: list[int]) -> str:
    out, start = [], lanes[0]
    for prev, cur in zip(lanes, lanes[1:] + [None], strict=True):
        if cur != prev + 1:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = cur
    return ",".join(out)


def _collective(op: str, mask, value=None, arg=None):
    warp, lane, thread = _here()
    mask = int(mask) & FULL_MASK
    bit = 1 << lane
    if not mask & bit:
        raise WarpSyncError(f"{op}: lane {lane} of warp {warp.index} called with mask "
                            f"{mask:#010x}, which does not include the calling lane")
    with warp.cond:
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
        warp.waiting[lane] = call
        warp.try_complete(call)
        while not call.done:
            warp.cond.wait(_POLL_S)
            if call.done:
                break
            if thread.abort:
                raise RuntimeError("abort flag set while waiting in a warp intrinsic")
            warp.check_deadlock()
        return call.results[lane]


def _on_exit(manager, thread_id: int) -> None:
    """A lane finished the kernel: drop it from every mask it was named in, tell the runner."""
    block = _block_of(manager)
    warp = block.warp(thread_id // WARP_SIZE)
    with warp.cond:
        warp.exited |= 1 << (thread_id % WARP_SIZE)
        for call in list(warp.pending.values()):
            warp.try_complete(call)
        warp.cond.notify_all()
    with block.cond:
        block.live -= 1
        block.cond.notify_all()


# ---------------------------------------------------------------------------------------------
# Running a block. The simulator starts one new Python thread per CUDA thread of every block and
# busy-polls them; thread start-up alone costs about a millisecond each here. Blocks run instead
# on a pool of reusable simulated threads, and the runner sleeps until a thread reaches the
# barrier, finishes or fails. The semantics are the simulator's: exited threads leave the
# barrier, and the first failure aborts the block and is re-raised with its thread's ids.

_pool_lock = threading.Lock()
_idle_workers: list = []
_worker_class = None


def _syncthreads(self):
    """Wait at the block barrier, waking the runner."""
    if self.abort:
        raise RuntimeError("abort flag set on syncthreads call")
    block = _block_of(self._manager)
    with block.cond:
        self.syncthreads_blocked = True
        block.at_barrier.append(self)
        block.cond.notify_all()
    self.syncthreads_event.wait()
    self.syncthreads_event.clear()
    if self.abort:
        raise RuntimeError("abort flag set on syncthreads clear")


def _make_worker_class(kernel, kernelapi):
    class Worker(kernel.BlockThread):
        """A simulated CUDA thread that runs one block's thread after another."""

        syncthreads = _syncthreads

        def __init__(self):
            threading.Thread.__init__(self, daemon=True)
            self.syncthreads_event = threading.Event()
            self._job_ready = threading.Event()
            self._job = None

        def assign(self, manager, job, grid_point, point):
            dims = manager._block_dim
            self._manager = manager
            self.blockIdx = kernelapi.Dim3(*grid_point)
            self.threadIdx = kernelapi.Dim3(*point)
            self.thread_id = int(point[0] + dims[0] * (point[1] + dims[1] * point[2]))
            self.exception = None
            self.abort = False
            self.debug = manager._debug
            self.syncthreads_blocked = False
            self.syncthreads_event.clear()
            self._job = job
            _block_of(manager).threads[self.thread_id] = self
            self._job_ready.set()

        def run(self):
            while True:
                self._job_ready.wait()
                self._job_ready.clear()
                manager, thread_id = self._manager, self.thread_id
                self._target, self._args, self._kwargs = self._job, (), {}
                try:
                    kernel.BlockThread.run(self)    # records an Exception with the thread's ids
                except BaseException as exc:        # anything else ends this worker
                    self.exception = (exc, exc.__traceback__)
                    _on_exit(manager, thread_id)
                    raise
                with _pool_lock:
                    _idle_workers.append(self)
                _on_exit(manager, thread_id)

    return Worker


def _workers(count: int) -> list:
    with _pool_lock:
        keep = max(0, len(_idle_workers) - count)
        taken = _idle_workers[keep:]
        del _idle_workers[keep:]
    while len(taken) < count:
        worker = _worker_class()
        worker.start()
        taken.append(worker)
    return taken


def _run_block(self, grid_point, *args):
    """BlockManager.run on pooled threads (see above)."""
    block = _block_of(self)

    if self._debug:
        def job():
            with np.errstate(divide="raise"):
                self._f(*args)
    else:
        def job():
            self._f(*args)

    points = list(np.ndindex(*self._block_dim))
    workers = _workers(len(points))
    block.live = len(points)
    for worker, point in zip(workers, points, strict=True):
        worker.assign(self, job, grid_point, point)
    with block.cond:
        while True:
            failed = next((w for w in workers if w.exception), None)
            if failed is not None:
                for w in workers:
                    w.abort = True
                    w.syncthreads_blocked = False
                    w.syncthreads_event.set()
                raise failed.exception[0].with_traceback(failed.exception[1])
            if block.live == 0:
                return
            if len(block.at_barrier) == block.live:
                for w in block.at_barrier:
                    w.syncthreads_blocked = False
                    w.syncthreads_event.set()
                block.at_barrier.clear()
            block.cond.wait()


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
    with warp.cond:
        return np.uint32(warp.live())


def _lanemask_lt(self):
    _, lane, _ = _here()
    return np.uint32((1 << lane) - 1)


def _nanosleep(self, ns):
    time.sleep(0)


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
    thread = threading.current_thread()
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
    ("kernel", "BlockThread", ("run", "syncthreads")),
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

    global _worker_class
    _worker_class = _make_worker_class(kernel, kernelapi)
    kernel.BlockManager.run = _run_block
    module._gpusm_installed = True
    return True


__all__ = [
    "FULL_MASK", "UNDEFINED_INT", "WARP_SIZE", "WarpSyncError", "install", "simulator_active",
]
