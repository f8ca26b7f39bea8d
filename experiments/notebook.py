"""What the paper notebooks (``notebooks/``) call: show a paper's measured tables beside the
printed ones, its figures, and any count disagreement, from the files a run left in ``results/``.

The tables and figures are recomputed from the raw per-query CSV (not copied from the markdown
or the PNG), so a notebook shows exactly what the rows say, drawn by the current plotting code.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import experiments_of
from .core import check_counts
from .report import draw_figure, side_by_side, write_figure
from .runner import read_rows
from .workloads import get_scale


def _display(obj) -> None:
    try:
        from IPython.display import display
    except ImportError:                      # plain Python (the notebook test): print instead
        print(obj.to_string() if isinstance(obj, pd.DataFrame) else obj)
        return
    display(obj)


def _display_figure(fig) -> None:
    """Show a Figure as a PNG (whatever matplotlib backend is active), or name it in plain Python."""
    import io

    import matplotlib.pyplot as plt

    try:
        from IPython.display import Image, display
    except ImportError:
        print(f"figure: {fig.axes[0].get_title()}")
    else:
        png = io.BytesIO()
        fig.savefig(png, dpi=100, format="png")
        display(Image(data=png.getvalue(), format="png"))
    plt.close(fig)


def draw_from_rows(experiment, folder: Path | str, scale: str = "small"):
    """``experiment``'s figure (:func:`experiments.report.draw_figure`) drawn from the raw rows in ``folder``."""
    raw = read_rows(Path(folder) / f"{experiment.name}.{scale}.csv")
    raw = raw[raw.experiment == experiment.name]
    return draw_figure(experiment, get_scale(scale), raw, experiment.table(raw, get_scale(scale)))


def redraw_figures(paper: str, results: Path | str = "results", scale: str = "small") -> list[Path]:
    """Rewrite the PNG of every figure of ``paper`` that has run at ``scale``, from its raw rows
    (after a change to the plots; the rows and tables are not touched)."""
    folder = Path(results) / paper
    written = []
    for experiment in experiments_of(paper):
        raw_file = folder / f"{experiment.name}.{scale}.csv"
        if experiment.figure and raw_file.exists():
            raw = read_rows(raw_file)
            raw = raw[raw.experiment == experiment.name]
            written.append(write_figure(experiment, get_scale(scale), raw, experiment.table(raw, get_scale(scale)),
                                        folder / f"{experiment.name}.{scale}.png"))
    return written


def paper_outputs(paper: str, results: Path | str = "results", scale: str = "small") -> dict[str, pd.DataFrame]:
    """Measured table (paper's value beside each cell) per experiment of ``paper`` that has run at ``scale``."""
    folder = Path(results) / paper
    tables = {}
    for experiment in experiments_of(paper):
        raw_file = folder / f"{experiment.name}.{scale}.csv"
        if not raw_file.exists():
            continue
        raw = read_rows(raw_file)
        raw = raw[raw.experiment == experiment.name]
        tables[experiment.name] = side_by_side(experiment.table(raw, get_scale(scale)), experiment.paper_values,
                                               experiment.not_run(raw, get_scale(scale)))
    return tables


def show_paper(paper: str, results: Path | str = "results", scale: str = "small") -> dict[str, pd.DataFrame]:
    """Display every table and figure of ``paper`` found under ``results``; say which are missing."""
    folder = Path(results) / paper
    tables = paper_outputs(paper, results, scale)
    for experiment in experiments_of(paper):
        print(f"\n## {experiment.name}: {experiment.title}")
        if experiment.name not in tables:
            print(f"(not run at scale {scale}: make experiment-... SCALE={scale} writes {folder}/)")
            continue
        _display(tables[experiment.name])
        raw = read_rows(folder / f"{experiment.name}.{scale}.csv")
        problems = check_counts(raw, {})
        if len(problems):
            print("COUNT DISAGREEMENTS between configurations:")
            _display(problems)
        if experiment.figure:
            _display_figure(draw_from_rows(experiment, folder, scale))
    return tables
