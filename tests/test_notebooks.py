"""The paper notebooks run on tiny-scale outputs and show tables computed from the raw rows."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from _extras import requires
from experiments import PAPERS, experiments_of
from experiments.harness.core import run_experiment
from experiments.harness.report import format_cell

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


def test_there_is_one_notebook_per_paper_and_the_tutorial():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted([*PAPERS, "tutorial"])


@pytest.mark.slow
def test_tutorial_executes_without_errors_and_shows_embeddings_a_frame_and_a_plot(tmp_path):
    """Runs notebooks/tutorial.ipynb in a Jupyter kernel (nbclient); any cell error fails the test."""
    requires("nbformat", "nbclient", "ipykernel")
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOKS / "tutorial.ipynb", as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "cpu and egsm found the same embeddings: True" in text
    assert "every count equals the published exact count" in text
    rich = [o.data for o in outputs if o.output_type in ("execute_result", "display_data")]
    assert any("text/html" in d and "known count" in d["text/html"] for d in rich)      # the DataFrame
    assert any("image/png" in d for d in rich)                                          # the plot


def test_committed_notebooks_carry_their_outputs():
    for path in NOTEBOOKS.glob("*.ipynb"):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        assert all(c["execution_count"] for c in cells), f"{path.name} has cells that were not executed"
        assert any(c["outputs"] for c in cells), f"{path.name} was committed without outputs"
        assert not [o for c in cells for o in c["outputs"] if o["output_type"] == "error"], path.name
        figures = path.stem == "tutorial" or any(e.figure for e in experiments_of(path.stem))
        shown = [o for c in cells for o in c["outputs"] if "image/png" in o.get("data", {})]
        assert shown or not figures, f"{path.name} shows no figure"


@pytest.mark.slow
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


def test_notebooks_default_to_the_medium_results_and_show_verdicts_and_the_runs_gpu(tmp_path, monkeypatch):
    from common.gpu.runtime import device_info
    from experiments import get_experiment
    from experiments.harness.core import run_set
    from experiments.harness.notebook import default_scale, show_paper

    monkeypatch.delenv("SCALE", raising=False)
    assert default_scale("stwig_lin14", tmp_path) == "small"
    experiment = get_experiment("stwig_lin14.fig3a_hash")
    run_set("stwig_lin14", "tiny", tmp_path, experiments=[experiment], isolation="inline", progress=False,
            log=lambda line: None)
    folder = tmp_path / "stwig_lin14"
    for path in folder.glob("*.tiny.*"):                 # the same rows, named as a medium run's
        path.rename(path.with_name(path.name.replace(".tiny.", ".medium.")))
    assert default_scale("stwig_lin14", tmp_path) == "medium"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        show_paper("stwig_lin14", tmp_path, "medium")
    printed = out.getvalue()
    device = device_info()
    ran_on = "CUDA simulator" if device["simulator"] else device["name"]          # the device this test ran on
    assert f"GPU: {ran_on}; commit: " in printed
    assert "the GPU's (copy &) hash is slower than the CPU's" in printed
    assert any(v in printed for v in ("held", "did not hold", "direction only", "inconclusive", "not testable"))


def test_every_paper_has_committed_medium_results():
    results = NOTEBOOKS.parent / "results"
    assert [p for p in PAPERS if any((results / p).glob("*.medium.csv"))] == list(PAPERS)


def test_results_readme_names_each_sets_run_commit_and_gpu():
    """The run table of results/README.md says, for every set, the commit and GPU model its
    committed reports name (run.medium.json of its last part)."""
    results = NOTEBOOKS.parent / "results"
    rows = {}
    for line in (results / "README.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] in PAPERS:
            rows[cells[0]] = cells
    for paper in PAPERS:
        meta = json.loads((results / paper / "run.medium.json").read_text())
        cells = rows[paper]
        assert meta["commit"] in cells[2], (paper, meta["commit"], cells[2])
        assert meta["gpu"].removeprefix("NVIDIA ") in cells[1], (paper, meta["gpu"], cells[1])


@pytest.mark.slow                                     # executes a whole notebook
@pytest.mark.parametrize("paper", PAPERS)
def test_committed_medium_notebooks_execute_from_the_committed_csvs(paper, monkeypatch):
    """Every paper with medium-scale results in results/ shows them in its notebook: each table
    recomputed from the committed CSVs, its verdicts, the run's GPU and commit, no disagreement."""
    results = NOTEBOOKS.parent / "results"
    monkeypatch.delenv("SCALE", raising=False)
    printed = _execute(NOTEBOOKS / f"{paper}.ipynb", {"GPUSM_RESULTS": str(results)}, monkeypatch)
    meta = json.loads((results / paper / "run.medium.json").read_text())
    assert f"GPU: {meta['gpu']}; commit: {meta['commit']}; scale: medium" in printed
    assert all(f"## {e.name}" in printed for e in experiments_of(paper))
    assert "not run at scale" not in printed and "COUNT DISAGREEMENTS" not in printed
    if any(e.claims for e in experiments_of(paper)):          # the comparison states no claim
        assert any(v in printed for v in ("held", "did not hold", "direction only", "inconclusive", "not testable"))


def test_a_notebook_shows_the_large_set_after_its_own_with_only_the_large_experiments(tmp_path, monkeypatch):
    """show_larger_sets: a set that has run at a larger scale is shown after the notebook's own, its
    header from its own run.<scale>.json, only the experiments that run at that scale."""
    from experiments import get_experiment
    from experiments.harness.core import run_set
    from experiments.harness.notebook import show_larger_sets

    experiment = get_experiment("stwig_lin14.fig3a_hash")
    run_set("stwig_lin14", "tiny", tmp_path, experiments=[experiment], isolation="inline", progress=False,
            log=lambda line: None)
    assert show_larger_sets("stwig_lin14", tmp_path, "medium") == {}
    folder = tmp_path / "stwig_lin14"
    for path in list(folder.glob("*.tiny.*")):                 # the same rows, named as a large run's
        path.rename(path.with_name(path.name.replace(".tiny.", ".large.")))
    meta = json.loads((folder / "run.large.json").read_text())
    meta["commit"] = "abc1234"
    (folder / "run.large.json").write_text(json.dumps(meta))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        shown = show_larger_sets("stwig_lin14", tmp_path, "medium")
    printed = out.getvalue()
    assert list(shown) == ["large"] and experiment.name in shown["large"]
    assert "# The large set" in printed and "commit: abc1234; scale: large" in printed
    assert "## stwig_lin14.fig3a_hash" in printed and "## stwig_lin14.fig3d" in printed
    assert "stwig_lin14.fig3_degree" not in printed                 # a sweep that does not run at large
    assert show_larger_sets("stwig_lin14", tmp_path, "large") == {}
