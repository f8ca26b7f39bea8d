"""Small-query cost: milliseconds per query for every engine against the CPU reference.

Workloads: HPRD dense-16 (100 queries), yeast dense-8 and sparse-8 (those of at most 10^7
embeddings: 92 and 87), GitHub Q_0-Q_10,
all with exact counts. Each engine prepares the data graph once and answers the whole set once
untimed (kernels compiled, buffers grown); then every query is timed, wall clock around
``match()`` (``one``), and, for an engine with batches (its own ``_match_batch``), the whole set
(``batched``: the set's total divided per query, so a batch has a total, not a median or a
per-query ratio: those columns are empty for it). Printed last: per workload and engine, the
median and total ms per query, the ratio to ``cpu`` measured in the same run, and the count check.
``--interleave`` times the one-at-a-time passes query by query instead: every engine answers
query 1 (in an order rotated per query and reversed every other query), then query 2, and so
on, so a drift of the host's speed between runs
hits every engine alike; the table's
``ratio_vs_cpu`` (the median over queries of each query's wall against the CPU reference's for the
same query) is then a same-moment comparison. Engines are compared fairly either way: each one
prepares the data graph once and is warmed before any timing.
Each timed pass starts with ``gc.collect()``: with numba-cuda loaded a process tracks ~1M Python
objects, and a full collection that the garbage of earlier passes triggers inside a pass would be billed
to whichever query it lands in (docs/decisions.md, "Timing: a collection before each pass").
``--profile DIR`` adds a one-at-a-time pass under cProfile (after the timed ones) and writes its
listing per (workload, engine) with the median of every reported phase, so the fixed cost can be
read call by call.

    python -m experiments.bench.small_queries --engines cpu,gmatch,egsm,gsi,stwig --out small.csv
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import time
from pathlib import Path

import pandas as pd

from common.engine.base import Engine
from common.engine.registry import create_engine
from common.engine.result import Status
from common.gpu.runtime import backend_label
from common.interrupt import command_line, csv_rows, interruptible

from ..harness.timing import clocked
from ..harness.workloads import GITHUB, GITHUB_Q, HPRD, HPRD_DENSE_16, YEAST, load_set, yeast_queries
from . import engine_spec, note_simulator

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
    gc.collect()                      # earlier passes' garbage is not this pass's cost
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
    gc.collect()
    return clocked(lambda: engine.match_batch(queries, timeout_s=timeout_s))


def time_interleaved(engines: dict, queries, timeout_s):
    """{engine name: [(wall seconds, result)] per query}, every engine answering each query in
    turn: the order rotated by one per query and reversed every other query, so that no engine
    always runs right after the same one (an engine that follows a similar one, such as an
    ablation of itself, finds the host's caches warm)."""
    names = list(engines)
    out = {name: [] for name in names}
    gc.collect()
    for i, query in enumerate(queries):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order[::-1] if i % 2 else order:
            start = time.perf_counter()
            result = engines[name].match(query, timeout_s=timeout_s)
            out[name].append((time.perf_counter() - start, result))
    return out


def engine_from_spec(spec: str):
    """The engine of :func:`experiments.bench.engine_spec` ``spec`` (an ablation: ``egsm:blocks=33``)."""
    name, options = engine_spec(spec)
    return create_engine(name, **options)


def warmed(name, data, queries, timeout_s):
    """Engine ``name`` (or an ablation spec, ``gsi:fuse_rows=0``) prepared on ``data`` and run
    once over ``queries`` untimed (kernels compiled, buffers grown), batches too where it has
    them."""
    engine = engine_from_spec(name).prepare(data)
    for query in queries:
        engine.match(query, timeout_s=timeout_s)
    if batches(engine):
        engine.match_batch(queries, timeout_s=timeout_s)
    return engine


def run_interleaved(workloads, engines, timeout_s, out: Path | None = None, rows: list | None = None):
    """:func:`run` with the one-at-a-time passes of all engines interleaved query by query;
    the batched passes follow, one engine after another."""
    rows = [] if rows is None else rows
    for workload in workloads:
        data, queries, known = load(workload)
        print(f"== {workload}: {data.name}, {len(queries)} queries, engines interleaved", flush=True)
        prepared = {name: warmed(name, data, queries, timeout_s) for name in engines}
        for name, timed in time_interleaved(prepared, queries, timeout_s).items():
            rows += [_row(workload, name, "one", q, wall, result, known) for q, (wall, result) in zip(queries, timed)]
        for name, engine in prepared.items():
            if batches(engine):
                wall, results = time_batched(engine, queries, timeout_s)
                rows += [_row(workload, name, "batched", q, wall / len(queries), result, known)
                         for q, result in zip(queries, results)]
        if out is not None:
            pd.DataFrame(rows).to_csv(out, index=False)
    return pd.DataFrame(rows)


def run(workloads, engines, timeout_s, profile_to=None, out: Path | None = None, rows: list | None = None):
    """Every (workload, engine) timed; each engine's rows are appended to ``out`` (CSV) and to
    ``rows`` and summarised on one line as soon as it is done, so a run cut short keeps what it
    measured."""
    rows = [] if rows is None else rows
    for workload in workloads:
        data, queries, known = load(workload)
        print(f"== {workload}: {data.name}, {len(queries)} queries", flush=True)
        for name in engines:
            engine = warmed(name, data, queries, timeout_s)
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
                median = f"median {part.wall_ms.median():8.3f} ms, " if mode == "one" else ""
                print(f"   {name:7s} {mode:8s} {median}total {part.wall_ms.sum():9.1f} ms, "
                      f"exact {int(part.exact.sum())}/{len(part)}", flush=True)
    return pd.DataFrame(rows)


def _row(workload, engine, mode, query, wall, result, known):
    expected = known.get(query.name)
    exact = result.status is Status.OK and (expected is None or result.count == expected)
    return {"workload": workload, "engine": engine, "mode": mode, "query": query.name,
            "wall_ms": wall * 1e3, "status": str(result.status), "count": result.count,
            "expected": expected, "exact": exact, "backend": backend_label(),
            **{f"{phase}_ms": seconds * 1e3 for phase, seconds in result.phases.items()}}


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and total ms per query per (workload, engine, mode), the total's ratio to cpu's,
    the median over queries of each query's ratio to cpu's time for it, and the exact counts.
    A batch's rows carry its total split evenly, so it gets no median and no per-query ratio
    (NaN): only its total compares."""
    table = frame.groupby(["workload", "engine", "mode"], sort=False).agg(
        median_ms=("wall_ms", "median"), total_ms=("wall_ms", "sum"),
        exact=("exact", "sum"), queries=("query", "count")).reset_index()
    cpu = table[table.engine == "cpu"].set_index("workload")
    table["total_vs_cpu"] = [row.total_ms / cpu.total_ms.get(row.workload, float("nan"))
                             for row in table.itertuples()]
    cpu_wall = frame[(frame.engine == "cpu") & (frame["mode"] == "one")].set_index(["workload", "query"]).wall_ms
    ratio = frame.wall_ms / cpu_wall.reindex(pd.MultiIndex.from_frame(frame[["workload", "query"]])).to_numpy()
    medians = ratio.groupby([frame.workload, frame.engine, frame["mode"]], sort=False).median()
    table["ratio_vs_cpu"] = [medians.get((row.workload, row.engine, row.mode), float("nan"))
                             for row in table.itertuples()]
    table.loc[table["mode"] == "batched", ["median_ms", "ratio_vs_cpu"]] = float("nan")
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--timeout", type=float, default=10.0, help="per-query timeout_s")
    parser.add_argument("--profile", type=Path, help="folder for cProfile listings")
    parser.add_argument("--out", type=Path, help="CSV of every timed query")
    parser.add_argument("--interleave", action="store_true",
                        help="time the engines query by query in turn (a drifting host hits all alike)")
    args = parser.parse_args(argv)
    note_simulator("python -m experiments.bench.small_queries", args, timeout_s=args.timeout)
    if args.interleave and args.profile:
        parser.error("--profile times each engine's own pass; it does not go with --interleave")
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    if args.out and args.out.exists():
        args.out.unlink()
    workloads, engines = args.workloads.split(","), args.engines.split(",")
    out = args.out or Path("small_queries.partial.csv")
    show = lambda rows: print(summary(pd.DataFrame(rows)).to_string(index=False))  # noqa: E731
    with interruptible(command_line("python -m experiments.bench.small_queries", argv), starts_over=True,
                       save=csv_rows(out, show), unit="rows") as tally:
        if args.interleave:
            frame = run_interleaved(workloads, engines, args.timeout, args.out, rows=tally.rows)
        else:
            frame = run(workloads, engines, args.timeout, args.profile, args.out, rows=tally.rows)
    table = summary(frame)
    print(f"backend: {backend_label()}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0 if bool(frame.exact.all()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
