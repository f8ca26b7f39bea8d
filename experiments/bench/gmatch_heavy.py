"""gMatch on heavy queries against the authors' own build (run on a GPU).

Runs ``rw12`` (30 random-walk 12-vertex GitHub queries, 10^8-10^12 embeddings) and GitHub
Q_0-Q_10 with the data graph prepared once and every kernel compiled before timing, and prints
per query: our search time (CUDA events around the BFS seed pool and DFS: the ``enumerate``
phase plus the data-graph ``probe`` that ``candidate_graph="auto"`` runs first, at most 5 ms),
the probe alone, the candidate-graph build (``index``), the wall time of ``match()``, the authors' ``search_ms`` from
``authors_gmatch_h200.csv`` (their CUDA build on an H200), the ratio ours / authors and the count
check. Queries the authors do not finish in the time limit are checked against a second run:
``--check-engine`` (default ``egsm``) within ``--check-timeout`` seconds, else gMatch without
leaf counting (full enumeration of every leaf, a different code path). ``--variants`` adds our
own ablations to the same run. A summary table comes last; ``--out`` writes the rows as CSV.

    python -m experiments.bench.gmatch_heavy --timeout 8
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import time
from pathlib import Path

import pandas as pd

from common.engine.registry import create_engine
from common.engine.result import Status

from ..harness.workloads import GMATCH_AUTHORS, check_set, data_dir, read_authors_csv

VARIANTS = {
    "default": {},
    "no-leaf-counting": {"leaf_counting": False},
    "data-graph": {"candidate_graph": False, "leaf_counting": False},
}


def variant_options(token: str) -> dict:
    """A named variant, or engine options written ``key=value+key=value`` (Python literals)."""
    if token in VARIANTS:
        return VARIANTS[token]
    options = {}
    for item in token.split("+"):
        key, _, value = item.partition("=")
        options[key] = ast.literal_eval(value)
    return options


def workloads(names: list[str]):
    """(workload, query name, query graph, authors' count or None, authors' search ms or None)."""
    for name in names:
        if name not in GMATCH_AUTHORS:
            raise SystemExit(f"unknown workload {name!r} ({', '.join(GMATCH_AUTHORS)})")
        authors = read_authors_csv(data_dir() / GMATCH_AUTHORS[name])
        for query, count in check_set(name).queries:
            solved = authors[query.name]["status"] == "ok"
            yield name, query.name, query, count, float(authors[query.name]["search_ms"]) if solved else None


def _sm_count() -> int:
    from common.gpu.runtime import cuda, simulator_active
    return 1 if simulator_active() else cuda.get_current_device().MULTIPROCESSOR_COUNT


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.gmatch_heavy",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=8.0, help="seconds per query (authors: 8)")
    parser.add_argument("--workloads", default="rw12,github")
    parser.add_argument("--variants", default="default",
                        help=f"comma list of {list(VARIANTS)} or options such as max_registers=64")
    parser.add_argument("--queries", help="comma list of query names (default: all)")
    parser.add_argument("--check-engine", default="egsm")
    parser.add_argument("--check-timeout", type=float, default=20.0)
    parser.add_argument("--check-budget", type=float, default=120.0,
                        help="seconds for all second-engine checks together")
    parser.add_argument("--out", type=Path, help="CSV of every row")
    args = parser.parse_args(argv)

    data = check_set("github", 0).data
    queries = list(workloads(args.workloads.split(",")))
    if args.queries:
        queries = [q for q in queries if q[1] in args.queries.split(",")]
    rows = []
    for variant in args.variants.split(","):
        options = variant_options(variant)
        engine = create_engine("gmatch", **options).prepare(data)
        indexed = create_engine("gmatch", **{**options, "probe_s": 0}).prepare(data)
        for size in sorted({q.num_vertices for _, _, q, _, _ in queries}):     # compile first
            warm = next(q for _, _, q, _, _ in queries if q.num_vertices == size)
            for prepared in (engine, indexed):   # the probe's kernels and the candidate graph's
                prepared.match(warm, timeout_s=args.timeout)
                prepared.match(warm, limit=10)
        for workload, name, query, count, authors_ms in queries:
            start = time.perf_counter()
            result = engine.match(query, timeout_s=args.timeout)
            wall = time.perf_counter() - start
            search = (result.phases.get("enumerate", 0.0) + result.phases.get("probe", 0.0)) * 1e3
            rows.append(dict(variant=variant, workload=workload, query=name, status=result.status.value,
                             count=result.count, authors_count=count, authors_search_ms=authors_ms,
                             search_ms=search, index_ms=result.phases.get("index", 0.0) * 1e3,
                             probe_ms=result.phases.get("probe", 0.0) * 1e3,
                             wall_ms=wall * 1e3, counted_leaves=result.stats.get("counted_leaves"),
                             registers=result.stats.get("registers_per_thread"),
                             local_bytes=result.stats.get("local_bytes_per_thread"),
                             blocks=result.stats.get("blocks"),
                             warps_per_block=result.stats.get("warps_per_block")))
            print(f"{variant:>16} {name:>8} {result.status.value:>7} {result.count:>16,} "
                  f"search {search:9.1f} ms  authors {authors_ms or float('nan'):8.0f} ms", flush=True)
    table = pd.DataFrame(rows)

    # second opinion for queries the authors did not finish
    checker = None
    budget_end = time.perf_counter() + args.check_budget
    table["check"] = ""
    for i, row in table.iterrows():
        if row["status"] != Status.OK.value:
            continue
        if pd.notna(row["authors_count"]):
            table.at[i, "check"] = "authors " + ("equal" if row["count"] == row["authors_count"]
                                                 else "DIFFERENT")
            continue
        query = next(q for _, n, q, _, _ in queries if n == row["query"])
        verdict = ""
        if time.perf_counter() < budget_end:
            if checker is None:
                checker = create_engine(args.check_engine).prepare(data)
            second = checker.match(query, timeout_s=args.check_timeout)
            if second.status is Status.OK:
                verdict = f"{args.check_engine} " + ("equal" if second.count == row["count"] else "DIFFERENT")
        if not verdict:
            same = table[(table["query"] == row["query"]) & (table["variant"] != row["variant"])
                         & (table["status"] == Status.OK.value)]
            if len(same):
                verdict = "ablation " + ("equal" if (same["count"] == row["count"]).all() else "DIFFERENT")
            else:
                verdict = "unchecked"
        table.at[i, "check"] = verdict
    table["ratio"] = table["search_ms"] / table["authors_search_ms"]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)

    pd.set_option("display.width", 200)
    print(table[["variant", "workload", "query", "status", "count", "search_ms", "probe_ms", "index_ms",
                 "wall_ms",
                 "authors_search_ms", "ratio", "counted_leaves", "check"]].to_string(index=False,
                                                                                     float_format="%.1f"))
    launch = table.groupby("variant")[["registers", "local_bytes", "blocks", "warps_per_block"]].max()
    launch["warps_per_sm"] = launch["blocks"] * launch["warps_per_block"] / _sm_count()
    print("\ncompiled fine kernel per variant (largest over the queries)")
    print(launch.to_string())
    print("\nsummary (search phase; ratio = ours / authors on the queries both solve)")
    for (variant, workload), part in table.groupby(["variant", "workload"]):
        both = part[(part["status"] == "ok") & part["authors_search_ms"].notna()]
        only_ours = part[(part["status"] == "ok") & part["authors_search_ms"].isna()]
        authors_solved = part["authors_search_ms"].notna().sum()
        median = statistics.median(both["ratio"]) if len(both) else float("nan")
        wrong = part["check"].str.contains("DIFFERENT").sum()
        print(f"{variant:>16} {workload:>7}: solved {int((part['status'] == 'ok').sum())}/{len(part)}, "
              f"{len(both)}/{authors_solved} of the authors', {len(only_ours)} they do not finish; "
              f"median ratio {median:.2f}; count disagreements {wrong}")
        if len(part[part["status"] == "ok"]):
            best = part[part["status"] == "ok"].sort_values("count").iloc[-1]
            rate = best["count"] / (best["search_ms"] / 1e3) if best["search_ms"] else float("nan")
            print(f"{'':>16} largest solved {best['query']} {best['count']:,} in {best['search_ms']:.0f} ms "
                  f"= {rate:.3g} embeddings/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
