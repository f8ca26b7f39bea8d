"""Every system, ours and theirs, on the same query sets: counts, search times, the ratio to our engine.

Sets: GitHub's P1-P9 on the unlabelled graph (``patterns``), GitHub's 30 random-walk 12-vertex
queries (``rw12``) and HPRD's 100 dense 16-vertex queries (``hprd``). Systems: gpusm's gMatch,
GSI and EGSM and the external binaries (:mod:`experiments.papers.competitors`: STMatch, T-DFS,
BEEP, G2Miner, the authors' GSI; :mod:`experiments.papers.authors`: the authors' EGSM and
gMatch). Each external system is compared with our engine of the paper it comes from
(:data:`BASE`): gMatch's for STMatch, T-DFS, BEEP, G2Miner and the authors' gMatch, GSI's for the
authors' GSI, EGSM's for the authors' EGSM. The time is the one that paper reports: the search
(``probe`` and ``enumerate``) for gMatch's family (§4.5), the whole query for GSI's and EGSM's.

Every count is checked: against the known count in ``data/`` where there is one, else against the
cpu engine's (when it finishes within the limit), else against the base engine's; the ``check``
column says which. A query a system cannot take is ``unsupported`` with its reason; a system that
is not built is one row with the reason (the build's first error where ``make competitors``
failed). Each system that a warm-up helps answers its first query untimed (not the external
binaries: a fresh process each run), then every query is timed
``--repeats`` times (the median; a query that did not finish is not repeated, nor one whose runs
have taken :data:`REPEAT_S`; a system that times its repeats in one call, as the authors' GSI in one
process, gives them all, or the first where one did not finish), each query by every system
before the next. ``--timeout-s`` limits one query, ``--budget-s`` the whole run, each set's
queries an equal share of what is left after its warm-ups: past a set's share its remaining
queries are ``skipped``. ``--resume CSV`` carries over an earlier run's rows of the same engine
code (all but ``skipped`` and ``not built``) and runs only the rest; a system with nothing left
is not started.

    python -m experiments.bench.competitors --timeout-s 5 --budget-s 240 --out competitors.csv
    python -m experiments.bench.competitors --timeout-s 5 --budget-s 240 --resume competitors.csv --out more.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, dataclass, fields

import numpy as np
import pandas as pd

from common.engine.registry import available_engines, create_engine
from common.engine.result import MatchResult, Status

from ..harness.timing import without_compiles
from ..harness.workloads import check_set
from ..papers import authors, competitors
from ..papers.authors import PROBE_LIMIT_S

SETS = ("patterns", "rw12", "hprd")
OURS = ("gmatch", "gsi", "egsm")
BASE = {"stmatch-authors": "gmatch", "tdfs-authors": "gmatch", "beep-authors": "gmatch",
        "g2miner-authors": "gmatch", "gmatch-authors": "gmatch", "gsi-authors": "gsi", "egsm-authors": "egsm"}
"""External system -> our engine of the paper it is compared in."""
SEARCH_PHASES = {"gmatch": ("probe", "enumerate"), "gsi": None, "egsm": None}
"""The phases a paper's time covers (None: all): gMatch reports search time only, which for our
gMatch at its defaults is the data-graph probe (a DFS that answers most queries) and the DFS
after it."""
SYSTEMS = OURS + tuple(BASE)
REPEAT_S = 2.0
"""A query's timed runs stop repeating once they have taken this long (its median is of fewer runs)."""
CHECK_LIMIT_S = 30.0
"""The check's limit of one query and of an external system's start-up probe (graphs of 300 vertices)."""


@dataclass
class Row:
    """One (set, system, query): the outcome, the count and its check, the median time."""

    set: str
    system: str
    query: str
    status: str
    count: int | None = None
    reference: int | None = None
    check: str = ""
    ms: float | None = None
    runs: int = 0
    reason: str = ""


def base_of(system: str) -> str:
    return BASE.get(system, system)


def reason_missing(system: str) -> str | None:
    """Why ``system`` cannot run here (None: it can)."""
    if system in competitors.COMPETITORS:
        return competitors.competitor_reason(system)
    if system in authors.BINARIES:
        return authors.authors_reason(system)
    return None if system in available_engines() else f"{system} is not an engine here"


def paper_ms(result: MatchResult, system: str) -> float:
    """The time the system's paper reports, in ms (:data:`SEARCH_PHASES`)."""
    phases = SEARCH_PHASES.get(base_of(system))
    if phases is None:
        return result.seconds * 1e3
    return sum(result.phases.get(p, 0.0) for p in phases) * 1e3


