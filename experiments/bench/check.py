"""Every engine's counts against the exact counts known from outside gpusm, in one command.

``python -m experiments.bench.check --engines gsi,egsm,gmatch,stwig --sets hprd,yeast,github,rw12``
runs each engine on each query set of :data:`experiments.harness.workloads.CHECK_SETS` (data graph
prepared once per engine, one untimed warm-up query first): HPRD dense-16 (100 queries), yeast
dense_8 / sparse_8 / dense_16 (known counts <= 10^7), GitHub Q_0-Q_10, the gMatch authors' rw12
counts (30 random-walk 12-vertex GitHub queries, on a GPU), and ``patterns`` / ``enron``, which
have no exact counts: there the engines that finish are checked against each other (as on the
rw12 queries the authors did not finish).

A count is **wrong** when an engine answers ``ok`` with a count other than the known one, or,
without a known count, when the engines that answered ``ok`` disagree. Timeouts and other
statuses are reported, not wrong; an engine that raises is wrong. The table (one row per query,
one column per engine) is printed last; ``--out`` writes the raw rows as CSV. Exit status 1 on any wrong count, else 0.

An engine may carry constructor options, ``NAME:KEY=VALUE[+KEY=VALUE...]``
(:func:`experiments.bench.engine_spec`), and is a column of its own under that name:
``--engines gmatch,gmatch:candidate_graph_build=gpu`` checks both builds of gMatch's candidate graph.

``--queries N --smallest`` keeps the N queries with the fewest known embeddings per set (per
yeast kind in turn): the simulator's size (``tests/test_check.py`` runs every engine so in
seconds).

Ctrl-C keeps the finished rows (in ``--out``, else ``check.partial.csv``) and prints the command
that carries on: the same one with ``--resume``, which keeps the rows of ``--out`` and runs the rest.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from common import available_engines, create_engine
from common.engine.result import Status
from common.interrupt import command_line, interruptible

from ..harness.workloads import CHECK_SETS, CheckSet, check_set
from . import engine_spec, note_simulator

ERROR = "error"
"""The status of a row whose engine raised: counted as wrong (the exception is in ``error``)."""


COLUMNS = ["set", "query", "engine", "status", "count", "expected", "wall_s", "error"]


def run_check(engines: list[str], sets: list[CheckSet], timeout_s: float | None = None,
              progress: bool = True, rows: list | None = None) -> pd.DataFrame:
    """One row per (set, query, engine): status, count, expected count, wall seconds, verdict.

    ``verdict`` is ``right``/``wrong`` against the known count, ``agrees``/``wrong`` against the
    other engines' ``ok`` counts when no count is known (``unchecked`` when no other engine
    answered), and the status itself (``timeout``, ...) when the engine did not answer; an
    exception is status ``error``, verdict ``wrong``.

    ``rows`` (a list) is extended as rows come, so a caller keeps them when interrupted; a
    (set, query, engine) already in it is not run again.
    """
    rows = [] if rows is None else rows
    done = {(r["set"], r["query"], r["engine"]) for r in rows}
    for item in sets:
        if progress:
            print(f"== {item.name}: {item.data!r}, {len(item.queries)} queries", flush=True)
        for name in engines:
            if all((item.name, q.name, name) in done for q, _ in item.queries):
                continue
            try:
                engine_name, options = engine_spec(name)
                engine = create_engine(engine_name, **options).prepare(item.data)
                if item.queries:
                    engine.match(item.queries[0][0], timeout_s=timeout_s)          # compiles
            except Exception as error:                   # noqa: BLE001 - reported as a failed row
                engine, failure = None, f"{type(error).__name__}: {error}"
            for query, expected in item.queries:
                if (item.name, query.name, name) in done:
                    continue
                start = time.perf_counter()
                if engine is not None:
                    try:
                        result = engine.match(query, timeout_s=timeout_s)
                        status, count = result.status.value, result.count
                    except Exception as error:           # noqa: BLE001
                        status, count = ERROR, 0
                        failure = f"{type(error).__name__}: {error}"
                else:
                    status, count = ERROR, 0
                wall = time.perf_counter() - start
                rows.append({"set": item.name, "query": query.name, "engine": name,
                             "status": status, "count": count, "expected": expected, "wall_s": wall,
                             "error": failure if status == ERROR else ""})
                if status == ERROR and progress:
                    print(f"  {name:9s} {query.name:24s} ERROR {failure}", flush=True)
                    continue
                if progress:
                    print(f"  {name:9s} {query.name:24s} {status:8s} {count:>16,d} "
                          f"{'' if expected is None else f'(known {expected:,})':>22s} {wall * 1e3:10.1f} ms",
                          flush=True)
            del engine
    return with_verdicts(rows)


def with_verdicts(rows: list[dict]) -> pd.DataFrame:
    """The rows as a table with their ``verdict`` column (:func:`run_check`)."""
    raw = pd.DataFrame(rows, columns=COLUMNS)
    raw["verdict"] = [_verdict(raw, row) for row in raw.itertuples()]
    return raw


def read_rows(path: Path) -> list[dict]:
    """The rows of an earlier ``--out`` CSV (``--resume``); none if the file is missing."""
    if not path.exists():
        return []
    frame = pd.read_csv(path, keep_default_na=False, na_values={"expected": [""]}, dtype={"query": str})
    rows = []
    for row in frame[COLUMNS].to_dict("records"):
        row["expected"] = None if pd.isna(row["expected"]) else int(row["expected"])
        row["count"] = int(row["count"])
        rows.append(row)
    return rows


def _verdict(raw: pd.DataFrame, row) -> str:
    if row.status == ERROR:
        return "wrong"
    if row.status != Status.OK.value:
        return row.status
    if not pd.isna(row.expected):
        return "right" if row.count == int(row.expected) else "wrong"
    others = raw[(raw["set"] == row.set) & (raw["query"] == row.query) & (raw["engine"] != row.engine)
                 & (raw["status"] == Status.OK.value)]
    if not len(others):
        return "unchecked"
    return "agrees" if (others["count"] == row.count).all() else "wrong"


def table(raw: pd.DataFrame) -> pd.DataFrame:
    """Per query (rows) and engine (columns): the count, marked ``WRONG`` when wrong, else the status."""
    cells = [f"{c:,}" if s == "ok" else s for c, s in zip(raw["count"], raw["status"])]
    cells = [f"{cell} WRONG" if v == "wrong" else cell for cell, v in zip(cells, raw["verdict"])]
    known = raw.groupby(["set", "query"], sort=False)["expected"].first()
    wide = raw.assign(cell=cells).pivot_table(index=["set", "query"], columns="engine", values="cell",
                                              aggfunc="first", sort=False)
    wide.insert(0, "known", [f"{int(v):,}" if not pd.isna(v) else "-" for v in known.reindex(wide.index)])
    return wide[["known", *[e for e in dict.fromkeys(raw["engine"])]]]


def summary(raw: pd.DataFrame) -> pd.DataFrame:
    """Per engine: queries, answered, right (known count), agrees (cross-checked), wrong."""
    def counts(group):
        verdicts = group["verdict"]
        return pd.Series({"queries": len(group), "answered": int((group["status"] == "ok").sum()),
                          "right": int((verdicts == "right").sum()), "agrees": int((verdicts == "agrees").sum()),
                          "wrong": int((verdicts == "wrong").sum())})
    return raw.groupby("engine", sort=False)[["status", "verdict"]].apply(counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="cpu,gsi,sgsi,egsm,gmatch,stwig",
                        help=f"comma list of registered engines ({', '.join(available_engines())})")
    parser.add_argument("--sets", default="hprd,yeast,github",
                        help=f"comma list of {', '.join(CHECK_SETS)}")
    parser.add_argument("--queries", type=int, help="queries per set (default: all)")
    parser.add_argument("--smallest", action="store_true", help="keep the queries with the fewest embeddings")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per query and engine")
    parser.add_argument("--out", type=Path, help="CSV of every row")
    parser.add_argument("--resume", action="store_true", help="keep the rows of --out and run only the others")
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    for spec in engines:
        try:
            name, options = engine_spec(spec)
        except argparse.ArgumentTypeError as exc:
            parser.error(f"engine {spec!r}: {exc}")
        if name not in available_engines():
            parser.error(f"unknown engine {name!r}; registered: {', '.join(available_engines())}")
        try:
            create_engine(name, **options)
        except (TypeError, ValueError) as exc:
            parser.error(f"engine {spec!r}: {exc}")
    names = [s for s in args.sets.split(",") if s]
    for name in names:
        if name not in CHECK_SETS:
            parser.error(f"unknown set {name!r}; choose from {', '.join(CHECK_SETS)}")
    if args.resume and not args.out:
        parser.error("--resume needs --out (the CSV of the interrupted run)")
    sets = [check_set(name, args.queries, args.smallest) for name in names]
    note_simulator("python -m experiments.bench.check", args, queries=sum(len(s.queries) for s in sets),
                   runs=len(engines), timeout_s=args.timeout)
    out = args.out or Path("check.partial.csv")       # where an interrupted run keeps its rows

    def save(tally) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with_verdicts(tally.rows).to_csv(out, index=False)
        tally.done, tally.note = len(tally.rows), f"rows in {out}"

    argv = sys.argv[1:] if argv is None else list(argv)
    resume = command_line("python -m experiments.bench.check",
                          argv + ([] if args.out else ["--out", str(out)]) + ([] if args.resume else ["--resume"]))
    total = len(engines) * sum(len(item.queries) for item in sets)
    with interruptible(resume, save=save, total=total, unit="rows") as tally:
        tally.rows = read_rows(args.out) if args.resume else []
        raw = run_check(engines, sets, args.timeout, rows=tally.rows)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        raw.to_csv(args.out, index=False)
    pd.set_option("display.width", 200)
    print("\n" + table(raw).to_string())
    print("\n" + summary(raw).to_string())
    wrong = raw[raw["verdict"] == "wrong"]
    if len(wrong):
        print(f"\n!!!! {len(wrong)} WRONG COUNTS: "
              + ", ".join(f"{r.engine} {r.set}/{r.query}" for r in wrong.itertuples()))
        return 1
    print("\nno wrong count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
