"""What the paper notebooks (``notebooks/``) call: show a paper's measured tables beside the
printed ones, its figures, and any count disagreement, from the files a run left in ``results/``.

The tables are recomputed from the raw per-query CSV (not copied from the markdown), so a
notebook shows exactly what the rows say.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import experiments_of
from .core import check_counts
from .report import side_by_side
from .runner import read_rows
from .workloads import get_scale


def _display(obj) -> None:
    try:
        from IPython.display import display
    except ImportError:                      # plain Python (the notebook test): print instead
        print(obj.to_string() if isinstance(obj, pd.DataFrame) else obj)
        return
    display(obj)


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
        figure = folder / f"{experiment.name}.{scale}.png"
        if figure.exists():
            try:
                from IPython.display import Image
                _display(Image(filename=str(figure)))
            except ImportError:
                print(f"figure: {figure}")
    return tables