def reference_counts(data, queries, timeout_s: float, deadline: float) -> dict:
    """query name -> (count, source): the known count, else cpu's within ``timeout_s`` (0: none) before the deadline."""
    cpu = None
    out = {}
    for query, known in queries:
        if known is not None:
            out[query.name] = (known, "known")
            continue
        if timeout_s <= 0 or time.monotonic() > deadline:
            continue
        cpu = cpu or create_engine("cpu").prepare(data)
        result = cpu.match(query, timeout_s=timeout_s)
        out[query.name] = (result.count, "cpu") if result.status is Status.OK else (None, "")
    return out


def time_query(engine, system: str, query, timeout_s: float, repeats: int) -> tuple[MatchResult, list[float]]:
    """The first result and the times of up to ``repeats`` runs (one when it did not finish; no more
    once the runs have taken :data:`REPEAT_S`). A run that compiled or loaded a kernel (a query size
    the warm-up did not reach) is run again, as the harness does
    (:func:`~experiments.harness.timing.without_compiles`)."""
    began = time.perf_counter()
    if engine.repeats_in_one_call:              # one process for every run (the authors' GSI)
        runs = engine.match_repeats(query, repeats, timeout_s=timeout_s)
        return runs[0], [paper_ms(run, system) for run in (runs if runs[-1].status is Status.OK else runs[:1])]
    def run() -> MatchResult:
        return without_compiles(lambda: engine.match(query, timeout_s=timeout_s))[1]

    first = run()
    times = [paper_ms(first, system)]
    while first.status is Status.OK and len(times) < repeats and time.perf_counter() - began < REPEAT_S:
        times.append(paper_ms(run(), system))
    return first, times


def rows_frame(rows: list[Row]) -> pd.DataFrame:
    """The rows as the CSV holds them: counts as exact integers (empty where none)."""
    frame = pd.DataFrame([asdict(r) for r in rows], columns=[f.name for f in fields(Row)])
    for column in ("count", "reference"):      # built from the ints: through floats they would round
        frame[column] = pd.array([getattr(r, column) for r in rows], dtype="Int64")
    return frame


def carried_rows(path) -> dict:
    """(set, system, query) -> :class:`Row` of an earlier run's CSV that a resumed run keeps: every
    row but ``skipped`` and ``not built``."""
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    missing = {f.name for f in fields(Row)} - set(frame.columns)
    if missing:
        raise ValueError(f"{path} is not a competitors' bench CSV: no column {', '.join(sorted(missing))}")
    def value(v, kind):                         # an older CSV wrote counts as floats ("12456.0")
        return None if v == "" else kind(v[:-2] if kind is int and v.endswith(".0") else v)
    kept = {}
    for r in frame.itertuples(index=False):
        if r.status in ("skipped", "not built"):
            continue
        kept[r.set, r.system, r.query] = Row(r.set, r.system, r.query, r.status, value(r.count, int),
                                              value(r.reference, int), r.check, value(r.ms, float),
                                              int(r.runs), r.reason)
    return kept


