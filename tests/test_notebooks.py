"""The paper notebooks run on tiny-scale outputs and show tables computed from the raw rows."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from experiments import PAPERS, experiments_of
from experiments.core import run_experiment
from experiments.report import format_cell

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _execute(notebook: Path, env: dict, monkeypatch) -> str:
    """Run the notebook's code cells in order in one namespace (no Jupyter kernel needed)."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(notebook.parent)
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for cell in json.loads(notebook.read_text())["cells"]:
            if cell["cell_type"] == "code":
                exec(compile("".join(cell["source"]), str(notebook), "exec"), namespace)
    return out.getvalue()


def test_there_is_one_notebook_per_paper():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(PAPERS)


@pytest.mark.parametrize("paper", [p for p in PAPERS if p != "compare"])
def test_notebook_shows_a_tiny_run(paper, tmp_path, monkeypatch):
    experiment = next(e for e in experiments_of(paper) if not e.missing_engines())
    outcome = run_experiment(experiment, "tiny", tmp_path, isolation="inline", progress=False)
    printed = _execute(NOTEBOOKS / f"{paper}.ipynb", {"GPUSM_RESULTS": str(tmp_path), "SCALE": "tiny"},
                       monkeypatch)
    assert f"## {experiment.name}" in printed
    assert format_cell(outcome.table.iloc[0, 0]) in printed
    others = [e for e in experiments_of(paper) if e.name != experiment.name]
    assert all(f"## {e.name}" in printed for e in others)
    assert "not run at scale tiny" in printed
