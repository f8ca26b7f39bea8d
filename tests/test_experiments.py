"""The experiments harness: runner (isolation, hard limits, resume), metrics, reports, CLI."""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd
import pytest

from common import create_engine
from common.engine import Engine, register
from common.generate import power_law_labels, query_set, rmat
from experiments import experiments_of, get_experiment
from experiments.core import Config, Experiment, Metric, MissingEngine, Point, check_counts, run_experiment
from experiments.runner import Job, read_rows, run_jobs
from experiments.workloads import Dataset, QuerySpec, get_scale


@pytest.fixture(scope="module")
def workload():
    labels = power_law_labels(60, 3, 1.0, seed=2)
    data = rmat(60, 200, seed=2, labels=labels, name="tiny-rmat")
    queries = list(query_set(data, 3, 4, seed=5).queries)
    return data, queries


class SlowEngine(Engine):
    """Reference counts, except that a query named ``hang`` never returns and ``crash`` kills the process."""

    name = "slow-test"
    supports_disconnected = True

    def _prepare(self, data):
        self.reference = create_engine("cpu").prepare(data)

    def _match(self, query, *, limit, collect, timeout_s, homomorphic):
        if query.name == "hang":
            time.sleep(3600)
        if query.name == "crash":
            os._exit(3)
        return self.reference.match(query)


register("slow-test", SlowEngine)


def _counts(data, queries):
    ref = create_engine("cpu").prepare(data)
    return {q.name: ref.match(q).count for q in queries}


def test_inline_run_resumes_without_redoing_queries(tmp_path, workload):
    data, queries = workload
    out = tmp_path / "rows.csv"
    job = Job("t", "cpu", "cpu", "tiny", data, tuple(queries[:2]), time_limit_s=30)
    first = run_jobs([job], out, isolation="inline", progress=False)
    assert len(first) == 2
    full = Job("t", "cpu", "cpu", "tiny", data, tuple(queries), time_limit_s=30)
    rows = run_jobs([full], out, isolation="inline", progress=False)
    assert len(rows) == 3                      # one new row, the first two kept
    assert rows["query"].tolist() == [q.name for q in queries]
    assert dict(zip(rows["query"], rows["count"])) == _counts(data, queries)
    assert (rows.status == "ok").all()
    assert len(run_jobs([full], out, isolation="inline", progress=False)) == 3


def test_worker_process_turns_hang_and_crash_into_rows(tmp_path, workload):
    data, queries = workload
    hang, crash = queries[0].replace(name="hang"), queries[0].replace(name="crash")
    job = Job("t", "slow", "slow-test", "tiny", data, (queries[1], hang, crash, queries[2]),
              time_limit_s=0.2, grace_s=4.0)
    rows = run_jobs([job], tmp_path / "rows.csv", progress=False).set_index("query")
    assert rows.loc["hang", "status"] == "timeout" and "worker killed" in rows.loc["hang", "reason"]
    assert rows.loc["crash", "status"] == "error" and "exit code 3" in rows.loc["crash", "reason"]
    expected = _counts(data, [queries[1], queries[2]])
    # a fresh worker answers the queries after the killed ones
    for q in (queries[1], queries[2]):
        assert rows.loc[q.name, "status"] == "ok" and rows.loc[q.name, "count"] == expected[q.name]


def test_failed_prepare_is_an_error_row(tmp_path, workload):
    data, queries = workload
    job = Job("t", "bad", "cpu", "tiny", data, tuple(queries[:1]), options=(("filter", "nope"),))
    rows = run_jobs([job], tmp_path / "rows.csv", progress=False)
    assert rows.status.tolist() == ["error"] and "unknown filter" in rows.reason[0]


def _tiny_experiment(paper_values=None):
    dataset = Dataset("toy", 500, 2000, vertex_labels=3)
    points = (Point("toy-4", dataset, QuerySpec("induced", size=4, count=3), x=4),
              Point("toy-3", dataset, QuerySpec("induced", size=3, count=3), x=3))
    configs = (Config.of("cpu", "cpu"), Config.of("cpu-label", "cpu", filter="label"))
    return Experiment("test.toy", "testpaper", "Toy experiment", configs, points,
                      Metric("speedup", base="cpu"), time_limit_s=60.0, paper_values=paper_values,
                      figure="lines")


