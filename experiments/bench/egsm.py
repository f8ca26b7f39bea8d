"""EGSM benchmark: validate counts against the exact external counts, time EGSM (warm, device
phases, median of --repeats) beside the CPU reference, and print the Table 4 variant speedups.

Workloads (data folder README): ``hprd`` (all 100 dense-16 queries), ``yeast`` (dense_8, sparse_8,
dense_16 queries with a known count <= 1e7), ``github`` (GitHub Q_0..Q_10). ``--quick`` takes a
few queries of each; in the simulator (no GPU) it runs two tiny generated queries instead, with
the reference's counts as the expected ones, to check that the script runs.

Exit status 1 if any count is wrong. CSV rows go to --out (default $OUT, else ./bench_out);
the summary table is printed last.

    python -m experiments.bench.egsm --time-budget 240
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from common.cpu.reference import ReferenceMatcher
from common.engine.result import Status
from common.gpu.runtime import simulator_active
from egsm.engine import EGSM, VARIANTS

from ..harness.store import write_rows
from ..harness.timing import Budget, timed
from ..harness.workloads import check_set
from . import note_simulator

WORKLOADS = ("hprd", "yeast", "github")


def load_workload(name: str, quick: bool):
    """(data graph, [(query, expected count)]); ``quick``: 4 queries (6 of yeast)."""
    item = check_set(name, (6 if name == "yeast" else 4) if quick else None)
    return item.data, item.queries


def simulator_workload():
    from common.graph.generate import random_walk_query, rmat, uniform_labels
    data = rmat(40, 130, seed=2, labels=uniform_labels(40, 3, seed=1), name="sim_rmat40")
    ref = ReferenceMatcher().prepare(data)
    queries = [random_walk_query(data, k, seed=s) for k, s in ((4, 1), (5, 2))]
    return data, [(q, ref.match(q).count) for q in queries]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.egsm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a few queries per workload")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="seconds; stop starting new queries after that")
    parser.add_argument("--variants", nargs="*", default=[v for v in VARIANTS if v != "default"],
                        help="variants timed for the Table 4 speedups (default: all)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    args = parser.parse_args(argv)
    note_simulator(parser.prog, args, budget_s=args.time_budget)
    budget = Budget(args.time_budget)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    if simulator_active():
        print("simulator: no GPU, running two tiny generated queries (reference counts as expected)")
        workloads = {"sim": simulator_workload()}
        repeats = 1
    else:
        workloads = {}
        for name in args.workloads:
            start = time.perf_counter()
            workloads[name] = load_workload(name, args.quick)
            print(f"loaded {name}: {len(workloads[name][1])} queries in {time.perf_counter() - start:.1f} s")
        repeats = args.repeats

    rows, mismatches, summary = [], [], []
    out_of_time = False
    for wname, (data, items) in workloads.items():
        start = time.perf_counter()
        # the paper's pipeline (Table 4): the wedge filter on every index, however small
        engines = {"default": EGSM(wedge_filter_min_edges=0).prepare(data)}
        for v in args.variants:
            engines[v] = EGSM(variant=v, wedge_filter_min_edges=0).prepare(data)
        cpu = ReferenceMatcher().prepare(data)
        print(f"[{wname}] prepared {len(engines)} EGSM engines + reference in {time.perf_counter() - start:.1f} s")
        done = 0
        ratios = {v: [] for v in args.variants}
        egsm_times, cpu_times, walls = [], [], []
        for query, expected in items:
            if budget.spent():
                out_of_time = True
                break
            run, ref_run = timed(engines["default"], query, repeats), timed(cpu, query, repeats)
            result, dev, wall = run.last, run.seconds, run.wall_s
            ref, ref_dev = ref_run.last, ref_run.seconds
            ok = result.status is Status.OK and result.count == expected
            if not ok:
                mismatches.append((wname, query.name, "default", result.count, expected, str(result.status)))
                print(f"!!!!! MISMATCH {wname} {query.name} egsm={result.count} expected={expected} "
                      f"status={result.status} {result.reason}")
            if ref.count != expected:
                print(f"!!!!! reference disagrees on {wname} {query.name}: {ref.count} vs {expected}")
            row = {"workload": wname, "query": query.name, "engine": "egsm", "variant": "default",
                   "count": result.count, "expected": expected, "status": str(result.status),
                   "device_s": dev, "wall_s": wall, "cpu_s": ref_dev,
                   "cpu_over_egsm": ref_dev / dev if dev > 0 else float("nan")}
            row.update({f"{k}_s": v for k, v in result.phases.items()})
            row.update({k: v for k, v in result.stats.items() if isinstance(v, (int, float, str))})
            rows.append(row)
            egsm_times.append(dev)
            cpu_times.append(ref_dev)
            walls.append(wall)
            for v in args.variants:
                vrun = timed(engines[v], query, repeats)
                vres, vdev, vwall = vrun.last, vrun.seconds, vrun.wall_s
                if vres.status is not Status.OK or vres.count != expected:
                    mismatches.append((wname, query.name, v, vres.count, expected, str(vres.status)))
                    print(f"!!!!! MISMATCH {wname} {query.name} variant {v}: {vres.count} vs {expected}")
                ratios[v].append(vdev / dev if dev > 0 else float("nan"))
                rows.append({"workload": wname, "query": query.name, "engine": "egsm", "variant": v,
                             "count": vres.count, "expected": expected, "status": str(vres.status),
                             "device_s": vdev, "wall_s": vwall,
                             "speedup_of_default": vdev / dev if dev > 0 else float("nan"),
                             **{f"{k}_s": t for k, t in vres.phases.items()}})
            done += 1
            print(f"  {query.name}: count {result.count} (expected {expected}) egsm {dev * 1e3:.2f} ms "
                  f"(wall {wall * 1e3:.2f} ms, filter+index {result.stats.get('filter_seconds', 0) * 1e3:.2f} ms) "
                  f"cpu {ref_dev * 1e3:.2f} ms ratio {ref_dev / dev if dev else float('nan'):.2f}")
        summary.append((wname, done, len(items), egsm_times, cpu_times, walls, ratios))
        del engines, cpu                 # give the device memory (queues of up to 6 GB) back
        gc.collect()
        if out_of_time:
            break

    csv_path = out_dir / "egsm_bench.csv"
    fields = sorted({k for r in rows for k in r}, key=lambda k: (k not in ("workload", "query", "variant"), k))
    write_rows(csv_path, rows, fields)
    print(f"\nper-query rows: {csv_path}")
    if out_of_time:
        print(f"time budget of {args.time_budget} s reached: remaining queries not started")
    if mismatches:
        print(f"\n!!!!! {len(mismatches)} WRONG COUNTS !!!!!")
        for m in mismatches:
            print("!!!!!", *m)

    def med(xs):
        return statistics.median(xs) * 1e3 if xs else float("nan")

    print("\nsummary (milliseconds, medians over queries; ratio = cpu/egsm per query, mean)")
    print(f"{'workload':10} {'done':>9} {'egsm dev':>9} {'egsm wall':>9} {'cpu':>9} {'egsm tot':>9} {'ratio':>7}  "
          + " ".join(f"{v:>8}" for v in args.variants))
    for wname, done, total, et, ct, wl, ratios in summary:
        ratio = np.mean([c / e for c, e in zip(ct, et) if e > 0]) if et else float("nan")
        table4 = " ".join(f"{np.mean(ratios[v]) if ratios[v] else float('nan'):7.2f}x" for v in args.variants)
        print(f"{wname:10} {done:>4}/{total:<4} {med(et):9.3f} {med(wl):9.3f} {med(ct):9.3f} "
              f"{sum(et) * 1e3:9.1f} {ratio:7.2f}  {table4}")
    print("variant columns: Table 4 speedup of EGSM over the variant (mean of t_variant / t_egsm)")
    print("\nwhere EGSM's time goes (default variant; medians over queries, milliseconds; "
          "wall - device = host overhead outside the timed phases)")
    phases = ("filter_s", "index_s", "plan_s", "enumerate_s", "transfer_s")
    print(f"{'workload':10} " + " ".join(f"{p[:-2]:>9}" for p in phases) + f" {'wall-dev':>9}")
    for wname, *_ in summary:
        mine = [r for r in rows if r["workload"] == wname and r["variant"] == "default"]
        cells = " ".join(f"{med([r.get(p, 0.0) for r in mine]):9.3f}" for p in phases)
        print(f"{wname:10} {cells} {med([r['wall_s'] - r['device_s'] for r in mine]):9.3f}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
