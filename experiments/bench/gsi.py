"""GSI benchmark: validate counts against the exact external counts, time GSI warm against the CPU
reference in the same run, run the paper's ablations, write a CSV and print a summary last.

Workloads (``--workloads``): ``hprd`` (all 100 dense-16 queries), ``yeast`` (dense_8, sparse_8
and dense_16 queries whose count is known and <= 1e7), ``github`` (Q_0..Q_10). Under the CUDA
simulator ``--quick`` runs a tiny generated workload instead (counts from the CPU reference), so
the script can be checked without a GPU.

Per query: one warm-up match (its count is validated), then ``--repeats`` timed matches; GSI's
time is the sum of its device-event-timed phases (median), "wall" is the host time of
``engine.match``; the reference's time is its wall time (median). Variants (``--variants``) run
after the main pass on every workload's first ``--variant-queries`` queries, with
``instrument=True`` once more to report the global-load counters. A wrong count is printed loudly
and makes the exit status 1. ``--time-budget`` stops launching new queries after that many
seconds (the summary says how many ran).

    python -m experiments.bench.gsi --time-budget 240 --out $OUT
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
from common.gpu.runtime import device_info, simulator_active
from common.graph.model import Graph
from gsi.engine import GSI

from ..harness.store import write_rows
from ..harness.timing import Budget, timed
from ..harness.workloads import check_set
from ..papers.gsi_icde20 import GSI_LB, GSI_MINUS, GSI_OPT, GSI_PLAIN, PLUS_DS, PLUS_PC
from . import note_simulator

#: The ablations of GSI Tables IV-IX as constructor options, built from the paper module's
#: configurations (Table V's steps GSI- -> +DS -> +PC -> +SO, then +LB and +DR of Table VIII);
#: GSI-opt is the default engine. CR and BR swap the data structure of GSI (Table VI's columns
#: swap it in +DS), ``no-write-cache`` is Table VII's left column.
VARIANTS = {
    "GSI-b": GSI_MINUS,
    "+DS": PLUS_DS,
    "+PC": PLUS_PC,
    "GSI": GSI_PLAIN,
    "GSI+LB": GSI_LB,
    "GSI-opt": GSI_OPT,
    "CR": dict(GSI_PLAIN, structure="cr"),
    "BR": dict(GSI_PLAIN, structure="br"),
    "no-write-cache": dict(GSI_PLAIN, write_cache=False),
    "filter=label": dict(GSI_OPT, filter="label"),
    "filter=degree": dict(GSI_OPT, filter="degree"),
    "LB=histogram": dict(GSI_OPT, load_balance="histogram"),
}


def workloads(names, quick: bool):
    """[(name, data graph, [(query, expected count)])]; expected None means "ask the reference"."""
    if quick and simulator_active():
        from common.graph.generate import random_walk_query
        rng = np.random.default_rng(3)
        n, m = 40, 120
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        g = Graph.from_edges(n, src, dst, rng.integers(0, 3, n), name="tiny")
        return [("tiny", g, [(random_walk_query(g, k, seed=k), None) for k in (3, 4)])]
    sets = [check_set(name, 5 if quick else None) for name in ("hprd", "yeast", "github") if name in names]
    return [(item.name, item.data, item.queries) for item in sets]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.bench.gsi", description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="hprd,yeast,github")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--time-budget", type=float, default=None, help="seconds; no new query after it")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma list, or 'none'")
    ap.add_argument("--variant-queries", type=int, default=10)
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    args = ap.parse_args(argv)
    note_simulator(ap.prog, args, budget_s=args.time_budget)
    budget = Budget(args.time_budget)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    info = device_info()
    print(f"device: {info.get('name')} (simulator={info['simulator']}), numba-cuda {info['numba_cuda']}")
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    variants = [] if args.variants == "none" else [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r}; known: {', '.join(VARIANTS)}")
    repeats = 1 if args.quick else args.repeats

    rows, mismatches, summary = [], [], []
    for wname, graph, queries in workloads(names, args.quick):
        t = time.perf_counter()
        gsi = GSI().prepare(graph)
        prep_gsi = time.perf_counter() - t
        cpu = ReferenceMatcher().prepare(graph)
        print(f"\n== {wname}: {graph} ({len(queries)} queries; GSI prepare {prep_gsi:.2f} s)")
        # Fixed per-query cost: a one-edge query (filter, plan, one join iteration) on the
        # endpoints of the data's first edge, and its per-iteration share on the workload's queries.
        src, dst, el = graph.edges()
        edge = Graph.from_edges(2, [0], [1], graph.labels[[src[0], dst[0]]],
                                None if el is None else [el[0]], directed=graph.directed, name="one_edge")
        run = timed(gsi, edge, repeats)
        res, dev_s, wall_s = run.warm, run.seconds, run.wall_s
        want_edge = cpu.match(edge).count
        edge_ok = res.count == want_edge and res.status.value == "ok"
        if not edge_ok:
            mismatches.append((wname, "one_edge", "GSI-opt", res.count, want_edge, str(res.status)))
            print(f"!!! MISMATCH {wname} one_edge: GSI {res.count} ({res.status}) expected {want_edge}")
        print(f"fixed cost (one-edge query, {res.count} embeddings): device {dev_s * 1e3:.3f} ms, "
              f"wall {wall_s * 1e3:.3f} ms")
        rows.append(dict(workload=wname, query="one_edge", variant="GSI-opt", expected=want_edge,
                         count=res.count, status=str(res.status), correct=edge_ok,
                         gsi_device_ms=dev_s * 1e3, gsi_wall_ms=wall_s * 1e3))
        done, ratios, gsi_times, walls = 0, [], [], []
        for q, expected in queries:
            if budget.spent():
                break
            ref_run = timed(cpu, q, repeats)
            ref, cpu_s = ref_run.warm, ref_run.seconds
            if expected is None:
                expected = ref.count
            run = timed(gsi, q, repeats)
            res, dev_s, wall_s = run.warm, run.seconds, run.wall_s
            ok = res.count == expected and res.status.value == "ok"
            if not ok:
                mismatches.append((wname, q.name, "GSI-opt", res.count, expected, str(res.status)))
                print(f"!!! MISMATCH {wname} {q.name}: GSI {res.count} ({res.status}) expected {expected}")
            ratio = cpu_s / dev_s if dev_s > 0 else float("nan")
            done += 1
            ratios.append(ratio)
            gsi_times.append(dev_s)
            walls.append(wall_s)
            rows.append(dict(workload=wname, query=q.name, variant="GSI-opt", expected=expected,
                             count=res.count, status=str(res.status), correct=ok, gsi_device_ms=dev_s * 1e3,
                             gsi_wall_ms=wall_s * 1e3, cpu_ms=cpu_s * 1e3, cpu_over_gsi=ratio,
                             min_candidates=min(res.stats["candidate_sizes"]),
                             rows_per_iteration=" ".join(map(str, res.stats.get("rows_per_iteration", []))),
                             peak_device_bytes=res.peak_device_bytes,
                             **{f"{k}_ms": v * 1e3 for k, v in res.phases.items()}))
            print(f"{q.name:24s} count {res.count:>10d} {'ok' if ok else 'WRONG'}  GSI {dev_s * 1e3:8.2f} ms "
                  f"(wall {wall_s * 1e3:8.2f})  CPU {cpu_s * 1e3:8.2f} ms  CPU/GSI {ratio:7.2f}")
        summary.append((wname, "GSI-opt", done, len(queries), gsi_times, walls, ratios))
        for vname in variants:
            if budget.spent():
                break
            eng = GSI(**VARIANTS[vname]).prepare(graph)
            inst = GSI(instrument=True, **VARIANTS[vname]).prepare(graph)
            vd, vt, vw, vr, loads = 0, [], [], [], []
            for q, expected in queries[:args.variant_queries]:
                if budget.spent():
                    break
                if expected is None:
                    expected = cpu.match(q).count
                run = timed(eng, q, repeats)
                res, dev_s, wall_s = run.warm, run.seconds, run.wall_s
                ok = res.count == expected and res.status.value == "ok"
                if not ok:
                    mismatches.append((wname, q.name, vname, res.count, expected, str(res.status)))
                    print(f"!!! MISMATCH {wname} {q.name} {vname}: {res.count} ({res.status}) expected {expected}")
                ires = inst.match(q)
                vd += 1
                vt.append(dev_s)
                vw.append(wall_s)
                loads.append(ires.stats.get("loads_total", 0))
                base = next((r for r in rows if r["workload"] == wname and r["query"] == q.name
                             and r["variant"] == "GSI-opt"), None)
                vr.append(base["gsi_device_ms"] / (dev_s * 1e3) if base and dev_s > 0 else float("nan"))
                rows.append(dict(workload=wname, query=q.name, variant=vname, expected=expected,
                                 count=res.count, status=str(res.status), correct=ok,
                                 gsi_device_ms=dev_s * 1e3, gsi_wall_ms=wall_s * 1e3,
                                 loads_total=ires.stats.get("loads_total", 0),
                                 **{f"loads_{k}": ires.stats.get(f"loads_{k}", 0)
                                    for k in ("structure", "neighbors", "bitset", "table")}))
            summary.append((wname, vname, vd, min(len(queries), args.variant_queries), vt, vw, vr,
                            statistics.median(loads) if loads else 0))
            print(f"  variant {vname:16s} {vd} queries, median {statistics.median(vt) * 1e3 if vt else 0:8.2f} ms, "
                  f"GSI-opt/variant time {statistics.median(vr) if vr else float('nan'):6.2f}, "
                  f"median loads {statistics.median(loads) if loads else 0:,.0f}")

    write_rows(out_dir / "gsi_bench.csv", rows)
    print(f"\nwrote {out_dir / 'gsi_bench.csv'} ({len(rows)} rows); elapsed {budget.elapsed():.1f} s")
    if mismatches:
        print("\n!!!!!!!! WRONG COUNTS !!!!!!!!")
        for m in mismatches:
            print("!!!", *m)
    print("\nsummary (device = median of per-query medians; ratio = median CPU/GSI, or GSI-opt/variant)")
    print(f"{'workload':8s} {'variant':16s} {'done':>9s} {'device ms':>10s} {'wall ms':>10s} {'ratio':>8s} "
          f"{'loads':>12s}")
    for entry in summary:
        wname, vname, done, total, times, walls, ratios = entry[:7]
        loads = entry[7] if len(entry) > 7 else ""
        med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
        print(f"{wname:8s} {vname:16s} {done:>4d}/{total:<4d} {med(times) * 1e3:10.2f} {med(walls) * 1e3:10.2f} "
              f"{med(ratios):8.2f} {loads if loads == '' else f'{loads:,.0f}':>12s}")
    print(f"mismatches: {len(mismatches)}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
