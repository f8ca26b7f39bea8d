"""Dask on GPUs: query-set throughput and one heavy query split, against a local run.

Starts ``dask_cuda.LocalCUDACluster`` with 1, 2, ... workers (one GPU each; ``--workers 1,2,4``)
and measures, with the same engine prepared in this process as the base (one GPU, no Dask):

* **query sets** (``--sets``): HPRD dense-16, yeast dense-16/sparse-16 (counts <= 10^7, as the
  small-query benchmark), rw12 (the 30 random-walk queries, ``--timeout`` each): wall seconds of
  the whole set through ``common.distributed.match_many`` (groups of queries per task, each
  answered by ``match_batch``), queries/s, speedup over the local run (the engine's
  ``match_batch`` over the whole set, as ``common.match_many`` runs it), and the counts against
  the exact ones (and against the local run where no exact count is known);
* **split heavy queries** (``--heavy``: rw12 names, or the patterns P1-P9 on the unlabelled
  GitHub graph): each query through ``common.distributed.match_split``
  (``--parts-per-worker`` ranges per worker, a comma list to compare): wall seconds, speedup,
  embeddings/s, the split count against the local one, and where the time went: the longest
  part's seconds on its worker (``largest_part_s``; a split cannot beat it) and the parts'
  summed seconds (``parts_s``; against the local wall, the cost of splitting).

On one GPU the ratio dask/local is the Dask path's overhead. Each configuration answers its
workload once untimed first (worker-side prepare and kernel compiles; a split query, and its
local base, also once itself: :data:`WARM_S` seconds per query at most), then once timed. Printed
last: one table; ``--out`` writes it as CSV, ``--plot`` the speedups as a PNG.

    python -m experiments.bench.dask_scaling --engine gmatch --workers 1 --out dask.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from common.engine.registry import create_engine
from common.engine.result import Status
from common.gpu.backend import require_gpu
from common.gpu.runtime import backend_label
from common.graph.generate import pattern
from common.interrupt import command_line, csv_rows, interruptible

from ..harness.timing import clocked
from ..harness.workloads import GITHUB, GITHUB_RW12, HPRD, HPRD_DENSE_16, SCALES, YEAST, load_set, yeast_queries
from . import note_simulator

SETS = {
    "hprd": (HPRD, HPRD_DENSE_16),
    "yeast16d": (YEAST, yeast_queries("dense_16")),
    "yeast16s": (YEAST, yeast_queries("sparse_16")),
    "rw12": (GITHUB, GITHUB_RW12),
}
HEAVY = ("q12_000", "q12_006", "q12_015")       # the longest rw12 queries one H200 solves in 8 s
#: per-query seconds of the untimed warm-up pass (compiles every kernel path, prepares every worker)
WARM_S = 0.5


def query_set(name: str):
    """(data graph, queries, exact counts) of a query set."""
    return load_set(*SETS[name])


def _check(results, known, base):
    """Queries whose count is exact where known, equal to the local run otherwise (ok only)."""
    good = 0
    for result, local in zip(results, base):
        expected = known.get(result.query, local.count if local.status is Status.OK else None)
        good += result.status is Status.OK and expected is not None and result.count == expected
    return good


def start_cluster(kind: str, workers: int):
    """``local-cuda``: one worker per GPU (dask-cuda); ``local``: CPU processes, one thread each."""
    if kind == "local-cuda":
        from dask_cuda import LocalCUDACluster
        return LocalCUDACluster(n_workers=workers, dashboard_address=None)
    from dask.distributed import LocalCluster
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)


def heavy_queries(names):
    """(data graph, query, known counts, warm-up query) per heavy query: ``q12_*`` names are rw12
    queries on labelled GitHub, ``P1``..``P9`` the unlabelled patterns on unlabelled GitHub."""
    out = []
    rw12 = None
    unlabelled = None
    for name in names:
        if name.startswith("P"):
            if unlabelled is None:
                github = GITHUB.load(SCALES["full"])
                unlabelled = github.replace(labels=np.zeros(github.num_vertices, np.int32),
                                            name="GitHub (unlabelled)")
            out.append((unlabelled, pattern(name), {}, pattern("P1")))
        else:
            if rw12 is None:
                rw12 = query_set("rw12")
            data, queries, known = rw12
            by_name = {q.name: q for q in queries}
            out.append((data, by_name[name], known, by_name["q12_001"]))
    return out


def run(engine_name, worker_counts, sets, heavy, timeout_s, parts_per_worker, cluster_kind="local-cuda",
        rows: list | None = None):
    """The table's rows (module docstring), each also appended to ``rows`` as it comes."""
    from dask.distributed import Client

    from common.distributed import match_many, match_split

    rows = [] if rows is None else rows
    loaded = {name: query_set(name) for name in sets}
    local = {}
    for name, (data, queries, known) in loaded.items():            # the base: one GPU, no Dask
        engine = create_engine(engine_name).prepare(data)
        engine.match_batch(queries, timeout_s=min(timeout_s, WARM_S))
        wall, results = clocked(lambda: engine.match_batch(queries, timeout_s=timeout_s))
        local[name] = results
        rows.append(_row("set", name, "local", 0, wall, len(queries), results, _check(results, known, results)))
    heavy = heavy_queries(heavy)
    engines = {}
    for data, query, known, warm in heavy:
        if id(data) not in engines:
            engines[id(data)] = create_engine(engine_name).prepare(data)
            engines[id(data)].match(warm, timeout_s=timeout_s)        # compile
        engines[id(data)].match(query, timeout_s=min(timeout_s, WARM_S))   # this query's kernels
        wall, result = clocked(lambda: engines[id(data)].match(query, timeout_s=timeout_s))
        local[query.name] = [result]
        rows.append(_row("split", query.name, "local", 0, wall, 1, [result], _check([result], known, [result])))
    for workers in worker_counts:
        with start_cluster(cluster_kind, workers) as cluster, Client(cluster) as client:
            for name, (data, queries, known) in loaded.items():
                match_many(data, queries, engine_name, client=client, timeout_s=min(timeout_s, WARM_S))
                wall, results = clocked(lambda: match_many(data, queries, engine_name, client=client,
                                                          timeout_s=timeout_s))
                rows.append(_row("set", name, "dask", workers, wall, len(queries), results,
                                 _check(results, known, local[name])))
            warmed, warmed_splits = set(), set()
            for data, query, known, warm in heavy:
                for per_worker in parts_per_worker:
                    parts = per_worker * workers
                    if id(data) not in warmed:
                        match_split(data, warm, engine_name, client=client, parts=parts, timeout_s=timeout_s)
                        warmed.add(id(data))
                    if (query.name, parts) not in warmed_splits:    # this query's kernels on its workers
                        match_split(data, query, engine_name, client=client, parts=parts,
                                    timeout_s=min(timeout_s, WARM_S))
                        warmed_splits.add((query.name, parts))
                    wall, result = clocked(lambda: match_split(data, query, engine_name, client=client,
                                                              parts=parts, timeout_s=timeout_s))
                    seconds = result.stats.get("part_seconds", [])
                    rows.append(dict(_row("split", query.name, "dask", workers, wall, 1, [result],
                                          _check([result], known, local[query.name])),
                                     parts_per_worker=per_worker, parts=result.stats.get("split_parts", 1),
                                     largest_part_s=max(seconds, default=np.nan),
                                     parts_s=sum(seconds) if seconds else np.nan))
    frame = pd.DataFrame(rows)
    base = frame[frame["run"] == "local"].set_index(["kind", "workload"]).wall_s
    frame["speedup"] = [base[(r.kind, r.workload)] / r.wall_s for r in frame.itertuples()]
    frame["backend"] = backend_label()
    return frame


