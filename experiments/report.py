"""Reports of one experiment run: a markdown table with the paper's value beside every measured
cell, and a matplotlib PNG for figures (bars, lines, or per-query scatter on log axes).

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
    from common.device import cuda, simulator_active

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


def run_context(scale, command: str) -> dict:
    """What every output states about its run: GPU, scale, command, date (UTC), versions."""
    import os

    context = {"gpu": gpu_name(), "scale": scale.name, "command": command or "n/a",
               "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
               "versions": versions()}
    if os.environ.get(LAUNCHER_ENV):
        context["launched_by"] = os.environ[LAUNCHER_ENV]
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        context["cuda_visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return context


LAUNCHER_ENV = "GPUSM_LAUNCHED_BY"
"""Environment variable in which the parallel launcher passes its own command to each set."""


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
                 not_run: pd.DataFrame | None = None) -> pd.DataFrame:
    """Cells as ``measured (paper: X)``; the paper's value is omitted where it printed none.

    A cell with skipped queries (``not_run`` > 0) reads ``not run (k skipped: budget)``, never a number.
    """
    cells = measured.map(format_cell)
    if not_run is not None:
        for row in cells.index:
            for col in cells.columns:
                if not_run.loc[row, col]:
                    cells.loc[row, col] = f"not run ({int(not_run.loc[row, col])} skipped: budget)"
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
    for row, members in groups.items():
        for config in experiment.configs:
            rows = raw[raw.dataset.isin(members) & (raw.config == config.label)]
            skipped = int((rows.status == SKIPPED).sum())
            timed_out = int((rows.status == "timeout").sum()) if counts_timeouts else 0
            ran = len(rows) - skipped
            table.loc[row, config.label] = (f"{int((rows.status == 'ok').sum())}/{ran}"
                                            + (f" (+{timed_out} timed out, in the stat)" if timed_out else "")
                                            + (f" ({skipped} not run)" if skipped else ""))
    return table


def write_markdown(experiment, scale, raw, table, disagreements, path: Path, command: str = "") -> Path:
    context = run_context(scale, command)
    here = experiment.scale_for(scale)
    datasets = sorted({str(p.dataset.load(here).name) for p in experiment.points_for(scale)})
    stand_ins = [d for d in datasets if "stand-in" in d]
    limit = experiment.time_limit_for(scale)
    not_run = experiment.not_run(raw, scale)
    skipped = int((raw.status == SKIPPED).sum())
    lines = [f"# {experiment.paper}: {experiment.title} ({experiment.name})", "",
             f"- GPU: {context['gpu']}; scale: `{scale.name}`; date: {context['date']}",
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
              _markdown(side_by_side(table, experiment.paper_values, not_run)), "",
              "## Solved queries per cell", "", _markdown(_solved_table(experiment, raw, scale)), ""]
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


def write_figure(experiment, scale, raw: pd.DataFrame, table: pd.DataFrame, path: Path) -> Path | None:
    """A PNG for experiments that reproduce a figure (``experiment.figure``)."""
    if experiment.figure is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    if experiment.figure == "bars":
        table.plot.bar(ax=ax, rot=0, logy=experiment.metric.kind == "avg_ms")
        ax.set_ylabel(METRIC_UNITS[experiment.metric.kind])
    elif experiment.figure == "lines":
        xs = [p.x for p in experiment.points_for(scale)]
        for column in table.columns:
            ax.plot(xs, table[column].to_numpy(dtype=float), marker="o", label=column)
        ax.set_ylabel(METRIC_UNITS[experiment.metric.kind])
        ax.legend()
    elif experiment.figure == "scatter":
        base = experiment.scatter_base
        solved = raw[raw.status == "ok"]
        times = solved.assign(seconds=solved["seconds"].astype(float)).pivot_table(
            index=["dataset", "query"], columns="config", values="seconds")
        for column in times.columns if base in times.columns else ():
            if column == base:
                continue
            pair = times[[base, column]].dropna() * 1e3
            ax.scatter(pair[base], pair[column], s=12, label=column)
        values = times.to_numpy(dtype=float)
        values = values[np.isfinite(values)] * 1e3
        if len(values) and values.min() > 0:
            ax.plot([values.min(), values.max()], [values.min(), values.max()], color="grey", linewidth=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel(f"{base} time per query (ms)")
        ax.set_ylabel("time per query (ms)")
        if ax.collections:
            ax.legend()
        else:
            ax.text(0.5, 0.5, f"no query solved by {base} and another configuration", ha="center",
                    transform=ax.transAxes)
    else:
        raise ValueError(f"unknown figure kind {experiment.figure!r}")
    ax.set_title(f"{experiment.title} [{scale.name}]")
    fig.tight_layout()
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


def write_run_metadata(outcome, scale, folder: Path, *, command: str = "", budget_s: float | None = None,
                       worst_s: float | None = None) -> Path:
    """``run.<scale>.json``: the run context plus, per experiment, its row statuses or why it did not run."""
    folder.mkdir(parents=True, exist_ok=True)
    experiments = {}
    for done in outcome.outcomes:
        experiments[done.experiment.name] = {
            "statuses": {str(k): int(v) for k, v in done.raw.status.value_counts().items()},
            "count_disagreements": int(len(done.disagreements)),
            "cut": done.experiment.cuts(scale) or None}
    for name, reason in outcome.missing.items():
        experiments[name] = {"not_run": reason}
    meta = dict(run_context(scale, command), paper=outcome.paper, wall_s=round(outcome.seconds, 1),
                budget_s=budget_s, worst_case_s=None if worst_s is None else round(worst_s, 1),
                experiments=experiments)
    path = folder / f"run.{scale.name}.json"
    write_atomic(path, json.dumps(meta, indent=2) + "\n")
    return path