def run_set(name: str, systems, *, timeout_s: float, repeats: int, deadline: float, cpu_timeout_s: float = 2.0,
            max_queries: int | None = None, set_loader=check_set, log=print, sets_left: int = 1,
            carried: dict | None = None) -> list[Row]:
    """Every system on one set; the rows of :class:`Row`. Every system is prepared and warmed
    first, then each query is answered by every system in turn (ours first: the base counts exist),
    so that a budget that ends mid-set leaves whole rows of the queries it reached; the queries get
    ``1 / sets_left`` of the time left before ``deadline`` once the warm-ups (compiles, start-up
    probes) are done. ``carried`` (:func:`carried_rows`): rows of an earlier run, kept as they are
    and not run again."""
    chosen = set_loader(name)
    data, queries = chosen.data, chosen.queries[:max_queries]
    carried = {key[1:]: row for key, row in (carried or {}).items() if key[0] == name}
    todo = [(q, known) for q, known in queries if any((s, q.name) not in carried for s in systems)]
    refs = reference_counts(data, todo, cpu_timeout_s, deadline)
    rows: list[Row] = []
    counts = {(s, q): row.count for (s, q), row in carried.items() if row.status == "ok"}
    engines = {}
    skipped = "the run's time budget is spent"
    for system in sorted(systems, key=lambda s: s in BASE):
        missing = reason_missing(system)
        if missing:
            rows.append(Row(name, system, "*", "not built", reason=missing))
            continue
        if all((system, q.name) in carried for q, _ in queries):
            engines[system] = None               # every query carried over: not started
            continue
        if time.monotonic() > deadline:
            rows += [Row(name, system, q.name, "skipped", reason=skipped) for q, _ in queries]
            continue
        options = {"probe_limit_s": min(PROBE_LIMIT_S, max(1.0, deadline - time.monotonic()))} if system in BASE else {}
        engine = create_engine(system, **options).prepare(data)
        engine.wall_beyond_limit_s()             # an external binary's start-up probe, before the timing
        warm = next((q for q, _ in queries if not engine.unsupported_reason(q)), None)
        if warm is not None and engine.warm_up_helps:
            engine.match(warm, timeout_s=timeout_s)
        engines[system] = engine
    deadline = time.monotonic() + max(0.0, deadline - time.monotonic()) / sets_left
    for query, _ in queries:
        for system, engine in engines.items():
            if (system, query.name) in carried:
                rows.append(carried[system, query.name])
                continue
            if time.monotonic() > deadline:
                rows.append(Row(name, system, query.name, "skipped", reason=skipped))
                continue
            result, times = time_query(engine, system, query, timeout_s, repeats)
            row = Row(name, system, query.name, str(result.status), reason=result.reason, runs=len(times))
            if result.status is Status.OK:
                row.count, row.ms = result.count, float(np.median(times))
                counts[system, query.name] = result.count
                row.reference, source = refs.get(query.name, (None, ""))
                if row.reference is None and (base_of(system), query.name) in counts and base_of(system) != system:
                    row.reference, source = counts[base_of(system), query.name], f"vs {base_of(system)}"
                row.check = ("unchecked" if row.reference is None
                             else f"ok ({source})" if row.count == row.reference else f"WRONG ({source})")
            rows.append(row)
            log(f"{name}: {system} {row.query} {row.status} {row.ms if row.ms is not None else '-'} ms "
                f"{row.check} {row.reason[:120]}".rstrip(), file=sys.stderr)
    log(f"{name}: done", file=sys.stderr)
    return rows


def check_systems(systems, labelled_queries: int = 4, log=print, size: tuple[int, int] = (300, 2000)) -> pd.DataFrame:
    """Each external system against cpu on two small graphs (docs/competitors.md, "To check on a GPU").

    An unlabelled R-MAT of ``size`` (vertices, edges) with G2Miner's seven patterns and a labelled
    one with ``labelled_queries`` random 4-vertex queries; per (system, query): its count, cpu's, the
    pattern's automorphisms and the verdict: ``equal``, ``per subgraph`` (the count times the
    automorphisms is cpu's: the binary counts each subgraph once) or ``differs``.
    """
    from common.graph.generate import power_law_labels, query_set, rmat

    n, m = size
    plain = rmat(n, m, seed=11, name="check-unlabelled")
    labelled = rmat(n, m, seed=11, labels=power_law_labels(n, 4, 1.0, seed=11), name="check-labelled")
    cases = [(plain, list(competitors.G2MINER_PATTERNS.items()))]
    if labelled_queries:
        cases.append((labelled, [(q.name or f"q{i}", q)
                                 for i, q in enumerate(query_set(labelled, labelled_queries, 4, seed=3).queries)]))
    lines = []
    for data, queries in cases:
        cpu = create_engine("cpu").prepare(data)
        expected = {}                            # cpu's count of a query, once, where a system answered it
        for system in systems:
            missing = reason_missing(system)
            if missing:
                lines.append({"system": system, "graph": data.name, "query": "*", "verdict": "not built",
                              "note": missing})
                continue
            engine = create_engine(system, probe_limit_s=CHECK_LIMIT_S).prepare(data)
            for name, query in queries:
                result = engine.match(query, timeout_s=CHECK_LIMIT_S)
                line = {"system": system, "graph": data.name, "query": name, "status": str(result.status),
                        "count": result.count, "ms": round(1e3 * result.seconds, 1), "note": result.reason[:160]}
                if result.status is Status.OK:
                    if name not in expected:
                        expected[name] = cpu.match(query).count
                    want, aut = expected[name], competitors.automorphisms(query)
                    line.update(cpu=want, automorphisms=aut, verdict=(
                        "equal" if result.count == want else
                        "per subgraph" if result.count * aut == want else "differs"))
                lines.append(line)
                log("check: " + " ".join(f"{k}={v}" for k, v in line.items()), file=sys.stderr)
            log(f"check: {system} on {data.name} done", file=sys.stderr)
    return pd.DataFrame(lines)


