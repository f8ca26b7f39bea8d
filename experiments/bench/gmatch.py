"""gMatch benchmark: exact counts, warm timings against the CPU reference, variant ratios and idle
rates (paper Tables 2/5/6/8, Figs. 11 and 16).

Workloads (``--workloads``, comma-separated; default all):
  hprd      all 100 HPRD dense-16 queries (hprd/expected_counts_1_100.txt)
  yeast     yeast dense_8 / sparse_8 / dense_16 queries with a known count <= 1e7
  github    GitHub Q_0..Q_10 (gmatch_test/expected_counts.txt)
  patterns  P1-P9 on the unlabelled GitHub graph, checked against the reference where it finishes
            within --ref-timeout
  variants  coarse Naive / Unroll-2/4/8, fine without batching, with in-block stealing only,
            with every hand-over through the global mailbox, without stealing, with the
            candidate graph (bitmap set intersection), seed pools,
            on GitHub Q_0..Q_10 (ratios to the default fine engine)
  idle      idle rates of the fine and coarse variants on GitHub and Enron (16 uniform labels),
            --idle-queries random 12-vertex induced queries each (Tables 2/6), query-major, one
            run per query and variant under --timeout (a timed-out run reports the idle rate of
            its first --timeout seconds); the summary gives, per graph and variant, the mean
            over all runs and over the queries every variant finished

Every count is checked (external count, or the reference's when it finishes); a mismatch is
printed loudly and the script exits with status 1. Times: one warm-up, then the median of
--repeats runs; ``search`` is the device-timed enumerate phase (BFS + DFS), ``total`` the sum of
the phases, ``wall`` the host time of ``match`` (fixed per-query cost included). Per-query rows go
to ``<out>/gmatch_bench.csv``; the summary table is printed last.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from common.cpu.reference import ReferenceMatcher
from common.engine.result import Status
from common.gpu.runtime import simulator_active
from common.graph.generate import query_set, relabel, rmat, uniform_labels
from common.graph.io import load_graph, load_query_set
from gmatch import GMatch

from ..harness.store import write_rows
from ..harness.timing import Budget, timed
from ..harness.workloads import check_set, data_dir
from . import note_simulator

WORKLOADS = ("hprd", "yeast", "github", "patterns", "variants", "idle")
COMPILE_TIMEOUT = 120.0     # s: the idle workload's compiling limit=1 run of its first query
VARIANTS = {
    "coarse-naive": dict(granularity="coarse", unroll=1),
    "coarse-unroll-2": dict(granularity="coarse", unroll=2),
    "coarse-unroll-4": dict(granularity="coarse", unroll=4),
    "coarse-unroll-8": dict(granularity="coarse", unroll=8),
    "fine-no-batch": dict(batch=False),
    "fine-block-stealing": dict(work_stealing="block"),
    "fine-mailbox-stealing": dict(work_stealing="mailbox"),
    "fine-no-stealing": dict(work_stealing=False),
    "fine-candidate-graph": dict(candidate_graph=True),
    "fine-pool-1e4": dict(seed_pool=10**4),
    "fine-pool-1e5": dict(seed_pool=10**5),
}


class Bench:
    def __init__(self, args):
        self.args = args
        self.rows: list[dict] = []
        self.mismatches: list[str] = []
        self.budget = Budget(args.time_budget)
        self.skipped = 0
        self.sim = simulator_active()

    def counts(self, workload: str, variant: str) -> dict:
        """Exact counts found so far by one workload/variant (to check the other variants)."""
        return {r["query"]: r["count"] for r in self.rows
                if r["workload"] == workload and r["variant"] == variant and r["status"] == "ok"
                and r["check"] in ("ok", "unchecked")}

    def reference(self, ref, query, repeats):
        t = time.perf_counter()
        result = ref.match(query, timeout_s=self.args.ref_timeout)
        walls = [time.perf_counter() - t]
        if result.status is Status.OK and walls[0] < 1.0:
            for _ in range(max(0, repeats - 1)):
                t = time.perf_counter()
                ref.match(query, timeout_s=self.args.ref_timeout)
                walls.append(time.perf_counter() - t)
        return result, statistics.median(walls)

    def check(self, workload, engine_name, query, got, expected):
        if expected is None:
            return "unchecked"
        if got.status is not Status.OK:
            return str(got.status)
        if got.count != expected:
            message = (f"MISMATCH {workload} {engine_name} {query.name}: gmatch {got.count} "
                       f"!= expected {expected}")
            print("!" * 80 + "\n" + message + "\n" + "!" * 80, flush=True)
            self.mismatches.append(message)
            return "MISMATCH"
        return "ok"

    def engine(self, data, options=None):
        return GMatch(**(options or {}), **self.shape_options()).prepare(data)

    def compile(self, workload, variant, engine, query):
        """Compile the kernels with a limit=1 run of ``query`` (an untimed single run's deadline
        would otherwise include the compilation)."""
        print(f"{workload} {variant} compile (limit=1 run of {query.name})", flush=True)
        t = time.perf_counter()
        warm_up = engine.match(query, limit=1, timeout_s=COMPILE_TIMEOUT)
        print(f"{workload} {variant} compiled in {time.perf_counter() - t:.1f} s "
              f"({warm_up.status})", flush=True)

    def run_set(self, workload, data, queries, expected, variant="fine", options=None,
                with_reference=True):
        """Run ``queries`` on one engine variant (warm-up, then --repeats timed runs each)."""
        engine = self.engine(data, options)
        ref = ReferenceMatcher().prepare(data) if with_reference else None
        if ref is not None and queries:
            ref.match(queries[0], timeout_s=self.args.ref_timeout)          # compile the reference
        for done, query in enumerate(queries):
            if self.budget.spent():
                self.skipped += len(queries) - done
                print(f"[time budget] {workload}/{variant}: {done} of {len(queries)} queries done")
                return
            self.run_query(workload, variant, engine, query, expected.get(query.name), ref)

    def run_query(self, workload, variant, engine, query, known, ref=None, repeats=None, warm=True):
        """Run one query on one engine, check its count against ``known`` (or the reference's
        count, where ``ref`` is given and finishes), record and print its row; returns the row."""
        repeats = self.args.repeats if repeats is None else repeats
        # after the warm-up (compiles) finished within the timeout, the timed runs go without one
        # (no host polling of the launch for the deadline)
        run = timed(engine, query, repeats, timeout_s=self.args.timeout, warm=warm, untimed_after_warm=True)
        result, total, wall = run.last, run.seconds, run.wall_s
        search = run.median_of(lambda r: r.phases.get("enumerate", 0.0))
        iters = result.stats.get("warp_iterations", 0)
        row = {"workload": workload, "variant": variant, "query": query.name,
               "vertices": query.num_vertices, "count": result.count, "status": str(result.status),
               "search_ms": 1e3 * search, "total_ms": 1e3 * total, "wall_ms": 1e3 * wall,
               # no DFS iteration (no seed, or stopped before the DFS launch), or an engine that does
               # not count idle lanes (fine granularity without idle_stats): no idle rate
               "idle_rate": result.stats.get("idle_rate", float("nan")) if iters else float("nan"),
               "warp_iterations": iters,
               "steals": result.stats.get("steals", 0),
               "global_steals": result.stats.get("global_steals", 0),
               "seeds": result.stats.get("seeds", 0),
               "seed_pool_bytes": result.stats.get("seed_pool_bytes", 0),
               "max_stack_bytes": result.stats.get("max_stack_bytes", 0),
               "steal_buffer_bytes": result.stats.get("steal_buffer_bytes", 0),
               "seed_width": result.stats.get("seed_width", 0),
               "stack_shared_bytes": result.stats.get("stack_shared_bytes", 0),
               "stack_global_bytes": result.stats.get("stack_global_bytes", 0),
               "peak_device_bytes": result.peak_device_bytes}
        if ref is not None:
            rres, rwall = self.reference(ref, query, repeats)
            row.update(ref_status=str(rres.status), ref_ms=1e3 * rwall,
                       ratio_ref_over_gmatch=(rwall / wall) if wall else float("nan"))
            if known is None and rres.status is Status.OK:
                known = rres.count
        row["expected"] = known
        row["check"] = self.check(workload, variant, query, result, known)
        self.rows.append(row)
        print(f"{workload:9s} {variant:22s} {query.name:22s} count={result.count:<16d} "
              f"{row['check']:9s} search={row['search_ms']:9.3f} ms wall={row['wall_ms']:9.3f} ms"
              + (f" ref={row['ref_ms']:9.3f} ms" if 'ref_ms' in row else "")
              + f" idle={row['idle_rate']:.3f}", flush=True)
        return row

    def run_idle(self, workload, data, queries):
        """Idle rates (Tables 2/6), query-major: each query runs once on the fine engine (checked
        against the reference where it finishes) and then on every coarse variant (checked
        against the fine count), all under --timeout; a timed-out run keeps the idle rate of
        the part it searched."""
        variants = {"fine": {}, **{k: v for k, v in VARIANTS.items() if k.startswith("coarse")}}
        if not queries or self.budget.spent():
            self.skipped += len(queries) * len(variants)
            return
        engines = {name: self.engine(data, options) for name, options in variants.items()}
        ref = ReferenceMatcher().prepare(data)
        ref.match(queries[0], timeout_s=self.args.ref_timeout)              # compile the reference
        for name, engine in engines.items():
            self.compile(workload, name, engine, queries[0])
        for i, query in enumerate(queries):
            if self.budget.spent():
                self.skipped += (len(queries) - i) * len(variants)
                print(f"[time budget] {workload}: {i} of {len(queries)} queries done")
                return
            known = None
            for name, engine in engines.items():
                print(f"{workload} {name} q{i} {query.name} n={query.num_vertices} "
                      f"m={query.num_edges} start (timeout {self.args.timeout} s)", flush=True)
                row = self.run_query(workload, name, engine, query, known,
                                     ref if name == "fine" else None, repeats=1, warm=False)
                if name == "fine":      # the coarse variants are checked against this count
                    known = row["expected"]
                    if known is None and row["status"] == "ok" and row["check"] == "unchecked":
                        known = row["count"]

    def shape_options(self):
        return dict(blocks=2, warps_per_block=2, seed_pool=64) if self.sim else {}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.gmatch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"subset of {','.join(WORKLOADS)}")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per query (median)")
    parser.add_argument("--quick", action="store_true", help="a few queries per workload")
    parser.add_argument("--out", default=os.environ.get("OUT") or "bench_out", help="folder for the CSV")
    parser.add_argument("--time-budget", type=float, default=None, help="seconds; no new query after that")
    parser.add_argument("--timeout", type=float, default=60.0, help="gMatch per-query timeout (s)")
    parser.add_argument("--ref-timeout", type=float, default=30.0, help="reference per-query timeout (s)")
    parser.add_argument("--idle-queries", type=int, default=100, help="random 12-vertex queries per graph")
    parser.add_argument("--idle-graphs", default="github,enron", help="graphs of the idle workload")
    args = parser.parse_args(argv)
    note_simulator(parser.prog, args, timeout_s=args.timeout, budget_s=args.time_budget)
    chosen = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(chosen) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}; choose from {WORKLOADS}")
    bench = Bench(args)
    quick = 2 if args.quick else None
    if bench.sim and not args.quick:
        print("warning: running in the CUDA simulator; use --quick", flush=True)

    # In the simulator a --quick run swaps the 37,700-vertex GitHub and Enron graphs for small
    # R-MAT stand-ins (checked against the reference, not the external counts): it only proves
    # that every workload's code path runs.
    stand_in = bench.sim and args.quick
    if stand_in:
        print("simulator --quick: GitHub and Enron replaced by small R-MAT stand-ins", flush=True)
    github = None

    def github_graph():
        nonlocal github
        if github is None:
            github = (rmat(120, 300, seed=1, labels=uniform_labels(120, 4, seed=2), name="github-stand-in")
                      if stand_in else check_set("github", 0).data)
        return github

    for name in ("hprd", "yeast"):
        if name in chosen:
            item = check_set(name, quick, smallest=name == "yeast")
            bench.run_set(name, item.data, [q for q, _ in item.queries], {q.name: c for q, c in item.queries})
    if "github" in chosen or "variants" in chosen:
        item = check_set("github")
        queries, expected = [q for q, _ in item.queries], {q.name: c for q, c in item.queries}
        if quick:
            queries = [q for q in queries if q.name in ("Q_7", "Q_1")]
        if stand_in:
            expected = {}
            queries = [relabel(q, q.labels % 4) for q in queries]
        if "github" in chosen:
            bench.run_set("github", github_graph(), queries, expected)
        if "variants" in chosen:
            variants = VARIANTS
            if quick:
                variants = {k: VARIANTS[k] for k in ("coarse-naive", "fine-mailbox-stealing",
                                                     "fine-candidate-graph")}
            checked = expected or bench.counts("github", "fine")
            for name, options in variants.items():
                bench.run_set("variants", github_graph(), queries, checked, name, options,
                              with_reference=False)
    if "patterns" in chosen:
        data = github_graph()
        unlabelled = relabel(data, np.zeros(data.num_vertices, dtype=np.int32))
        queries = load_query_set(data_dir() / "gmatch_test" / "patterns")
        bench.run_set("patterns", unlabelled, queries[:1] if quick else queries, {})
    if "idle" in chosen:
        count = 2 if quick else args.idle_queries
        if stand_in:
            enron = rmat(100, 250, seed=3, labels=uniform_labels(100, 4, seed=4), name="enron-stand-in")
        else:
            enron = load_graph(data_dir() / "snap" / "email-Enron.txt.gz", symmetrize=True)
            enron = relabel(enron, uniform_labels(enron.num_vertices, 16, seed=6))
        graphs = {"github": github_graph, "enron": lambda: enron}
        for name in args.idle_graphs.split(","):
            data = graphs[name]()
            bench.run_idle(f"idle-{name}", data, list(query_set(data, count, 4 if stand_in else 12, seed=12)))

    write_csv(bench, Path(args.out))
    summary(bench)
    return 1 if bench.mismatches else 0


def write_csv(bench: Bench, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "gmatch_bench.csv"
    keys: list[str] = []
    for row in bench.rows:
        keys += [k for k in row if k not in keys]
    write_rows(path, bench.rows, keys)
    print(f"wrote {len(bench.rows)} rows to {path}")


def summary(bench: Bench) -> None:
    rows = bench.rows
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["workload"], row["variant"]), []).append(row)
    base = {r["query"]: r["search_ms"] for r in rows if r["workload"] == "github" and r["variant"] == "fine"}
    print("\n" + "=" * 123)
    print(f"{'workload':14s} {'variant':22s} {'n':>4s} {'ok':>4s} {'bad':>4s} {'med search ms':>13s} "
          f"{'sum search ms':>13s} {'med wall ms':>11s} {'med ref ms':>10s} {'ref/gm (med)':>12s} "
          f"{'idle rate':>9s} {'vs fine':>8s}")
    for (workload, variant), group in groups.items():
        ok = sum(r["check"] in ("ok", "unchecked") and r["status"] == "ok" for r in group)
        bad = sum(r["check"] == "MISMATCH" for r in group)
        search = [r["search_ms"] for r in group]
        wall = [r["wall_ms"] for r in group]
        refs = [r["ref_ms"] for r in group if "ref_ms" in r]
        ratios = [r["ratio_ref_over_gmatch"] for r in group if "ratio_ref_over_gmatch" in r]
        idle = [r["idle_rate"] for r in group if r["idle_rate"] == r["idle_rate"]]
        versus = ""
        if workload == "variants":
            pairs = [(r["search_ms"], base[r["query"]]) for r in group if r["query"] in base and base[r["query"]] > 0]
            if pairs:
                versus = f"{sum(a for a, _ in pairs) / sum(b for _, b in pairs):.2f}x"
        print(f"{workload:14s} {variant:22s} {len(group):4d} {ok:4d} {bad:4d} {statistics.median(search):13.3f} "
              f"{sum(search):13.3f} {statistics.median(wall):11.3f} "
              f"{(statistics.median(refs) if refs else float('nan')):10.3f} "
              f"{(statistics.median(ratios) if ratios else float('nan')):12.2f} "
              f"{(statistics.mean(idle) if idle else float('nan')):9.4f} {versus:>8s}")
    print("=" * 123)
    idle_summary(rows, bench.args.timeout)
    if bench.skipped:
        print(f"time budget reached: {bench.skipped} queries not run")
    if bench.mismatches:
        print(f"{len(bench.mismatches)} MISMATCHES:")
        for m in bench.mismatches:
            print("  " + m)
    else:
        print("all checked counts are exact")


def idle_summary(rows: list[dict], timeout: float) -> None:
    """Per idle graph and variant: queries run, finished, mean idle rate over all runs (a
    timed-out run's rate covers the first ``timeout`` seconds of its search) and over the queries
    that every variant finished."""
    graphs: dict[str, dict[str, list[dict]]] = {}
    for row in rows:
        if row["workload"].startswith("idle-"):
            graphs.setdefault(row["workload"], {}).setdefault(row["variant"], []).append(row)
    if not graphs:
        return
    print(f"idle rates: a timed-out run's rate is over the first {timeout:g} s (--timeout) of its search; "
          "'all finished' = the queries every variant finished")
    print(f"{'graph':14s} {'variant':22s} {'queries':>7s} {'finished':>8s} {'idle (all runs)':>15s} "
          f"{'all finished':>12s} {'idle (all finished)':>19s}")
    for workload, variants in graphs.items():
        finished = {v: {r["query"] for r in group if r["status"] == "ok"} for v, group in variants.items()}
        finished_by_all = set.intersection(*finished.values())
        for variant, group in variants.items():
            every = [r["idle_rate"] for r in group if r["idle_rate"] == r["idle_rate"]]
            shared = [r["idle_rate"] for r in group
                      if r["query"] in finished_by_all and r["idle_rate"] == r["idle_rate"]]
            print(f"{workload:14s} {variant:22s} {len(group):7d} {len(finished[variant]):8d} "
                  f"{(statistics.mean(every) if every else float('nan')):15.4f} {len(finished_by_all):12d} "
                  f"{(statistics.mean(shared) if shared else float('nan')):19.4f}")
    print("=" * 123)


if __name__ == "__main__":
    sys.exit(main())
