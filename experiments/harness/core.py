"""Named experiments: what a paper's table or figure runs, how its cells are computed, what it printed.

An :class:`Experiment` crosses its :class:`Config` columns (engine + options) with its
:class:`Point` rows (a dataset and a query set). :func:`run_experiment` runs every (config,
point) pair through :func:`experiments.harness.runner.run_jobs`, computes each cell with the experiment's
:class:`Metric` from the per-query rows, and writes the reports (:mod:`experiments.harness.report`).

Metrics, as the papers define them:
- ``avg_ms``: mean time over the solved queries, in ms, with the solved count beside it (GSI
  §VIII-A, EGSM §6.4, gMatch §4.5);
- ``solved``: number of queries with status ok;
- ``speedup``: mean (or ``reduce="max"``) over queries solved by both of ``t_config / t_base``
  (EGSM §6.4);
- ``stat``: mean of an engine statistic over the queries that ran (``partial_runs=False``:
  solved ones only, for totals over the whole search);
- ``peak_mb``: mean peak device memory over solved queries, in MiB.
A query's time is the sum of the phases the paper counts (``phases``). A cell with a ``skipped``
row (the budget ran out) is NaN and reads "not run".

Budget: :func:`plan` gives each experiment's worst-case seconds at a scale (every query to its
limit), which :func:`assign_gpus` uses; :func:`run_set` runs one paper's set in one worker
process under an optional wall-time budget.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from common.engine.registry import available_engines

from .runner import SKIPPED, Job, canonical_options, config_key, run_jobs
from .store import FolderLock
from .workloads import Dataset, QuerySpec, Scale, get_scale


class MissingEngine(RuntimeError):
    """An experiment needs an engine that is not built (registered) yet."""


@dataclass(frozen=True)
class Config:
    """One column: an engine (registry name) with constructor options, under a report label."""

    label: str
    engine: str
    options: tuple = ()

    @classmethod
    def of(cls, label: str, engine: str, **options) -> "Config":
        return cls(label, engine, tuple(sorted(options.items())))


@dataclass(frozen=True)
class Point:
    """One row: a dataset and its query set, under a label (the dataset, or a sweep's x value).

    ``options`` are engine options every config takes at this point (a sweep over an engine
    parameter, such as gMatch's seed-pool size).
    """

    label: str
    dataset: Dataset
    queries: QuerySpec
    x: float | None = None       # numeric x for line plots
    options: tuple = ()


@dataclass(frozen=True)
class Metric:
    """How a cell is computed from the raw rows (module docstring)."""

    kind: str                       # avg_ms | solved | speedup | stat | peak_mb
    base: str | None = None         # speedup: the config label divided by
    stat: str | None = None         # stat: the engine statistic averaged
    phases: tuple = ()              # time = sum of these phases (empty: all)
    reduce: str = "mean"            # speedup: "mean" or "max" over queries
    partial_runs: bool = True       # stat: timed-out queries count too
    factor: float = 1.0             # stat: multiplies the statistic (e.g. 1000: seconds -> ms)

    def times(self, rows: pd.DataFrame) -> pd.Series:
        if not self.phases:
            return rows["seconds"].astype(float)
        return rows[[f"{p}_s" for p in self.phases]].astype(float).sum(axis=1)

    def cell(self, rows: pd.DataFrame, base_rows: pd.DataFrame | None) -> float:
        solved = rows[rows.status == "ok"]
        if self.kind == "solved":
            return float(len(solved))
        if self.kind == "avg_ms":
            return float(self.times(solved).mean() * 1e3) if len(solved) else math.nan
        if self.kind == "peak_mb":
            return float(solved["peak_device_bytes"].astype(float).mean() / 2**20) if len(solved) else math.nan
        if self.kind == "stat":
            ran = rows[rows.status.isin(("ok", "timeout") if self.partial_runs else ("ok",))]
            values = pd.to_numeric(ran["stats"].map(lambda js: _stat(js, self.stat)),
                                   errors="coerce").dropna()
            return float(values.mean() * self.factor) if len(values) else math.nan
        if self.kind == "speedup":
            base = base_rows[base_rows.status == "ok"]
            mine = pd.Series(self.times(solved).to_numpy(), index=solved["query"].to_numpy())
            theirs = pd.Series(self.times(base).to_numpy(), index=base["query"].to_numpy())
            both = mine.index.intersection(theirs.index)
            if not len(both):
                return math.nan
            ratios = mine[both] / theirs[both]
            return float(ratios.max() if self.reduce == "max" else ratios.mean())
        raise ValueError(f"unknown metric {self.kind!r}")


def _stat(js: str, key: str):
    """One statistic from the JSON the runner stores in a row's ``stats`` column."""
    try:
        return json.loads(js).get(key) if isinstance(js, str) and js else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Claim:
    """A claim the paper makes about an experiment's table, and how the measured table judges it.

    ``check`` takes the measured table (rows = row labels, columns = config labels) and returns
    True (held), False (did not hold) or None (the cells it compares were not measured); without
    a ``check`` the claim is not testable here and ``reason`` says why. :func:`lower`,
    :func:`below`, :func:`at_least` and :func:`trend` make the usual checks.
    """

    text: str
    check: object = None              # callable(table) -> bool | None
    reason: str = ""

    def verdict(self, table: pd.DataFrame) -> tuple[str, str]:
        """(``held`` | ``did not hold`` | ``not testable``, why)."""
        if self.check is None:
            return "not testable", self.reason
        result = self.check(table)
        if result is None:
            return "not testable", "the cells it compares were not measured (nothing solved, or not run)"
        return ("held" if result else "did not hold"), self.reason


def _measured(table: pd.DataFrame, *columns) -> pd.DataFrame | None:
    if any(c not in table.columns for c in columns):
        return None
    here = table[list(columns)].astype(float).dropna()
    return here if len(here) else None


def lower(a: str, b: str, rows: tuple = ()):
    """Check: column ``a`` is below column ``b`` in every row where both were measured (``rows``: only those)."""
    def check(table):
        here = _measured(table.loc[[r for r in rows if r in table.index]] if rows else table, a, b)
        return None if here is None else bool((here[a] < here[b]).all())
    return check


def below(column: str, value: float):
    """Check: every measured cell of ``column`` is below ``value``."""
    def check(table):
        here = _measured(table, column)
        return None if here is None else bool((here[column] < value).all())
    return check


def at_least(column: str, value: float, rows: tuple = ()):
    """Check: the mean of ``column``'s measured cells (``rows``: only those) is at least ``value``."""
    def check(table):
        here = _measured(table.loc[[r for r in rows if r in table.index]] if rows else table, column)
        return None if here is None else bool(here[column].mean() >= value)
    return check


def trend(column: str, direction: str):
    """Check: ``column`` rises (``"up"``) or falls (``"down"``) from its first to its last measured row
    (a sweep's end points, in the order of its points)."""
    if direction not in ("up", "down"):
        raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")

    def check(table):
        here = _measured(table, column)
        if here is None or len(here) < 2:
            return None
        first, last = float(here[column].iloc[0]), float(here[column].iloc[-1])
        return last > first if direction == "up" else last < first
    return check


def all_of(*checks):
    """Check: every one of ``checks`` holds (False if one fails, None if none could be judged)."""
    def check(table):
        results = [c(table) for c in checks]
        if any(r is False for r in results):
            return False
        return None if all(r is None for r in results) else True
    return check


def ratio_between(a: str, b: str, low: float, high: float = math.inf):
    """Check: the mean over measured rows of ``a / b`` lies in [``low``, ``high``]."""
    def check(table):
        here = _measured(table, a, b)
        if here is None:
            return None
        ratio = float((here[a] / here[b]).mean())
        return low <= ratio <= high
    return check


def row_lower(column: str, row_a: str, row_b: str):
    """Check: in ``column``, row ``row_a`` is below row ``row_b`` (both measured)."""
    def check(table):
        if column not in table.columns or row_a not in table.index or row_b not in table.index:
            return None
        a, b = float(table.loc[row_a, column]), float(table.loc[row_b, column])
        return None if math.isnan(a) or math.isnan(b) else a < b
    return check


@dataclass(frozen=True)
class Experiment:
    """A paper's table or figure (module docstring).

    ``paper_values`` has the paper's printed numbers in the same layout as the measured table
    (rows = point labels, columns = config labels); NaN where the paper printed nothing.
    ``time_limit_s`` and ``memory_cap`` are the paper's; the scale may lower the time limit.
    ``scale_at`` maps a scale name to overrides of that scale's fields for this experiment
    alone (fewer queries, a shorter limit, fewer points, smaller stand-ins).
    ``figure``: None, ``"bars"``, ``"lines"`` (x = ``Point.x``, named with its unit by ``xlabel``),
    ``"scatter"`` (per-query times of each config against ``scatter_base``) or ``"box"`` (per row,
    the spread of per-query times and result sizes). ``repeats``: timed runs per query (median
    kept, spread reported), unless the scale (with ``scale_at``) sets ``repeats``.
    ``rows`` maps point labels to table rows
    when a row pools several points (e.g. one pattern on several datasets); by default each
    point is a row.
    """

    name: str
    paper: str
    title: str
    configs: tuple
    points: tuple
    metric: Metric
    time_limit_s: float
    memory_cap: int | None = None
    paper_values: pd.DataFrame | None = None
    figure: str | None = None
    scatter_base: str | None = None
    notes: str = ""
    repeats: int = 1
    points_at: dict = field(default_factory=dict)   # scale name -> tuple of points (override)
    rows: dict = field(default_factory=dict)        # point label -> row label (pooled rows)
    memory_cap_at: dict = field(default_factory=dict)  # scale name -> device-memory cap (override)
    scale_at: dict = field(default_factory=dict)       # scale name -> {Scale field: value} (override)
    xlabel: str = ""                                   # lines: what Point.x is, with its unit
    claims: tuple = ()                                 # the paper's claims on this table (Claim)

    def scale_for(self, scale: Scale) -> Scale:
        """``scale`` with this experiment's overrides for it applied."""
        return replace(scale, **self.scale_at.get(scale.name, {}))

    def all_points(self, scale: Scale) -> tuple:
        """The points at ``scale`` before ``max_points`` cuts them."""
        return self.points_at.get(scale.name, self.points)

    def points_for(self, scale: Scale) -> tuple:
        scale = self.scale_for(scale)
        points = self.all_points(scale)
        return points if scale.max_points is None else points[:scale.max_points]

    def time_limit_for(self, scale: Scale) -> float:
        limit = self.scale_for(scale).time_limit_s
        return self.time_limit_s if limit is None else min(self.time_limit_s, limit)

    def repeats_for(self, scale: Scale) -> int:
        """Timed runs per query at ``scale``: the scale's (as this experiment overrides it), else its own."""
        repeats = self.scale_for(scale).repeats
        return self.repeats if repeats is None else int(repeats)

    def memory_cap_for(self, scale: Scale) -> int | None:
        return self.memory_cap_at.get(scale.name, self.memory_cap)

    def missing_engines(self) -> list[str]:
        registered = set(available_engines())
        return sorted({c.engine for c in self.configs} - registered)

    def jobs(self, scale: Scale) -> tuple[list[Job], dict[str, dict[str, int]]]:
        """The runner jobs at ``scale`` and the exact counts known per point (by query name)."""
        scale = self.scale_for(scale)
        limit = self.time_limit_for(scale)
        jobs, known = [], {}
        for point in self.points_for(scale):
            data = point.dataset.load(scale)
            queries, counts = point.queries.build(data, point.dataset, scale)
            known[point.label] = counts
            for config in self.configs:
                options = tuple(sorted(dict(config.options + point.options).items()))
                jobs.append(Job(self.name, config.label, config.engine, point.label, data,
                                tuple(queries), options, time_limit_s=limit,
                                device_memory_limit=self.memory_cap_for(scale), repeats=self.repeats_for(scale),
                                run_key=self.run_key(config, point, scale)))
        return jobs, known

    def job_for(self, config_label: str, point_label: str, scale: Scale) -> tuple[Job, dict[str, int]]:
        """The runner job of one cell (config x point) at ``scale`` and the exact counts known for
        its queries: what one Dask task runs (:mod:`experiments.harness.cells`)."""
        configs = {c.label: c for c in self.configs}
        points = {p.label: p for p in self.points_for(scale)}
        if config_label not in configs or point_label not in points:
            raise ValueError(f"{self.name} at scale {scale.name} has no cell ({config_label!r}, {point_label!r})")
        config, point = configs[config_label], points[point_label]
        here = self.scale_for(scale)
        data = point.dataset.load(here)
        queries, counts = point.queries.build(data, point.dataset, here)
        options = tuple(sorted(dict(config.options + point.options).items()))
        job = Job(self.name, config.label, config.engine, point.label, data, tuple(queries), options,
                  time_limit_s=self.time_limit_for(scale), device_memory_limit=self.memory_cap_for(scale),
                  repeats=self.repeats_for(scale), run_key=self.run_key(config, point, scale))
        return job, counts

    def run_key(self, config: Config, point: Point, scale: Scale) -> tuple:
        """What makes a (config, point) job's runs identical to another experiment's (runner docstring)."""
        scale = self.scale_for(scale)
        options = canonical_options(config.engine, config.options + point.options)
        return (config.engine, options, repr(point.dataset), scale.max_edges, scale.real_data,
                repr(replace(point.queries, count=0)), scale.max_query_vertices,
                self.time_limit_for(scale), self.memory_cap_for(scale), self.repeats_for(scale))

    def row_groups(self, scale: Scale) -> dict[str, list[str]]:
        """Table row label -> the point labels pooled in it."""
        groups: dict[str, list[str]] = {}
        for point in self.points_for(scale):
            groups.setdefault(self.rows.get(point.label, point.label), []).append(point.label)
        return groups

    def table(self, raw: pd.DataFrame, scale: Scale) -> pd.DataFrame:
        """The measured table: rows = point labels, columns = config labels; NaN where not run."""
        skipped = self.not_run(raw, scale)
        table = pd.DataFrame(index=list(skipped.index), columns=list(skipped.columns), dtype=float)
        for row, members in self.row_groups(scale).items():
            here = raw[raw.dataset.isin(members)]
            base = here[here.config == self.metric.base] if self.metric.base else None
            for config in self.configs:
                if not skipped.loc[row, config.label]:
                    table.loc[row, config.label] = self.metric.cell(here[here.config == config.label], base)
        return table

    def not_run(self, raw: pd.DataFrame, scale: Scale) -> pd.DataFrame:
        """Per cell, how many queries were skipped (status ``skipped``); a ratio counts its base's too."""
        groups = self.row_groups(scale)
        table = pd.DataFrame(0, index=list(groups), columns=[c.label for c in self.configs], dtype=int)
        skipped = raw[raw.status == SKIPPED]
        for row, members in groups.items():
            here = skipped[skipped.dataset.isin(members)]
            base = int((here.config == self.metric.base).sum()) if self.metric.base else 0
            for config in self.configs:
                table.loc[row, config.label] = max(int((here.config == config.label).sum()), base)
        return table

    def cuts(self, scale: Scale) -> str:
        """What ``scale`` cuts from the paper's setting (points, queries per set), in words."""
        scale = self.scale_for(scale)
        kept = self.points_for(scale)
        labels = {p.label for p in kept}
        parts = []
        if len(kept) < len(self.points):
            dropped = ", ".join(p.label for p in self.points if p.label not in labels)
            parts.append(f"{len(kept)} of {len(self.points)} points kept (not run: {dropped})")
        paper_counts = sorted({p.queries.count for p in kept if p.queries.kind != "patterns"})
        if scale.queries_per_set is not None and any(c > scale.queries_per_set for c in paper_counts):
            parts.append(f"at most {scale.queries_per_set} queries per set "
                         f"(paper: {', '.join(map(str, paper_counts))})")
        if scale.max_query_vertices is not None:
            parts.append(f"generated queries shrunk to at most {scale.max_query_vertices} vertices")
        return "; ".join(parts)


def check_counts(raw: pd.DataFrame, known: dict[str, dict[str, int]]) -> pd.DataFrame:
    """Rows whose count disagrees with another engine's or with a known exact count (status ok only)."""
    solved = raw[raw.status == "ok"]
    problems = []
    for (dataset, query), group in solved.groupby(["dataset", "query"]):
        counts = set(int(c) for c in group["count"])
        exact = known.get(dataset, {}).get(query)
        if len(counts) > 1 or (exact is not None and counts != {exact}):
            for _, row in group.iterrows():
                problems.append({"dataset": dataset, "query": query, "config": row.config,
                                 "count": int(row["count"]), "exact": exact})
    return pd.DataFrame(problems, columns=["dataset", "query", "config", "count", "exact"])


@dataclass
class Outcome:
    """What :func:`run_experiment` produced."""

    experiment: Experiment
    scale: Scale
    raw: pd.DataFrame
    table: pd.DataFrame
    disagreements: pd.DataFrame
    files: list[Path]


def run_experiment(experiment: Experiment, scale: str | Scale = "small", out_dir: Path | str = "results",
                   *, isolation: str = "process", progress: bool = True, command: str = "",
                   deadline: float | None = None, worker=None, shared: dict | None = None) -> Outcome:
    """Run (or resume) ``experiment`` at ``scale`` and write its reports under ``out_dir/<paper>/``.

    ``deadline``, ``worker`` and ``shared`` go to :func:`experiments.harness.runner.run_jobs` (budget,
    a worker and the rows of identical runs shared by a set's experiments).
    """
    from .report import write_reports

    scale = get_scale(scale) if isinstance(scale, str) else scale
    missing = experiment.missing_engines()
    if missing:
        raise MissingEngine(f"experiment {experiment.name} needs engine(s) {', '.join(missing)}, "
                            f"which are not built yet (registered: {', '.join(available_engines())})")
    folder = Path(out_dir) / experiment.paper
    with FolderLock(folder, command):
        jobs, known = experiment.jobs(scale)
        raw = run_jobs(jobs, folder / f"{experiment.name}.{scale.name}.csv", isolation=isolation,
                       progress=progress, deadline=deadline, worker=worker, shared=shared)
        raw = raw[raw.experiment == experiment.name]
        table = experiment.table(raw, scale)
        disagreements = check_counts(raw, known)
        files = write_reports(experiment, scale, raw, table, disagreements, folder, command=command)
    return Outcome(experiment, scale, raw, table, disagreements, files)


# ---------------------------------------------------------------------- worst-case plan
COMPILE_ALLOWANCE_S = 10.0
"""Seconds allowed for compiling one (engine, options) configuration's kernels, once per worker
(an upper bound: on the 4x H200 run of 2026-11-21 whole sets of 7-16 configurations took 48-101 s
of wall time, queries and compiles included, at most 7 s per configuration; docs/decisions.md)."""


@dataclass(frozen=True)
class PlanLine:
    """The worst case of one experiment at a scale: every query runs to its time limit.

    ``query_s`` = runs x repeats x limit; ``warmup_s`` = one untimed query (the runner's warm-up)
    per configuration (:func:`runner.canonical_options`) and query-set shape that no earlier
    experiment of the same worker ran; ``compile_s`` = :data:`COMPILE_ALLOWANCE_S` per compiled variant
    (:func:`runner.config_key`: run-time options aside) not compiled before. Building and
    preparing a job's data graph and a worker restart after a hard kill (which compiles
    again) are not counted.
    """

    experiment: str
    jobs: int
    runs: int                 # (config, query) pairs run (not copied from an earlier experiment)
    limit_s: float
    repeats: int
    query_s: float
    warmup_s: float
    compile_s: float
    missing: tuple = ()       # engines not built: the experiment will not run

    @property
    def worst_s(self) -> float:
        return self.query_s + self.warmup_s + self.compile_s


def plan(experiments, scale: str | Scale) -> list[PlanLine]:
    """Worst-case lines for ``experiments`` run in this order by one worker (:class:`PlanLine`).

    A run that an earlier experiment already made (same ``run_key``, same query) costs nothing;
    ``runs`` counts the runs actually made. Only query files are read; no data graph is built.
    """
    scale = get_scale(scale) if isinstance(scale, str) else scale
    compiled, warmed, done = set(), set(), set()
    lines = []
    for experiment in experiments:
        here = experiment.scale_for(scale)
        limit = experiment.time_limit_for(scale)
        jobs = runs = 0
        new_compiles, new_warmups = set(), set()
        missing = tuple(experiment.missing_engines())
        for point in experiment.points_for(scale):
            queries = point.queries.count_at(here)
            for config in experiment.configs:
                jobs += 1
                options = dict(config.options + point.options)
                if config.engine in missing:           # defaults unknown: every spelling is its own
                    compile_key = warm_key = (config.engine, tuple(sorted(options.items())))
                    run_key = None
                else:
                    compile_key = config_key(config.engine, options)
                    warm_key = (config.engine, canonical_options(config.engine, options))
                    run_key = experiment.run_key(config, point, scale)
                fresh = [i for i in range(queries) if run_key is None or (run_key, i) not in done]
                done |= {(run_key, i) for i in fresh if run_key is not None}
                runs += len(fresh)
                if fresh:
                    # the runner warms up once per query size: a query set's shape stands for it
                    spec = point.queries
                    shaped = (*warm_key, spec.kind, spec.size, spec.sizes, spec.names)
                    new_compiles |= {compile_key} - compiled
                    new_warmups |= {shaped} - warmed
        compiled |= new_compiles
        warmed |= new_warmups
        repeats = experiment.repeats_for(scale)
        lines.append(PlanLine(experiment.name, jobs, runs, limit, repeats,
                              query_s=runs * repeats * limit,
                              warmup_s=len(new_warmups) * limit,
                              compile_s=len(new_compiles) * COMPILE_ALLOWANCE_S, missing=missing))
    return lines


def plan_set(paper: str, scale: str | Scale) -> list[PlanLine]:
    """The worst case of a paper's whole set, run by one worker (as :func:`run_set` does)."""
    from .. import experiments_of

    return plan(experiments_of(paper), scale)


def assign_gpus(worst_s: dict[str, float], gpus: list[str]) -> dict[str, list[str]]:
    """Sets per GPU (a GPU's sets run one after the other), minimising the largest GPU total.

    Every assignment is tried (6 sets on 4 GPUs: 4,096); ties go to the smaller sum of squared
    GPU totals, then to the first found (sets in ``PAPERS`` order, GPUs in the order given), so
    the assignment is fixed for a given plan. Every set lands on exactly one GPU.
    """
    from itertools import product

    from .. import PAPERS

    if not gpus:
        raise ValueError("no GPUs given")
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"GPU listed twice in {gpus}")
    order = {paper: i for i, paper in enumerate(PAPERS)}
    papers = sorted(worst_s, key=lambda p: (order.get(p, len(order)), p))
    best, best_score = None, None
    for choice in product(range(len(gpus)), repeat=len(papers)):
        loads = [0.0] * len(gpus)
        for paper, gpu in zip(papers, choice):
            loads[gpu] += worst_s[paper]
        score = (max(loads), sum(x * x for x in loads))
        if best_score is None or score < best_score:
            best, best_score = choice, score
    assignment: dict[str, list[str]] = {gpu: [] for gpu in gpus}
    for paper, gpu in zip(papers, best or ()):
        assignment[gpus[gpu]].append(paper)
    return assignment


def format_plan(paper: str, lines: list[PlanLine]) -> str:
    """The plan of one set as a text table, with its total."""
    header = f"{'experiment':40s} {'jobs':>5s} {'runs':>5s} {'limit':>6s} {'query s':>8s} " \
             f"{'warm-up':>8s} {'compile':>8s} {'worst s':>8s}"
    out = [f"{paper}:", header]
    for line in lines:
        note = f"  (needs {', '.join(line.missing)}: not built)" if line.missing else ""
        out.append(f"{line.experiment:40s} {line.jobs:5d} {line.runs:5d} {line.limit_s:6g} "
                   f"{line.query_s:8.1f} {line.warmup_s:8.1f} {line.compile_s:8.0f} {line.worst_s:8.1f}{note}")
    out.append(f"{'total':40s} {sum(p.jobs for p in lines):5d} {sum(p.runs for p in lines):5d} {'':6s} "
               f"{sum(p.query_s for p in lines):8.1f} {sum(p.warmup_s for p in lines):8.1f} "
               f"{sum(p.compile_s for p in lines):8.0f} {sum(p.worst_s for p in lines):8.1f}")
    return "\n".join(out)


# ---------------------------------------------------------------------- one paper's set
@dataclass
class SetOutcome:
    """What :func:`run_set` produced: per experiment an :class:`Outcome` or the reason it did not run."""

    paper: str
    outcomes: list
    missing: dict              # experiment name -> MissingEngine message
    seconds: float

    @property
    def failed(self) -> bool:
        return bool(self.missing) or any(len(o.disagreements) for o in self.outcomes)


def run_set(paper: str, scale: str | Scale = "small", out_dir: Path | str = "results", *,
            names: list[str] | None = None, experiments: list | None = None, budget_s: float | None = None,
            isolation: str = "process", progress: bool = True, command: str = "", log=print,
            started: float | None = None) -> SetOutcome:
    """Run (or resume) a paper's experiments (or ``names`` of them) in one worker process.

    ``experiments`` replaces the paper's declared ones (a set built elsewhere). Runs identical
    to an earlier experiment's are copied (runner docstring). With ``budget_s``, pairs not
    started within that many seconds of wall time become ``skipped`` rows. Writes
    ``out_dir/<paper>/run.<scale>.json`` (:func:`report.write_run_metadata`), whose wall time counts
    from ``started`` (a ``time.monotonic()`` value: where the caller's run began, such as the Dask
    phase that computed the rows) or from this call. The folder is locked for the run: a second run
    into it raises :class:`experiments.harness.store.FolderLocked`.
    """
    from .. import experiments_of
    from .report import write_run_metadata
    from .runner import make_worker

    scale = get_scale(scale) if isinstance(scale, str) else scale
    declared = experiments_of(paper) if experiments is None else list(experiments)
    chosen = [e for e in declared if names is None or e.name in names]
    lock = FolderLock(Path(out_dir) / paper, command).acquire()   # before any work: FolderLocked
    start = time.monotonic() if started is None else started
    deadline = None if budget_s is None else time.monotonic() + budget_s
    worker = make_worker(isolation)
    shared: dict = {}
    outcomes, missing = [], {}
    try:
        for experiment in chosen:
            log(f"[{time.monotonic() - start:7.1f} s] {experiment.name}")
            try:
                outcomes.append(run_experiment(experiment, scale, out_dir, isolation=isolation,
                                               progress=progress, command=command,
                                               deadline=deadline, worker=worker, shared=shared))
            except MissingEngine as exc:
                missing[experiment.name] = str(exc)
                log(f"  {exc}")
        result = SetOutcome(paper, outcomes, missing, time.monotonic() - start)
        write_run_metadata(result, scale, Path(out_dir) / paper, command=command, budget_s=budget_s,
                           worst_s=sum(line.worst_s for line in plan(chosen, scale)))
    finally:
        worker.stop()
        lock.release()
    log(f"[{result.seconds:7.1f} s] {paper} done")
    return result
