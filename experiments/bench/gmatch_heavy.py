"""gMatch on heavy queries against the authors' own build (run on a GPU).

Workloads (``--workloads``): ``rw12`` (30 random-walk 12-vertex GitHub queries, 10^8-10^12
embeddings; ``--solved-only`` keeps the 11 the authors' recorded build finishes), ``github``
(Q_0-Q_10) and the seeded slow-path families of :data:`experiments.harness.workloads.HEAVY_FAMILIES`
(``dense12``, ``cyclic8``: ``--family-count`` queries each). The data graph is prepared once and
every kernel compiled before timing; a timed run that still compiled or loaded one (a path the
warm-up did not take) is run again (``compile_reruns``).

Per query and variant (``--variants``; default ``enumerate`` = every position enumerated, the
paper's search over the candidate graph, and ``count`` = gpusm's defaults, counting the leaves and
the last position), the median of ``--repeats`` runs with the variants taking turns: our search
time (the ``enumerate`` phase plus the data-graph ``probe``), the probe alone, the
candidate-graph build (``index``) and the wall time of ``match()``. With
``--authors`` the authors' binary (``make authors``; :mod:`experiments.papers.authors`) runs beside it in
the same process on the same GPU: its ``# Processing`` time (search) and ``# Preparation`` time
(process); without it the recorded H200 times of ``authors_gmatch_h200.csv`` are used where there
are any. ``--authors-csv`` reads the authors' rows from a file when it exists (with or without
``--authors``), else, with ``--authors``, writes them there (two runs of this module, e.g. two
commits, share one authors' run). The counts are checked against the authors', then the CPU
reference (``--cpu-timeout`` per query within ``--cpu-budget`` seconds), then the other
variants. A wide table (one row per query) and the summary come last, the summary also over the
queries whose plan has no countable leaf (the count-only target's queries); ``--out`` writes the
long rows as CSV.

    python -m experiments.bench.gmatch_heavy --timeout 8 --authors --workloads rw12,github,dense12,cyclic8 --solved-only
"""

from __future__ import annotations

import argparse
import ast
import inspect
import statistics
import sys
import time
from pathlib import Path

import pandas as pd

from common.engine.registry import create_engine, engine_class
from common.engine.result import Status
from common.interrupt import command_line, csv_rows, interruptible
from gmatch.engine import PROBE_STATS
from gmatch.order import build_plan

from ..harness.timing import without_compiles
from ..harness.workloads import GMATCH_AUTHORS, HEAVY_FAMILIES, check_set, data_dir, heavy_family, read_authors_csv
from . import note_simulator

VARIANTS = {
    "enumerate": {"leaf_counting": False, "count_last": False},
    "count": {},
    "default": {},
    "no-leaf-counting": {"leaf_counting": False},
    "data-graph": {"candidate_graph": False, "leaf_counting": False},
    "gpu-build": {"candidate_graph_build": "gpu"},
    "host-build": {"candidate_graph_build": "host"},
}


def variant_options(token: str) -> dict:
    """A named variant, or engine options written ``key=value+key=value`` (Python literals)."""
    if token in VARIANTS:
        return VARIANTS[token]
    options = {}
    for item in token.split("+"):
        key, _, value = item.partition("=")
        options[key] = ast.literal_eval(value)
    return options


def supported(options: dict) -> dict:
    """The options the installed gMatch takes (an older commit may lack newer ones)."""
    known = inspect.signature(engine_class("gmatch").__init__).parameters
    return {k: v for k, v in options.items() if k in known}


def workloads(names: list[str], data, family_count: int, solved_only: bool):
    """(workload, query name, query graph, known count or None, recorded authors' search ms or None)."""
    for name in names:
        if name in HEAVY_FAMILIES:
            for query in heavy_family(data, name, family_count):
                yield name, query.name, query, None, None
            continue
        if name not in GMATCH_AUTHORS:
            raise SystemExit(f"unknown workload {name!r} ({', '.join([*GMATCH_AUTHORS, *HEAVY_FAMILIES])})")
        authors = read_authors_csv(data_dir() / GMATCH_AUTHORS[name])
        for query, count in check_set(name).queries:
            solved = authors[query.name]["status"] == "ok"
            if solved_only and not solved:
                continue
            yield name, query.name, query, count, float(authors[query.name]["search_ms"]) if solved else None


