"""Reports of one experiment run: a markdown table with the paper's value beside every measured
cell, and a matplotlib PNG for figures (bars, lines, or per-query scatter; :func:`draw_figure`).

The raw per-query rows are the runner's CSV (``<name>.<scale>.csv``) in the same folder. Every
report's header names the GPU, the scale, the command, the date and the package versions;
:func:`write_run_metadata` puts the same in ``run.<scale>.json`` beside them for a whole set.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from .runner import SKIPPED
from .store import write_atomic

METRIC_UNITS = {"avg_ms": "average ms over solved queries", "solved": "solved queries",
                "speedup": "per-query time ratio", "stat": "mean over the queries that ran",
                "peak_mb": "peak device memory (MiB), mean over solved queries"}
PACKAGES = ("gpusm", "numba", "numba-cuda", "numpy", "pandas")


@lru_cache(maxsize=1)
def gpu_name() -> str:
    """The device the engines run on: the CUDA device's name, or ``CUDA simulator``."""
    from common.gpu.runtime import cuda, simulator_active

    if simulator_active():
        return "CUDA simulator"
    if not cuda.is_available():
        return "no CUDA GPU"
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def versions() -> dict[str, str]:
    """Python's and the packages' versions (``not installed`` where one is missing)."""
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


@lru_cache(maxsize=1)
def commit() -> str:
    """The checkout's commit (short hash, ``+dirty`` with uncommitted changes other than executed
    notebooks), or ``unknown``;
    ``$GPUSM_COMMIT`` names it for a tree exported without its git history (a GPU host's copy)."""
    if os.environ.get("GPUSM_COMMIT"):
        return os.environ["GPUSM_COMMIT"]
    return checkout_commit(Path(__file__).resolve().parents[2])