def plot(frame: pd.DataFrame, path: Path) -> None:
    """Speedup over the one-GPU local run against workers (log scale): query sets solid, split
    queries dashed (one marker per parts-per-worker value), the ideal line black."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dask = frame[frame["run"] == "dask"]
    if "parts_per_worker" not in dask:
        dask = dask.assign(parts_per_worker=np.nan)
    several = dask.parts_per_worker.nunique() > 1
    markers = dict(zip(sorted(dask.parts_per_worker.dropna().unique()), "so^vD"))
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, workload in enumerate(dict.fromkeys(dask.workload)):
        for (kind, per_worker), part in dask[dask.workload == workload].groupby(
                ["kind", "parts_per_worker"], sort=False, dropna=False):
            split = kind == "split"
            what = "query set" if not split else (f"split, {per_worker:.0f} parts/worker" if several else "split")
            ax.plot(part.workers, part.speedup, color=colours(i % 10), linestyle="--" if split else "-",
                    marker=markers.get(per_worker, "o"), label=f"{workload} ({what})")
    top = int(dask.workers.max()) if len(dask) else 1
    ax.plot([1, top], [1, top], "k-", linewidth=2, alpha=0.4, label="ideal (linear)")
    ax.set_yscale("log", base=2)
    ax.set_xlabel("Dask workers (one GPU each)")
    ax.set_ylabel("speedup over one GPU without Dask (x, log scale)")
    ax.set_xticks(sorted(dask.workers.unique()) if len(dask) else [1])
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(f"gpusm on Dask, {frame.backend.iloc[0]}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _row(kind, workload, mode, workers, wall, queries, results, good):
    embeddings = sum(r.count for r in results)
    return {"kind": kind, "workload": workload, "run": mode, "workers": workers, "wall_s": wall,
            "queries": queries, "queries_per_s": queries / wall, "embeddings_per_s": embeddings / wall,
            "exact": good, "statuses": ",".join(sorted({str(r.status) for r in results}))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="gmatch")
    parser.add_argument("--workers", default="1", help="comma-separated worker (GPU) counts")
    parser.add_argument("--sets", default="hprd", help=f"query sets: {', '.join(SETS)}")
    parser.add_argument("--heavy", default=",".join(HEAVY),
                        help="queries to split: rw12 names, or P1..P9 on unlabelled GitHub ('' for none)")
    parser.add_argument("--timeout", type=float, default=8.0)
    parser.add_argument("--parts-per-worker", default="4",
                        help="ranges per worker for a split query (comma list to compare)")
    parser.add_argument("--cluster", choices=("local-cuda", "local"), default="local-cuda")
    parser.add_argument("--out", type=Path, help="CSV of the table")
    parser.add_argument("--plot", type=Path, help="PNG of speedup against workers")
    args = parser.parse_args(argv)
    if args.cluster == "local-cuda":
        require_gpu("python -m experiments.bench.dask_scaling --cluster local-cuda")
    note_simulator("python -m experiments.bench.dask_scaling", args, timeout_s=args.timeout)
    sets = [s for s in args.sets.split(",") if s]
    heavy = [h for h in args.heavy.split(",") if h]
    save = csv_rows(args.out or Path("dask_scaling.partial.csv"), lambda rows: print(pd.DataFrame(rows).to_string()))
    with interruptible(command_line("python -m experiments.bench.dask_scaling", argv), save=save, unit="rows",
                       starts_over=True) as tally:
        frame = run(args.engine, [int(w) for w in args.workers.split(",")], sets, heavy, args.timeout,
                    [int(p) for p in args.parts_per_worker.split(",")], args.cluster, rows=tally.rows)
    if args.out:
        frame.to_csv(args.out, index=False)
    if args.plot:
        plot(frame, args.plot)
    print(f"backend: {backend_label()}, engine {args.engine}")
    print(frame.drop(columns="backend").to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    good = frame.exact == frame.queries
    return 0 if bool(good.all()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