def _sm_count() -> int:
    from common.gpu.runtime import cuda, simulator_active
    return 1 if simulator_active() else cuda.get_current_device().MULTIPROCESSOR_COUNT


def run_authors(queries, data, timeout: float, path: Path | None) -> pd.DataFrame:
    """The authors' binary on every query (or the rows of ``path`` when it exists)."""
    if path is not None and path.exists():
        return pd.read_csv(path)
    from ..papers import authors as _authors
    reason = _authors.authors_reason("gmatch-authors")
    if reason:
        raise SystemExit(reason)
    engine = _authors.GMatchAuthors().prepare(data)
    rows = []
    for workload, name, query, _, _ in queries:
        result = engine.match(query, timeout_s=timeout)
        rows.append(dict(workload=workload, query=name, a_status=result.status.value,
                         a_count=result.count if result.status is Status.OK else None,
                         a_search_ms=result.phases.get("enumerate", 0.0) * 1e3 if result.status is Status.OK else None,
                         a_process_ms=result.phases.get("filter", 0.0) * 1e3))
        print(f"{'authors':>10} {name:>12} {result.status.value:>7} {result.count:>16,} "
              f"search {rows[-1]['a_search_ms'] or float('nan'):8.0f} ms", flush=True)
    table = pd.DataFrame(rows)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(path, index=False)
    return table


def _prepared(args, data, queries) -> dict:
    """Each variant's engine, prepared on ``data`` and warmed on a query of every size: the
    probe's kernels and, through a second engine without the probe, the candidate graph's."""
    engines = {}
    for variant in args.variants.split(","):
        options = supported(variant_options(variant))
        engine = create_engine("gmatch", **options).prepare(data)
        indexed = create_engine("gmatch", **{**options, "probe_s": 0}).prepare(data)
        for size in sorted({q.num_vertices for _, _, q, _, _ in queries}):
            warm = next(q for _, _, q, _, _ in queries if q.num_vertices == size)
            for prepared in (engine, indexed):
                prepared.match(warm, timeout_s=args.timeout)
                prepared.match(warm, limit=10)
        engines[variant] = engine
    return engines


