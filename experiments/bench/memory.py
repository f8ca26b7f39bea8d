"""Device memory as users meet it: GPU engines at the default (no ``device_memory_limit``) and
under limits, one worker process per (revision, limit), on the regression gate's heavy GitHub
workloads; and two engines of one kind in one process.

    python -m experiments.bench.memory --engines gsi,sgsi --limits none,40G,8G \\
        --also 19dbc6c=FOLDER --out $OUT

Per query and setting: the wall of the second of two runs (the first grows the buffers), the
query's ``peak_device_bytes`` and its status, and the ratio of the default's wall to the best
capped wall of the same revision. ``--pair`` prepares each engine twice in one process (GitHub
and a copy of its file) and has both answer every query in turn: every answer must be ``ok``
with the count the single engines give. ``--deadline`` adds, per engine at the default, a run of
every query under that deadline and reports the worst wall (a deadline must hold at the default).
Exit status 1 on a wrong or disagreeing count or a pair that did not answer.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

from common.engine.base import memory_bytes

from . import note_simulator, regress

GITHUB_HEAVY = ("github-rw12", "github-dense12", "github-cyclic8")


def _describe_tree() -> str:
    try:
        return regress.describe("HEAD+") or "working-tree"
    except OSError:                          # no git on this machine
        return "working-tree"


def _limit_label(limit: int | None) -> str:
    return "default" if limit is None else f"{limit / (1 << 30):g}GiB"


def run_setting(worker: regress.Worker, engine: str, wl: regress.Workload, options: dict,
                timeout_s: float) -> list[dict]:
    """Each query of ``wl`` twice on a freshly prepared engine; the second run's answer."""
    rows = []
    answer = worker.ask(op="prepare", engine=engine, data=wl.data, options=options)
    if not answer["ok"]:
        return [dict(query=name, status="error", reason=answer["error"]) for name, _, _ in wl.queries]
    for name, path, known in wl.queries:
        request = dict(op="match", engine=engine, data=wl.data, query=path, timeout=timeout_s)
        first = worker.ask(**request)
        second = worker.ask(**request) if first.get("status") == "ok" else first
        rows.append(dict(query=name, known=known, status=second.get("status", "error"),
                         count=second.get("count"), ms=1e3 * second.get("wall", float("nan")),
                         peak_gb=second.get("peak", 0) / 1e9, reason=second.get("error", "")))
    worker.ask(op="drop")
    return rows


