"""What the paper notebooks (``notebooks/``) call: show a paper's measured tables beside the
printed ones, its figures, and any count disagreement, from the files a run left in ``results/``.

The tables and figures are recomputed from the raw per-query CSV (not copied from the markdown
or the PNG), so a notebook shows exactly what the rows say, drawn by the current plotting code.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .catalog import experiments_of, papers
from .core import check_counts
from .report import draw_figure, run_scales, side_by_side, verdicts, write_figure
from .runner import read_rows
from .workloads import SCALES, get_scale


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
    """``experiment``'s figure (:func:`experiments.harness.report.draw_figure`) drawn from the raw rows in
    ``folder``."""
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


def default_scale(paper: str, results: Path | str = "results") -> str:
    """The scale a notebook shows: ``$SCALE``, else ``medium`` where its results exist, else ``small``."""
    import os

    if os.environ.get("SCALE"):
        return os.environ["SCALE"]
    return "medium" if any((Path(results) / paper).glob("*.medium.csv")) else "small"


def run_header(paper: str, results: Path | str = "results", scale: str = "small") -> str:
    """GPU, commit, date and command of the set's run (``run.<scale>.json``), or why they are unknown."""
    import json

    path = Path(results) / paper / f"run.{scale}.json"
    if not path.exists():
        return f"(no {path.name}: GPU and commit of these rows unknown)"
    meta = json.loads(path.read_text())
    return (f"GPU: {meta.get('gpu')}; commit: {meta.get('commit', 'unknown')}; scale: {scale}; "
            f"date: {meta.get('date')}; command: {meta.get('command')}")


def show_paper(paper: str, results: Path | str = "results", scale: str = "small") -> dict[str, pd.DataFrame]:
    """Display every table, its claims' verdicts and figure of ``paper`` found under ``results``;
    say which are missing."""
    folder = Path(results) / paper
    tables = paper_outputs(paper, results, scale)
    print(run_header(paper, results, scale))
    for experiment in experiments_of(paper):
        if not experiment.runs_at(get_scale(scale)):          # not part of this set (large: headline ones)
            continue
        print(f"\n## {experiment.name}: {experiment.title}")
        if experiment.name not in tables:
            print(f"(not run at scale {scale}: make experiment-... SCALE={scale} writes {folder}/)")
            continue
        _display(tables[experiment.name])
        if experiment.claims:
            raw = read_rows(folder / f"{experiment.name}.{scale}.csv")
            raw = raw[raw.experiment == experiment.name]
            evidence = experiment.evidence(raw, get_scale(scale))
            with pd.option_context("display.max_colwidth", None, "display.width", 250, "display.max_columns", None):
                _display(pd.DataFrame(verdicts(experiment, evidence)))
        raw = read_rows(folder / f"{experiment.name}.{scale}.csv")
        problems = check_counts(raw, {})
        if len(problems):
            print("COUNT DISAGREEMENTS between configurations:")
            _display(problems)
        if experiment.figure:
            _display_figure(draw_from_rows(experiment, folder, scale))
    return tables


def show_larger_sets(paper: str, results: Path | str = "results", shown: str = "small") -> dict[str, dict]:
    """Display, after the ``shown`` set, every larger set of ``paper`` that has run (a ``run.<scale>.json``
    under ``results``), e.g. the large set of the headline experiments; their tables by scale."""
    order = list(SCALES)
    larger = [s for s in run_scales(results, [paper]) if order.index(s) > order.index(shown)]
    shown_sets = {}
    for scale in larger:
        print(f"\n# The {scale} set")
        shown_sets[scale] = show_paper(paper, results, scale)
    return shown_sets


def execute_notebooks(paths=None, timeout_s: int = 1200) -> list[Path]:
    """Run the paper notebooks (``notebooks/<paper>.ipynb``, or ``paths``) in a Jupyter kernel and
    save them with their outputs (``make notebooks``, after a run's results are in ``results/``)."""
    import nbformat
    from nbclient import NotebookClient

    root = Path(__file__).resolve().parents[2] / "notebooks"
    paths = [Path(p) for p in paths] if paths else [root / f"{paper}.ipynb" for paper in papers()]
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        NotebookClient(notebook, timeout=timeout_s, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        nbformat.write(notebook, path)
    return paths
