"""Small-query cost: milliseconds per query for every engine against the CPU reference (issue 14).

Workloads: HPRD dense-16 (100 queries), yeast dense-8 and sparse-8 (those of at most 10^7
embeddings: 92 and 87), GitHub Q_0-Q_10,
all with exact counts. Each engine prepares the data graph once and answers the whole set once
untimed (kernels compiled, buffers grown); then every query is timed, wall clock around
``match()`` (``one``), and, for an engine with batches (its own ``_match_batch``), the whole set
(``batched``: the set's total divided per query). Printed last: per workload and engine, the
median and total ms per query, the ratio to ``cpu`` measured in the same run, and the count check.
``--profile DIR`` adds a one-at-a-time pass under cProfile (after the timed ones) and writes its
listing per (workload, engine) with the median of every reported phase, so the fixed cost can be
read call by call.

    python -m experiments.small_queries --engines cpu,gmatch,egsm,gsi,stwig --out small.csv
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from pathlib import Path

import pandas as pd

from common.device import backend_label
from common.engine import Engine, create_engine
from common.result import Status

from .workloads import GITHUB, GITHUB_Q, HPRD, HPRD_DENSE_16, YEAST, load_set, yeast_queries

WORKLOADS = {
    "hprd": (HPRD, HPRD_DENSE_16),
    "yeast8d": (YEAST, yeast_queries("dense_8")),
    "yeast8s": (YEAST, yeast_queries("sparse_8")),
    "github": (GITHUB, GITHUB_Q),
}
ENGINES = ("cpu", "gmatch", "egsm", "gsi", "stwig")


def load(name: str):
    """(data graph, queries, exact counts by query name) of a workload."""
    return load_set(*WORKLOADS[name])


def time_one_at_a_time(engine, queries, timeout_s, profile_to: Path | None, label: str):
    """Per query (wall seconds, result); the pass is profiled when ``profile_to`` is given."""
    profiler = cProfile.Profile() if profile_to else None
    out = []
    for query in queries:
        if profiler:
            profiler.enable()
        start = time.perf_counter()
        result = engine.match(query, timeout_s=timeout_s)
        wall = time.perf_counter() - start
        if profiler:
            profiler.disable()
        out.append((wall, result))
    if profiler:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text)
        stats.sort_stats("tottime").print_stats(35)
        stats.sort_stats("cumulative").print_stats(45)
        phases = pd.DataFrame([r.phases for _, r in out]).median() * 1e3
        text.write("\nmedian phase ms:\n" + phases.to_string() + "\n")
        (profile_to / f"profile_{label}.txt").write_text(text.getvalue())
    return out


def batches(engine) -> bool:
    """Does the engine answer query sets in batches (its own ``_match_batch``)?"""
    return type(engine)._match_batch is not Engine._match_batch


def time_batched(engine, queries, timeout_s):
    """(wall seconds of the whole set, results) through ``engine.match_batch``."""
    start = time.perf_counter()
    results = engine.match_batch(queries, timeout_s=timeout_s)
    return time.perf_counter() - start, results


def run(workloads, engines, timeout_s, profile_to=None, out: Path | None = None):
    """Every (workload, engine) timed; each engine's rows are appended to ``out`` (CSV) and
    summarised on one line as soon as it is done, so a run cut short keeps what it measured."""
    rows = []
    for workload in workloads:
        data, queries, known = load(workload)
        print(f"== {workload}: {data.name}, {len(queries)} queries", flush=True)
        for name in engines:
            engine = create_engine(name).prepare(data)
            for query in queries:                          # untimed: compile, grow buffers
                engine.match(query, timeout_s=timeout_s)
            if batches(engine):
                engine.match_batch(queries, timeout_s=timeout_s)
            label = f"{workload}_{name}"
            timed = time_one_at_a_time(engine, queries, timeout_s, None, label)
            if profile_to:                                 # a separate pass: the profiler's cost
                time_one_at_a_time(engine, queries, timeout_s, profile_to, label)
            for query, (wall, result) in zip(queries, timed):
                rows.append(_row(workload, name, "one", query, wall, result, known))
            if batches(engine):
                wall, results = time_batched(engine, queries, timeout_s)
                for query, result in zip(queries, results):
                    rows.append(_row(workload, name, "batched", query, wall / len(queries), result,
                                     known))
            done = pd.DataFrame(rows[-len(queries) * (2 if batches(engine) else 1):])
            if out is not None:                            # whole: engines report different phases
                pd.DataFrame(rows).to_csv(out, index=False)
            for mode, part in done.groupby("mode", sort=False):
                print(f"   {name:7s} {mode:8s} median {part.wall_ms.median():8.3f} ms, total "
                      f"{part.wall_ms.sum():9.1f} ms, exact {int(part.exact.sum())}/{len(part)}", flush=True)
    return pd.DataFrame(rows)


def _row(workload, engine, mode, query, wall, result, known):
    expected = known.get(query.name)
    exact = result.status is Status.OK and (expected is None or result.count == expected)
    return {"workload": workload, "engine": engine, "mode": mode, "query": query.name,
            "wall_ms": wall * 1e3, "status": str(result.status), "count": result.count,
            "expected": expected, "exact": exact, "backend": backend_label(),
            **{f"{phase}_ms": seconds * 1e3 for phase, seconds in result.phases.items()}}


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and total ms per query per (workload, engine, mode), ratio to cpu, exact counts."""
    table = frame.groupby(["workload", "engine", "mode"], sort=False).agg(
        median_ms=("wall_ms", "median"), total_ms=("wall_ms", "sum"),
        exact=("exact", "sum"), queries=("query", "count")).reset_index()
    cpu = table[table.engine == "cpu"].set_index("workload")
    table["total_vs_cpu"] = [row.total_ms / cpu.total_ms.get(row.workload, float("nan"))
                             for row in table.itertuples()]
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--timeout", type=float, default=10.0, help="per-query timeout_s")
    parser.add_argument("--profile", type=Path, help="folder for cProfile listings")
    parser.add_argument("--out", type=Path, help="CSV of every timed query")
    args = parser.parse_args(argv)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    if args.out and args.out.exists():
        args.out.unlink()
    frame = run(args.workloads.split(","), args.engines.split(","), args.timeout, args.profile, args.out)
    table = summary(frame)
    print(f"backend: {backend_label()}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0 if bool(frame.exact.all()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
