"""Named experiments: what a paper's table or figure runs, how its cells are computed, what it printed.

An :class:`Experiment` crosses its :class:`Config` columns (engine + options) with its
:class:`Point` rows (a dataset and a query set: one per dataset in a table, one per x value in
a sweep). :func:`run_experiment` runs every (config, point) pair through
:func:`experiments.runner.run_jobs`, computes each cell with the experiment's :class:`Metric`
from the raw per-query rows, and writes the reports (:mod:`experiments.report`).

Metrics, as the papers define them:
- ``avg_ms``: mean time over the solved queries (status ok), in ms (GSI §VIII-A averages over
  its 100 queries; EGSM §6.4 and gMatch §4.5 over solved ones: we always average over solved
  queries and report the solved count beside it);
- ``solved``: number of queries with status ok;
- ``speedup``: mean (or, with ``reduce="max"``, maximum) over queries solved by both of
  ``t_config / t_base`` (EGSM §6.4's mean of per-query ratios; ``base`` is a config label);
- ``stat``: mean over solved queries of a statistic the engine reports (``stat`` key);
- ``peak_mb``: mean over solved queries of the peak device memory, in MiB.
The time of a query is the sum of the phases the paper counts (``phases``; default all).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from common.engine import available_engines

from .runner import Job, run_jobs
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
            values = pd.to_numeric(solved["stats"].map(lambda js: _stat(js, self.stat)),
                                   errors="coerce").dropna()
            return float(values.mean()) if len(values) else math.nan
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
class Experiment:
    """A paper's table or figure (module docstring).

    ``paper_values`` has the paper's printed numbers in the same layout as the measured table
    (rows = point labels, columns = config labels); NaN where the paper printed nothing.
    ``time_limit_s`` and ``memory_cap`` are the paper's; the scale may lower the time limit.
    ``figure``: None, ``"bars"``, ``"lines"`` (x = ``Point.x``) or ``"scatter"`` (per-query
    times of each config against ``scatter_base``). ``rows`` maps point labels to table rows
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

    def points_for(self, scale: Scale) -> tuple:
        points = self.points_at.get(scale.name, self.points)
        return points if scale.max_points is None else points[:scale.max_points]

    def memory_cap_for(self, scale: Scale) -> int | None:
        return self.memory_cap_at.get(scale.name, self.memory_cap)

    def missing_engines(self) -> list[str]:
        registered = set(available_engines())
        return sorted({c.engine for c in self.configs} - registered)

    def jobs(self, scale: Scale) -> tuple[list[Job], dict[str, dict[str, int]]]:
        """The runner jobs at ``scale`` and the exact counts known per point (by query name)."""
        limit = self.time_limit_s if scale.time_limit_s is None else min(self.time_limit_s,
                                                                           scale.time_limit_s)
        jobs, known = [], {}
        for point in self.points_for(scale):
            data = point.dataset.load(scale)
            queries, counts = point.queries.build(data, point.dataset, scale)
            known[point.label] = counts
            for config in self.configs:
                options = tuple(sorted(dict(config.options + point.options).items()))
                jobs.append(Job(self.name, config.label, config.engine, point.label, data,
                                tuple(queries), options, time_limit_s=limit,
                                device_memory_limit=self.memory_cap_for(scale), repeats=self.repeats))
        return jobs, known

    def table(self, raw: pd.DataFrame, scale: Scale) -> pd.DataFrame:
        """The measured table: rows = point labels, columns = config labels."""
        groups: dict[str, list[str]] = {}
        for point in self.points_for(scale):
            groups.setdefault(self.rows.get(point.label, point.label), []).append(point.label)
        table = pd.DataFrame(index=list(groups), columns=[c.label for c in self.configs], dtype=float)
        for row, members in groups.items():
            here = raw[raw.dataset.isin(members)]
            base = here[here.config == self.metric.base] if self.metric.base else None
            for config in self.configs:
                table.loc[row, config.label] = self.metric.cell(here[here.config == config.label], base)
        return table


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
                   *, isolation: str = "process", progress: bool = True, command: str = "") -> Outcome:
    """Run (or resume) ``experiment`` at ``scale`` and write its reports under ``out_dir/<paper>/``."""
    from .report import write_reports

    scale = get_scale(scale) if isinstance(scale, str) else scale
    missing = experiment.missing_engines()
    if missing:
        raise MissingEngine(f"experiment {experiment.name} needs engine(s) {', '.join(missing)}, "
                            f"which are not built yet (registered: {', '.join(available_engines())})")
    folder = Path(out_dir) / experiment.paper
    jobs, known = experiment.jobs(scale)
    raw = run_jobs(jobs, folder / f"{experiment.name}.{scale.name}.csv", isolation=isolation,
                   progress=progress)
    raw = raw[raw.experiment == experiment.name]
    table = experiment.table(raw, scale)
    disagreements = check_counts(raw, known)
    files = write_reports(experiment, scale, raw, table, disagreements, folder, command=command)
    return Outcome(experiment, scale, raw, table, disagreements, files)
