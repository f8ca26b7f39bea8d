"""gMatch's phases per fresh process (run on a GPU): where one process's level comes from.

The regression gate compares revisions across worker processes, and on the lent hosts one process
can read a short query 10-30% slower than another running the same code, steadily over its repeats
(docs/decisions.md, "The regression gate's run shape"). This runs ``--processes`` fresh processes in
turn on the same queries (gMatch at its defaults on GitHub, the seeded ``--workloads`` families of
:data:`experiments.harness.workloads.HEAVY_FAMILIES`) and prints, per process, the sum over queries
of each query's median wall of ``match()``, its phases and ``candidate_graph_build_ms`` (the host's
part of ``index``): a spread the processes show in a host phase and not in the search is host
work. ``--env NAME=VALUE`` (repeatable) runs every other process with that environment (e.g.
glibc's ``MALLOC_MMAP_THRESHOLD_``), and ``--taskset CPUS`` pins every other one, to test a cause.

    python -m experiments.bench.process_levels --processes 8 --workloads cyclic8,pendant-cycle --out levels.csv
    python -m experiments.bench.process_levels --processes 8 --option candidate_graph_build=gpu
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import pandas as pd

#: the columns summed per process: wall and phases (ms), then the host build
COLUMNS = ("wall", "index", "candidate_graph_build", "enumerate", "probe", "filter")


def process_sums(engine, queries, repeats: int, timeout: float) -> dict:
    """Per column of :data:`COLUMNS`, the sum over ``queries`` of each query's median over
    ``repeats`` runs on the prepared ``engine`` (ms), after the first three queries once untimed."""
    for query in queries[:3]:                   # compiles and first allocations
        engine.match(query, timeout_s=timeout)
    runs: dict[str, list[dict]] = {}
    for _ in range(repeats):
        for query in queries:
            start = time.perf_counter()
            result = engine.match(query, timeout_s=timeout)
            wall = time.perf_counter() - start
            runs.setdefault(query.name, []).append(
                {"wall": 1e3 * wall, **{k: 1e3 * result.phases.get(k, 0.0) for k in COLUMNS[1:]},
                 "candidate_graph_build": result.stats.get("candidate_graph_build_ms", 0.0)})
    sums = {column: sum(statistics.median(run[column] for run in query_runs) for query_runs in runs.values())
            for column in COLUMNS}
    return {"queries": len(runs), **sums}


def child(workloads: list[str], family_count: int, repeats: int, timeout: float, options: dict) -> dict:
    """One fresh process's :func:`process_sums`: gMatch with ``options`` (else its defaults) on
    GitHub's families."""
    from common.engine.registry import create_engine

    from ..harness.workloads import check_set, heavy_family

    data = check_set("github").data
    queries = [q for name in workloads for q in heavy_family(data, name, family_count)]
    engine = create_engine("gmatch", **options).prepare(data)
    return {"pid": os.getpid(), **process_sums(engine, queries, repeats, timeout)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.process_levels",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--workloads", default="cyclic8,pendant-cycle")
    parser.add_argument("--family-count", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per query")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for every other process")
    parser.add_argument("--taskset", default="", help="CPU list pinning every other process (taskset -c)")
    parser.add_argument("--option", "-o", action="append", default=[], metavar="KEY=VALUE",
                        help="gMatch constructor option, every process (repeatable)")
    parser.add_argument("--out", default="", help="CSV of the per-process sums")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.processes < 1 or args.repeats < 1:
        parser.error("--processes and --repeats must be at least 1")
    workloads = [w for w in args.workloads.split(",") if w]
    from common.cli.main import parse_option
    try:
        options = dict(parse_option(item) for item in args.option)
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    if args.child:
        print(json.dumps(child(workloads, args.family_count, args.repeats, args.timeout, options)))
        return 0
    bad = [item for item in args.env if "=" not in item]
    if bad:
        parser.error(f"--env takes NAME=VALUE, got {bad[0]!r}")
    altered = bool(args.env or args.taskset)
    rows = []
    for i in range(args.processes):
        variant = "altered" if altered and i % 2 else "default"
        env = dict(os.environ, **dict(item.split("=", 1) for item in args.env)) if variant == "altered" else None
        prefix = ["taskset", "-c", args.taskset] if variant == "altered" and args.taskset else []
        command = [*prefix, sys.executable, "-m", "experiments.bench.process_levels", "--child",
                   "--workloads", ",".join(workloads), "--family-count", str(args.family_count),
                   "--repeats", str(args.repeats), "--timeout", str(args.timeout),
                   *[f"--option={item}" for item in args.option]]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"process {i} failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 1
        rows.append({"process": i, "variant": variant, **json.loads(done.stdout.strip().splitlines()[-1])})
        print(f"process {i} ({variant}): " + ", ".join(f"{c} {rows[-1][c]:.1f}" for c in COLUMNS), flush=True)
    table = pd.DataFrame(rows)
    if args.out:
        table.to_csv(args.out, index=False)
    spread = table.groupby("variant")[list(COLUMNS)].agg(["min", "max"]).round(1)
    print("\nper-process sums over the queries of each query's median (ms), min and max per variant")
    print(spread.to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