def summary(rows: list[Row]) -> pd.DataFrame:
    """One line per (set, system): outcomes (a run that ended in an error counted and its first
    reason in the note), wrong counts, median time and median ratio to the base."""
    frame = pd.DataFrame([asdict(r) for r in rows])
    ms = {(r.set, r.system, r.query): r.ms for r in rows if r.ms is not None}
    lines = []
    for (set_name, system), group in frame.groupby(["set", "system"], sort=False):
        if (group.status == "not built").all():
            lines.append({"set": set_name, "system": system, "note": group.reason.iloc[0]})
            continue
        ratios = [ms[set_name, system, q] / ms[set_name, base_of(system), q] for q in group["query"]
                  if (set_name, system, q) in ms and ms.get((set_name, base_of(system), q))]
        unsupported, errors = group[group.status == "unsupported"], group[group.status == "error"]
        reasons = sorted(set(unsupported.reason)) + [f"error: {r}" for r in errors.reason.iloc[:1]]
        lines.append({
            "set": set_name, "system": system, "queries": len(group), "ok": int((group.status == "ok").sum()),
            "timeout": int((group.status == "timeout").sum()), "error": len(errors), "unsupported": len(unsupported),
            "skipped": int((group.status == "skipped").sum()),
            "wrong": int(group.check.str.startswith("WRONG").sum()),
            "unchecked": int((group.check == "unchecked").sum()),
            "median_ms": float(np.median(group.ms.dropna())) if group.ms.notna().any() else None,
            "ratio_to_base": (round(float(np.median(ratios)), 3) if ratios and system != base_of(system) else None),
            "base": base_of(system) if system != base_of(system) else "",
            "note": "; ".join(reasons)[:300]})
    return pd.DataFrame(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.competitors", description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)}")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated engine names")
    parser.add_argument("--timeout-s", type=float, default=5.0, help="limit of one query (default 5)")
    parser.add_argument("--budget-s", type=float, default=None, help="time budget of the whole run")
    parser.add_argument("--cpu-timeout-s", type=float, default=2.0,
                        help="limit of the cpu engine's reference count where data/ has none (default 2; 0: none)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per finished query (median)")
    parser.add_argument("--max-queries", type=int, default=None, help="the first N queries of each set")
    parser.add_argument("--out", default=None, help="CSV of the per-query rows")
    parser.add_argument("--resume", default=None, metavar="CSV",
                        help="keep an earlier run's rows (same engine code) and run only the rest")
    parser.add_argument("--check", action="store_true",
                        help="only check the external systems' counts against cpu on two small graphs")
    args = parser.parse_args(argv)
    sets, systems = args.sets.split(","), args.systems.split(",")
    for bad in [s for s in sets if s not in SETS]:
        parser.error(f"unknown set {bad!r}; choose from {', '.join(SETS)}")
    for bad in [s for s in systems if s not in SYSTEMS]:
        parser.error(f"unknown system {bad!r}; choose from {', '.join(SYSTEMS)}")
    if args.repeats < 1 or args.timeout_s <= 0:
        parser.error("--repeats must be at least 1 and --timeout-s positive")
    if args.check:
        checked = check_systems([s for s in systems if s in BASE])
        if args.out:
            checked.to_csv(args.out, index=False)
        print(checked.to_string(index=False, na_rep=""))
        return 1 if (checked.get("verdict", pd.Series(dtype=str)) == "differs").any() else 0
    carried = carried_rows(args.resume) if args.resume else None
    deadline = time.monotonic() + (args.budget_s if args.budget_s else float("inf"))
    rows = []
    for i, name in enumerate(sets):              # each set's queries an equal share of the budget left
        rows += run_set(name, systems, timeout_s=args.timeout_s, repeats=args.repeats, deadline=deadline,
                        cpu_timeout_s=args.cpu_timeout_s, max_queries=args.max_queries, sets_left=len(sets) - i,
                        carried=carried)
        if args.out:                             # after every set: a run killed later keeps these rows
            rows_frame(rows).to_csv(args.out, index=False)
    table = summary(rows)
    print(table.to_string(index=False, na_rep=""))
    return 1 if (table.get("wrong", pd.Series(dtype=int)).fillna(0) > 0).any() else 0


if __name__ == "__main__":
    sys.exit(main())
