"""Where a small query's GPU time goes: each kernel's device time per query, on the GPU.

Every launch made through :mod:`common.gpu.launch` is bracketed by two CUDA events on its own stream;
after each query the events are read. Printed per engine: each kernel's launches per query and
median device microseconds per query, the median device time of all launches, and the median
wall time of ``match()`` (measured in a separate, unbracketed pass: the events cost host time).
Launches that go through numba's dispatcher (cooperative kernels, first launches) are not seen;
the count column says what was.

    python -m experiments.profiling.kernel_times --workload hprd --engines egsm,gsi,gmatch,egsm:blocks=33
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import pandas as pd

from common.gpu import launch
from common.gpu.backend import require_gpu
from common.gpu.runtime import cuda

from ..bench.small_queries import WORKLOADS, engine_from_spec, load


class _Bracketed:
    """While active, every quick launch is recorded as (kernel name, start event, end event)."""

    def __init__(self):
        self.records: list = []
        self._original = launch._Launch.__call__

    def __enter__(self):
        original, records = self._original, self.records

        def call(this, *args):
            start, end = cuda.event(), cuda.event()
            stream = this.stream or 0
            start.record(stream)
            original(this, *args)
            end.record(stream)
            records.append((this.kernel.dispatcher.py_func.__name__, start, end))

        launch._Launch.__call__ = call
        return self

    def __exit__(self, *exc):
        launch._Launch.__call__ = self._original

    def take(self) -> dict:
        """{kernel: (launches, device microseconds)} of the records so far (synchronises)."""
        cuda.synchronize()
        out = defaultdict(lambda: [0, 0.0])
        for name, start, end in self.records:
            out[name][0] += 1
            out[name][1] += 1e3 * cuda.event_elapsed_time(start, end)
        self.records.clear()
        return out


def warmed_walls(spec: str, data, queries, timeout_s: float | None):
    """(the engine of ``spec`` prepared and warmed on ``queries``, each query's wall of
    ``match()`` in microseconds from a plain pass): the baseline an instrumented pass is read
    against."""
    engine = engine_from_spec(spec).prepare(data)
    for query in queries:                                 # warm: compiled, buffers grown
        engine.match(query, timeout_s=timeout_s)
    walls = []
    for query in queries:
        start = time.perf_counter()
        engine.match(query, timeout_s=timeout_s)
        walls.append(1e6 * (time.perf_counter() - start))
    return engine, walls


def measure(spec: str, data, queries, timeout_s: float | None) -> pd.DataFrame:
    """One row per (query, kernel): launches and device microseconds; plus each query's wall."""
    engine, walls = warmed_walls(spec, data, queries, timeout_s)
    rows = []
    with _Bracketed() as bracket:
        for query, wall in zip(queries, walls):
            engine.match(query, timeout_s=timeout_s)
            for name, (count, us) in bracket.take().items():
                rows.append({"query": query.name, "kernel": name, "launches": count, "device_us": us,
                             "wall_us": wall})
    return pd.DataFrame(rows)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per kernel: launches per query and median device us per query (0 where a query made none)."""
    queries = frame["query"].nunique()
    table = frame.pivot_table(index="query", columns="kernel", values=["launches", "device_us"],
                              aggfunc="sum", fill_value=0)
    out = pd.DataFrame({"launches_per_query": table["launches"].sum() / queries,
                        "median_device_us": table["device_us"].median(),
                        "mean_device_us": table["device_us"].mean()})
    out.loc["(all kernels)"] = [table["launches"].sum(axis=1).mean(),
                                table["device_us"].sum(axis=1).median(),
                                table["device_us"].sum(axis=1).mean()]
    out.loc["(wall of match)"] = [float("nan"), frame.groupby("query").wall_us.first().median(),
                                  frame.groupby("query").wall_us.first().mean()]
    return out.sort_values("mean_device_us", ascending=False)


def per_engine_tables(argv, prog: str, description: str, measure, summary, what: str, needs_gpu: bool) -> int:
    """The command line shared with ``host_timeline``: a workload, engine specs, ``--limit`` and
    ``--timeout``; prints ``summary(measure(spec, data, queries, timeout))`` per engine. Refuses in one line
    without a GPU (``needs_gpu``, or an engine that uses the device)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--workload", default="hprd", choices=sorted(WORKLOADS))
    parser.add_argument("--engines", default="gmatch,egsm,gsi",
                        help="comma list of NAME or NAME:key=value+key=value")
    parser.add_argument("--limit", type=int, help="first N queries only")
    parser.add_argument("--timeout", type=float, default=10.0, help="per-query timeout_s")
    args = parser.parse_args(argv)
    specs = args.engines.split(",")
    if needs_gpu or any(engine_from_spec(spec).uses_device for spec in specs):
        require_gpu(prog)
    data, queries, _ = load(args.workload)
    queries = queries[:args.limit] if args.limit else queries
    for spec in specs:
        table = summary(measure(spec, data, queries, args.timeout))
        print(f"== {spec} on {args.workload} ({len(queries)} queries): {what} per query")
        print(table.to_string(float_format=lambda v: f"{v:.1f}"), flush=True)
    return 0


def main(argv=None) -> int:
    return per_engine_tables(argv, "python -m experiments.profiling.kernel_times",
                             __doc__.splitlines()[0], measure, summary, "device us", needs_gpu=True)


if __name__ == "__main__":
    raise SystemExit(main())
