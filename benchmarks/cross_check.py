"""Cross-check the engines' counts where no exact count is known: every engine on the same queries.

Workloads: ``patterns`` (P1-P9 on the unlabelled GitHub graph: counts up to ~10^10, beyond the
CPU reference within seconds), ``enron`` (random induced 8-vertex queries on SNAP email-Enron
with 16 power-law labels). Each engine prepares the graph once, answers every query once after
a warm-up query, and the table printed last shows each query's counts side by side; any
disagreement between engines that finished (status ok) is printed loudly and the exit code is 1.

    python benchmarks/cross_check.py --engines gsi,egsm,gmatch,stwig --workloads patterns,enron --timeout 30
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.paths import data_dir as bundled_data  # noqa: E402
from common import create_engine  # noqa: E402
from common.generate import pattern, power_law_labels, query_set  # noqa: E402
from common.io import load_graph  # noqa: E402


def workload(name: str, data_dir: Path, count: int):
    if name == "patterns":
        data = load_graph(data_dir / "gmatch_test" / "data.graph")
        data = data.replace(labels=data.labels * 0, name="GitHub (unlabelled)")
        return data, [pattern(f"P{i}") for i in range(1, 10)]
    if name == "enron":
        data = load_graph(data_dir / "snap" / "email-Enron.txt.gz", symmetrize=True)
        data = data.replace(labels=power_law_labels(data.num_vertices, 16, 1.0, seed=1), name="Enron (16 labels)")
        return data, list(query_set(data, count, 8, seed=8).queries)
    raise ValueError(f"unknown workload {name!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_data = str(bundled_data())
    parser.add_argument("--data", default=default_data)
    parser.add_argument("--engines", default="gsi,egsm,gmatch,stwig")
    parser.add_argument("--workloads", default="patterns,enron")
    parser.add_argument("--count", type=int, default=20, help="random queries per generated workload")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-query timeout_s")
    parser.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    args = parser.parse_args()
    rows = []
    for name in args.workloads.split(","):
        data, queries = workload(name, Path(args.data), args.count)
        print(f"== {name}: {data!r}, {len(queries)} queries", flush=True)
        for engine_name in args.engines.split(","):
            engine = create_engine(engine_name).prepare(data)
            engine.match(queries[0], timeout_s=args.timeout)              # warm-up: compile
            for query in queries:
                start = time.perf_counter()
                result = engine.match(query, timeout_s=args.timeout)
                wall = time.perf_counter() - start
                rows.append({"workload": name, "query": query.name, "engine": engine_name,
                             "status": str(result.status), "count": result.count, "wall_s": wall})
                print(f"  {engine_name:7s} {query.name:24s} {result.status!s:8s} {result.count:>16,d} "
                      f"{wall * 1e3:10.2f} ms", flush=True)
            del engine
    raw = pd.DataFrame(rows)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    raw.to_csv(Path(args.out) / "cross_check.csv", index=False)
    table = raw.assign(cell=[f"{c:,}" if s == "ok" else s for c, s in zip(raw["count"], raw["status"])]) \
        .pivot_table(index=["workload", "query"], columns="engine", values="cell", aggfunc="first", sort=False)
    ok = raw[raw.status == "ok"].groupby(["workload", "query"])["count"].nunique()
    bad = ok[ok > 1]
    print("\n" + table.to_string())
    if len(bad):
        print(f"\n!!!! COUNT DISAGREEMENT on {len(bad)} queries: {', '.join(q for _, q in bad.index)}")
        return 1
    print(f"\nall engines that finished agree on every query ({int((ok == 1).sum())} queries with >= 1 finished engine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
