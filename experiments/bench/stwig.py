"""Benchmark and validation of the STwig engines (Lin et al. 2014 §5).

1. Validates ``stwig`` (GPU) counts against the exact external counts: the 100 HPRD queries,
   the yeast dense_8 / sparse_8 / dense_16 queries with a known count <= 1e7, and GitHub
   Q_0..Q_10. Statuses timeout / oom / unsupported are allowed (reported, with the reason);
   a wrong ``ok`` count, or a lower bound above the exact count, is a MISMATCH (exit code 1).
2. Times each query warm (one warm-up run, then the median of ``--repeats`` runs of the summed
   phase times; device-event timed on a GPU) for the GPU engine, the CPU STwig baseline
   (``stwig-cpu``, single thread: the paper's comparison) and the CPU reference matcher, and
   prints the ratios (total and join-only, the paper's 26.0x figure).
3. ``rmat``: the paper's default setting (§5.1): R-MAT a=0.4, b=c=d=0.2, 16K vertices, 16
   uniform labels, average degree 32, queries of N = 5..10 vertices with 2N random edges
   (``common.graph.generate.stwig_query``); GPU vs CPU STwig speedup (Fig. 3a / §5.5), counts
   cross-checked between the engines and the reference.
4. ``variants`` (on the R-MAT queries): GPU exploration, STwig join order (no result-size
   prediction), the paper's one-thread-per-R_1-row probe (``split_probe=False``), a split of
   the first join level only (``split_levels=1``) and the parallel CPU baseline, as ratios to
   the default GPU engine.

Workloads run in the order hprd, github, rmat, yeast, variants, sharing ``--time-budget``;
``--yeast-max`` caps the yeast queries. Per-query rows go to ``--out``/stwig_bench.csv, a
summary table is printed last: ``python -m experiments.bench.stwig --time-budget 300`` (GPU),
``--quick`` (simulator smoke test).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from common.cpu.reference import ReferenceMatcher
from common.engine.result import Status
from common.gpu.runtime import simulator_active
from common.graph import generate
from stwig import STwig, STwigCPU

from ..harness.store import write_rows
from ..harness.timing import Budget, timed
from ..harness.workloads import check_set
from ..papers.stwig_lin14 import RMAT_ABCD
from . import note_simulator

WORKLOADS = ("hprd", "github", "rmat", "yeast", "variants")
LOWER_BOUND = (Status.TIMEOUT, Status.OOM, Status.LIMIT)


def parse_args(argv=None):
    default_out = os.environ.get("OUT") or "bench_out"
    p = argparse.ArgumentParser(prog="python -m experiments.bench.stwig", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"comma list of {', '.join(WORKLOADS)}")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per query after one warm-up")
    p.add_argument("--quick", action="store_true", help="a few small queries per workload")
    p.add_argument("--time-budget", type=float, default=600.0, help="seconds; no new query after that")
    p.add_argument("--timeout", type=float, default=10.0, help="per-query timeout_s of every engine")
    p.add_argument("--max-relation-gb", type=float, default=4.0, help="STwig relation cap (GB)")
    p.add_argument("--yeast-max", type=int, default=60,
                   help="yeast queries per run (taken in turn from dense_8, sparse_8, dense_16)")
    p.add_argument("--rmat-vertices", type=int, default=16384)
    p.add_argument("--rmat-labels", type=int, default=16)
    p.add_argument("--rmat-degree", type=int, default=32)
    p.add_argument("--rmat-queries", type=int, default=100, help="queries over N = 5..10")
    p.add_argument("--seed", type=int, default=2014)
    p.add_argument("--no-reference", action="store_true", help="skip the CPU reference matcher")
    p.add_argument("--out", default=default_out, help="output folder (default $OUT or ./bench_out)")
    args = p.parse_args(argv)
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        p.error(f"unknown workloads {sorted(unknown)}; choose from {WORKLOADS}")
    return args


class SharedBudget(Budget):
    """The ``--time-budget`` shared out over the workloads (leftovers roll over)."""

    def __init__(self, seconds: float, parts: int):
        super().__init__(seconds)
        self.parts = max(parts, 1)
        self.used_parts = 0
        self.part_deadline = self.start

    def next_part(self) -> float:
        """Start the next workload; returns its share of the budget (seconds)."""
        now = time.perf_counter()
        left = self.seconds - (now - self.start)
        share = max(left, 0.0) / max(self.parts - self.used_parts, 1)
        self.part_deadline = now + share
        self.used_parts += 1
        return share

    def spent(self) -> bool:
        """Whether this workload's share is spent."""
        return time.perf_counter() > self.part_deadline


