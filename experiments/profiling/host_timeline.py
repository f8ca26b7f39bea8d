"""Where a small query's host time goes: each engine step's host microseconds per query.

``kernel_times`` gives the device side; this gives the host side. Each of these is wrapped with
``perf_counter`` (the outermost call of each name per query counts, so nested steps are not
added twice): the methods of the engine's class and its bases (``Engine.match`` down to the
engine's own steps), the functions its module imports from its own package (planning,
ordering; compiled ``numba.njit`` ones included) and the methods of the classes it imports from
there (STwig's hash join, for instance), the per-query device calls every engine
shares (``upload``, ``download``, ``fill`` as the engine's module binds them, every kernel
launch through ``common.gpu.launch``,
``LaunchWatch.run_all``, ``PhaseTimer.seconds``). A ``download`` includes the wait for the work
queued before it, and ``run_all`` the wait for its launches: the device time the host waits for.
A wrapper adds its own call's cost, so the steps read a little high; the median wall
of ``match()`` is taken in a separate, unwrapped pass.

    python -m experiments.profiling.host_timeline --workload hprd --engines egsm,gmatch,gsi
"""

from __future__ import annotations

import inspect
import sys
import time
from collections import defaultdict

import pandas as pd
from numba.core.registry import CPUDispatcher

from common.engine.base import Engine
from common.gpu import launch
from common.gpu.timers import PhaseTimer
from common.gpu.watch import LaunchWatch

from .kernel_times import per_engine_tables, warmed_walls

SHARED_CALLS = ("upload", "download", "fill")


class HostTimeline:
    """Wraps steps (:meth:`wrap`), logs their entries and exits, and undoes the wrapping."""

    def __init__(self):
        self.log: list[tuple[str, bool, float]] = []
        self._undo: list = []

    def wrap(self, owner, attr: str, label: str) -> None:
        raw = vars(owner)[attr]
        function = raw.fget if isinstance(raw, property) else getattr(raw, "__func__", raw)
        log = self.log

        def timed(*args, **kwargs):
            log.append((label, True, time.perf_counter()))
            try:
                return function(*args, **kwargs)
            finally:
                log.append((label, False, time.perf_counter()))

        if isinstance(raw, property):
            timed = property(timed)
        elif isinstance(raw, staticmethod):
            timed = staticmethod(timed)
        elif isinstance(raw, classmethod):
            timed = classmethod(timed)
        setattr(owner, attr, timed)
        self._undo.append((owner, attr, raw))

    def wrap_engine(self, engine: Engine) -> None:
        """Every step of ``engine`` listed in the module docstring."""
        cls = type(engine)
        for klass in cls.__mro__:
            if klass is object:
                continue
            for name, raw in vars(klass).items():
                method = inspect.isfunction(raw) or isinstance(raw, (staticmethod, classmethod))
                if method and not name.startswith("__"):
                    self.wrap(klass, name, f"{klass.__name__}.{name}")
        module = sys.modules[cls.__module__]
        package = cls.__module__.split(".")[0] + "."
        for name, value in list(vars(module).items()):
            function = value.py_func if isinstance(value, CPUDispatcher) else value
            if inspect.isfunction(function) and (function.__module__.startswith(package) or name in SHARED_CALLS):
                self.wrap(module, name, name)
            elif inspect.isclass(value) and value.__module__.startswith(package) and not issubclass(value, Engine):
                for attr, raw in list(vars(value).items()):
                    if inspect.isfunction(raw) and not attr.startswith("__"):
                        self.wrap(value, attr, f"{value.__name__}.{attr}")
        self.wrap(launch._Launch, "__call__", "kernel launch")
        self.wrap(LaunchWatch, "run_all", "LaunchWatch.run_all")
        self.wrap(PhaseTimer, "seconds", "PhaseTimer.seconds")

    def restore(self) -> None:
        for owner, attr, raw in reversed(self._undo):
            setattr(owner, attr, raw)
        self._undo.clear()

    def take(self) -> dict[str, tuple[int, float]]:
        """{step: (calls, seconds)} since the last take; a step's calls inside itself count once."""
        depth: dict[str, int] = defaultdict(int)
        began: dict[str, float] = {}
        out: dict[str, list] = defaultdict(lambda: [0, 0.0])
        for label, entering, at in self.log:
            if entering:
                if depth[label] == 0:
                    began[label] = at
                    out[label][0] += 1
                depth[label] += 1
            else:
                depth[label] -= 1
                if depth[label] == 0:
                    out[label][1] += at - began[label]
        self.log.clear()
        return {label: (calls, seconds) for label, (calls, seconds) in out.items()}


def measure(spec: str, data, queries, timeout_s: float | None) -> pd.DataFrame:
    """One row per (query, step): calls and host microseconds inside it; and each query's
    wall from an unwrapped pass."""
    engine, walls = warmed_walls(spec, data, queries, timeout_s)
    timeline = HostTimeline()
    timeline.wrap_engine(engine)
    rows = []
    try:
        for query, wall in zip(queries, walls):
            engine.match(query, timeout_s=timeout_s)
            for step, (calls, seconds) in timeline.take().items():
                rows.append({"query": query.name, "step": step, "calls": calls, "host_us": 1e6 * seconds,
                             "wall_us": wall})
    finally:
        timeline.restore()
    return pd.DataFrame(rows)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per step: calls per query and median / mean host us per query (0 where a query made
    none), slowest first; last, the median wall of ``match()``."""
    queries = frame["query"].nunique()
    table = frame.pivot_table(index="query", columns="step", values=["calls", "host_us"], aggfunc="sum",
                              fill_value=0)
    out = pd.DataFrame({"calls_per_query": table["calls"].sum() / queries,
                        "median_host_us": table["host_us"].median(),
                        "mean_host_us": table["host_us"].mean()}).sort_values("median_host_us", ascending=False)
    walls = frame.groupby("query").wall_us.first()
    out.loc["(wall of match, unwrapped)"] = [float("nan"), walls.median(), walls.mean()]
    return out


def main(argv=None) -> int:
    return per_engine_tables(argv, "python -m experiments.profiling.host_timeline",
                             __doc__.splitlines()[0], measure, summary, "host us", needs_gpu=False)


if __name__ == "__main__":
    raise SystemExit(main())
