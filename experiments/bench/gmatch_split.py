"""gMatch on one GPU: one launch against the same query cut into parts, one after another.

For each heavy query (rw12 names, or the patterns P1-P9 on the unlabelled GitHub graph, as in
:mod:`experiments.bench.dask_scaling`), with the engine prepared once per data graph and every
configuration answered once untimed first:

* **one launch**: ``match(query)`` on an engine with ``hub_parts=0``, best of ``--repeats`` timed runs;
* **split into k parts** (``--parts``): the parts :func:`common.graph.roots.plan_split` plans
  (root ranges by estimated work, a hub's range cut into branch parts and a branch class
  holding a hub of its own cut again; ``--no-branch`` for root ranges only), each answered
  once untimed and once timed on the same engine (``match(query, part=...)``): the summed
  seconds (what one GPU spends) and the longest part (what a cluster cannot beat);
* **hub_parts=k** (``--hub-parts``): one ``match`` call of an engine made with ``hub_parts=k``
  and each ``hub_after_s`` of ``--hub-after-s`` and ``hub_whole_s`` of ``--hub-whole-s``
  (default: the engine's, what a user's call does), best of ``--repeats``, with the whole
  search's last predicted seconds (``whole_predicted_s``), how many predictions were made
  (``whole_looks``) and whether it was cut.

Every count is checked against the one launch's. Printed last: one table; ``--out`` writes it as
CSV.

    python -m experiments.bench.gmatch_split --queries q12_000,q12_006,q12_015,P5 --parts 4,16 --hub-parts 4,8,16
    python -m experiments.bench.gmatch_split --queries q12_000 --parts 4 --hub-parts 4 --hub-after-s 0,0.02,0.05
    python -m experiments.bench.gmatch_split --queries q12_003,q12_006 --parts 4 --hub-parts 4 --hub-whole-s 0,1
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import pandas as pd

from common.engine.part import WHOLE, Part
from common.engine.registry import create_engine
from common.engine.result import Status
from common.gpu.runtime import backend_label
from common.graph.roots import plan_split

from ..harness.timing import clocked
from . import note_simulator
from .dask_scaling import heavy_queries


def _timed(engine, query, timeout_s, part=None):
    """(host seconds, result) of one ``match`` (of ``part``, where given)."""
    return clocked(lambda: engine.match(query, timeout_s=timeout_s, part=part))


def _label(row) -> str:
    """A row's run as the progress line names it: 'split 8', or 'hub_parts 8 (whole 0.8 s:
    predicted 1.49 s at look 2, 14 parts)' (the bound ``hub_whole_s``, the call's last prediction and
    how many it made, its parts)."""
    if row["run"] != "hub_parts":
        return f"{row['run']} {row['k']}"
    predicted = row["whole_predicted_s"]
    looks = f" at look {row['whole_looks']}" if row["whole_looks"] else ""
    return (f"hub_parts {row['k']} (whole {row['hub_whole_s']:g} s: predicted "
            f"{'-' if predicted is None else f'{predicted:.2f}'} s{looks}, {row['parts']} parts)")


def measure(data, query, *, parts=(4, 16), hub_parts=(4,), hub_after_s=(None,), hub_whole_s=(None,),
            branch=True, repeats=2, timeout_s=20.0, options=None, engine=None) -> list[dict]:
    """The rows of one query (module docstring); ``hub_after_s``, ``hub_whole_s``: None for the
    engine's default; ``engine``: a prepared gMatch with ``hub_parts=0`` to reuse."""
    options = dict(options or {})
    engine = engine or create_engine("gmatch", **{**options, "hub_parts": 0}).prepare(data)
    if engine.hub_parts:
        raise ValueError("the one launch needs an engine with hub_parts=0")
    engine.match(query, timeout_s=timeout_s, part=WHOLE)
    runs = [_timed(engine, query, timeout_s, WHOLE) for _ in range(repeats)]
    whole_s, whole = min(runs, key=lambda run: run[0])
    rows = [dict(query=query.name, run="one launch", k=1, parts=1, branch_parts=0, hub_after_s=None,
                 hub_whole_s=None, whole_predicted_s=None, whole_looks=None, seconds=whole_s, largest_part_s=whole_s,
                 count=whole.count, status=whole.status.value, equal=True)]
    root = engine.root_vertex(query)
    below = engine.branch_vertices(query)[0] if branch else None
    for k in parts:
        tasks, _ = plan_split(data, query, root, below, k)
        seconds, count, statuses = [], 0, set()
        for task in tasks:
            engine.match(query, timeout_s=timeout_s, part=Part(*task))
            took, part = _timed(engine, query, timeout_s, Part(*task))
            seconds.append(took)
            count += part.count
            statuses.add(part.status.value)
        status = Status.OK.value if statuses == {Status.OK.value} else ",".join(sorted(statuses))
        rows.append(dict(query=query.name, run="split", k=k, parts=len(tasks),
                         branch_parts=sum(1 for _, b in tasks if b), hub_after_s=None, hub_whole_s=None,
                         whole_predicted_s=None, whole_looks=None, seconds=sum(seconds),
                         largest_part_s=max(seconds), count=count, status=status,
                         equal=count == whole.count))
    for k, after, keep in itertools.product(hub_parts, hub_after_s, hub_whole_s):
        chosen = {name: value for name, value in (("hub_after_s", after), ("hub_whole_s", keep))
                  if value is not None}
        hub = create_engine("gmatch", **{**options, "hub_parts": k, **chosen}).prepare(data)
        hub.match(query, timeout_s=timeout_s)
        took, result = min((_timed(hub, query, timeout_s) for _ in range(repeats)), key=lambda run: run[0])
        rows.append(dict(query=query.name, run="hub_parts", k=k, parts=result.stats.get("hub_parts", 1),
                         branch_parts=None, hub_after_s=hub.hub_after_s, hub_whole_s=hub.hub_whole_s,
                         whole_predicted_s=result.stats.get("hub_whole_predicted_s"),
                         whole_looks=result.stats.get("hub_whole_looks"), seconds=took,
                         largest_part_s=None, count=result.count, status=result.status.value,
                         equal=result.count == whole.count))
    for row in rows:
        row["ratio"] = row["seconds"] / whole_s if whole_s > 0 else float("nan")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", default="q12_000,q12_006,q12_015,P5",
                        help="rw12 names, or P1..P9 on unlabelled GitHub")
    parser.add_argument("--parts", default="4,16", help="split_tasks' parts (comma list; '' for none)")
    parser.add_argument("--hub-parts", default="4,8,16", help="hub_parts of one match call ('' for none)")
    parser.add_argument("--hub-after-s", default="",
                        help="hub_after_s of the hub_parts calls (comma list; '' for the engine's default)")
    parser.add_argument("--hub-whole-s", default="",
                        help="hub_whole_s of the hub_parts calls (comma list; '' for the engine's default)")
    parser.add_argument("--no-branch", action="store_true", help="root ranges only (no branch parts)")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of one call (best taken)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per match call")
    parser.add_argument("--out", type=Path, help="CSV of the table")
    args = parser.parse_args(argv)
    note_simulator("python -m experiments.bench.gmatch_split", args, timeout_s=args.timeout)

    def ints(text):
        return [int(x) for x in text.split(",") if x]

    def floats(text):                                # '' is the engine's default
        return [float(x) for x in text.split(",") if x] or [None]

    rows, engines = [], {}
    for data, query, _, warm in heavy_queries([q for q in args.queries.split(",") if q]):
        if id(data) not in engines:                   # compile on another query of the graph first
            engines[id(data)] = create_engine("gmatch", hub_parts=0).prepare(data)
            engines[id(data)].match(warm, timeout_s=args.timeout)
        found = measure(data, query, parts=ints(args.parts), hub_parts=ints(args.hub_parts),
                        hub_after_s=floats(args.hub_after_s), hub_whole_s=floats(args.hub_whole_s),
                        branch=not args.no_branch, repeats=args.repeats, timeout_s=args.timeout,
                        engine=engines[id(data)])
        print(f"  {query.name}: " + ", ".join(f"{_label(r)} {r['seconds']:.3f} s" for r in found), flush=True)
        rows += found
    frame = pd.DataFrame(rows)
    frame["backend"] = backend_label()
    if args.out:
        frame.to_csv(args.out, index=False)
    print(f"backend: {backend_label()}; seconds: one launch and hub_parts best of {args.repeats}, "
          "a split's parts summed (each timed once after an untimed run)")
    print(frame.drop(columns="backend").to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0 if bool(frame.equal.all()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