def run_pair(worker: regress.Worker, engine: str, loads: list[regress.Workload], copy: str,
             timeout_s: float) -> list[dict]:
    """Two engines of one kind in one process (on GitHub and on a copy of its file, loaded as a
    second graph), answering every query in turns."""
    rows = []
    data = loads[0].data
    for graph in (data, copy):
        answer = worker.ask(op="prepare", engine=engine, data=graph, options={})
        if not answer["ok"]:
            return [dict(query="prepare", graph=graph, status="error", reason=answer["error"])]
    for wl in loads:
        for name, path, known in wl.queries:
            for graph in (data, copy):
                a = worker.ask(op="match", engine=engine, data=graph, query=path, timeout=timeout_s)
                rows.append(dict(query=name, graph=Path(graph).stem, status=a.get("status", "error"),
                                 count=a.get("count"), known=known, ms=1e3 * a.get("wall", float("nan")),
                                 peak_gb=a.get("peak", 0) / 1e9, reason=a.get("error", "")))
    worker.ask(op="drop")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="gsi,sgsi")
    parser.add_argument("--limits", default="none,40G,8G", help="comma list of device_memory_limit values; "
                        "none = the default")
    parser.add_argument("--also", action="append", default=[],
                        help="LABEL=FOLDER or REV: another revision, run at the default only")
    parser.add_argument("--workloads", default=",".join(GITHUB_HEAVY))
    parser.add_argument("--max-queries", type=int, default=None)
    parser.add_argument("--queries", default=None, help="comma-separated query names to keep")
    parser.add_argument("--timeout", type=float, default=30.0, help="deadline of every run (s)")
    parser.add_argument("--pair", action="store_true", help="also two engines of each kind in one process")
    parser.add_argument("--deadline", type=float, default=None, help="also every query at the default under this")
    parser.add_argument("--label", default=None, help="name of the working tree's revision in the table "
                        "(default: its short commit hash)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    note_simulator(parser.prog, args, timeout_s=args.timeout)
    limits = [None if v.strip() == "none" else memory_bytes(v.strip()) for v in args.limits.split(",")]
    out = args.out or Path(tempfile.mkdtemp(prefix="gpusm-memory-"))
    out.mkdir(parents=True, exist_ok=True)
    rows, pair_rows, deadline_rows = [], [], []
    with tempfile.TemporaryDirectory(prefix="gpusm-memory-") as tmp:
        tmp = Path(tmp)
        (tmp / "graphs").mkdir()
        keep = set(args.workloads.split(","))
        loads = [wl for wl in regress.workloads(["heavy"], tmp / "graphs", args.max_queries) if wl.name in keep]
        if args.queries:
            names = set(args.queries.split(","))
            for wl in loads:
                wl.queries = [q for q in wl.queries if q[0] in names]
        revisions = [(args.label or _describe_tree(), regress.ROOT, limits)]
        revisions += [(*regress.resolve(rev, tmp / f"also{i}"), [None]) for i, rev in enumerate(args.also)]
        log = open(out / "memory-workers.log", "w")
        for engine in args.engines.split(","):
            for label, tree, revision_limits in revisions:
                for limit in revision_limits:
                    worker = regress.Worker(label, tree, log)     # a fresh process per setting
                    options = {} if limit is None else {"device_memory_limit": limit}
                    for wl in loads:
                        for row in run_setting(worker, engine, wl, options, args.timeout):
                            rows.append(dict(engine=engine, workload=wl.name, revision=label,
                                             setting=_limit_label(limit), **row))
                            print(f"  {engine} {label} {_limit_label(limit)} {row['query']} {row['status']} "
                                  f"{row.get('ms', float('nan')):.1f} ms peak {row.get('peak_gb', 0):.3f} GB",
                                  flush=True)
                    worker.close()
            if args.deadline:
                worker = regress.Worker(revisions[0][0], regress.ROOT, log)
                for wl in loads:
                    worker.ask(op="prepare", engine=engine, data=wl.data, options={})
                    worker.ask(op="match", engine=engine, data=wl.data, query=wl.queries[0][1],
                               timeout=args.deadline)                  # compiles: not timed
                    for name, path, _ in wl.queries:
                        a = worker.ask(op="match", engine=engine, data=wl.data, query=path, timeout=args.deadline)
                        deadline_rows.append(dict(engine=engine, query=name, status=a.get("status"),
                                                  wall_s=a.get("wall")))
                    worker.ask(op="drop")
                worker.close()
            if args.pair:
                source = Path(loads[0].data)
                copy = tmp / "graphs" / f"copy-{source.name}"
                if not copy.exists():
                    shutil.copyfile(source, copy)
                worker = regress.Worker(revisions[0][0], regress.ROOT, log)
                for row in run_pair(worker, engine, loads, str(copy), args.timeout):
                    pair_rows.append(dict(engine=engine, **row))
                worker.close()
        log.close()
    return report(pd.DataFrame(rows), pd.DataFrame(pair_rows), pd.DataFrame(deadline_rows), out, args.deadline)


def report(frame: pd.DataFrame, pairs: pd.DataFrame, deadlines: pd.DataFrame, out: Path, deadline) -> int:
    """Write the CSVs and print the per-query table and the checks; the exit status."""
    frame.to_csv(out / "memory_queries.csv", index=False)
    problems = []
    ok = frame[frame.status == "ok"]
    for (engine, query), group in ok.groupby(["engine", "query"]):
        counts = set(group["count"]) | ({int(group["known"].iloc[0])} if pd.notna(group["known"].iloc[0]) else set())
        if len(counts) > 1:
            problems.append(f"{engine} {query}: counts {sorted(counts)}")
    wide = frame.pivot_table(index=["engine", "workload", "query"], columns=["revision", "setting"],
                             values=["ms", "peak_gb"], aggfunc="first")
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_columns", 40):
        print(wide.round(3).to_string())
        head = frame.revision.iloc[0] if len(frame) else ""
        mine = ok[ok.revision == head]
        for engine, group in mine.groupby("engine"):
            walls = group.pivot_table(index="query", columns="setting", values="ms", aggfunc="first")
            if "default" in walls and len(walls.columns) > 1:
                capped = walls.drop(columns="default").min(axis=1)
                ratio = walls["default"] / capped
                peak = group[group.setting == "default"].peak_gb.max()
                print(f"{engine}: default / best capped wall: median {ratio.median():.2f}, worst {ratio.max():.2f} "
                      f"({ratio.idxmax()}); peak at the default: max {peak:.2f} GB")
        if len(pairs):
            pairs.to_csv(out / "memory_pairs.csv", index=False)
            for engine, group in pairs.groupby("engine"):
                bad = group[group.status != "ok"]
                wrong = group[(group.status == "ok") & group.known.notna() & (group["count"] != group.known)]
                print(f"{engine}: two engines in one process: {len(group) - len(bad)}/{len(group)} answers ok, "
                      f"{len(wrong)} wrong counts")
                problems += [f"{engine} pair {r.query} on {r.graph}: {r.status} {r.reason}" for r in bad.itertuples()]
                problems += [f"{engine} pair {r.query}: count {r.count} != {r.known}" for r in wrong.itertuples()]
        if len(deadlines):
            deadlines.to_csv(out / "memory_deadlines.csv", index=False)
            for engine, group in deadlines.groupby("engine"):
                print(f"{engine}: deadline {deadline} s at the default: worst wall {group.wall_s.max():.2f} s "
                      f"({group.loc[group.wall_s.idxmax(), 'query']}), {int((group.status == 'timeout').sum())} "
                      f"timeouts of {len(group)}")
    for line in problems:
        print("PROBLEM:", line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
