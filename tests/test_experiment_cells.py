"""Experiment cells as Dask tasks (experiments/harness/cells.py): a LocalCluster of CPU processes at tiny scale."""

from __future__ import annotations

import pytest

from _extras import requires
from common import create_engine
from experiments import get_experiment
from experiments.harness.cells import cells_of, group_cells, run_on_dask
from experiments.harness.runner import read_rows
from experiments.harness.workloads import get_scale

NAMES = ["stwig_lin14.fig3a_total", "stwig_lin14.fig3a_hash"]      # the same runs, two reports
SWEEP = "stwig_lin14.fig3_vertices"          # its first point is fig3a's default graph under another label


@pytest.fixture(scope="module")
def client():
    requires("distributed")
    from experiments.harness.cells import make_client

    client, cluster = make_client("local", workers=2)
    yield client
    client.close()
    cluster.close()


def _rows(out, name):
    return read_rows(out / "stwig_lin14" / f"{name}.tiny.csv")


@pytest.mark.slow
def test_cells_run_as_tasks_share_identical_runs_and_resume_from_the_store(tmp_path, client):
    log = []
    code = run_on_dask({"stwig_lin14": NAMES}, "tiny", tmp_path, client=client, isolation="inline",
                       progress=False, log=log.append)
    assert code == 0
    assert "2 tasks (4 cells) on 2 Dask workers" in log
    total, hashed = _rows(tmp_path, NAMES[0]), _rows(tmp_path, NAMES[1])
    assert len(total) == len(hashed) == 2 * 2                     # 2 configs x 2 queries, none skipped
    assert set(total.status) == {"ok"} and set(hashed.status) == {"ok"}
    assert hashed.reason.str.contains("same run as stwig_lin14.fig3a_total").all()
    # counts: every query has matches (cut out of the data graph) and equals the CPU reference's
    experiment = get_experiment(NAMES[0])
    job, _ = experiment.job_for("GPU", experiment.points[0].label, get_scale("tiny"))
    cpu = create_engine("cpu").prepare(job.data)
    expected = {q.name: cpu.match(q).count for q in job.queries}
    assert all(expected[r.query] == int(r["count"]) >= 1 for _, r in total.iterrows())
    report = (tmp_path / "stwig_lin14" / f"{NAMES[0]}.tiny.md").read_text()
    assert "commit: `" in report and "every solved query has the same count" in report

    # a second run finds everything in the store: no task
    log.clear()
    assert run_on_dask({"stwig_lin14": NAMES}, "tiny", tmp_path, client=client, isolation="inline",
                       progress=False, log=log.append) == 0
    assert "0 tasks (0 cells) on 2 Dask workers" in log

    # a lost row is run again, and only that one
    path = tmp_path / "stwig_lin14" / f"{NAMES[0]}.tiny.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))
    log.clear()
    assert run_on_dask({"stwig_lin14": NAMES[:1]}, "tiny", tmp_path, client=client, isolation="inline",
                       progress=False, log=log.append) == 0
    assert "1 tasks (1 cells) on 2 Dask workers" in log
    again = _rows(tmp_path, NAMES[0])
    assert len(again) == 4 and sorted(again["query"]) == sorted(total["query"])


def test_cells_are_grouped_by_identical_runs_and_finished_cells_drop_out(tmp_path):
    experiments = [get_experiment(name) for name in NAMES]
    cells = cells_of(experiments, get_scale("tiny"), tmp_path)
    assert len(cells) == 4 and not any(c.complete for c in cells)
    groups = group_cells(cells)
    assert sorted(len(g) for g in groups) == [2, 2]
    assert all({c.experiment for c in g} == set(NAMES) for g in groups)


def test_a_cell_that_does_not_exist_is_refused_by_name():
    experiment = get_experiment(NAMES[0])
    with pytest.raises(ValueError, match="has no cell \\('TPU'"):
        experiment.job_for("TPU", experiment.points[0].label, get_scale("tiny"))


def test_cli_plans_the_dask_spread_and_refuses_a_budget_with_dask(capsys, tmp_path):
    from experiments.cli import main

    assert main(["--plan", "--paper", "stwig_lin14", "--scale", "medium", "--gpus", "0,1"]) == 0
    out = capsys.readouterr().out
    assert "GPU 0: stwig_lin14 = " in out and "--dask on 2 GPUs: about " in out
    with pytest.raises(SystemExit, match="--budget is not supported with --dask"):
        main(["--paper", "stwig_lin14", "--scale", "tiny", "--dask", "local", "--budget", "5", "--out", str(tmp_path)])


@pytest.mark.slow
def test_a_sweep_point_that_repeats_another_experiments_run_gets_its_rows_under_its_own_label(tmp_path, client):
    sweep = get_experiment(SWEEP)
    tiny = get_scale("tiny")
    first, default = sweep.points_for(tiny)[0], get_experiment(NAMES[0]).points_for(tiny)[0]
    config = sweep.configs[0]
    assert first.label != default.label
    assert sweep.run_key(config, first, tiny) == get_experiment(NAMES[0]).run_key(config, default, tiny)
    assert run_on_dask({"stwig_lin14": [NAMES[0], SWEEP]}, "tiny", tmp_path, client=client, isolation="inline",
                       progress=False, log=lambda _: None) == 0
    rows = _rows(tmp_path, SWEEP)
    assert set(rows.dataset) == {p.label for p in sweep.points_for(tiny)}
    assert "skipped" not in set(rows.status)
    report = (tmp_path / "stwig_lin14" / f"{SWEEP}.tiny.md").read_text()
    assert "budget ran out" not in report