def checkout_commit(root: Path) -> str:
    """:func:`commit` of the tree at ``root``: ``unknown`` unless ``root`` is the top of its own git
    checkout (an export unpacked inside another repository would name that repository's HEAD)."""
    import subprocess

    def git(*args) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != Path(root).resolve():
            return "unknown"
        head = git("rev-parse", "--short", "HEAD")
        # notebooks only display results/: re-executing one (make notebooks, the README's nbconvert)
        # changes no code that produced a measurement, so it does not make the tree dirty
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)notebooks/*.ipynb")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+dirty" if dirty else head


def run_context(scale, command: str) -> dict:
    """What every output states about its run: GPU, commit, scale, command, date (UTC), versions.

    The GPU is this process's, or the Dask workers' (``experiments.harness.cells.GPU_ENV``)."""
    from .cells import GPU_ENV

    context = {"gpu": os.environ.get(GPU_ENV) or gpu_name(), "commit": commit(), "scale": scale.name,
               "command": command or "n/a",
               "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
               "versions": versions()}
    if os.environ.get(LAUNCHER_ENV):
        context["launched_by"] = os.environ[LAUNCHER_ENV]
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        context["cuda_visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return context


LAUNCHER_ENV = "GPUSM_LAUNCHED_BY"
"""Environment variable in which the parallel launcher passes its own command to each set."""


CUT_TEXT = "not run at this scale"
"""A cell that the scale leaves out (the report's cut line says why)."""


def format_cell(value) -> str:
    """A measured or printed number as the reports show it (thousands separators, 3 significant digits)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    value = float(value)
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def side_by_side(measured: pd.DataFrame, paper: pd.DataFrame | None,
                 not_run: pd.DataFrame | None = None, cut: pd.DataFrame | None = None) -> pd.DataFrame:
    """Cells as ``measured (paper: X)``; the paper's value is omitted where it printed none.

    A cell with skipped queries (``not_run`` > 0) reads ``not run (k skipped: budget)``, never a
    number; a cell the scale leaves out (``cut``: :meth:`~experiments.harness.core.Experiment.cut_table`)
    reads ``not run at this scale``.
    """
    cells = measured.map(format_cell)
    if not_run is not None:
        for row in cells.index:
            for col in cells.columns:
                if not_run.loc[row, col]:
                    cells.loc[row, col] = f"not run ({int(not_run.loc[row, col])} skipped: budget)"
    if cut is not None:
        for row in cells.index:
            for col in cells.columns:
                if cut.loc[row, col]:
                    cells.loc[row, col] = CUT_TEXT
    if paper is None:
        return cells
    for row in cells.index:
        for col in cells.columns:
            if row in paper.index and col in paper.columns and not pd.isna(paper.loc[row, col]):
                cells.loc[row, col] = f"{cells.loc[row, col]} (paper: {format_cell(paper.loc[row, col])})"
    return cells


def _markdown(frame: pd.DataFrame) -> str:
    header = "| | " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|---" * (len(frame.columns) + 1) + "|"
    body = ["| " + str(idx) + " | " + " | ".join(map(str, row)) + " |" for idx, row in frame.iterrows()]
    return "\n".join([header, rule, *body])


def _solved_table(experiment, raw: pd.DataFrame, scale) -> pd.DataFrame:
    """``solved/ran`` per cell, with the timed-out runs a stat cell counts and the pairs not run."""
    counts_timeouts = experiment.metric.kind == "stat" and experiment.metric.partial_runs
    groups: dict[str, list[str]] = {}
    for point in experiment.points_for(scale):
        groups.setdefault(experiment.rows.get(point.label, point.label), []).append(point.label)
    table = pd.DataFrame(index=list(groups), columns=[c.label for c in experiment.configs], dtype=object)
    cut = experiment.cut_table(scale)
    for row, members in groups.items():
        for config in experiment.configs:
            if cut.loc[row, config.label]:
                table.loc[row, config.label] = CUT_TEXT
                continue
            rows = raw[raw.dataset.isin(members) & (raw.config == config.label)]
            skipped = int((rows.status == SKIPPED).sum())
            timed_out = int((rows.status == "timeout").sum()) if counts_timeouts else 0
            ran = len(rows) - skipped
            table.loc[row, config.label] = (f"{int((rows.status == 'ok').sum())}/{ran}"
                                            + (f" (+{timed_out} timed out, in the stat)" if timed_out else "")
                                            + (f" ({skipped} not run)" if skipped else ""))
    return table


#: the statuses of a query a configuration did not answer for a reason other than time
FAILED = ("error", "unsupported")


def failure_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and status of :data:`FAILED`: how many queries, and the first one's
    reason (its first line), so a system that crashed or refuses a query is named with its error."""
    failed = raw[raw.status.isin(FAILED)]
    rows = []
    for (config, status), group in failed.groupby(["config", "status"], sort=False):
        first = group.iloc[0]
        reason = str(first.get("reason", "") or "").strip().splitlines()
        rows.append({"configuration": config, "status": status, "queries": len(group),
                     "first": f"{first.dataset}: {first.query}",
                     "reason": _cell(reason[0][:240]) if reason else "(none recorded)"})
    return pd.DataFrame(rows, columns=["configuration", "status", "queries", "first", "reason"])


def write_markdown(experiment, scale, raw, table, disagreements, path: Path, command: str = "") -> Path:
    context = run_context(scale, command)
    here = experiment.scale_for(scale)
    datasets = sorted({str(p.dataset.load(here).name) for p in experiment.points_for(scale)})
    stand_ins = [d for d in datasets if "stand-in" in d]
    limit = experiment.time_limit_for(scale)
    not_run = experiment.not_run(raw, scale)
    skipped = int((raw.status == SKIPPED).sum())
    lines = [f"# {experiment.paper}: {experiment.title} ({experiment.name})", "",
             f"- GPU: {context['gpu']}; commit: `{context['commit']}`; scale: `{scale.name}`; "
             f"date: {context['date']}",
             f"- command: `{context['command']}`"
             + (f" (launched by `{context['launched_by']}`)" if "launched_by" in context else ""),
             "- versions: " + ", ".join(f"{k} {v}" for k, v in context["versions"].items()),
             f"- metric: {METRIC_UNITS[experiment.metric.kind]}"
             + (f" ({experiment.metric.reduce} over queries)" if experiment.metric.kind == "speedup" else "")
             + (f" of `{experiment.metric.stat}`" if experiment.metric.stat else "")
             + (f", relative to {experiment.metric.base}" if experiment.metric.base else ""),
             f"- time limit per query: {limit:g} s (paper: {experiment.time_limit_s:g} s); "
             f"device-memory cap: "
             + (f"{experiment.memory_cap_for(scale) / 2**30:g} GiB" if experiment.memory_cap_for(scale) else "none")
             + (f" (paper: {experiment.memory_cap / 2**30:g} GiB)"
                if experiment.memory_cap and experiment.memory_cap_for(scale) != experiment.memory_cap else ""),
             f"- datasets: {', '.join(datasets)}"]
    if experiment.metric.kind == "stat":
        lines.append("- stat cells: " + (
            "mean over solved and timed-out queries (the statistic of a partial run is still a measurement)"
            if experiment.metric.partial_runs else
            "mean over solved queries only (a total over the search: a timed-out run's is a lower bound)"))
    cuts = experiment.cuts(scale)
    if cuts:
        lines.append(f"- cut at this scale: {cuts}")
    if skipped:
        lines.append(f"- **budget ran out**: {skipped} (configuration, query) pairs were not run; "
                     "their cells read `not run` (resume the run to fill them in)")
    if stand_ins:
        lines.append(f"- **stand-ins** (the paper's graph is not available offline, or the scale shrinks it): "
                     f"{', '.join(stand_ins)}")
    if experiment.notes:
        lines.append(f"- notes: {experiment.notes}")
    lines += ["", "## Measured (paper's value in parentheses)", "",
              _markdown(side_by_side(table, experiment.paper_values, not_run, experiment.cut_table(scale))), ""]
    lines += claims_section(experiment, experiment.evidence(raw, scale, table))
    lines += ["## Solved queries per cell", "", _markdown(_solved_table(experiment, raw, scale)), ""]
    failures = failure_table(raw)
    if len(failures):
        lines += ["## Errors and unsupported queries", "",
                  "Queries a configuration did not answer for a reason other than the time limit (a crash is "
                  "`error`, a query it cannot take `unsupported`), with the first one's reason.", "",
                  _markdown(failures.set_index("configuration")), ""]
    if experiment.repeats_for(scale) > 1:
        lines += [f"## Spread of the {experiment.repeats_for(scale)} timed runs per query", "",
                  "Per cell: the median over solved queries of (slowest - fastest run) / median run.", "",
                  _markdown(spread_table(experiment, raw, scale)), ""]
    if len(disagreements):
        lines += ["## COUNT DISAGREEMENTS", "",
                  "**Engines disagree with each other or with a known exact count on these queries:**",
                  "", _markdown(disagreements.set_index("query")), ""]
    elif (raw.status == "ok").any():
        lines += ["Counts: every solved query has the same count in every configuration"
                  " (and equals the known exact count where there is one).", ""]
    else:
        lines += ["Counts: no query was solved, so there is nothing to cross-check.", ""]
    write_atomic(path, "\n".join(lines))
    return path


def spread_table(experiment, raw: pd.DataFrame, scale) -> pd.DataFrame:
    """Per cell, the median over solved queries of the timed runs' relative spread (runner: ``repeat_*_s``)."""
    from .core import stat_value

    groups = experiment.row_groups(scale)
    table = pd.DataFrame("-", index=list(groups), columns=[c.label for c in experiment.configs], dtype=object)
    solved = raw[raw.status == "ok"]
    for row, members in groups.items():
        for config in table.columns:
            here = solved[solved.dataset.isin(members) & (solved.config == config)]
            low = pd.to_numeric(here["stats"].map(lambda js: stat_value(js, "repeat_min_s")), errors="coerce")
            high = pd.to_numeric(here["stats"].map(lambda js: stat_value(js, "repeat_max_s")), errors="coerce")
            spread = ((high - low) / here["seconds"].astype(float)).dropna()
            if len(spread):
                table.loc[row, config] = f"{100 * float(spread.median()):.0f}%"
    return table


CLAIMS_HEADING = "## The paper's claims"


def replace_claims_section(text: str, section: list[str]) -> str:
    """A report's text with its claims section (from :data:`CLAIMS_HEADING` to the next ``## ``
    heading) replaced by ``section``; a ValueError when the report has none."""
    lines = text.split("\n")
    try:
        start = lines.index(CLAIMS_HEADING)
    except ValueError:
        raise ValueError(f"the report has no {CLAIMS_HEADING!r} section") from None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[:start] + section + lines[end:])


def claims_section(experiment, evidence) -> list[str]:
    """The paper's claims on this table with their verdicts (:mod:`experiments.harness.verdicts`),
    what was measured and why."""
    if not experiment.claims:
        return [CLAIMS_HEADING, "", "No claim of the paper rests on this table alone "
                "(see results/README.md).", ""]
    out = [CLAIMS_HEADING, "", "| claim | verdict | measured | why |", "|---|---|---|---|"]
    for record in verdicts(experiment, evidence):
        out.append(f"| {record['claim']} | {_bold(record['verdict'])} | {_cell(record['measured'])} "
                   f"| {_cell(record['why'])} |")
    return out + [""]


def _bold(verdict: str) -> str:
    return verdict if verdict == "measured" else f"**{verdict}**"


def _cell(text: str) -> str:
    return (text or "-").replace("|", "\\|")


def verdicts(experiment, evidence) -> list[dict]:
    """The claims' verdicts as records (for ``run.<scale>.json``, results/README.md and the notebooks):
    claim, verdict, measured, why. ``evidence``: :meth:`Experiment.evidence` (or a bare table)."""
    return [dict(zip(("claim", "verdict", "measured", "why"), (c.text, *c.judge(evidence))))
            for c in experiment.claims]


STAT_AXES = {
    "max_stack_bytes": ("maximum execution-stack size (bytes)", True),
    "seed_pool_bytes": ("seed-pool size (bytes)", True),
    "candidate_index_bytes": ("candidate-index size (bytes)", True),
    "candidate_edges_per_relation": ("candidate edges per query-edge relation (count)", True),
    "loads_total": ("global-memory loads (count)", True),
    "idle_rate": ("idle rate (share of lanes without a task)", False),
}
"""y-axis label (with its unit) and log scale of the statistics figures plot; others: :func:`value_axis`."""


def value_axis(experiment) -> tuple[str, bool]:
    """The value axis of ``experiment``'s figure: its label with the unit, and whether it is logarithmic
    (times, bytes, counts that span decades and ratios are; solved-query counts and rates are not)."""
    metric = experiment.metric
    if metric.kind == "avg_ms":
        return "time per query (ms), mean over solved queries", True
    if metric.kind == "solved":
        return "solved queries (count)", False
    if metric.kind == "speedup":
        return f"speedup over {metric.base} (time ratio, x)", True
    if metric.kind == "peak_mb":
        return "peak device memory (MiB), mean over solved queries", True
    if metric.stat in STAT_AXES:
        return STAT_AXES[metric.stat]
    if metric.stat.endswith("_s") and metric.factor == 1000.0:
        return f"{metric.stat[:-2]} time (ms)", True
    return f"{metric.stat} (mean over queries)", metric.stat.endswith("bytes")


def unsolved_counts(experiment, scale, raw: pd.DataFrame) -> pd.DataFrame:
    """Per (row, config): queries that ran but were not solved (any status but ok, skipped and
    unsupported: a query the engine cannot take is not a timeout)."""
    table = pd.DataFrame(0, index=list(experiment.row_groups(scale)), columns=[c.label for c in experiment.configs])
    for row, members in experiment.row_groups(scale).items():
        here = raw[raw.dataset.isin(members)]
        for config in table.columns:
            rows = here[here.config == config]
            table.loc[row, config] = int((~rows.status.isin(("ok", SKIPPED, "unsupported"))).sum())
    return table


def _log_if_positive(ax, axis: str, values) -> None:
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) and values.min() > 0:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")


def graphs_run(experiment, scale, rows) -> dict:
    """Row label -> the size of the data graph its points ran at ``scale`` (``nV/mE`` for a
    stand-in: the paper's nominal size is not what ran), for rows of one graph each."""
    from .workloads import graph_size

    here = experiment.scale_for(scale)
    points = {p.label: p for p in experiment.points_for(scale)}
    out = {}
    for row, members in experiment.row_groups(scale).items():
        sizes = {graph_size(points[m].dataset, here) for m in members if m in points}
        if row in rows and len(sizes) == 1:
            out[row] = sizes.pop()
    return out


def draw_figure(experiment, scale, raw: pd.DataFrame, table: pd.DataFrame):
    """The matplotlib Figure of an experiment that reproduces a figure (``experiment.figure``).

    Every axis is labelled with its unit; times, bytes and ratios are on log scales. Queries that
    ran but were not solved stay visible: a bar or line's legend entry says how many, a time cell
    with no solved query is drawn at the time limit (marker x), and a scatter draws each unsolved
    side of a pair at the time limit (marker ^, its own legend entry). The scatter's y = x line is
    in the legend.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    limit_ms = experiment.time_limit_for(scale) * 1e3
    if experiment.figure == "box":
        return _draw_boxes(experiment, scale, raw)
    fig, ax = plt.subplots(figsize=(10.5 if experiment.figure == "scatter" else 7.5, 4.5))
    if experiment.figure == "by_count":
        solved = raw[raw.status == "ok"]
        for config in [c.label for c in experiment.configs]:
            mine = solved[solved.config == config]
            ax.scatter(mine["count"].astype(float).clip(lower=1), mine["seconds"].astype(float) * 1e3, s=14,
                       label=f"{config}: {len(mine)} solved queries")
            _log_if_positive(ax, "x", mine["count"].astype(float).clip(lower=1))
            _log_if_positive(ax, "y", mine["seconds"].astype(float) * 1e3)
        unsolved = int((~raw.status.isin(("ok", SKIPPED))).sum())
        ax.set_xlabel("result size (matches; 0 drawn at 1)")
        ax.set_ylabel("time per query (ms)")
        ax.legend(fontsize=8, title=f"{unsolved} unsolved not drawn" if unsolved else None)
    elif experiment.figure in ("bars", "lines"):
        ylabel, log = value_axis(experiment)
        unsolved = unsolved_counts(experiment, scale, raw)
        ran = raw[raw.status != SKIPPED]
        is_time = experiment.metric.kind == "avg_ms"
        shown = [table.to_numpy(dtype=float).ravel()]
        marked = False
        if experiment.figure == "bars":
            xs = np.arange(len(table.index), dtype=float)
            width = 0.8 / max(1, len(table.columns))
        else:
            by_label = {p.label: p.x for p in experiment.points_for(scale)}
            xs = np.array([by_label.get(row, math.nan) for row in table.index], dtype=float)
        for i, column in enumerate(table.columns):
            values = table[column].to_numpy(dtype=float)
            missing = int(unsolved[column].sum())
            total = int((ran.config == column).sum())
            cannot = int(((ran.config == column) & (ran.status == "unsupported")).sum())
            label = (f"{column} (unsupported: cannot take these queries)" if cannot == total and total
                     else f"{column} ({missing} of {total} queries unsolved)" if missing else column)
            if experiment.figure == "bars":
                here = xs - 0.4 + width * (i + 0.5)
                artist = ax.bar(here, np.nan_to_num(values, nan=0.0), width, label=label)
                colour = artist.patches[0].get_facecolor() if artist.patches else None
            else:
                here = xs
                (line,) = ax.plot(xs, values, marker="o", label=label)
                colour = line.get_color()
            paper = experiment.paper_values
            if paper is not None and column in paper.columns:   # the paper's printed value: a second marker
                printed = paper[column].reindex(table.index).to_numpy(dtype=float)
                if np.isfinite(printed).any():
                    ax.plot(here, printed, linestyle="none" if experiment.figure == "bars" else "--",
                            marker="*", markersize=11, color=colour, markeredgecolor="black",
                            label=f"{column}: paper's value")
                    shown.append(printed)
            if is_time:      # a cell where every query that ran went unsolved: at the time limit
                empty = np.isnan(values) & (unsolved[column].to_numpy() > 0)
                if empty.any():
                    ax.plot(here[empty], np.full(int(empty.sum()), limit_ms), linestyle="none", marker="x",
                            markersize=9, color=colour,
                            label=None if marked else f"no query solved (drawn at the {limit_ms / 1e3:g} s limit)")
                    marked = True
                    shown.append(np.full(1, limit_ms))
        run_on = graphs_run(experiment, scale, table.index)
        if experiment.figure == "bars":
            ax.set_xticks(xs, [f"{r}\n{run_on[r]}" if run_on.get(r) else str(r) for r in table.index])
            ax.set_xlabel(experiment.xlabel or "data graph")
        else:
            if run_on:                                   # the graph each point ran, under its x
                ax.set_xticks(xs, [f"{x:g}\n{run_on.get(r, '')}" for x, r in zip(xs, table.index)])
            ax.set_xlabel(experiment.xlabel or "x")
        ax.set_ylabel(ylabel)
        if log:
            _log_if_positive(ax, "y", np.concatenate(shown))
            values = np.concatenate(shown)
            values = values[np.isfinite(values) & (values > 0)]
            if experiment.figure == "bars" and ax.get_yscale() == "log" and len(values):
                # bars grow from a decade below the smallest one, so that it stays visible
                ax.set_ylim(bottom=10.0 ** (math.floor(math.log10(values.min())) - 1))
        ax.legend(fontsize=8)
    elif experiment.figure == "scatter":
        base = experiment.scatter_base
        ran = raw[raw.status != SKIPPED]
        ms = ran.assign(ms=ran["seconds"].astype(float) * 1e3)
        ms.loc[ms.status != "ok", "ms"] = limit_ms            # unsolved: drawn at the time limit
        times = ms.pivot_table(index=["dataset", "query"], columns="config", values="ms")
        solved = ms.assign(ok=ms.status == "ok").pivot_table(index=["dataset", "query"], columns="config",
                                                            values="ok", aggfunc="all")
        drawn = []
        for column in times.columns if base in times.columns else ():
            if column == base:
                continue
            pair = times[[base, column]].dropna()
            both = solved.loc[pair.index, [base, column]].astype(bool).all(axis=1)
            points = ax.scatter(pair.loc[both, base], pair.loc[both, column], s=14, label=f"{column}: both solved")
            if (~both).any():
                ax.scatter(pair.loc[~both, base], pair.loc[~both, column], s=40, marker="^",
                           color=points.get_facecolor()[0] if len(points.get_facecolor()) else None,
                           label=f"{column}: unsolved by one or both ({int((~both).sum())}), "
                                 f"at the {limit_ms / 1e3:g} s limit")
            drawn.append(pair.to_numpy(dtype=float).ravel())
        values = np.concatenate(drawn) if drawn else np.zeros(0)
        values = values[np.isfinite(values) & (values > 0)]
        if len(values):
            low, high = values.min(), values.max()
            ax.plot([low, high], [low, high], color="grey", linewidth=0.8, label="y = x (equal time)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
        else:
            ax.text(0.5, 0.5, f"no query ran on both {base} and another configuration", ha="center",
                    transform=ax.transAxes)
        ax.set_xlabel(f"{base}: time per query (ms)")
        ax.set_ylabel("other configuration: time per query (ms)")
    else:
        plt.close(fig)
        raise ValueError(f"unknown figure kind {experiment.figure!r}")
    ax.set_title(f"{experiment.title} [{scale.name}]", fontsize=10)
    fig.tight_layout()
    return fig


def _draw_boxes(experiment, scale, raw: pd.DataFrame):
    """Box plots per table row of the solved queries' times (left) and result sizes (right), GSI Fig. 17."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.5))
    groups = experiment.row_groups(scale)
    solved = raw[raw.status == "ok"]
    config = experiment.configs[0].label
    for ax, column, label in ((axes[0], "seconds", "time per query (ms)"),
                              (axes[1], "count", "result size (matches; 0 drawn at 1)")):
        data = []
        for members in groups.values():
            rows = solved[solved.dataset.isin(members) & (solved.config == config)]
            values = rows[column].astype(float).to_numpy()
            data.append(values * 1e3 if column == "seconds" else np.maximum(values, 1.0))
        ran = [len(raw[raw.dataset.isin(m) & (raw.config == config) & (raw.status != SKIPPED)])
               for m in groups.values()]
        ax.boxplot([d if len(d) else [np.nan] for d in data], tick_labels=[f"{r}\n{len(d)}/{n} solved"
                   for r, d, n in zip(groups, data, ran)])
        _log_if_positive(ax, "y", np.concatenate([d for d in data if len(d)] or [np.zeros(0)]))
        ax.set_ylabel(label)
        ax.set_xlabel("data graph")
    fig.suptitle(f"{experiment.title} [{scale.name}]: {config}", fontsize=10)
    fig.tight_layout()
    return fig


def write_figure(experiment, scale, raw: pd.DataFrame, table: pd.DataFrame, path: Path,
                 context: dict | None = None) -> Path | None:
    """A PNG of :func:`draw_figure` for experiments that reproduce a figure (``experiment.figure``);
    its footer names the run's GPU and commit (``context``: a ``run.<scale>.json``'s, default this
    process's) and the claims' verdicts."""
    if experiment.figure is None:
        return None
    import matplotlib.pyplot as plt

    fig = draw_figure(experiment, scale, raw, table)
    context = context or run_context(scale, "")
    notes = [f"{context['gpu']}, commit {context['commit']}, scale {scale.name}"]
    evidence = experiment.evidence(raw, scale, table)
    notes += [f"paper: {c['claim']} -> {c['verdict']}" for c in verdicts(experiment, evidence)]
    fig.text(0.005, 0.005, "\n".join(notes), fontsize=6.5, va="bottom", ha="left", wrap=True)
    fig.subplots_adjust(bottom=min(0.5, 0.12 + 0.035 * len(notes)))
    temp = path.with_name(f".{path.name}.tmp")
    fig.savefig(temp, dpi=120, format="png")
    os.replace(temp, path)
    plt.close(fig)
    return path


def write_reports(experiment, scale, raw, table, disagreements, folder: Path, command: str = "") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{experiment.name}.{scale.name}"
    files = [folder / f"{stem}.csv",
             write_markdown(experiment, scale, raw, table, disagreements, folder / f"{stem}.md", command)]
    figure = write_figure(experiment, scale, raw, table, folder / f"{stem}.png")
    if figure is not None:
        files.append(figure)
    return files


def run_scales(results: Path | str = "results", paper_names=None) -> list[str]:
    """The scales, smallest first, at which any of ``paper_names`` (default: every paper) has a
    ``run.<scale>.json`` under ``results``."""
    from .catalog import papers
    from .workloads import SCALES

    names = papers() if paper_names is None else list(paper_names)
    return [s for s in SCALES if any((Path(results) / p / f"run.{s}.json").exists() for p in names)]


def write_run_metadata(outcome, scale, folder: Path, *, command: str = "", budget_s: float | None = None,
                       worst_s: float | None = None, resumed: bool = False) -> Path:
    """``run.<scale>.json``: the run context plus, per experiment, its row statuses or why it did not run.

    ``calls`` lists every call that wrote the folder's rows (date, commit, GPU, command, wall
    seconds): a ``resumed`` run (one that found rows there) adds its call to those the file
    already lists, and ``wall_s`` is their sum, the true wall time of a run spread over calls.
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"run.{scale.name}.json"
    experiments = {}
    for done in outcome.outcomes:
        experiments[done.experiment.name] = {
            "statuses": {str(k): int(v) for k, v in done.raw.status.value_counts().items()},
            "count_disagreements": int(len(done.disagreements)),
            "claims": verdicts(done.experiment, done.experiment.evidence(done.raw, scale, done.table)),
            "cut": done.experiment.cuts(scale) or None}
    for name, reason in outcome.missing.items():
        experiments[name] = {"not_run": reason}
    context = run_context(scale, command)
    calls = previous_calls(path) if resumed else []
    calls.append({key: context.get(key) for key in ("date", "commit", "gpu", "command")}
                 | {"wall_s": round(outcome.seconds, 1)})
    meta = dict(context, paper=outcome.paper, wall_s=round(sum(c["wall_s"] or 0.0 for c in calls), 1),
                budget_s=budget_s, worst_case_s=None if worst_s is None else round(worst_s, 1),
                calls=calls, experiments=experiments)
    write_atomic(path, json.dumps(meta, indent=2) + "\n")
    return path


def previous_calls(path: Path) -> list[dict]:
    """The calls an earlier ``run.<scale>.json`` at ``path`` records (one, from its own fields, when
    it lists none); none when there is no readable file."""
    try:
        previous = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return []
    if isinstance(previous.get("calls"), list):
        return [c for c in previous["calls"] if isinstance(c, dict)]
    if isinstance(previous.get("wall_s"), (int, float)):
        return [{key: previous.get(key) for key in ("date", "commit", "gpu", "command", "wall_s")}]
    return []
