"""What a user waits for on first use: per engine, in fresh processes, the first query with an
empty kernel cache, the first query with a filled one, a warm query, and the ``gpusm match``
command's wall time (docs/performance.md, "Cold start", has the table).

    python -m experiments.bench.cold_start [--data D] [--query Q] [--engines ...] [--out DIR]

For each engine, with its own empty temporary ``NUMBA_CACHE_DIR``:

1. **empty**: a fresh process loads the data, prepares the engine and runs the query once
   (process wall, first-query seconds, compile seconds and kernels compiled, from
   :data:`common.gpu.compile_clock.compile_clock`);
2. **filled**: a second fresh process does the same over the cache the first one filled (kernels
   compiled should be 0, loaded from the cache instead), then runs the query twice more: the
   second run (its wall and compile seconds: an engine whose plan for the query changes once it
   has been answered, such as gMatch's candidate graph after its probe, loads those kernels
   here) and the third (**warm**);
3. **CLI**: ``gpusm match DATA QUERY --engine E`` as a user types it, over the filled cache
   (the median of :data:`CLI_REPEATS` runs).

The cpu engine (no kernels) is the CLI baseline: the table's last column is each engine's CLI wall
over cpu's. The table is printed last; ``--out DIR`` also writes ``cold_start.csv`` and
``cold_start.json`` (every measurement, with the kernels a filled-cache process still compiled).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common.engine.registry import compared_engines

from ..harness.store import write_rows
from . import note_simulator

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = "gmatch_test/data.graph"          # GitHub (gMatch's test graph), under data/
DEFAULT_QUERY = "gmatch_test/queries/Q_3.graph"  # 36.8 million embeddings
DEFAULT_ENGINES = compared_engines()

_CHILD = """
import json, sys, time
began = time.perf_counter()
import common
from common.gpu.compile_clock import compile_clock
from common.graph.io import load_graph, load_query_set
from common.graph.paths import resolve_input
engine_name, data_path, query_path = sys.argv[1:4]
imported = time.perf_counter()
data = load_graph(resolve_input(data_path))
query = load_query_set(resolve_input(query_path))[0]
engine = common.create_engine(engine_name).prepare(data)
prepared = time.perf_counter()
first = engine.match(query)
first_s = time.perf_counter() - prepared
counts = compile_clock.counts()
second_began, compiled_before = time.perf_counter(), compile_clock.seconds
second = engine.match(query)
second_s, second_compile_s = time.perf_counter() - second_began, compile_clock.seconds - compiled_before
warm_began = time.perf_counter()
warm = engine.match(query)
warm_s = time.perf_counter() - warm_began
print(json.dumps(dict(engine=engine_name, count=first.count, status=str(first.status), warm_count=warm.count,
                      import_s=imported - began, prepare_s=prepared - imported, first_query_s=first_s,
                      first_result_s=first.seconds, second_query_s=second_s, second_compile_s=second_compile_s,
                      warm_query_s=warm_s, warm_result_s=warm.seconds,
                      compile_s=compile_clock.seconds, compiled_names=compile_clock.compiled_names, **counts)))
