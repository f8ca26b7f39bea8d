"""Named grow-and-reuse device buffers of one engine, allocated through its budget."""

from __future__ import annotations

import math
import weakref

import numpy as np

from .budget import DeviceMemoryBudget
from .copies import upload


class BufferPool:
    """Named grow-and-reuse device buffers of one engine, allocated through its budget.

    ``get(name, size, dtype)`` returns a buffer of at least ``size`` elements, reusing the one
    kept from earlier queries or replacing it by one ``growth`` times larger (the old contents
    are kept for the first ``keep`` elements). Each query's demand (the largest size it asked
    for per buffer) is what the budget's peak counts, not the capacity kept from an earlier,
    larger query. :meth:`scan` does the same for a :class:`common.gpu.scan.ScanWorkspace`.
    """

    def __init__(self, budget: DeviceMemoryBudget, prefix: str = "", growth: float = 1.5):
        self.budget = budget
        self.prefix = prefix
        self.growth = float(growth)
        self._arrays: dict[str, object] = {}
        self._views: dict[tuple, object] = {}    # (name, shape) -> view of the current buffer
        self._demand: dict[str, int] = {}        # bytes asked for by the current query
        self._scans: dict[str, object] = {}
        #: name -> (buffer, dtype as asked, elements, itemsize): get's quick path
        self._kept: dict[str, tuple] = {}
        budget._pools.append(weakref.ref(self))

    def _forget_demand(self) -> int:
        """A new query begins: return the bytes demanded so far (they become slack)."""
        total = sum(self._demand.values())
        self._demand = dict.fromkeys(self._demand, 0)
        return total

    def _demand_bytes(self, name: str, nbytes: int) -> None:
        old = self._demand.get(name, 0)
        if nbytes > old:
            self._demand[name] = nbytes
            self.budget._add_slack(old - nbytes)

    def get(self, name: str, size, dtype, keep: int = 0, growth: float | None = None,
            cap_bytes: int | None = None):
        """The whole buffer (at least ``size`` elements) for an int ``size``; for a shape, a view
        of its first elements in that shape. ``growth`` overrides the pool's growth factor for
        this call (1.0: a buffer replaced is exactly ``size`` long); a buffer grown by it stays
        within ``cap_bytes`` (the size asked for still passes it)."""
        if type(size) is int:                # the common case: a buffer kept at least this long
            kept = self._kept.get(name)
            if kept is not None and kept[1] is dtype and kept[2] >= size:
                self._demand_bytes(name, max(size, 1) * kept[3])
                return kept[0]
        requested = dtype
        dtype = np.dtype(dtype)
        shape = (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)
        elements = max(math.prod(shape), 1)
        current = self._arrays.get(name)
        if current is None or current.size < elements or current.dtype != dtype:
            factor = self.growth if growth is None else float(growth)
            capacity = elements if current is None else max(elements, int(current.size * factor))
            if cap_bytes is not None:
                capacity = max(elements, min(capacity, cap_bytes // dtype.itemsize))
            if current is not None and not keep:
                self.free(name)
            array = self.budget.device_array(capacity, dtype, what=f"{self.prefix}{name}")
            self.budget._add_slack(array.nbytes)
            if current is not None and keep:
                array[:keep].copy_to_device(current[:keep])
                self.free(name)
            self._arrays[name] = array
            self._demand.setdefault(name, 0)
            current = array
        self._demand_bytes(name, elements * dtype.itemsize)
        if len(shape) == 1:
            self._kept[name] = (current, requested, current.size, dtype.itemsize)
            return current               # the whole buffer: slicing costs as much as a launch
        return self._view(name, current, shape)

    def _view(self, name: str, current, shape: tuple):
        """``current[:prod(shape)]`` in ``shape``, made once per (buffer, shape): a slice or a
        reshape of a device array costs more host time than a launch."""
        view = self._views.get((name, shape))
        if view is None or view[0] is not current:
            if len(self._views) > 256:
                self._views.clear()
            view = (current, current[:math.prod(shape)].reshape(shape))
            self._views[(name, shape)] = view
        return view[1]

    def upload(self, name: str, host):
        """``host`` copied into the pooled buffer ``name``: a view of its first elements, host's shape."""
        host = np.ascontiguousarray(host)
        shape = host.shape
        current = self.get(name, host.size, host.dtype)
        upload(current, host)
        return self._view(name, current, shape)

    def scan(self, size: int, dtype=np.int64):
        """A :class:`common.gpu.scan.ScanWorkspace` for scans of at least ``size`` elements; like a
        buffer, it counts in the peak only as far as the current query's scans need it."""
        from .scan import ScanWorkspace, workspace_bytes

        key = np.dtype(dtype).str
        name = f"scan workspace {key}"
        workspace = self._scans.get(key)
        if workspace is None or workspace.capacity < size:
            if workspace is not None:
                self._free_scan(key)
            capacity = size if workspace is None else max(int(size), int(workspace.capacity * self.growth))
            workspace = ScanWorkspace(capacity, dtype, self.budget)
            self.budget._add_slack(workspace.nbytes)
            self._demand.setdefault(name, 0)
            self._scans[key] = workspace
        self._demand_bytes(name, workspace_bytes(size, dtype))
        return workspace

    def free(self, name: str) -> None:
        """Give buffer ``name`` back to the budget."""
        array = self._arrays.pop(name, None)
        self._kept.pop(name, None)
        if array is None:
            return
        self._views = {key: view for key, view in self._views.items() if key[0] != name}
        demanded = self._demand.pop(name, 0)
        self.budget._add_slack(demanded - array.nbytes)
        self.budget.free(array)

    def free_scans(self) -> None:
        """Give the scan workspaces back to the budget."""
        for key in list(self._scans):
            self._free_scan(key)

    def _free_scan(self, key: str) -> None:
        """Give the scan workspace of dtype ``key`` back, its bytes this query asked for with it."""
        workspace = self._scans.pop(key)
        self.budget._add_slack(self._demand.pop(f"scan workspace {key}", 0) - workspace.nbytes)
        workspace.free(self.budget)

    @property
    def nbytes(self) -> int:
        """Device bytes the pool holds (buffers and scan workspaces)."""
        return (sum(a.nbytes for a in self._arrays.values())
                + sum(w.nbytes for w in self._scans.values()))

    def free_all(self) -> None:
        for name in list(self._arrays):
            self.free(name)
        self.free_scans()

    def __contains__(self, name: str) -> bool:
        return name in self._arrays
