"""Reports of one experiment run: a markdown table with the paper's value beside every measured
cell, and a matplotlib PNG for figures (bars, lines, or per-query scatter on log axes).

The raw per-query rows are the runner's CSV (``<name>.<scale>.csv``) in the same folder.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from common.device import device_info

METRIC_UNITS = {"avg_ms": "average ms over solved queries", "solved": "solved queries",
                "speedup": "per-query time ratio", "stat": "mean over solved queries",
                "peak_mb": "peak device memory (MiB), mean over solved queries"}


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


def side_by_side(measured: pd.DataFrame, paper: pd.DataFrame | None) -> pd.DataFrame:
    """Cells as ``measured (paper: X)``; the paper's value is omitted where it printed none."""
    cells = measured.map(format_cell)
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
    groups: dict[str, list[str]] = {}
    for point in experiment.points_for(scale):
        groups.setdefault(experiment.rows.get(point.label, point.label), []).append(point.label)
    table = pd.DataFrame(index=list(groups), columns=[c.label for c in experiment.configs], dtype=object)
    for row, members in groups.items():
        for config in experiment.configs:
            rows = raw[raw.dataset.isin(members) & (raw.config == config.label)]
            table.loc[row, config.label] = f"{int((rows.status == 'ok').sum())}/{len(rows)}"
    return table


def write_markdown(experiment, scale, raw, table, disagreements, path: Path, command: str = "") -> Path:
    info = device_info()
    device = info.get("name") or info.get("backend", "unknown device")
    datasets = sorted({str(p.dataset.load(scale).name) for p in experiment.points_for(scale)})
    stand_ins = [d for d in datasets if "stand-in" in d]
    limit = experiment.time_limit_s if scale.time_limit_s is None else min(experiment.time_limit_s,
                                                                           scale.time_limit_s)
    lines = [f"# {experiment.paper}: {experiment.title} ({experiment.name})", "",
             f"- scale: `{scale.name}`; device: {device}; command: `{command or 'n/a'}`",
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
    if stand_ins:
        lines.append(f"- **stand-ins** (the paper's graph is not available offline, or the scale shrinks it): "
                     f"{', '.join(stand_ins)}")
    if experiment.notes:
        lines.append(f"- notes: {experiment.notes}")
    lines += ["", "## Measured (paper's value in parentheses)", "",
              _markdown(side_by_side(table, experiment.paper_values)), "",
              "## Solved queries per cell", "", _markdown(_solved_table(experiment, raw, scale)), ""]
    if len(disagreements):
        lines += ["## COUNT DISAGREEMENTS", "",
                  "**Engines disagree with each other or with a known exact count on these queries:**",
                  "", _markdown(disagreements.set_index("query")), ""]
    else:
        lines += ["Counts: every solved query has the same count in every configuration"
                  " (and equals the known exact count where there is one).", ""]
    path.write_text("\n".join(lines))
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
        times = solved.pivot_table(index=["dataset", "query"], columns="config", values="seconds")
        for column in times.columns:
            if column == base:
                continue
            pair = times[[base, column]].dropna() * 1e3
            ax.scatter(pair[base], pair[column], s=12, label=column)
        lo, hi = np.nanmin(times.to_numpy()) * 1e3, np.nanmax(times.to_numpy()) * 1e3
        if np.isfinite(lo) and lo > 0:
            ax.plot([lo, hi], [lo, hi], color="grey", linewidth=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel(f"{base} time per query (ms)")
        ax.set_ylabel("time per query (ms)")
        ax.legend()
    else:
        raise ValueError(f"unknown figure kind {experiment.figure!r}")
    ax.set_title(f"{experiment.title} [{scale.name}]")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
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