"""


def _run(command: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} failed ({done.returncode}): {done.stderr.strip()[-1500:]}")
    return wall, done


def _fresh_query(engine: str, data: str, query: str, env: dict) -> dict:
    wall, done = _run([sys.executable, "-c", _CHILD, engine, data, query], env)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]), process_s=wall)


#: ``gpusm match`` runs per engine (the table shows their median wall)
CLI_REPEATS = 3


def measure(engine: str, data: str, query: str) -> dict:
    """The empty-cache, filled-cache, warm and CLI measurements of one engine (fresh processes)."""
    with tempfile.TemporaryDirectory(prefix="gpusm-cold-start-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        empty = _fresh_query(engine, data, query, env)
        filled = _fresh_query(engine, data, query, env)
        cli_wall = statistics.median(
            _run([sys.executable, "-m", "experiments.gpusm", "match", data, query, "--engine", engine,
                  "--format", "json"], env)[0] for _ in range(CLI_REPEATS))
    if len({empty["count"], filled["count"], filled["warm_count"]}) != 1:
        raise RuntimeError(f"{engine}: counts differ between runs: {empty['count']}, {filled['count']}, "
                           f"{filled['warm_count']}")
    return {"engine": engine, "count": empty["count"], "status": empty["status"],
            "empty_process_s": empty["process_s"], "empty_first_query_s": empty["first_query_s"],
            "empty_compile_s": empty["compile_s"], "empty_compiled": empty["kernels_compiled"],
            "filled_process_s": filled["process_s"], "filled_first_query_s": filled["first_query_s"],
            "filled_compile_s": filled["compile_seconds"], "filled_load_s": filled["load_seconds"],
            "filled_compiled": filled["kernels_compiled"], "filled_loaded": filled["kernels_loaded"],
            "second_query_s": filled["second_query_s"], "second_compile_s": filled["second_compile_s"],
            "warm_query_s": filled["warm_query_s"], "warm_result_s": filled["warm_result_s"],
            "import_s": filled["import_s"], "cli_s": cli_wall,
            "filled_compiled_names": " ".join(filled["compiled_names"])}


COLUMNS = (("engine", "engine", "{}"), ("empty_process_s", "empty: process s", "{:.1f}"),
           ("empty_first_query_s", "first query s", "{:.2f}"), ("empty_compile_s", "compile s", "{:.2f}"),
           ("empty_compiled", "kernels", "{}"), ("filled_process_s", "filled: process s", "{:.1f}"),
           ("filled_first_query_s", "first query s", "{:.2f}"), ("filled_compile_s", "compile s", "{:.2f}"),
           ("filled_load_s", "load s", "{:.2f}"), ("filled_compiled", "compiled", "{}"),
           ("filled_loaded", "loaded", "{}"), ("second_query_s", "second query s", "{:.3f}"),
           ("second_compile_s", "its compile s", "{:.2f}"), ("warm_query_s", "warm query s", "{:.3f}"),
           ("cli_s", "`gpusm match` s", "{:.2f}"), ("cli_vs_cpu", "/ cpu", "{:.2f}"))


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table (the one in docs/performance.md)."""
    lines = ["| " + " | ".join(title for _, title, _ in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join("-" if row.get(key) is None else fmt.format(row[key])
                                       for key, _, fmt in COLUMNS) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.cold_start",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help=f"data graph (default {DEFAULT_DATA}, under data/)")
    parser.add_argument("--query", default=DEFAULT_QUERY, help=f"query graph (default {DEFAULT_QUERY})")
    parser.add_argument("--engines", nargs="+", default=list(DEFAULT_ENGINES),
                        help="engines, cpu first as the CLI baseline (default: %(default)s)")
    parser.add_argument("--out", type=Path, help="also write cold_start.csv and cold_start.json here")
    args = parser.parse_args(argv)
    note_simulator(parser.prog, args)
    from common.engine.registry import available_engines
    from common.gpu.backend import BACKEND

    unknown = [e for e in args.engines if e not in available_engines()]
    if unknown:
        parser.error(f"unknown engine(s) {', '.join(unknown)}; choose from {', '.join(available_engines())}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    print(f"cold start on {BACKEND}: {args.data}, {args.query}", file=sys.stderr)
    from common.interrupt import command_line, csv_rows, interruptible

    save = csv_rows((args.out or Path(".")) / "cold_start.partial.csv", lambda rows: print(table(rows)))
    with interruptible(command_line("python -m experiments.bench.cold_start", argv), save=save,
                       total=len(args.engines), unit="engines", starts_over=True) as tally:
        rows = tally.rows
        for engine in args.engines:
            rows.append(measure(engine, args.data, args.query))
            print(f"{engine}: done ({rows[-1]['empty_process_s']:.1f} s empty, "
                  f"{rows[-1]['filled_process_s']:.1f} s filled)", file=sys.stderr)
    baseline = next((r["cli_s"] for r in rows if r["engine"] == "cpu"), None)
    for row in rows:
        row["cli_vs_cpu"] = None if baseline is None else row["cli_s"] / baseline
    if args.out is not None:
        write_rows(args.out / "cold_start.csv", rows)
        (args.out / "cold_start.json").write_text(json.dumps(
            {"backend": BACKEND, "data": args.data, "query": args.query, "command": " ".join(sys.argv),
             "rows": rows}, indent=2))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