def median_run(runs: list[tuple]) -> tuple:
    """The run of median wall among ``(wall, result, reruns)`` runs (the lower of two middles)."""
    return sorted(runs, key=lambda run: run[0])[(len(runs) - 1) // 2]


def _measure(args, data, queries, leaves_of: dict, rows: list) -> None:
    """Every variant on every query ``--repeats`` times (once where its first run did not finish),
    the variants taking turns on a query (the first one further on each round, so neither always
    follows the other); one row per variant and query, from its run of median wall (every run's
    wall in ``wall_runs_ms``)."""
    engines = _prepared(args, data, queries)
    variants = list(engines)
    for workload, name, query, count, authors_ms in queries:
        if name not in leaves_of:
            leaves_of[name] = build_plan(query, defer_leaves=True).free_leaves
        runs: dict[str, list] = {variant: [] for variant in variants}
        for r in range(args.repeats):
            k = r % len(variants)
            for variant in variants[k:] + variants[:k]:
                if runs[variant] and runs[variant][0][1].status is not Status.OK:
                    continue                    # a run that did not finish is not repeated
                runs[variant].append(without_compiles(
                    lambda: engines[variant].match(query, timeout_s=args.timeout)))
        for variant in variants:
            wall, result, reruns = median_run(runs[variant])
            phases = {k: v * 1e3 for k, v in result.phases.items()}
            search = phases.get("enumerate", 0.0) + phases.get("probe", 0.0)
            rows.append(dict(label=args.label, variant=variant, workload=workload, query=name,
                             vertices=query.num_vertices, edges=query.num_edges,
                             status=result.status.value, count=result.count, known_count=count,
                             recorded_authors_ms=authors_ms, search_ms=search,
                             dfs_ms=phases.get("enumerate", 0.0), probe_ms=phases.get("probe", 0.0),
                             index_ms=phases.get("index", 0.0), filter_ms=phases.get("filter", 0.0),
                             plan_ms=phases.get("plan", 0.0), wall_ms=wall * 1e3,
                             wall_runs_ms=" ".join(f"{1e3 * run[0]:.2f}" for run in runs[variant]),
                             peak_mb=result.peak_device_bytes / 2**20, compile_reruns=reruns,
                             probe_finished=bool(result.stats.get("probe_finished", False)),
                             **{key: result.stats.get(key) for key in PROBE_STATS},
                             seed_pool_ms=result.stats.get("seed_pool_ms"),
                             hub_parts=result.stats.get("hub_parts"),
                             hub_whole_ms=None if result.stats.get("hub_whole_seconds") is None
                             else 1e3 * result.stats["hub_whole_seconds"],
                             order=" ".join(map(str, result.stats.get("order", []))),
                             counted=result.stats.get("counted_leaves"),
                             countable_leaves=leaves_of[name],
                             seeds=result.stats.get("seeds"), seed_width=result.stats.get("seed_width"),
                             steals=result.stats.get("steals"), gsteals=result.stats.get("global_steals"),
                             registers=result.stats.get("registers_per_thread"),
                             blocks=result.stats.get("blocks"),
                             warps_per_block=result.stats.get("warps_per_block")))
            print(f"{args.label:>8} {variant:>10} {name:>12} {result.status.value:>7} {result.count:>16,} "
                  f"wall {wall * 1e3:9.1f} ms (probe {phases.get('probe', 0.0):.1f}, index "
                  f"{phases.get('index', 0.0):.1f}, dfs {phases.get('enumerate', 0.0):.1f})", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.gmatch_heavy",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=8.0, help="seconds per query (authors: 8)")
    parser.add_argument("--workloads", default="rw12,github")
    parser.add_argument("--family-count", type=int, default=50, help="queries per generated family")
    parser.add_argument("--solved-only", action="store_true",
                        help="rw12: only the queries the authors' recorded build finishes")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timed runs of each variant on a query, the variants taking turns; the median is kept")
    parser.add_argument("--variants", default="enumerate,count",
                        help=f"comma list of {list(VARIANTS)} or options such as max_registers=64")
    parser.add_argument("--queries", help="comma list of query names (default: all)")
    parser.add_argument("--authors", action="store_true", help="run the authors' binary in this process")
    parser.add_argument("--authors-timeout", type=float, default=8.0)
    parser.add_argument("--authors-csv", type=Path, help="read the authors' rows from here, or write them")
    parser.add_argument("--cpu-timeout", type=float, default=2.0)
    parser.add_argument("--cpu-budget", type=float, default=60.0,
                        help="seconds for all CPU-reference checks together")
    parser.add_argument("--label", default="", help="a name for this run in the tables (e.g. a commit)")
    parser.add_argument("--out", type=Path, help="CSV of every row")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.authors_csv is not None and not args.authors and not args.authors_csv.exists():
        parser.error(f"--authors-csv {args.authors_csv} does not exist: pass --authors to run the authors' "
                     "binary and write it there")
    note_simulator(parser.prog, args, timeout_s=args.timeout)

    data = check_set("github", 0).data
    queries = list(workloads(args.workloads.split(","), data, args.family_count, args.solved_only))
    if args.queries:
        queries = [q for q in queries if q[1] in args.queries.split(",")]
    authors = None
    if args.authors or args.authors_csv is not None:
        authors = run_authors(queries, data, args.authors_timeout, args.authors_csv)
    leaves_of: dict[str, int] = {}                 # countable leaves of each query's plan
    save = csv_rows(args.out or Path("gmatch_heavy.partial.csv"))
    with interruptible(command_line("python -m experiments.bench.gmatch_heavy", argv), save=save,
                       total=len(queries) * len(args.variants.split(",")), unit="rows", starts_over=True) as tally:
        _measure(args, data, queries, leaves_of, tally.rows)
    rows = tally.rows
    table = pd.DataFrame(rows)
    if authors is not None:
        table = table.merge(authors, on=["workload", "query"], how="left")
    else:
        table["a_status"] = table["recorded_authors_ms"].map(lambda v: "ok" if pd.notna(v) else "")
        table["a_count"] = table["known_count"]
        table["a_search_ms"] = table["recorded_authors_ms"]
        table["a_process_ms"] = float("nan")

    # the check: the authors' count, else the CPU reference, else the other variants
    cpu = None
    budget_end = time.perf_counter() + args.cpu_budget
    cpu_counts: dict[str, int | None] = {}
    table["check"] = ""
    for i, row in table.iterrows():
        if row["status"] != Status.OK.value:
            continue
        if pd.notna(row["a_count"]):
            table.at[i, "check"] = "authors " + ("equal" if row["count"] == row["a_count"] else "DIFFERENT")
            continue
        if pd.notna(row["known_count"]):
            table.at[i, "check"] = "known " + ("equal" if row["count"] == row["known_count"] else "DIFFERENT")
            continue
        if row["query"] not in cpu_counts and time.perf_counter() < budget_end:
            cpu = cpu or create_engine("cpu").prepare(data)
            query = next(q for _, n, q, _, _ in queries if n == row["query"])
            second = cpu.match(query, timeout_s=args.cpu_timeout)
            cpu_counts[row["query"]] = second.count if second.status is Status.OK else None
        if cpu_counts.get(row["query"]) is not None:
            table.at[i, "check"] = "cpu " + ("equal" if cpu_counts[row["query"]] == row["count"] else "DIFFERENT")
            continue
        same = table[(table["query"] == row["query"]) & (table["variant"] != row["variant"])
                     & (table["status"] == Status.OK.value)]
        table.at[i, "check"] = ("variants " + ("equal" if (same["count"] == row["count"]).all() else "DIFFERENT")
                                if len(same) else "unchecked")
    table["ratio"] = table["search_ms"] / table["a_search_ms"]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)

    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 1000)
    wide = table.pivot_table(index=["workload", "query"], columns="variant",
                             values=["search_ms", "ratio"], aggfunc="first")
    wide.columns = [f"{v}_{c}" for c, v in wide.columns]
    first = table.drop_duplicates(["workload", "query"]).set_index(["workload", "query"])
    for column in ("edges", "count", "a_count", "a_search_ms", "a_process_ms"):
        wide[column] = first[column]
    for variant in table["variant"].unique():
        part = table[table["variant"] == variant].set_index(["workload", "query"])
        wide[f"{variant}_phases"] = (part["probe_ms"].round(1).astype(str) + "/" + part["index_ms"].round(1).astype(str)
                                     + "/" + part["dfs_ms"].round(1).astype(str))
        wide[f"{variant}_check"] = part["check"]
    print(f"\nper query ({args.label}; phases = probe/index/dfs ms; ratio = search / authors' search)")
    print(wide.reset_index().to_string(index=False, float_format="%.1f"))
    print(f"\nsummary ({args.label}; search phase; ratio = ours / authors on the queries both solve)")
    for (variant, workload), part in table.groupby(["variant", "workload"], sort=False):
        both = part[(part["status"] == "ok") & part["a_search_ms"].notna()]
        ratios = both["ratio"].where(both["a_search_ms"] > 0)
        ratios = ratios.dropna()
        median = statistics.median(ratios) if len(ratios) else float("nan")
        worst = ratios.max() if len(ratios) else float("nan")
        wrong = part["check"].str.contains("DIFFERENT").sum()
        unchecked = (part["check"].isin(["", "unchecked"]) & (part["status"] == "ok")).sum()
        print(f"{variant:>10} {workload:>8}: solved {int((part['status'] == 'ok').sum())}/{len(part)}, "
              f"authors {int(part['a_search_ms'].notna().sum())}; median ratio {median:.2f}, max {worst:.2f} "
              f"(over {len(ratios)} with authors' search > 0 ms); total ours {part['search_ms'].sum():.0f} ms, "
              f"authors {both['a_search_ms'].sum():.0f} ms; disagreements {wrong}; unchecked {unchecked}")
        bare = ratios[both.loc[ratios.index, "countable_leaves"] == 0]    # the count-only target's queries
        if len(bare):
            print(f"{'':>10} {'':>8}  without countable leaves: median ratio {statistics.median(bare):.2f}, "
                  f"max {bare.max():.2f} (over {len(bare)})")
    print(targets(table))
    return 0


