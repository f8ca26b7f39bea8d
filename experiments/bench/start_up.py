"""The external binaries' start-up against the size of the graph they load, read from committed rows.

An external binary (the authors' EGSM, gMatch and GSI, the gMatch paper's competitors) spends time
beside its search in every process: reading the data graph, the CUDA context, exit. Each of its rows
records that time (``startup_ms``: the process's wall less its printed search). This reads every
``<experiment>.<scale>.csv`` under ``--results``, puts each row beside its data graph's edges at that
scale, and fits seconds = fixed + per million edges (least squares) per engine: the numbers an
engine's :meth:`~common.engine.base.Engine.planned_start_up_s` declares for the worst-case plan.

    python -m experiments.bench.start_up --results results .bench/medium
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..harness.catalog import get_experiment
from ..harness.workloads import SCALES, standin_size


def start_up_rows(folders) -> pd.DataFrame:
    """engine, experiment, dataset, edges, start-up seconds and runs in the process, one per row that
    records a start-up (a row whose experiment or point is no longer declared is passed over)."""
    out = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.csv")):
            name, _, scale = path.name[:-len(".csv")].rpartition(".")
            if scale not in SCALES:
                continue
            try:
                experiment = get_experiment(name)
            except ValueError:                    # not an experiment declared today
                continue
            here = experiment.scale_for(SCALES[scale])
            datasets = {p.label: p.dataset for p in experiment.points_for(SCALES[scale])}
            rows = pd.read_csv(path, usecols=lambda c: c in ("engine", "dataset", "stats"))
            for row in rows.itertuples():
                stats = json.loads(row.stats) if isinstance(row.stats, str) and row.stats.startswith("{") else {}
                if "startup_ms" not in stats or row.dataset not in datasets:
                    continue
                edges = standin_size(datasets[row.dataset], here.max_edges, here.keep_degree)[1]
                out.append((row.engine, name, row.dataset, edges, stats["startup_ms"] / 1e3,
                            int(stats.get("runs_in_one_process", 1))))
    return pd.DataFrame(out, columns=["engine", "experiment", "dataset", "edges", "start_up_s", "runs"])


def fit(rows: pd.DataFrame) -> pd.DataFrame:
    """Per engine: the graphs seen, the median start-up per graph, and seconds = fixed + per million
    edges fitted to those medians (the slope alone where one graph size was seen)."""
    out = []
    for engine, mine in rows.groupby("engine"):
        per_graph = mine.groupby("edges")["start_up_s"].median()
        x, y = per_graph.index.to_numpy(dtype=float) / 1e6, per_graph.to_numpy(dtype=float)
        if len(x) >= 2:
            per_million, fixed = np.polyfit(x, y, 1)
        else:
            fixed, per_million = 0.0, float(y[0] / x[0]) if x[0] else float("nan")
        out.append((engine, len(mine), ", ".join(f"{e / 1e6:.2f}M: {s:.2f} s" for e, s in per_graph.items()),
                    round(float(fixed), 3), round(float(per_million), 3)))
    return pd.DataFrame(out, columns=["engine", "rows", "median start-up per graph", "fixed_s", "per_million_edges_s"])


def main(argv=None) -> int:
    """Print each external engine's start-up per data graph and its fitted model."""
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.start_up", description=main.__doc__)
    parser.add_argument("--results", nargs="+", default=["results"], help="folders of experiment rows")
    args = parser.parse_args(argv)
    rows = start_up_rows(args.results)
    if rows.empty:
        print("no row records a start-up (startup_ms) under " + ", ".join(args.results))
        return 0
    print(fit(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