def test_experiment_cells_come_from_the_raw_rows(tmp_path):
    paper = pd.DataFrame({"cpu-label": [2.5]}, index=["toy-4"])
    outcome = run_experiment(_tiny_experiment(paper), "tiny", tmp_path, isolation="inline", progress=False)
    raw = read_rows(tmp_path / "testpaper" / "test.toy.tiny.csv")
    assert len(raw) == 2 * 2 * get_scale("tiny").queries_per_set
    assert outcome.disagreements.empty
    for point in ("toy-4", "toy-3"):
        here = raw[(raw.dataset == point) & (raw.status == "ok")]
        base = here[here.config == "cpu"].set_index("query")["seconds"]
        other = here[here.config == "cpu-label"].set_index("query")["seconds"]
        assert outcome.table.loc[point, "cpu"] == pytest.approx(1.0)
        assert outcome.table.loc[point, "cpu-label"] == pytest.approx((other / base).mean())
    markdown = (tmp_path / "testpaper" / "test.toy.tiny.md").read_text()
    assert "(paper: 2.5)" in markdown and "stand-in" in markdown
    assert (tmp_path / "testpaper" / "test.toy.tiny.png").stat().st_size > 1000


def test_avg_solved_and_stat_metrics():
    raw = pd.DataFrame({"query": ["a", "b", "c"], "status": ["ok", "ok", "timeout"],
                        "seconds": [0.001, 0.003, 9.0], "filter_s": [0.0005, 0.001, 0.0],
                        "stats": ['{"rows": 4}', '{"rows": 8}', ""]})
    assert Metric("avg_ms").cell(raw, None) == pytest.approx(2.0)
    assert Metric("avg_ms", phases=("filter",)).cell(raw, None) == pytest.approx(0.75)
    assert Metric("solved").cell(raw, None) == 2
    assert Metric("stat", stat="rows").cell(raw, None) == 6


def test_count_disagreements_are_reported():
    raw = pd.DataFrame({"dataset": ["d"] * 4, "query": ["q1", "q1", "q2", "q2"],
                        "config": ["x", "y", "x", "y"], "status": ["ok", "ok", "ok", "timeout"],
                        "count": [5, 6, 7, 1]})
    problems = check_counts(raw, {"d": {"q2": 8}})
    assert sorted(zip(problems["query"], problems["config"])) == [("q1", "x"), ("q1", "y"), ("q2", "x")]


def test_experiment_needing_a_missing_engine_says_so(tmp_path, capsys):
    from common.cli import main

    experiment = Experiment("test.missing", "testpaper", "needs an unbuilt engine",
                            (Config.of("x", "no-such-engine"),), (), Metric("avg_ms"), 1.0)
    with pytest.raises(MissingEngine, match="no-such-engine"):
        run_experiment(experiment, "tiny", tmp_path, progress=False)
    assert not (tmp_path / "testpaper").exists()
    assert main(["experiment", "--list"]) == 0
    assert "compare.known" in capsys.readouterr().out


def test_every_declared_experiment_builds_its_tiny_workload():
    scale = get_scale("tiny")
    for experiment in experiments_of():
        assert experiment is get_experiment(experiment.name)
        jobs, _ = experiment.jobs(scale)
        assert jobs and all(len(j.queries) >= 1 for j in jobs)
        for job in jobs:
            assert job.data.num_vertices <= 200
            # generated queries are shrunk; the fixed patterns P1-P9 have up to 5 vertices
            assert all(q.num_vertices <= max(scale.max_query_vertices, 5) for q in job.queries)


def test_real_query_sets_at_small_scale_carry_their_exact_counts():
    from experiments.workloads import GITHUB, GITHUB_Q, YEAST, yeast_queries

    scale = get_scale("small")
    queries, known = GITHUB_Q.build(GITHUB.load(scale), GITHUB, scale)
    assert [q.name for q in queries] == [f"Q_{i}" for i in range(11)] and len(known) == 11
    queries, known = yeast_queries("dense_8").build(YEAST.load(scale), YEAST, scale)
    assert queries and all(known[q.name] <= 10**7 for q in queries)