#: a probe's share of a query's wall is judged on the queries longer than this (ms)
PROBE_JUDGED_MS = 20.0


def slower_past_spread(table: pd.DataFrame, queries) -> list[str]:
    """Of ``queries``, those whose count-mode runs were all slower than every enumeration-mode run
    (``wall_runs_ms``): a difference the runs' own spread does not cover."""
    runs = table[table["status"] == "ok"].pivot_table(index="query", columns="variant", values="wall_runs_ms",
                                                      aggfunc="first")
    def walls(text) -> list[float]:
        return [float(w) for w in str(text).split()]
    return [q for q in queries if min(walls(runs.at[q, "count"])) > max(walls(runs.at[q, "enumerate"]))]


def targets(table: pd.DataFrame) -> str:
    """The gMatch tails' measures, on the wall of ``match()``: the probe's largest share of a
    query of more than :data:`PROBE_JUDGED_MS`, and how often its look ran on to ``probe_s`` and
    ended there or lost the time; count mode over enumeration mode per query (both
    solved); enumeration mode over the authors' search, and over their search plus preprocessing."""
    lines = ["", "targets (wall of match(); queries both sides solve)"]
    long = table[(table["wall_ms"] > PROBE_JUDGED_MS) & (table["status"] == "ok")]
    if len(long):
        share = long["probe_ms"] / long["wall_ms"]
        worst = long.loc[share.idxmax()]
        lines.append(f"  probe share of walls over {PROBE_JUDGED_MS:.0f} ms: max {share.max():.1%} "
                     f"({worst['variant']} {worst['query']}, {worst['probe_ms']:.1f} of {worst['wall_ms']:.1f} ms), "
                     f"over {len(long)} runs")
        if "probe_past_end_ms" in long and long["probe_past_end_ms"].notna().any():
            past = long.loc[long["probe_past_end_ms"].idxmax()]
            lines.append(f"  probe past its end: max {past['probe_past_end_ms']:.1f} ms ({past['variant']} "
                         f"{past['query']}: direct {past['probe_direct_ms']:.1f}, look {past['probe_look_ms']:.1f} "
                         f"of which seed pool {past['probe_pool_ms']:.1f} ms"
                         + (f", {past['probe_pool_rows']:,.0f} rows, {past['probe_pool_growths']:.0f} buffer growths"
                            if pd.notna(past.get("probe_pool_rows")) else "") + ")")
    if "probe_ran_on" in table and "probe_finished" in table:
        ran_on = table[table["probe_ran_on"].fillna(False).astype(bool)]
        ended = ran_on["probe_finished"].fillna(False).astype(bool)
        lost = ", ".join(f"{r['variant']} {r['query']} ({r['probe_ms']:.1f} of {r['wall_ms']:.1f} ms)"
                         for _, r in ran_on[~ended].head(8).iterrows())
        lines.append(f"  probe ran on to probe_s: {len(ran_on)} of {len(table)} rows, {int(ended.sum())} ended in "
                     f"the probe" + (f"; lost: {lost}" if lost else ""))
    walls = table[table["status"] == "ok"].pivot_table(index="query", columns="variant", values="wall_ms",
                                                       aggfunc="first")
    if {"count", "enumerate"} <= set(walls.columns):
        ratio = (walls["count"] / walls["enumerate"]).dropna()
        if len(ratio):
            over = ratio[ratio > 1.0].sort_values(ascending=False)
            lines.append(f"  count / enumerate: median {ratio.median():.2f}, max {ratio.max():.2f} ({ratio.idxmax()}); "
                         f"{len(over)} of {len(ratio)} over 1.0: "
                         + ", ".join(f"{q} {r:.2f}" for q, r in over.head(8).items()))
            if "wall_runs_ms" in table:
                clear = slower_past_spread(table, over.index)
                lines.append(f"  count slower past the runs' spread (its fastest run slower than enumeration's "
                             f"slowest): {len(clear)} of {len(ratio)}" + "".join(f", {q}" for q in clear[:8]))
    enum = table[(table["variant"] == "enumerate") & (table["status"] == "ok") & (table["a_search_ms"] > 0)]
    if len(enum):
        search = enum["wall_ms"] / enum["a_search_ms"]
        both = enum["wall_ms"] / (enum["a_search_ms"] + enum["a_process_ms"].fillna(0))
        lines.append(f"  enumerate / authors' search: median {search.median():.2f} over {len(enum)}; "
                     f"/ (search + preprocessing): max {both.max():.2f} ({enum.loc[both.idxmax(), 'query']})")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
