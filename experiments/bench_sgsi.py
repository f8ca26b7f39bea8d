"""SGSI benchmark (TKDE'22 §6-§7): out-of-core SGSI and SGSI+ under a device-memory limit smaller than
the data graph, against in-core GSI without a limit, in one run; counts checked, times compared,
the computation/communication split (SGSI Table 7) reported.

Workloads (``--workloads``): ``hprd`` (the 100 dense-16 queries, exact counts), ``github``
(Q_0..Q_10, exact counts), ``rmat`` (a generated R-MAT graph, ``--rmat-vertices`` /
``--rmat-edges``, power-law vertex and edge labels, random-walk queries; in-core GSI's count is
the oracle). The limit is the data graph's device footprint (signature table
plus PCSR) divided by ``--ratio`` (default 4.5, so the graph is at least 4x larger than it).

Per query: one warm-up (validated), then the median of ``--repeats`` runs of the device-event
phase times (filter + plan + enumerate). ``comm``/``comp``: summed device time of copies and
kernels (they overlap, so they can add up to more than the elapsed time). A wrong count is
printed loudly and makes the exit status 1. Under the simulator ``--quick`` runs a tiny workload.

    python -m experiments.bench_sgsi --workloads hprd,github,rmat --time-budget 240 --out $OUT
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from common.device import device_info, simulator_active
from common.generate import power_law_labels, query_set, rmat
from common.graph import Graph
from common.result import Status
from gsi.engine import GSI
from gsi.pcsr import GROUP_WORDS, partition_lists
from gsi.sgsi import SGSI, SIG_SEGMENT_WORDS

from .timing import timed as _timed
from .workloads import check_set

ENGINES = ("SGSI", "SGSI+", "GSI in-core")


def footprint(data: Graph) -> int:
    """Device bytes of the data graph as SGSI streams it: signature rows plus every PCSR."""
    words = data.num_vertices * SIG_SEGMENT_WORDS
    for rows, _ in partition_lists(data):
        words += rows.size + GROUP_WORDS * np.unique(rows).size
    return 4 * words


def workloads(args, quick: bool):
    chosen = args.workloads.split(",")
    if quick:
        g = rmat(300, 1200, seed=3, labels=power_law_labels(300, 6, 1.0, seed=4), name="rmat-quick")
        yield "rmat-quick", g, list(query_set(g, 2, 4, seed=5, method="walk").queries), {}
        return
    for name in ("hprd", "github"):
        if name in chosen:
            item = check_set(name)
            yield name, item.data, [q for q, _ in item.queries], {q.name: c for q, c in item.queries}
    if "rmat" in chosen:
        n, m = args.rmat_vertices, args.rmat_edges
        g = rmat(n, m, seed=7, labels=power_law_labels(n, args.rmat_labels, 1.0, seed=8))
        src, dst, _ = g.edges()
        elab = power_law_labels(src.size, args.rmat_edge_labels, 1.0, seed=9)
        g = Graph.from_edges(n, src, dst, g.labels, elab, name=f"rmat-{n}V-{m}E")
        qs = query_set(g, args.rmat_queries, args.rmat_query_size, seed=10, method="walk")
        yield f"rmat-{n // 1000}K", g, list(qs.queries), {}


def timed(engine, query, repeats, timeout):
    """(warm-up result, median filter + plan + enumerate seconds, last result)."""
    t = _timed(engine, query, repeats, timeout_s=timeout,
               measure=lambda r: sum(r.phases.get(k, 0.0) for k in ("filter", "plan", "enumerate")))
    return t.warm, (t.seconds if t.runs[-1] is not t.warm else float("nan")), t.last


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.bench_sgsi", description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="hprd,github,rmat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ratio", type=float, default=4.5, help="data footprint / device_memory_limit")
    ap.add_argument("--rmat-vertices", type=int, default=1 << 20)
    ap.add_argument("--rmat-edges", type=int, default=8_000_000)
    ap.add_argument("--rmat-labels", type=int, default=64)
    ap.add_argument("--rmat-edge-labels", type=int, default=4)
    ap.add_argument("--rmat-queries", type=int, default=20)
    ap.add_argument("--rmat-query-size", type=int, default=6)
    ap.add_argument("--timeout", type=float, default=30.0, help="timeout_s of every match")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--time-budget", type=float, default=None, help="seconds per workload; no new query after it")
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    args = ap.parse_args(argv)
    quick = args.quick or simulator_active()
    repeats = 1 if quick else args.repeats
    print(f"device: {device_info()}", flush=True)
    rows, bad, summary = [], 0, []
    for name, data, queries, expected in workloads(args, quick):
        size = footprint(data)
        limit = max(int(size / args.ratio), 60_000 if quick else 0)   # (the simulator graph is tiny)
        shape = dict(block_threads=32, max_blocks=1) if quick else {}
        t0 = time.perf_counter()
        engines = {"SGSI": SGSI(device_memory_limit=limit, **shape).prepare(data),
                   "SGSI+": SGSI(device_memory_limit=limit, load_balance="histogram", **shape).prepare(data),
                   "GSI in-core": GSI(**shape).prepare(data)}
        print(f"{name}: |V|={data.num_vertices:,} |E|={data.num_edges:,} footprint {size / 2**20:.1f} MiB, "
              f"limit {limit / 2**20:.1f} MiB, {engines['SGSI'].partitions} PCSR segments, "
              f"{len(engines['SGSI'].sig_segments)} signature segments (prepare {time.perf_counter() - t0:.1f} s)",
              flush=True)
        done, start = 0, time.perf_counter()
        for q in queries:
            if args.time_budget is not None and time.perf_counter() - start > args.time_budget:
                break
            row = dict(workload=name, query=q.name, limit_bytes=limit, footprint_bytes=size)
            counts = {}
            for label, engine in engines.items():
                warm, ms, last = timed(engine, q, repeats, args.timeout)
                counts[label] = warm.count if warm.status is Status.OK else None
                row[f"{label} ms"] = 1000 * ms
                if label != "GSI in-core":
                    for key in ("comm_s", "comp_s", "bytes_h2d", "bytes_d2h", "segments_streamed", "chunks"):
                        row[f"{label} {key}"] = last.stats[key]
                    row[f"{label} peak_bytes"] = last.peak_device_bytes
            want = expected.get(q.name, counts["GSI in-core"])
            ok = want is not None and all(c == want for c in counts.values() if c is not None)
            if want is None or any(c is None for c in counts.values()):
                print(f"{name} {q.name}: a run timed out ({counts}); not counted as checked", flush=True)
                continue
            row.update(count=counts["SGSI"], expected=want, check="ok" if ok else "MISMATCH")
            if not ok:
                bad += 1
                print(f"!!! MISMATCH {name} {q.name}: {counts} expected {want}", flush=True)
            print(f"{name} {q.name}: count={counts['SGSI']} {row['check']} SGSI={row['SGSI ms']:.2f} ms "
                  f"SGSI+={row['SGSI+ ms']:.2f} ms in-core={row['GSI in-core ms']:.2f} ms "
                  f"comm={1000 * row['SGSI comm_s']:.2f} comp={1000 * row['SGSI comp_s']:.2f} ms", flush=True)
            rows.append(row)
            done += 1
        mine = [r for r in rows if r["workload"] == name]
        if mine:
            med = {e: statistics.median(r[f"{e} ms"] for r in mine) for e in ENGINES}
            summary.append((name, len(queries), done, sum(r["check"] == "ok" for r in mine), size, limit,
                            engines["SGSI"].partitions, med,
                            sum(r["SGSI comm_s"] for r in mine), sum(r["SGSI comp_s"] for r in mine),
                            sum(r["SGSI+ comm_s"] for r in mine), sum(r["SGSI+ comp_s"] for r in mine),
                            max(r["SGSI peak_bytes"] for r in mine),
                            sum(r["SGSI bytes_h2d"] for r in mine) / len(mine)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if rows:
        with open(out / "sgsi_bench.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    print("\nworkload | queries run/total | exact | data MiB | limit MiB | PCSR segs | median ms SGSI / SGSI+ / "
          "in-core | SGSI comm s / comp s | SGSI+ comm s / comp s | peak MiB | H2D MiB per query")
    for (name, total, done, ok, size, limit, parts, med, cm, cp, cm2, cp2, peak, h2d) in summary:
        print(f"{name} | {done}/{total} | {ok}/{done} | {size / 2**20:.1f} | {limit / 2**20:.1f} | {parts} | "
              f"{med['SGSI']:.2f} / {med['SGSI+']:.2f} / {med['GSI in-core']:.2f} | {cm:.3f} / {cp:.3f} | "
              f"{cm2:.3f} / {cp2:.3f} | {peak / 2**20:.1f} | {h2d / 2**20:.1f}")
    print("all counts exact" if not bad else f"{bad} MISMATCHES")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
