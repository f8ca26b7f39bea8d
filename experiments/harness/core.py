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

import numpy as np
import pandas as pd

from common.engine.registry import available_engines

from . import verdicts
from .runner import (
    SKIPPED,
    Job,
    canonical_options,
    check_settings,
    config_key,
    drop_skipped,
    measurement_settings,
    run_jobs,
)
from .store import FolderLock
from .workloads import Dataset, QuerySpec, Scale, get_scale, graph_key, standin_size, standin_spec


class MissingEngine(RuntimeError):
    """An experiment needs an engine that is not built (registered) yet."""


@dataclass(frozen=True)
class Config:
    """One column: an engine (registry name) with constructor options, under a report label.

    ``optional``: the engine comes from an optional package (a CPU peer); where it is not
    registered the column is not run, yet it stays in the tables and claims, so reports are judged
    from their rows alone wherever they are read.
    """

    label: str
    engine: str
    options: tuple = ()
    optional: bool = False

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

    @property
    def timed(self) -> bool:
        """Whether the cells are times (per-query values that vary from run to run)."""
        return self.kind in ("avg_ms", "speedup") or (self.kind == "stat" and str(self.stat).endswith("_s"))

    def samples(self, rows: pd.DataFrame, base_rows: pd.DataFrame | None) -> dict:
        """Per query, the values of its runs in the cell's unit (:class:`Evidence`)."""
        if self.kind == "solved":
            return {q: np.array([float(s == "ok")]) for q, s in zip(rows["query"], rows["status"])}
        ran = rows[rows.status.isin(("ok", "timeout") if self.kind == "stat" and self.partial_runs else ("ok",))]
        if self.kind == "peak_mb":
            return {q: np.array([float(b) / 2**20]) for q, b in zip(ran["query"], ran["peak_device_bytes"])}
        if self.kind == "stat":
            values = pd.to_numeric(ran["stats"].map(lambda js: stat_value(js, self.stat)), errors="coerce")
            return {row["query"]: (_runs(row, float(v) * self.factor) if self.timed and row.status == "ok"
                                   else np.array([float(v) * self.factor]))
                    for (_, row), v in zip(ran.iterrows(), values) if not pd.isna(v)}
        mine = {row["query"]: _runs(row, t) for (_, row), t in zip(ran.iterrows(), self.times(ran))}
        if self.kind == "avg_ms":
            return {q: v * 1e3 for q, v in mine.items()}
        if self.kind == "speedup":
            base = base_rows[base_rows.status == "ok"]
            theirs = {row["query"]: _runs(row, t) for (_, row), t in zip(base.iterrows(), self.times(base))}
            return {q: np.outer(v, 1.0 / theirs[q]).ravel() for q, v in mine.items() if q in theirs}
        raise ValueError(f"unknown metric {self.kind!r}")

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
            values = pd.to_numeric(ran["stats"].map(lambda js: stat_value(js, self.stat)),
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


def stat_value(js: str, key: str):
    """One statistic from the JSON the runner stores in a row's ``stats`` column."""
    try:
        return json.loads(js).get(key) if isinstance(js, str) and js else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Claim:
    """A claim the paper makes about an experiment's table, and how the measurements judge it.

    ``check`` takes the :class:`Evidence` and returns (verdict, what was measured): ``held``,
    ``did not hold``, ``direction only``, ``inconclusive``, ``not testable (why)`` or ``measured``
    (a claim the run cannot contradict, shown without a verdict); the rules are
    :mod:`experiments.harness.verdicts`. Without a ``check`` the claim is not testable here and
    ``reason`` says why. :func:`lower`, :func:`higher`, :func:`below`, :func:`at_least`,
    :func:`trend`, :func:`row_lower` and :func:`measured` make the usual checks.
    """

    text: str
    check: object = None              # callable(Evidence) -> (verdict, measured)
    reason: str = ""

    def judge(self, evidence: "Evidence") -> tuple[str, str, str]:
        """(verdict, what was measured, why)."""
        if self.check is None:
            return "not testable", "", self.reason
        if isinstance(evidence, pd.DataFrame):
            evidence = Evidence(evidence)
        verdict, found = self.check(evidence)
        return verdict, found, self.reason

    def verdict(self, evidence: "Evidence") -> tuple[str, str]:
        """(verdict, why): :meth:`judge` without the measurement."""
        verdict, _, why = self.judge(evidence)
        return verdict, why


def _runs(row, value: float) -> np.ndarray:
    """``value`` (a phase or statistic of the row's median run) scaled run by run as the row's total time."""
    seconds = float(row["seconds"])
    return float(value) * run_values(row) / seconds if seconds > 0 else np.array([float(value)])


def run_values(row) -> np.ndarray:
    """A solved row's timed runs, in seconds: ``repeat_s`` when the runner recorded every run,
    else the fastest, median and slowest of ``repeat_min_s``/``repeat_max_s``, else the one value."""
    try:
        stats = json.loads(row["stats"]) if isinstance(row["stats"], str) and row["stats"] else {}
    except ValueError:
        stats = {}
    if isinstance(stats.get("repeat_s"), list) and stats["repeat_s"]:
        return np.asarray(stats["repeat_s"], dtype=float)
    if "repeat_min_s" in stats and "repeat_max_s" in stats:
        return np.array([stats["repeat_min_s"], float(row["seconds"]), stats["repeat_max_s"]], dtype=float)
    return np.array([float(row["seconds"])])


@dataclass
class Evidence:
    """What a claim is judged on: the table, and per cell its per-query samples.

    ``samples[(row, config)]`` maps a query to the values of its runs in the cell's unit (a time
    phase or timed statistic is scaled run by run as the query's total time); ``ran`` and
    ``unsupported`` count queries per cell; ``timed`` says whether the cells are times (whose
    comparisons need :data:`~experiments.harness.verdicts.MIN_RUNS` runs per query, except of the
    queries in ``cut``, whose runs filled their limit: :func:`experiments.harness.runner._answer`); ``keys``
    identifies what each row ran (its graphs and queries: :meth:`Experiment.point_key`).
    """

    table: pd.DataFrame
    samples: dict = field(default_factory=dict)
    ran: dict = field(default_factory=dict)
    unsupported: dict = field(default_factory=dict)
    timed: bool = False
    counts_solved: bool = False        # the cells are solved counts (samples: 1 solved, 0 not)
    keys: dict = field(default_factory=dict)
    cut: dict = field(default_factory=dict)    # per cell, queries whose repeats their limit cut short

    def side(self, row, column) -> dict:
        return self.samples.get((row, column), {})

    def rows(self, *columns, only=()) -> list:
        """Rows (``only``: of those) where every one of ``columns`` has a measured cell."""
        table = self.table
        if any(c not in table.columns for c in columns):
            return []
        rows = [r for r in table.index if not only or r in only]
        return [r for r in rows if all(not pd.isna(table.loc[r, c]) or self.ran.get((r, c), 0) for c in columns)]


def _gate(ev: Evidence, cells, paired: bool) -> str | None:
    """Why the cells cannot be compared (unsupported, too few solved or too few runs), or None."""
    for row, column in cells:
        if ev.unsupported.get((row, column)) and ev.unsupported[(row, column)] == ev.ran.get((row, column)):
            return verdicts.not_testable(f"{column} cannot take these queries: unsupported")
    sides = [ev.side(r, c) for r, c in cells]
    sizes = [len(s) for s in sides]
    if paired and not ev.counts_solved:
        both = len(set.intersection(*(set(s) for s in sides)))
        if both < verdicts.MIN_SOLVED:
            return verdicts.not_testable(f"{both} solved by both")
        sizes = [both] * len(sides)
    if ev.counts_solved:
        if not any(sum(float(v[0]) for v in s.values()) for s in sides):
            return verdicts.not_testable("0 solved")
        return (verdicts.not_testable(" + ".join(map(str, sizes)) + " ran")
                if min(sizes) < verdicts.MIN_SOLVED else None)
    gate = verdicts.too_few(*sizes)
    if gate:
        return gate
    if ev.timed:                           # queries whose repeats did not fit their limit aside
        runs = min((len(v) for cell, s in zip(cells, sides) for q, v in s.items()
                    if q not in ev.cut.get(cell, ())), default=verdicts.MIN_RUNS)
        if verdicts.too_few_runs(runs):
            return f"{verdicts.INCONCLUSIVE} ({runs} timed run(s) per query; {verdicts.MIN_RUNS} needed)"
    return None


def _compare_cells(ev: Evidence, a, b=None, value=None):
    """(Comparison, None) of cell ``a`` against cell ``b`` (or ``value``), or (None, why not)."""
    paired = b is not None and a[0] == b[0]
    gate = _gate(ev, [a] + ([b] if b is not None else []), paired)
    if gate:
        return None, gate
    sa = ev.side(*a)
    if b is None:
        return verdicts.compare(list(sa.values()), value=value), None
    sb = ev.side(*b)
    if paired:
        common = sorted(set(sa) & set(sb))
        return verdicts.compare([sa[q] for q in common], [sb[q] for q in common], paired=True), None
    return verdicts.compare(list(sa.values()), list(sb.values())), None


def _cell_text(ev: Evidence, cell) -> str:
    """A cell's value with its queries (and runs), e.g. ``1.24 (20 queries x 3 runs)``."""
    side = ev.side(*cell)
    if ev.counts_solved:
        return f"{int(sum(float(v[0]) for v in side.values()))}/{len(side)} solved"
    runs = min((len(v) for v in side.values()), default=0)
    return f"{ev.table.loc[cell]:.3g} ({len(side)} queries x {runs} run{'s' if runs != 1 else ''})"


def _factor_text(c) -> str:
    return f"{c.ratio:.3g}x [{c.low:.3g}, {c.high:.3g}], {c.n} queries"


def _outcome(comparison, want: str) -> str:
    if comparison.outcome == "inconclusive":
        return verdicts.INCONCLUSIVE
    return verdicts.HELD if comparison.outcome == want else verdicts.NOT_HELD


def _judge_rows(ev: Evidence, parts, factor=None, invert=False) -> tuple[str, str]:
    """Judge ``parts`` [(label, cell a, cell b or None, value, wanted outcome)]; all must hold.

    A part that cannot be compared is left out (its reason shown); a claim none of whose parts
    can be compared takes the first reason. ``factor``: the printed factor, judged on the mean of
    the parts' measured ratios (``invert``: b / a) once every part held.
    """
    outcomes, texts, gates, ratios, few_runs = [], [], [], [], []
    for label, a, b, value, want in parts:
        comparison, gate = _compare_cells(ev, a, b, value)
        if gate and gate.startswith(verdicts.INCONCLUSIVE):       # too few runs: judged, inconclusive
            outcomes.append(verdicts.INCONCLUSIVE)
            few_runs.append(gate)
            texts.append(f"{label}: {_cell_text(ev, a)}" + (f" against {_cell_text(ev, b)}" if b else ""))
            continue
        if gate:
            gates.append(gate)
            texts.append(f"{label}: {gate}")
            continue
        outcomes.append(_outcome(comparison, want))
        texts.append(f"{label}: " + (f"{_cell_text(ev, a)} against {_cell_text(ev, b)}" if ev.counts_solved
                                     else _factor_text(comparison)))
        if invert and factor is not None and b is not None and comparison.ratio > 0 and not ev.counts_solved:
            texts[-1] += f" ({b[1]} / {a[1]}: {1 / comparison.ratio:.3g}x)"
        ratios.append(1 / comparison.ratio if invert else comparison.ratio)
    if not outcomes:
        return (gates[0] if gates else verdicts.not_testable("the cells it compares were not measured")), \
            "; ".join(texts)
    verdict = verdicts.combine(outcomes)
    if verdict == verdicts.INCONCLUSIVE and few_runs:
        verdict = few_runs[0]
    if factor is not None and verdict == verdicts.HELD:
        verdict = verdicts.judge_magnitude(float(np.mean(ratios)), factor)
    return verdict, "; ".join(texts)


def lower(a: str, b: str, rows: tuple = (), factor=None):
    """Check: column ``a`` is below column ``b`` beyond the spread in every row where both were
    measured (``rows``: only those); ``factor``: the printed b / a (a number or a range)."""
    def check(ev):
        parts = [(str(r), (r, a), (r, b), None, "lower") for r in ev.rows(a, b, only=rows)]
        return _judge_rows(ev, parts, factor, invert=True)
    return check


def higher(a: str, b: str, rows: tuple = (), factor=None, pooled: bool = False):
    """Check: column ``a`` is above column ``b`` in every measured row (``pooled``: over the rows'
    queries taken together); ``factor``: the printed a / b."""
    def check(ev):
        if pooled:
            ev = _pool(ev, ev.rows(a, b, only=rows), (a, b))
        parts = [(str(r), (r, a), (r, b), None, "higher") for r in ev.rows(a, b, only=rows if not pooled else ())]
        return _judge_rows(ev, parts, factor)
    return check


def not_lower(a: str, b: str):
    """Check: column ``a`` is not below column ``b`` beyond the spread in any measured row (at
    least as many, as fast): ``did not hold`` only where it is."""
    def check(ev):
        verdict, text = lower(a, b)(ev)
        if verdict.startswith("not testable"):
            return verdict, text
        return (verdicts.NOT_HELD if verdict in (verdicts.HELD, verdicts.DIRECTION) else verdicts.HELD), text
    return check


def _pool(ev: Evidence, rows, columns) -> Evidence:
    """``ev`` with ``rows`` pooled into one row ``all rows`` (queries named by row)."""
    pooled = Evidence(pd.DataFrame({c: [ev.table.loc[rows, c].sum() if rows else np.nan] for c in columns},
                                   index=["all rows"]), timed=ev.timed, counts_solved=ev.counts_solved)
    for c in columns:
        cell = ("all rows", c)
        pooled.samples[cell] = {f"{r}/{q}": v for r in rows for q, v in ev.side(r, c).items()}
        pooled.ran[cell] = sum(ev.ran.get((r, c), 0) for r in rows)
        pooled.unsupported[cell] = sum(ev.unsupported.get((r, c), 0) for r in rows)
        pooled.cut[cell] = {f"{r}/{q}" for r in rows for q in ev.cut.get((r, c), ())}
    return pooled


def below(column: str, value: float):
    """Check: every measured cell of ``column`` is below ``value`` beyond the spread."""
    def check(ev):
        return _judge_rows(ev, [(str(r), (r, column), None, value, "lower") for r in ev.rows(column)])
    return check


def at_least(column: str, value: float = 1.0, rows: tuple = (), factor=None):
    """Check: ``column``'s cells (ratios; ``rows``: only those) are above ``value`` beyond the spread;
    ``factor``: the printed ratio, judged on the mean of the measured ones."""
    def check(ev):
        parts = [(str(r), (r, column), None, value, "higher") for r in ev.rows(column, only=rows)]
        return _judge_rows(ev, parts, factor)
    return check


def trend(column: str, direction: str):
    """Check: ``column`` rises (``"up"``) or falls (``"down"``) from its first to its last measured
    row beyond the spread; not testable when those two rows ran the same graph and queries."""
    if direction not in ("up", "down"):
        raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")

    def check(ev):
        rows = ev.rows(column)
        if len(rows) < 2:
            return verdicts.not_testable("fewer than two sweep points measured"), ""
        first, last = rows[0], rows[-1]
        same = [f"{x} = {y}" for x, y in zip(rows, rows[1:]) if _same(ev, x, y)]
        note = f"; identical points (same graph and queries): {', '.join(same)}" if same else ""
        if _same(ev, first, last):
            return verdicts.not_testable(f"{first} and {last} ran the same graph and queries"), note[2:]
        verdict, text = _judge_rows(ev, [(f"{last} / {first}", (last, column), (first, column), None,
                                          "higher" if direction == "up" else "lower")])
        return verdict, text + note
    return check


def _same(ev: Evidence, x, y) -> bool:
    return x in ev.keys and ev.keys.get(x) == ev.keys.get(y)


def row_lower(column: str, row_a: str, row_b: str):
    """Check: in ``column``, row ``row_a`` is below row ``row_b`` beyond the spread."""
    def check(ev):
        if not {row_a, row_b} <= set(ev.rows(column)):
            return verdicts.not_testable("the cells it compares were not measured"), ""
        if _same(ev, row_a, row_b):
            return verdicts.not_testable(f"{row_a} and {row_b} ran the same graph and queries"), ""
        return _judge_rows(ev, [(f"{row_a} / {row_b}", (row_a, column), (row_b, column), None, "lower")])
    return check


def all_of(*checks):
    """Check: every one of ``checks`` holds (:func:`~experiments.harness.verdicts.combine`)."""
    def check(ev):
        found = [c(ev) for c in checks]
        judged = [v for v, _ in found if not v.startswith("not testable")]
        verdict = verdicts.combine(judged) if judged else found[0][0]
        return verdict, "; ".join(t for _, t in found if t)
    return check


def measured(*columns):
    """No check: a claim the measurement cannot contradict (it holds by construction here), whose
    cells are shown without a verdict."""
    def check(ev):
        cells = [f"{r}: " + " / ".join(f"{ev.table.loc[r, c]:.3g}" for c in columns)
                 for r in ev.rows(*columns)]
        return verdicts.MEASURED, f"{' / '.join(columns)}: " + ("; ".join(cells) or "nothing measured")
    return check


@dataclass(frozen=True)
class ColumnCut:
    """At one scale, what is cut from some columns (config labels), and ``why``: they run on the
    ``datasets`` named only (None: on every one; empty: on none; their other cells read ``not run
    at this scale``), and ``repeats`` timed runs a query where it is set."""

    configs: tuple
    why: str
    datasets: tuple | None = None
    repeats: int | None = None


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
    point is a row. ``column_cuts_at`` maps a scale name to :class:`ColumnCut` records: columns
    that run on some datasets only at that scale.
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
    column_cuts_at: dict = field(default_factory=dict)  # scale name -> tuple of ColumnCut

    def runs_at(self, scale: Scale) -> bool:
        """Whether this experiment runs at ``scale``: always, except at a scale that experiments opt
        in to (``large``: the headline experiments, which set it in ``scale_at``)."""
        return not scale.opt_in or scale.name in self.scale_at

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

    def repeats_for(self, scale: Scale, config_label: str | None = None) -> int:
        """Timed runs per query at ``scale``: the scale's (as this experiment overrides it), else its own
        (a time comparison with fewer than :data:`~experiments.harness.verdicts.MIN_RUNS` is
        inconclusive); a column's own where ``column_cuts_at`` sets it."""
        for cut in self.column_cuts_at.get(scale.name, ()):
            if config_label in cut.configs and cut.repeats is not None:
                return int(cut.repeats)
        repeats = self.scale_for(scale).repeats
        return self.repeats if repeats is None else int(repeats)

    def memory_cap_for(self, scale: Scale) -> int | None:
        return self.memory_cap_at.get(scale.name, self.memory_cap)

    def missing_engines(self) -> list[str]:
        """Engines of required configs that are not registered here (the experiment cannot run)."""
        registered = set(available_engines())
        return sorted({c.engine for c in self.configs if not c.optional} - registered)

    def configs_run(self) -> tuple:
        """The configs that run here: all but optional ones whose engine is not registered."""
        registered = set(available_engines())
        return tuple(c for c in self.configs if not c.optional or c.engine in registered)

    def runs_cell(self, config_label: str, point: Point, scale: Scale) -> bool:
        """Whether the column ``config_label`` runs at ``point`` at ``scale`` (``column_cuts_at``)."""
        return not any(config_label in cut.configs and cut.datasets is not None
                       and point.dataset.name not in cut.datasets
                       for cut in self.column_cuts_at.get(scale.name, ()))

    def cells_run(self, scale: Scale) -> list[tuple[Point, Config]]:
        """The (point, config) cells that run here at ``scale``, points first."""
        return [(point, config) for point in self.points_for(scale) for config in self.configs_run()
                if self.runs_cell(config.label, point, scale)]

    def cut_cells(self, scale: Scale) -> set[tuple[str, str]]:
        """(point label, config label) of the cells ``column_cuts_at`` leaves out at ``scale``."""
        return {(p.label, c.label) for p in self.points_for(scale) for c in self.configs
                if not self.runs_cell(c.label, p, scale)}

    def cut_table(self, scale: Scale) -> pd.DataFrame:
        """Per table cell (row group x column), whether ``column_cuts_at`` leaves out all its points."""
        cut = self.cut_cells(scale)
        groups = self.row_groups(scale)
        return pd.DataFrame([[all((m, c.label) in cut for m in members) for c in self.configs]
                             for members in groups.values()],
                            index=list(groups), columns=[c.label for c in self.configs], dtype=bool)

    def jobs(self, scale: Scale) -> tuple[list[Job], dict[str, dict[str, int]]]:
        """The runner jobs at ``scale`` and the exact counts known per point (by query name)."""
        scale = self.scale_for(scale)
        jobs, known = [], {}
        for point in self.points_for(scale):
            data = point.dataset.load(scale)
            queries, counts = point.queries.build(data, point.dataset, scale)
            known[point.label] = counts
            for config in self.configs_run():
                if not self.runs_cell(config.label, point, scale):
                    continue
                options = tuple(sorted(dict(config.options + point.options).items()))
                jobs.append(Job(self.name, config.label, config.engine, point.label, data, tuple(queries), options,
                                **self.measured_under(scale, config.label), run_key=self.run_key(config, point, scale)))
        return jobs, known

    def job_for(self, config_label: str, point_label: str, scale: Scale) -> tuple[Job, dict[str, int]]:
        """The runner job of one cell (config x point) at ``scale`` and the exact counts known for
        its queries: what one Dask task runs (:mod:`experiments.harness.cells`)."""
        configs = {c.label: c for c in self.configs}
        points = {p.label: p for p in self.points_for(scale)}
        if (config_label not in configs or point_label not in points
                or not self.runs_cell(config_label, points[point_label], scale)):
            raise ValueError(f"{self.name} at scale {scale.name} has no cell ({config_label!r}, {point_label!r})")
        config, point = configs[config_label], points[point_label]
        here = self.scale_for(scale)
        data = point.dataset.load(here)
        queries, counts = point.queries.build(data, point.dataset, here)
        options = tuple(sorted(dict(config.options + point.options).items()))
        job = Job(self.name, config.label, config.engine, point.label, data, tuple(queries), options,
                  **self.measured_under(scale, config.label), run_key=self.run_key(config, point, scale))
        return job, counts

    def run_key(self, config: Config, point: Point, scale: Scale) -> tuple:
        """What makes a (config, point) job's runs identical to another experiment's (runner docstring)."""
        scale = self.scale_for(scale)
        options = canonical_options(config.engine, config.options + point.options)
        return (config.engine, options, repr(point.dataset), scale.max_edges, scale.real_data, scale.keep_degree,
                repr(replace(point.queries, count=0)), scale.max_query_vertices,
                self.time_limit_for(scale), self.memory_cap_for(scale), self.repeats_for(scale, config.label),
                scale.repeats_share_limit)

    def measured_under(self, scale: Scale, config_label: str | None = None) -> dict:
        """The :class:`Job` fields the cells of this experiment (of column ``config_label``) are
        measured under at ``scale``."""
        return {"time_limit_s": self.time_limit_for(scale), "device_memory_limit": self.memory_cap_for(scale),
                "repeats": self.repeats_for(scale, config_label),
                "share_limit": self.scale_for(scale).repeats_share_limit}

    def settings(self, config: Config, point: Point, scale: Scale) -> dict:
        """What a (config, point) cell's rows are measured under at ``scale`` (:attr:`Job.settings`,
        without building the job's graph)."""
        under = self.measured_under(scale, config.label)
        return measurement_settings(config.engine, config.options + point.options, under["time_limit_s"],
                                    under["device_memory_limit"], under["repeats"], under["share_limit"])

    def check_settings(self, scale: Scale, out_dir: Path | str, rerun_changed: bool = False) -> int:
        """Check that the rows already in this experiment's CSV under ``out_dir`` were measured under
        this run's settings (:func:`experiments.harness.runner.check_settings`: raises
        :class:`~experiments.harness.runner.SettingsChanged`, or with ``rerun_changed`` sets them
        aside); the file is made whole first. Returns the number of rows set aside."""
        path = Path(out_dir) / self.paper / f"{self.name}.{scale.name}.csv"
        if not path.exists():
            return 0
        drop_skipped(path)
        expected = {(self.name, config.label, point.label): self.settings(config, point, scale)
                    for point, config in self.cells_run(scale)}
        return check_settings(path, expected, rerun_changed)

    def point_key(self, point: Point, scale: Scale) -> tuple:
        """What identifies the runs of ``point`` at ``scale``: the graph actually run, the queries
        actually built and the point's engine options (two points with equal keys ran the same)."""
        here = self.scale_for(scale)
        return (graph_key(point.dataset, here), point.queries.key(here), point.options)

    def evidence(self, raw: pd.DataFrame, scale: Scale, table: pd.DataFrame | None = None) -> Evidence:
        """The :class:`Evidence` of the raw rows: the table and per cell its per-query samples."""
        table = self.table(raw, scale) if table is None else table
        points = {p.label: p for p in self.points_for(scale)}
        evidence = Evidence(table, timed=self.metric.timed, counts_solved=self.metric.kind == "solved")
        for row, members in self.row_groups(scale).items():
            evidence.keys[row] = tuple(self.point_key(points[m], scale) for m in members)
            here = raw[raw.dataset.isin(members) & (raw.status != SKIPPED)]
            if len(members) > 1:                          # pooled points: one query name per point
                here = here.assign(query=here["dataset"].astype(str) + "/" + here["query"].astype(str))
            base = here[here.config == self.metric.base] if self.metric.base else None
            for config in self.configs:
                mine = here[here.config == config.label]
                cell = (row, config.label)
                evidence.ran[cell] = len(mine)
                evidence.unsupported[cell] = int((mine.status == "unsupported").sum())
                evidence.cut[cell] = {q for q, js in zip(mine["query"], mine["stats"]) if stat_value(js, "repeats_cut")}
                if len(mine):
                    evidence.samples[cell] = self.metric.samples(mine, base)
        return evidence

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
        for cut in self.column_cuts_at.get(scale.name, ()):
            what = [] if cut.datasets is None else [f"on {', '.join(cut.datasets)} only" if cut.datasets
                                                    else "not at all"]
            what += [] if cut.repeats is None else [f"{cut.repeats} timed run{'s' * (cut.repeats != 1)} a query"]
            parts.append(f"{', '.join(cut.configs)}: {', '.join(what)} ({cut.why})")
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
                   deadline: float | None = None, worker=None, shared: dict | None = None,
                   rerun_changed: bool = False) -> Outcome:
    """Run (or resume) ``experiment`` at ``scale`` and write its reports under ``out_dir/<paper>/``.

    ``deadline``, ``worker``, ``shared`` and ``rerun_changed`` go to
    :func:`experiments.harness.runner.run_jobs` (budget, a worker, the rows of identical runs shared
    by a set's experiments, and what to do with rows measured under other settings).
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
                       progress=progress, deadline=deadline, worker=worker, shared=shared,
                       rerun_changed=rerun_changed)
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

    ``query_s`` = runs x repeats x limit, or runs x limit where the scale's repeats share the
    limit (:attr:`~experiments.harness.workloads.Scale.repeats_share_limit`); ``warmup_s`` = one
    untimed query (the runner's warm-up) per configuration (:func:`runner.canonical_options`) and
    query-set shape that no earlier experiment of the same worker ran, for an engine that a warm-up
    helps (:attr:`~common.engine.base.Engine.warm_up_helps`); ``compile_s`` =
    :data:`COMPILE_ALLOWANCE_S` per compiled variant (:func:`runner.config_key`: run-time options
    aside) not compiled before. Building and preparing a job's data graph and a worker restart
    after a hard kill (which compiles again) are not counted. ``start_up_s``: what an engine that
    runs beside its limit by design (an external binary's process) says it takes per run on the
    point's data graph (:meth:`~common.engine.base.Engine.planned_start_up_s`), over its start-up
    probe (one per data graph: :func:`experiments.papers.authors.graph_inputs`), its warm-up if it
    has one and every timed run (one per query where it ``repeats_in_one_call``); ``not_estimated``: the
    engines that cannot say, whose start-up the line leaves out.
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
    start_up_s: float = 0.0
    not_estimated: tuple = ()

    @property
    def worst_s(self) -> float:
        return self.query_s + self.warmup_s + self.compile_s + self.start_up_s


def plan(experiments, scale: str | Scale) -> list[PlanLine]:
    """Worst-case lines for ``experiments`` run in this order by one worker (:class:`PlanLine`).

    A run that an earlier experiment already made (same ``run_key``, same query) costs nothing;
    ``runs`` counts the runs actually made. Only query files are read; no data graph is built.
    """
    from common.engine.registry import engine_class

    scale = get_scale(scale) if isinstance(scale, str) else scale
    compiled, warmed, done, probed = set(), set(), set(), set()
    lines = []
    for experiment in at_scale(experiments, scale):
        here = experiment.scale_for(scale)
        limit = experiment.time_limit_for(scale)
        jobs = runs = 0
        query_s = 0.0
        start_up, not_estimated = 0.0, set()
        new_compiles, new_warmups = set(), set()
        missing = tuple(experiment.missing_engines())
        for point, config in experiment.cells_run(scale):
            queries = point.queries.count_at(here)
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
            repeats = experiment.repeats_for(scale, config.label)
            query_s += len(fresh) * (limit if here.repeats_share_limit else repeats * limit)   # runner._answer
            warms = True                    # an engine not here: as one that warms up
            if fresh and config.engine not in missing:
                cls = engine_class(config.engine)
                warms = cls.warm_up_helps
                per_run = cls.planned_start_up_s(standin_size(point.dataset, here.max_edges, here.keep_degree)[1])
                if per_run is None:
                    not_estimated.add(config.engine)
                elif per_run:               # a probe per data graph, a warm-up where it helps, the timed runs
                    probe = (config.engine, point.dataset.name) not in probed
                    probed.add((config.engine, point.dataset.name))
                    start_up += per_run * (probe + warms + len(fresh) * (1 if cls.repeats_in_one_call else repeats))
            if fresh:
                # the runner warms up once per query size: a query set's shape stands for it
                spec = point.queries
                shaped = (*warm_key, spec.kind, spec.size, spec.sizes, spec.names)
                new_compiles |= {compile_key} - compiled
                new_warmups |= ({shaped} - warmed) if warms else set()
        compiled |= new_compiles
        warmed |= new_warmups
        lines.append(PlanLine(experiment.name, jobs, runs, limit, experiment.repeats_for(scale),
                              query_s=query_s,
                              warmup_s=len(new_warmups) * limit,
                              compile_s=len(new_compiles) * COMPILE_ALLOWANCE_S, missing=missing,
                              start_up_s=start_up, not_estimated=tuple(sorted(not_estimated))))
    return lines


def at_scale(experiments, scale: Scale) -> list:
    """The ``experiments`` that run at ``scale`` (:meth:`Experiment.runs_at`)."""
    return [e for e in experiments if e.runs_at(scale)]


def standin_specs(selection: dict, scale: str | Scale) -> list[tuple]:
    """The disk-cached stand-ins (:func:`~experiments.harness.workloads.standin_spec`) a run of
    ``selection`` (paper -> experiment names, None: all) loads at ``scale``, in the order it loads
    them: what :class:`~experiments.harness.workloads.StandinPrefetch` draws ahead."""
    from .catalog import experiments_of

    scale = get_scale(scale) if isinstance(scale, str) else scale
    specs = []
    for paper, names in selection.items():
        for experiment in at_scale([e for e in experiments_of(paper) if names is None or e.name in names], scale):
            here = experiment.scale_for(scale)
            for point in dict.fromkeys(point for point, _ in experiment.cells_run(scale)):
                specs.append(standin_spec(point.dataset, here))
    return [spec for spec in dict.fromkeys(specs) if spec is not None]


def plan_set(paper: str, scale: str | Scale) -> list[PlanLine]:
    """The worst case of a paper's whole set, run by one worker (as :func:`run_set` does)."""
    from .catalog import experiments_of

    return plan(experiments_of(paper), scale)