def _join_seconds(result) -> float:
    return result.stats.get("join_s", result.phases.get("enumerate", 0.0))


def row_of(workload, query, name, result, seconds, join_s, expected):
    stats = result.stats
    return {"workload": workload, "query": query.name, "nq": query.num_vertices,
            "ne": query.num_edges, "engine": name, "status": str(result.status),
            "count": result.count, "expected": "" if expected is None else expected,
            "seconds": seconds, "explore_s": stats.get("explore_s", ""),
            "hash_s": stats.get("hash_s", ""), "join_s": join_s,
            "relation_rows": " ".join(map(str, stats.get("relation_rows", []))),
            "peak_device_bytes": result.peak_device_bytes, "reason": result.reason[:120]}


def check(row, mismatches) -> None:
    """Flag a wrong exact count, or a lower bound above the exact count."""
    if row["expected"] == "":
        return
    status, count, expected = Status(row["status"]), int(row["count"]), int(row["expected"])
    wrong = (status is Status.OK and count != expected) or (status in LOWER_BOUND and count > expected)
    if wrong:
        mismatches.append(row)
        print(f"!!!!!! MISMATCH {row['workload']} {row['query']} {row['engine']}: "
              f"count {count} ({status}) expected {expected}", flush=True)


def run_queries(workload, queries, expected, engines, args, budget, rows, mismatches):
    """Run every engine on each query (until the budget is spent); returns how many were done."""
    done = 0
    for position, query in enumerate(queries):
        if budget.spent():
            print(f"[{workload}] time budget share spent after {done} queries", flush=True)
            break
        line = []
        exact = expected.get(query.name)
        results = {}
        for name, engine in engines.items():
            # warm-up, then repeats; a run longer than 2 s (or not ok) is not repeated
            run = timed(engine, query, args.repeats, timeout_s=args.timeout, repeat_below_s=2.0)
            result, seconds, join_s = run.warm, run.seconds, run.median_of(_join_seconds)
            results[name] = result
            row = row_of(workload, query, name, result, seconds, join_s, exact)
            rows.append(row)
            check(row, mismatches)
            line.append(f"{name}={result.count}/{result.status} {seconds * 1e3:.2f}ms")
        if exact is None:                         # no external count: cross-check the engines
            ok = {n: r.count for n, r in results.items() if r.status is Status.OK}
            if len(set(ok.values())) > 1:
                mismatches.append({"workload": workload, "query": query.name, "engine": "cross-check"})
                print(f"!!!!!! MISMATCH {workload} {query.name}: engines disagree {ok}", flush=True)
        done += 1
        print(f"[{workload}] {position + 1}/{len(queries)} t={budget.elapsed():.0f}s {query.name} "
              f"(|V|={query.num_vertices}, |E|={query.num_edges}) "
              f"expected={exact} " + "; ".join(line), flush=True)
    print(f"[{workload}] {done} of {len(queries)} queries done", flush=True)
    return done


def make_engines(args, variants: bool = False) -> dict:
    cap = int(args.max_relation_gb * (1 << 30))
    engines = {"stwig": STwig(max_relation_bytes=cap),
               "stwig-cpu": STwigCPU(max_relation_bytes=cap)}
    if variants:
        return {"stwig": engines["stwig"],
                "stwig[exploration=gpu]": STwig(exploration="gpu", max_relation_bytes=cap),
                "stwig[join_order=stwig]": STwig(join_order="stwig", max_relation_bytes=cap),
                "stwig[split_probe=False]": STwig(split_probe=False, max_relation_bytes=cap),
                "stwig[split_levels=1]": STwig(split_levels=1, max_relation_bytes=cap),
                "stwig-cpu[parallel]": STwigCPU(parallel=True, max_relation_bytes=cap)}
    if not args.no_reference:
        engines["cpu"] = ReferenceMatcher()
    return engines


def prepare_all(engines, data):
    for engine in engines.values():
        engine.prepare(data)
    return engines


