"""SGSI benchmark (TKDE'22 §6-§7): in-core GSI, SGSI without a limit and SGSI under a device-memory limit that
the data graph oversubscribes ``--ratio`` times, per query in one process; counts checked against
the exact counts of data/ (or in-core GSI's), the issue's table and the SGSI paper's Table 7
(computation vs communication) printed.

Workloads (``--workloads``): ``hprd`` (the 100 dense-16 queries; GSI and SGSI without a limit),
``github`` (Q_0..Q_10; GSI, SGSI, SGSI at the ratio), ``rmat`` (a generated R-MAT graph,
``--rmat-vertices`` / ``--rmat-edges``, power-law vertex and edge labels, random-walk queries;
in-core GSI's count is the oracle; GSI and SGSI at the ratio). The limit is the data graph's
device footprint (signature table plus PCSR, :func:`footprint`) divided by ``--ratio``
(default 4.5). ``--plus`` adds SGSI+ (histogram load balance) at the ratio, ``--streamed`` SGSI
without zero-copy (``zero_copy=False``: segments only, the paper's §6) at the ratio.

Per query: one warm-up (validated), then the median of ``--repeats`` runs of the device-event
phase times (filter + plan + enumerate) without a deadline. ``comm``/``comp``: summed device
time of copies and kernels, from one more run with ``instrument`` on (they overlap, so they
can add up to more than the elapsed time); ``MiB streamed``: graph segments copied per query;
``GB/s``: those bytes over their copies' device time; ``in place``: chunks joined in place
(zero-copy); ``rows counted``: rows of the last table whose extensions were counted, not
written; ``MiB read in place``: list bytes the in-place kernels read from mapped memory, and
``its GB/s`` those over the kernels' device time. A wrong count is printed loudly and makes the
exit status 1. Under the simulator ``--quick`` runs a tiny workload.

    python -m experiments.bench.sgsi --workloads github,hprd --time-budget 200 --out $OUT
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from common.engine.result import MatchResult, Status
from common.gpu.runtime import device_info, simulator_active
from common.graph.generate import power_law_labels, query_set, rmat
from common.graph.model import Graph
from gsi.engine import GSI
from gsi.pcsr import GROUP_WORDS, partition_lists
from gsi.sgsi import SGSI, SIG_SEGMENT_WORDS

from ..harness.store import write_rows
from ..harness.timing import Budget
from ..harness.timing import timed as _timed
from ..harness.workloads import check_set
from . import note_simulator

GSI_NAME, NOLIMIT, LIMITED, PLUS = "gsi", "sgsi", "sgsi limited", "sgsi+ limited"
STREAMED = "sgsi streamed limited"
STREAM_KEYS = ("comm_s", "comp_s", "bytes_h2d", "bytes_streamed", "h2d_gbps", "segments_streamed", "chunks",
               "inplace_chunks", "counted_rows", "bytes_inplace", "inplace_gbps")


def footprint(data: Graph) -> int:
    """Device bytes of the data graph as SGSI streams it: signature rows plus every PCSR."""
    words = data.num_vertices * SIG_SEGMENT_WORDS
    for rows, _ in partition_lists(data):
        words += rows.size + GROUP_WORDS * np.unique(rows).size
    return 4 * words


def workloads(args, quick: bool):
    """(name, data graph, queries, exact counts by query name, engines to run)."""
    chosen = args.workloads.split(",")
    if quick:
        g = rmat(300, 1200, seed=3, labels=power_law_labels(300, 6, 1.0, seed=4), name="rmat-quick")
        yield "rmat-quick", g, list(query_set(g, 2, 4, seed=5, method="walk").queries), {}, (GSI_NAME, NOLIMIT, LIMITED)
        return
    for name, engines in (("hprd", (GSI_NAME, NOLIMIT)), ("github", (GSI_NAME, NOLIMIT, LIMITED))):
        if name in chosen:
            item = check_set(name)
            yield name, item.data, [q for q, _ in item.queries], {q.name: c for q, c in item.queries}, engines
    if "rmat" in chosen:
        n, m = args.rmat_vertices, args.rmat_edges
        g = rmat(n, m, seed=7, labels=power_law_labels(n, args.rmat_labels, 1.0, seed=8))
        src, dst, _ = g.edges()
        elab = power_law_labels(src.size, args.rmat_edge_labels, 1.0, seed=9)
        g = Graph.from_edges(n, src, dst, g.labels, elab, name=f"rmat-{n}V-{m}E")
        qs = query_set(g, args.rmat_queries, args.rmat_query_size, seed=10, method="walk")
        yield f"rmat-{n // 1000}K", g, list(qs.queries), {}, (GSI_NAME, LIMITED)


def timed(engine, query, repeats, timeout):
    """(warm-up result, median filter + plan + enumerate seconds, median wall seconds, last result)."""
    t = _timed(engine, query, repeats, timeout_s=timeout, untimed_after_warm=True,
               measure=lambda r: sum(r.phases.get(k, 0.0) for k in ("filter", "plan", "enumerate")))
    ok = t.repeated
    return t.warm, (t.seconds if ok else float("nan")), (t.wall_s if ok else float("nan")), t.last


def _fmt(x: float) -> str:
    return "-" if x != x else (f"{x:.1f}" if x >= 10 else f"{x:.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.bench.sgsi", description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="github,hprd")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ratio", type=float, default=4.5, help="data footprint / device_memory_limit")
    ap.add_argument("--plus", action="store_true", help="also SGSI+ (histogram load balance) at the ratio")
    ap.add_argument("--streamed", action="store_true", help="also SGSI without zero-copy at the ratio")
    ap.add_argument("--slot-share", type=int, default=None, help="SGSI's slot_share at the ratio (default its own)")
    ap.add_argument("--queries", default=None, help="comma-separated query names to keep")
    ap.add_argument("--rmat-vertices", type=int, default=1 << 20)
    ap.add_argument("--rmat-edges", type=int, default=8_000_000)
    ap.add_argument("--rmat-labels", type=int, default=64)
    ap.add_argument("--rmat-edge-labels", type=int, default=4)
    ap.add_argument("--rmat-queries", type=int, default=20)
    ap.add_argument("--rmat-query-size", type=int, default=6)
    ap.add_argument("--timeout", type=float, default=30.0, help="timeout_s of every warm-up")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--time-budget", type=float, default=None, help="seconds per workload; no new query after it")
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    args = ap.parse_args(argv)
    note_simulator(ap.prog, args, timeout_s=args.timeout, budget_s=args.time_budget)
    quick = args.quick or simulator_active()
    repeats = 1 if quick else args.repeats
    keep = set(args.queries.split(",")) if args.queries else None
    print(f"device: {device_info()}", flush=True)
    rows, bad, tables = [], 0, []
    for name, data, queries, expected, which in workloads(args, quick):
        if keep:
            queries = [q for q in queries if q.name in keep]
        size = footprint(data)
        limit = max(int(size / args.ratio), 60_000 if quick else 0)   # (the simulator graph is tiny)
        shape = dict(block_threads=32, max_blocks=1) if quick else {}
        t0 = time.perf_counter()
        slots = {} if args.slot_share is None else dict(slot_share=args.slot_share)
        makers = {GSI_NAME: lambda: GSI(**shape), NOLIMIT: lambda: SGSI(**shape),
                  LIMITED: lambda: SGSI(device_memory_limit=limit, **slots, **shape),
                  PLUS: lambda: SGSI(device_memory_limit=limit, load_balance="histogram", **slots, **shape),
                  STREAMED: lambda: SGSI(device_memory_limit=limit, zero_copy=False, **slots, **shape)}
        which = tuple(which) + ((PLUS,) if args.plus and LIMITED in which else ()) \
            + ((STREAMED,) if args.streamed and LIMITED in which else ())
        engines = {label: makers[label]().prepare(data) for label in which}
        lim = engines.get(LIMITED)
        print(f"{name}: |V|={data.num_vertices:,} |E|={data.num_edges:,} footprint {size / 2**20:.1f} MiB, "
              f"limit {limit / 2**20:.2f} MiB ({args.ratio}x)"
              + (f", {lim.partitions} PCSR segments, {len(lim.sig_segments)} signature segments" if lim else "")
              + f" (prepare {time.perf_counter() - t0:.1f} s)", flush=True)
        done, budget, mine = 0, Budget(args.time_budget), []
        for q in queries:
            if budget.spent():
                break
            row = dict(workload=name, query=q.name, limit_bytes=limit, footprint_bytes=size)
            counts = {}
            for label, engine in engines.items():
                try:
                    warm, ms, wall, last = timed(engine, q, repeats, args.timeout)
                except Exception as exc:            # a crash is reported as a row, the run goes on
                    print(f"!!! {label} {q.name}: {type(exc).__name__}: {exc}", flush=True)
                    traceback.print_exc()
                    warm = last = MatchResult(label, 0, Status.OOM, reason=repr(exc))
                    ms = wall = float("nan")
                counts[label] = warm.count if warm.status is Status.OK else None
                row[f"{label} ms"] = 1000 * ms
                row[f"{label} wall ms"] = 1000 * wall
                if label != GSI_NAME:
                    if warm.status is Status.OK and getattr(engine, "incore", None) is None:
                        engine.instrument = True        # Table 7's times: one more run, with events
                        last = engine.match(q, timeout_s=args.timeout)
                        engine.instrument = False
                    row[f"{label} mode"] = last.stats.get("mode")
                    for key in STREAM_KEYS:
                        row[f"{label} {key}"] = last.stats.get(key, 0)
                    row[f"{label} peak_bytes"] = last.peak_device_bytes
            want = expected.get(q.name, counts[GSI_NAME])
            done += 1
            row.update(expected=want, **{f"{label} count": c for label, c in counts.items()})
            if want is None or any(c is None for c in counts.values()):
                row["check"] = "timeout"
                print(f"{name} {q.name}: a warm-up did not finish ({counts}); not checked", flush=True)
            else:
                ok = all(c == want for c in counts.values())
                row["check"] = "ok" if ok else "MISMATCH"
                if not ok:
                    bad += 1
                    print(f"!!! MISMATCH {name} {q.name}: {counts} expected {want}", flush=True)
            print(f"{name} {q.name}: count={want} {row['check']} "
                  + " ".join(f"{label}={_fmt(row[f'{label} ms'])}ms" for label in engines)
                  + (f" streamed={row[f'{LIMITED} bytes_streamed'] / 2**20:.1f}MiB "
                     f"comm={1000 * row[f'{LIMITED} comm_s']:.2f} comp={1000 * row[f'{LIMITED} comp_s']:.2f}ms"
                     if LIMITED in engines else ""), flush=True)
            rows.append(row)
            mine.append(row)
        tables.append((name, len(queries), list(engines), mine, size, limit))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if rows:
        write_rows(out / "sgsi_bench.csv", rows)
    for name, total, labels, mine, size, limit in tables:
        if not mine:
            continue
        print(f"\n### {name}: ms per query (filter + plan + enumerate, median of {repeats}); "
              f"limited = device_memory_limit {limit / 2**20:.2f} MiB (graph {size / 2**20:.1f} MiB, "
              f"{size / limit:.1f}x); {len(mine)}/{total} queries run")
        many = len(mine) > 12
        if many:       # a summary per engine: median, max ratio to gsi
            print("| engine | median ms | median x gsi | max x gsi | exact |")
            print("|---|---|---|---|---|")
            for label in labels:
                ratio = [r[f"{label} ms"] / r[f"{GSI_NAME} ms"] for r in mine if r[f"{GSI_NAME} ms"] > 0]
                exact = sum(r.get(f"{label} count") == r["expected"] for r in mine)
                print(f"| {label} | {_fmt(statistics.median(r[f'{label} ms'] for r in mine))} | "
                      f"{_fmt(statistics.median(ratio))} | {_fmt(max(ratio))} | {exact}/{len(mine)} |")
        else:
            print("| | " + " | ".join(r["query"] for r in mine) + " |")
            print("|---" * (len(mine) + 1) + "|")
            print("| count | " + " | ".join(str(r["expected"]) for r in mine) + " |")
            for label in labels:
                print(f"| {label} | " + " | ".join(_fmt(r[f"{label} ms"]) for r in mine) + " |")
            for label in labels[1:]:
                print(f"| {label} / gsi | " + " | ".join(_fmt(r[f"{label} ms"] / r[f"{GSI_NAME} ms"]) for r in mine)
                      + " |")
            print("| exact | " + " | ".join(r["check"] for r in mine) + " |")
        streamed = [label for label in labels if label in (LIMITED, PLUS, STREAMED)]
        if streamed:
            print(f"\nTable 7 ({name}): computation vs communication per query at {size / limit:.1f}x")
            print("| engine | query | ms | comp ms | comm ms | MiB streamed | x graph | GB/s | chunks | in place | "
                  "rows counted | MiB read in place | its GB/s |")
            print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            for label in streamed:
                for r in mine:
                    print(f"| {label} | {r['query']} | {_fmt(r[f'{label} ms'])} | "
                          f"{_fmt(1000 * r[f'{label} comp_s'])} | {_fmt(1000 * r[f'{label} comm_s'])} | "
                          f"{r[f'{label} bytes_streamed'] / 2**20:.1f} | "
                          f"{r[f'{label} bytes_streamed'] / size:.1f} | {r[f'{label} h2d_gbps']:.1f} | "
                          f"{r[f'{label} chunks']} | {r[f'{label} inplace_chunks']} | "
                          f"{r[f'{label} counted_rows']} | {r[f'{label} bytes_inplace'] / 2**20:.1f} | "
                          f"{r[f'{label} inplace_gbps']:.1f} |")
    unchecked = sum(r["check"] == "timeout" for r in rows)
    print(("all counts exact" if not bad else f"{bad} MISMATCHES")
          + (f"; {unchecked} queries not checked (a warm-up did not finish)" if unchecked else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