def assign_gpus(worst_s: dict[str, float], gpus: list[str]) -> dict[str, list[str]]:
    """Sets per GPU (a GPU's sets run one after the other), minimising the largest GPU total.

    Every assignment is tried (6 sets on 4 GPUs: 4,096); ties go to the smaller sum of squared
    GPU totals, then to the first found (sets in registration order, GPUs in the order given), so
    the assignment is fixed for a given plan. Every set lands on exactly one GPU.
    """
    from itertools import product

    from .catalog import papers

    if not gpus:
        raise ValueError("no GPUs given")
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"GPU listed twice in {gpus}")
    order = {paper: i for i, paper in enumerate(papers())}
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
             f"{'warm-up':>8s} {'compile':>8s} {'start-up':>8s} {'worst s':>8s}"
    out = [f"{paper}:", header]
    for line in lines:
        notes = [f"needs {', '.join(line.missing)}: not built"] if line.missing else []
        if line.not_estimated:
            notes.append(f"start-up of {', '.join(line.not_estimated)} not estimated")
        note = f"  ({'; '.join(notes)})" if notes else ""
        out.append(f"{line.experiment:40s} {line.jobs:5d} {line.runs:5d} {line.limit_s:6g} "
                   f"{line.query_s:8.1f} {line.warmup_s:8.1f} {line.compile_s:8.0f} {line.start_up_s:8.1f} "
                   f"{line.worst_s:8.1f}{note}")
    out.append(f"{'total':40s} {sum(p.jobs for p in lines):5d} {sum(p.runs for p in lines):5d} {'':6s} "
               f"{sum(p.query_s for p in lines):8.1f} {sum(p.warmup_s for p in lines):8.1f} "
               f"{sum(p.compile_s for p in lines):8.0f} {sum(p.start_up_s for p in lines):8.1f} "
               f"{sum(p.worst_s for p in lines):8.1f}")
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
            started: float | None = None, resumed: bool | None = None,
            rerun_changed: bool = False) -> SetOutcome:
    """Run (or resume) a paper's experiments (or ``names`` of them) in one worker process.

    ``experiments`` replaces the paper's declared ones (a set built elsewhere). Runs identical
    to an earlier experiment's are copied (runner docstring). With ``budget_s``, pairs not
    started within that many seconds of wall time become ``skipped`` rows. Writes
    ``out_dir/<paper>/run.<scale>.json`` (:func:`report.write_run_metadata`), whose wall time counts
    from ``started`` (a ``time.monotonic()`` value: where the caller's run began, such as the Dask
    phase that computed the rows) or from this call. The folder is locked for the run: a second run
    into it raises :class:`experiments.harness.store.FolderLocked`. ``resumed``: whether the run
    found rows of an earlier call (default: whether a results file of the chosen experiments exists
    at the start); a resumed run's ``run.<scale>.json`` adds its wall time to the earlier calls'.
    Before anything runs, every chosen experiment's rows are checked against this run's settings
    (:meth:`Experiment.check_settings`): rows measured under others raise
    :class:`~experiments.harness.runner.SettingsChanged`, or with ``rerun_changed`` run again.
    """
    from .catalog import experiments_of
    from .report import write_run_metadata
    from .runner import make_worker

    scale = get_scale(scale) if isinstance(scale, str) else scale
    declared = experiments_of(paper) if experiments is None else list(experiments)
    chosen = at_scale([e for e in declared if names is None or e.name in names], scale)
    lock = FolderLock(Path(out_dir) / paper, command).acquire()   # before any work: FolderLocked
    start = time.monotonic() if started is None else started
    if resumed is None:
        resumed = any((Path(out_dir) / paper / f"{e.name}.{scale.name}.csv").exists() for e in chosen)
    deadline = None if budget_s is None else time.monotonic() + budget_s
    worker = make_worker(isolation)
    shared: dict = {}
    outcomes, missing = [], {}
    try:
        for experiment in chosen:              # before any query: a mixed table is refused up front
            if not experiment.missing_engines():
                experiment.check_settings(scale, out_dir, rerun_changed)
        for experiment in chosen:
            log(f"[{time.monotonic() - start:7.1f} s] {experiment.name}")
            try:
                outcomes.append(run_experiment(experiment, scale, out_dir, isolation=isolation,
                                               progress=progress, command=command,
                                               deadline=deadline, worker=worker, shared=shared,
                                               rerun_changed=rerun_changed))
            except MissingEngine as exc:
                missing[experiment.name] = str(exc)
                log(f"  {exc}")
        result = SetOutcome(paper, outcomes, missing, time.monotonic() - start)
        write_run_metadata(result, scale, Path(out_dir) / paper, command=command, budget_s=budget_s,
                           worst_s=sum(line.worst_s for line in plan(chosen, scale)), resumed=resumed)
    finally:
        worker.stop()
        lock.release()
    log(f"[{result.seconds:7.1f} s] {paper} done")
    return result