def rmat_workload(args):
    n = args.rmat_vertices if not args.quick or not simulator_active() else 256
    degree = args.rmat_degree if not args.quick or not simulator_active() else 4
    data = generate.rmat(n, n * degree // 2, *RMAT_ABCD, seed=args.seed,
                         labels=args.rmat_labels)
    total = args.rmat_queries if not args.quick else 6
    sizes = list(range(5, 11))
    per = [total // len(sizes) + (1 if i < total % len(sizes) else 0) for i in range(len(sizes))]
    queries = []
    for size, count in zip(sizes, per):
        qs = generate.query_set(None, count, size, seed=args.seed + size, method="stwig",
                                num_labels=args.rmat_labels)
        queries += list(qs)
    if args.quick and simulator_active():
        queries = queries[:2]
    return data, queries


def summary(rows, done, mismatches):
    print("\n=== STwig summary (seconds = median summed phase time per query; ratios over queries "
          "where both engines are ok) ===")
    header = f"{'workload':10} {'engine':26} {'done':>5} {'ok':>5} {'t/o':>4} {'oom':>4} {'uns':>4} " \
             f"{'sum s':>10} {'vs stwig':>9} {'join vs':>8}"
    print(header)
    by = {}
    for row in rows:
        by.setdefault((row["workload"], row["engine"]), []).append(row)
    for (workload, engine), group in by.items():
        base = {r["query"]: r for r in by.get((workload, "stwig"), [])}
        status = [r["status"] for r in group]
        both = [(r, base[r["query"]]) for r in group
                if r["status"] == "ok" and r["query"] in base and base[r["query"]]["status"] == "ok"]
        ratio = (sum(r["seconds"] for r, _ in both) / max(sum(b["seconds"] for _, b in both), 1e-12)
                 if both else float("nan"))
        jr = [(r["join_s"], b["join_s"]) for r, b in both if engine.startswith("stwig")]
        join_ratio = (sum(a for a, _ in jr) / max(sum(b for _, b in jr), 1e-12)) if jr else float("nan")
        print(f"{workload:10} {engine:26} {len(group):5d} {status.count('ok'):5d} "
              f"{status.count('timeout'):4d} {status.count('oom'):4d} {status.count('unsupported'):4d} "
              f"{sum(r['seconds'] for r in group):10.3f} {ratio:9.2f} {join_ratio:8.2f}")
    print("('vs stwig' = engine time / GPU stwig time: the CPU baseline's row is the GPU speedup)")
    print("queries done: " + ", ".join(f"{w}={d}" for w, d in done.items()))
    print(f"MISMATCHES: {len(mismatches)}" + ("  <<<<<< WRONG COUNTS" if mismatches else ""))


def main(argv=None) -> int:
    args = parse_args(argv)
    note_simulator("python -m experiments.bench.stwig", args, budget_s=args.time_budget)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    budget = SharedBudget(args.time_budget, len(args.workloads))
    rows, mismatches, done = [], [], {}
    quick_n = 2 if simulator_active() else 10
    print(f"device: {'simulator' if simulator_active() else 'GPU'}; workloads {args.workloads}", flush=True)

    for workload in WORKLOADS:             # fixed order: hprd, github, rmat, yeast, variants
        if workload not in args.workloads:
            continue
        share = budget.next_part()
        print(f"=== [{workload}] starts at t={budget.elapsed():.0f}s with a budget share of "
              f"{share:.0f}s", flush=True)
        if workload in ("hprd", "yeast", "github"):
            item = check_set(workload, max(args.yeast_max, 0) if workload == "yeast" else None)
            data, queries = item.data, [q for q, _ in item.queries]
            expected = {q.name: c for q, c in item.queries if c is not None}
        else:
            data, queries = rmat_workload(args)
            expected = {}
        if args.quick:   # the smallest: fewest known results, else fewest vertices and edges
            queries = sorted(queries, key=lambda q: (expected.get(q.name, 0), q.num_vertices,
                                                     q.num_edges))[:quick_n]
        engines = prepare_all(make_engines(args, variants=workload == "variants"), data)
        print(f"[{workload}] {data!r}: {len(queries)} queries", flush=True)
        done[workload] = run_queries(workload, queries, expected, engines, args, budget, rows, mismatches)

    path = out / "stwig_bench.csv"
    if rows:
        write_rows(path, rows)
        print(f"wrote {len(rows)} rows to {path}")
    summary(rows, done, mismatches)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
