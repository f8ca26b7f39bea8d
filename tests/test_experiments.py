"""The experiments harness: runner (isolation, hard limits, resume), metrics, reports, CLI."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import replace

import numba
import numpy as np
import pandas as pd
import pytest

from common import create_engine
from common.engine.base import Engine
from common.engine.registry import register
from common.engine.result import MatchResult
from common.graph.generate import power_law_labels, query_set, rmat
from experiments import experiments_of, get_experiment
from experiments.harness.core import (
    COMPILE_ALLOWANCE_S,
    ColumnCut,
    Config,
    Experiment,
    Metric,
    MissingEngine,
    Point,
    assign_gpus,
    check_counts,
    format_plan,
    plan,
    plan_set,
    run_experiment,
    run_set,
)
from experiments.harness.runner import (
    SKIPPED,
    Job,
    SettingsChanged,
    SettingsChangedWarning,
    hard_limit,
    read_rows,
    run_jobs,
)
from experiments.harness.workloads import Dataset, QuerySpec, get_scale, standin_size


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


class SlowStartEngine(SlowEngine):
    """Reference counts after a start-up outside the limit of 1.5 s per run, which it declares."""

    name = "slow-start-test"

    def wall_beyond_limit_s(self) -> float:
        return 2.0

    def _match(self, query, *, limit, collect, timeout_s, homomorphic):
        time.sleep(1.5)
        return self.reference.match(query)


register("slow-start-test", SlowStartEngine)


class FirstTimedRunCompiles(Engine):
    """Reference counts; the first timed run (the second call: the runner warms up on the first
    query) compiles a function numba has not seen, as a kernel on a path the warm-up missed would."""

    name = "compiles-once-test"
    supports_disconnected = True

    def _prepare(self, data):
        self.reference = create_engine("cpu").prepare(data)
        self.calls = 0

    def _match(self, query, *, limit, collect, timeout_s, homomorphic):
        self.calls += 1
        if self.calls == 2:
            numba.njit(lambda x: x + 1)(self.calls)
        return self.reference.match(query, limit=limit, collect=collect, timeout_s=timeout_s)


class RepeatsInOneCall(Engine):
    """Reference counts; a query's repeats in one call, whose runs take the seconds of
    ``RUN_SECONDS`` (a class attribute the test sets) in turn."""

    name = "one-call-repeats-test"
    supports_disconnected = True
    repeats_in_one_call = True
    RUN_SECONDS: tuple = ()
    CALLS: list = []

    def _prepare(self, data):
        self.reference = create_engine("cpu").prepare(data)

    def _match(self, query, *, limit, collect, timeout_s, homomorphic):
        return self.reference.match(query, timeout_s=timeout_s)

    def _match_repeats(self, query, repeats, *, timeout_s):
        type(self).CALLS.append((query.name, repeats))
        count = self.reference.match(query).count
        return [MatchResult(self.name, count, phases={"enumerate": s}) for s in self.RUN_SECONDS[:repeats]]


def _register(monkeypatch, *classes):
    """The test engines in the registry for one test only (other tests list the registered names)."""
    from common.engine import registry

    for cls in classes:
        monkeypatch.setitem(registry._REGISTRY, cls.name, f"{__name__}:{cls.__qualname__}")


@pytest.mark.parametrize("seconds, kept", [((0.2, 0.3, 0.4), 3),      # the third fits what is left (0.5)
                                           ((0.3, 0.4, 0.5), 2),      # 0.7 spent + 0.4 > 1: not asked
                                           ((0.2, 0.2, 0.7), 2)])     # asked, past what was left (0.6)
def test_an_engine_that_repeats_in_one_call_is_asked_once_and_its_runs_share_the_limit(
        tmp_path, workload, monkeypatch, seconds, kept):
    data, queries = workload
    _register(monkeypatch, RepeatsInOneCall)
    monkeypatch.setattr(RepeatsInOneCall, "RUN_SECONDS", seconds)
    monkeypatch.setattr(RepeatsInOneCall, "CALLS", [])
    job = Job("t", "one-call", "one-call-repeats-test", "tiny", data, tuple(queries[:2]), time_limit_s=1.0,
              repeats=3, share_limit=True)
    rows = run_jobs([job], tmp_path / "rows.csv", isolation="inline", progress=False)
    assert (rows["status"] == "ok").all(), rows["reason"].tolist()
    assert RepeatsInOneCall.CALLS == [(q.name, 3) for q in queries[:2]]
    assert dict(zip(rows["query"], rows["count"])) == _counts(data, queries[:2])
    for stats in rows["stats"]:
        stats = json.loads(stats)
        assert stats["repeat_s"] == list(seconds[:kept]) and stats.get("repeats_cut", False) == (kept < 3)


class CountsItsRuns(Engine):
    """Reference counts; every ``match`` call's query name in ``CALLS``."""

    name = "counts-its-runs-test"
    supports_disconnected = True
    CALLS: list = []

    def _prepare(self, data):
        self.reference = create_engine("cpu").prepare(data)

    def _match(self, query, *, limit, collect, timeout_s, homomorphic):
        type(self).CALLS.append(query.name)
        return self.reference.match(query, timeout_s=timeout_s)


@pytest.mark.parametrize("helps", [True, False])
def test_the_runner_warms_up_only_an_engine_a_warm_up_helps(tmp_path, workload, monkeypatch, helps):
    data, queries = workload
    _register(monkeypatch, CountsItsRuns)
    monkeypatch.setattr(CountsItsRuns, "CALLS", [])
    monkeypatch.setattr(CountsItsRuns, "warm_up_helps", helps)
    job = Job("t", "counted", "counts-its-runs-test", "tiny", data, tuple(queries[:2]), time_limit_s=5.0)
    rows = run_jobs([job], tmp_path / "rows.csv", isolation="inline", progress=False)
    assert dict(zip(rows["query"], rows["count"])) == _counts(data, queries[:2])
    timed = [q.name for q in queries[:2]]
    assert CountsItsRuns.CALLS == ([queries[0].name] if helps else []) + timed


def _device_name() -> str:
    """What the reports must name: the simulator as such, or the GPU the driver reports."""
    from common.gpu.backend import BACKEND
    from common.gpu.runtime import cuda

    if BACKEND == "simulator":
        return "CUDA simulator"
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


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


def _asking(worker):
    """``worker`` that records the indices of the queries it is asked to answer."""
    asked = []
    answer = worker.ask
    worker.ask = lambda job, index: asked.append((job.time_limit_s, index)) or answer(job, index)
    return worker, asked


def _limits(rows) -> list:
    return [json.loads(stats)["settings"]["time_limit_s"] for stats in rows["stats"]]


def _two_rows_at_half_a_second(tmp_path, workload):
    """The first two queries answered into ``rows.csv`` at a 0.5 s limit by an asking worker:
    (data, queries, worker, asked, out)."""
    from experiments.harness.runner import make_worker

    data, queries = workload
    worker, asked = _asking(make_worker("inline"))
    out = tmp_path / "rows.csv"
    run_jobs([Job("t", "cpu", "cpu", "tiny", data, tuple(queries[:2]), time_limit_s=0.5)], out,
             progress=False, worker=worker)
    return data, queries, worker, asked, out


def test_a_resume_under_the_same_settings_skips_the_done_rows(tmp_path, workload):
    data, queries, worker, asked, out = _two_rows_at_half_a_second(tmp_path, workload)
    rows = run_jobs([Job("t", "cpu", "cpu", "tiny", data, tuple(queries), time_limit_s=0.5)], out,
                    progress=False, worker=worker)
    assert asked == [(0.5, 0), (0.5, 1), (0.5, 2)]               # the resume asked only for the new query
    assert rows["query"].tolist() == [q.name for q in queries] and _limits(rows) == [0.5] * 3
    settings = json.loads(rows["stats"][0])["settings"]
    assert settings == {"time_limit_s": 0.5, "repeats": 1, "share_limit": False, "device_memory_limit": None,
                        "options": {}}


def test_a_resume_under_another_time_limit_refuses_then_reruns_the_old_rows(tmp_path, workload):
    data, queries, worker, asked, out = _two_rows_at_half_a_second(tmp_path, workload)
    before = out.read_bytes()
    today = Job("t", "cpu", "cpu", "tiny", data, tuple(queries), time_limit_s=0.25)
    with pytest.raises(SettingsChanged) as refused:
        run_jobs([today], out, progress=False, worker=worker)
    message = str(refused.value)
    assert message == (f"{out}: 2 row(s) of experiment t, config cpu, dataset tiny were measured with "
                       "time_limit_s=0.5 (this run: 0.25); refusing to mix them with this run's: pass a fresh "
                       "--out, or --rerun-changed to set them aside and run them again")
    assert out.read_bytes() == before and len(asked) == 2          # nothing ran, nothing was written
    with pytest.warns(SettingsChangedWarning, match="2 row"):
        rows = run_jobs([today], out, progress=False, worker=worker, rerun_changed=True)
    assert asked[2:] == [(0.25, 0), (0.25, 1), (0.25, 2)]        # the old rows' queries ran again
    assert rows["query"].tolist() == [q.name for q in queries] and _limits(rows) == [0.25] * 3
    aside = (tmp_path / "rows.csv.discarded").read_text()
    assert aside.count("measured with time_limit_s=0.5 (this run: 0.25)") == 2
    assert aside.count('""time_limit_s"":0.5') == 2


def test_other_repeats_memory_cap_or_options_are_refused_too(tmp_path, workload):
    data, queries = workload
    out = tmp_path / "rows.csv"
    base = Job("t", "cpu", "cpu", "tiny", data, tuple(queries[:1]), time_limit_s=30)
    run_jobs([base], out, isolation="inline", progress=False)
    for changed, said in ((replace(base, repeats=3), "repeats=1 (this run: 3)"),
                          (replace(base, device_memory_limit=2**20), "device_memory_limit=null (this run: 1048576)"),
                          (replace(base, options=(("filter", "label"),)), 'options={} (this run: {"filter":"label"})')):
        with pytest.raises(SettingsChanged, match=re.escape(said)):
            run_jobs([changed], out, isolation="inline", progress=False)
    # the default spelled out is the same configuration (canonical options): reused
    assert len(run_jobs([replace(base, options=(("filter", "refine"),))], out, isolation="inline",
                        progress=False)) == 1


def test_rows_without_recorded_settings_are_refused_then_rerun(tmp_path, workload):
    data, queries = workload
    out = tmp_path / "rows.csv"
    job = Job("t", "cpu", "cpu", "tiny", data, tuple(queries[:2]), time_limit_s=0.25)
    run_jobs([job], out, isolation="inline", progress=False)
    old = read_rows(out)                                          # as a file from before settings were recorded
    old["stats"] = [json.dumps({k: v for k, v in json.loads(js).items() if k != "settings"}) for js in old["stats"]]
    old.assign(seconds=9.0).to_csv(out, index=False)
    with pytest.raises(SettingsChanged, match=r"2 row\(s\) of experiment t, config cpu, dataset tiny were measured "
                                              r"with no recorded settings .*this run: time_limit_s=0.25, repeats=1"):
        run_jobs([job], out, isolation="inline", progress=False)
    assert (read_rows(out)["seconds"] == 9.0).all()
    with pytest.warns(SettingsChangedWarning):
        rows = run_jobs([job], out, isolation="inline", progress=False, rerun_changed=True)
    assert len(rows) == 2 and (rows["seconds"] < 9.0).all() and _limits(rows) == [0.25, 0.25]


def test_a_timed_run_that_compiled_is_run_again(tmp_path, workload, monkeypatch):
    from common.engine import registry

    monkeypatch.setitem(registry._REGISTRY, "compiles-once-test",
                        f"{__name__}:{FirstTimedRunCompiles.__qualname__}")
    data, queries = workload
    job = Job("t", "once", "compiles-once-test", "tiny", data, tuple(queries), time_limit_s=30)
    rows = run_jobs([job], tmp_path / "rows.csv", isolation="inline", progress=False)
    reruns = [json.loads(stats).get("compile_reruns", 0) for stats in rows["stats"]]
    assert reruns == [1] + [0] * (len(queries) - 1)
    assert dict(zip(rows["query"], rows["count"])) == _counts(data, queries)


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_hard_limit_grows_by_the_start_up_an_engine_declares(tmp_path, workload):
    """A run 1.5 s past a 0.2 s limit by design (declared: 2 s) is waited for and answered, where
    the hard limit alone (0.3 + 1 s) would kill it."""
    data, queries = workload
    job = Job("t", "slow-start", "slow-start-test", "tiny", data, (queries[1],), time_limit_s=0.2, grace_s=1.0)
    assert hard_limit(job) < 1.5 < hard_limit(job, 2.0)
    rows = run_jobs([job], tmp_path / "rows.csv", progress=False)
    assert rows.status.tolist() == ["ok"] and rows["count"].tolist() == [_counts(data, [queries[1]])[queries[1].name]]


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
    raw = pd.DataFrame({"query": ["a", "b", "c", "d"], "status": ["ok", "ok", "timeout", "error"],
                        "seconds": [0.001, 0.003, 9.0, 1.0], "filter_s": [0.0005, 0.001, 0.0, 0.0],
                        "stats": ['{"rows": 4}', '{"rows": 8}', '{"rows": 12}', '{"rows": 100}']})
    assert Metric("avg_ms").cell(raw, None) == pytest.approx(2.0)          # solved queries only
    assert Metric("avg_ms", phases=("filter",)).cell(raw, None) == pytest.approx(0.75)
    assert Metric("solved").cell(raw, None) == 2
    assert Metric("stat", stat="rows").cell(raw, None) == 8                # a timed-out run counts
    assert Metric("stat", stat="rows", partial_runs=False).cell(raw, None) == 6


def test_count_disagreements_are_reported():
    raw = pd.DataFrame({"dataset": ["d"] * 4, "query": ["q1", "q1", "q2", "q2"],
                        "config": ["x", "y", "x", "y"], "status": ["ok", "ok", "ok", "timeout"],
                        "count": [5, 6, 7, 1]})
    problems = check_counts(raw, {"d": {"q2": 8}})
    assert sorted(zip(problems["query"], problems["config"])) == [("q1", "x"), ("q1", "y"), ("q2", "x")]


def test_experiment_needing_a_missing_engine_says_so(tmp_path, capsys):
    from experiments.gpusm import main

    experiment = Experiment("test.missing", "testpaper", "needs an unbuilt engine",
                            (Config.of("x", "no-such-engine"),), (), Metric("avg_ms"), 1.0)
    with pytest.raises(MissingEngine, match="no-such-engine"):
        run_experiment(experiment, "tiny", tmp_path, progress=False)
    assert not (tmp_path / "testpaper").exists()
    assert main(["experiment", "--list"]) == 0
    assert "compare.known" in capsys.readouterr().out


def test_an_optional_config_whose_engine_is_missing_keeps_its_column_and_does_not_run(tmp_path):
    data = Dataset("toy", 40, 120, vertex_labels=3)
    experiment = Experiment("test.optional", "testpaper", "an optional peer that is not installed",
                            (Config.of("ref", "cpu"), Config("peer", "no-such-engine", optional=True)),
                            (Point("p", data, QuerySpec("induced", size=3, count=2)),), Metric("avg_ms"), 10.0)
    assert experiment.missing_engines() == [] and [c.label for c in experiment.configs_run()] == ["ref"]
    outcome = run_experiment(experiment, "tiny", tmp_path, isolation="inline", progress=False)
    assert set(outcome.raw["config"]) == {"ref"} and len(outcome.raw) == 2
    assert list(outcome.table.columns) == ["ref", "peer"] and outcome.table["peer"].isna().all()
    (line,) = plan([experiment], "tiny")
    assert line.jobs == 1 and line.missing == ()


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


def test_the_papers_register_with_the_harness_which_never_imports_them():
    import re
    import subprocess
    import sys
    from pathlib import Path

    from experiments import PAPERS
    from experiments.harness import catalog

    harness = Path(catalog.__file__).parent
    importers = [p.name for p in harness.glob("*.py")
                 if re.search(r"^\s*(from|import) (experiments\.papers|\.\.papers|\.\. import)", p.read_text(), re.M)]
    assert importers == []
    # the harness alone loads no paper; the first look-up imports the package that registers them
    probe = ("import sys, experiments.harness.core, experiments.harness.cells, experiments.harness.notebook; "
             "print(sorted(m for m in sys.modules if m.startswith('experiments.papers')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert catalog.papers() == PAPERS
    assert {e.paper for e in catalog.experiments_of()} == set(PAPERS)
    with pytest.raises(ValueError, match="unknown paper 'no_such_paper'"):
        catalog.experiments_of("no_such_paper")
    with pytest.raises(ValueError, match="must name it as its paper"):
        catalog.register_paper("another", catalog.experiments_of("compare"))


def test_real_query_sets_at_small_scale_carry_their_exact_counts():
    from experiments.harness.workloads import GITHUB, GITHUB_Q, YEAST, yeast_queries

    scale = replace(get_scale("small"), queries_per_set=None)    # every query of the set
    queries, known = GITHUB_Q.build(GITHUB.load(scale), GITHUB, scale)
    assert [q.name for q in queries] == [f"Q_{i}" for i in range(11)] and len(known) == 11
    queries, known = yeast_queries("dense_8").build(YEAST.load(scale), YEAST, scale)
    assert queries and all(known[q.name] <= 10**7 for q in queries)


# ---------------------------------------------------------------------- plan, budget, GPUs
def _toy(name, configs, points, limit=2.0, repeats=1, small=None):
    return Experiment(f"test.{name}", "testpaper", name, tuple(configs), tuple(points), Metric("avg_ms"),
                      time_limit_s=limit, repeats=repeats, scale_at={"tiny": small} if small else {})


def test_plan_counts_runs_limits_warmups_and_compiles_once_per_worker():
    dataset = Dataset("toy", 500, 2000, vertex_labels=3)
    four, three = (Point("toy-4", dataset, QuerySpec("induced", size=4, count=3)),
                   Point("toy-3", dataset, QuerySpec("induced", size=3, count=3)))
    cpu, label = Config.of("cpu", "cpu"), Config.of("cpu-label", "cpu", filter="label")
    default_spelled_out = Config.of("cpu-default", "cpu", filter="refine")
    first = _toy("first", (cpu, label), (four, three), limit=60.0, repeats=3, small=None)
    # same configurations with a shorter limit: compiled already, but not the same runs
    second = _toy("second", (default_spelled_out, label), (four,), small={"time_limit_s": 0.5})
    # exactly the first experiment's runs on one point: nothing new to run
    third = _toy("third", (cpu,), (three,), limit=60.0, repeats=3)
    q = get_scale("tiny").queries_per_set                      # 2 (the scale caps the sets' 3)
    lines = plan([first, second, third], "tiny")
    one, two, three_ = lines
    assert (one.jobs, one.runs, one.limit_s) == (4, 4 * q, 60.0)
    assert one.query_s == 4 * q * 3 * 60.0                    # runs x repeats x limit
    # one warm-up per configuration and query size (2 x 2), one compile per configuration
    assert one.warmup_s == 4 * 60.0 and one.compile_s == 2 * COMPILE_ALLOWANCE_S
    assert (two.runs, two.limit_s, two.query_s) == (2 * q, 0.5, 2 * q * 0.5)
    assert two.warmup_s == 0 and two.compile_s == 0           # filter="refine" is cpu's default
    assert (three_.jobs, three_.runs, three_.worst_s) == (1, 0, 0.0)
    assert one.worst_s == one.query_s + one.warmup_s + one.compile_s


class StartsAProcess(RepeatsInOneCall):
    """An engine whose runs each take a declared start-up beside the limit: 1 s + 1 s per 1,000 edges."""

    name = "starts-a-process-test"
    repeats_in_one_call = False

    @classmethod
    def planned_start_up_s(cls, num_edges):
        return 1.0 + num_edges / 1000


class StartsOnceAQuery(StartsAProcess):
    name = "starts-once-a-query-test"
    repeats_in_one_call = True


class StartsWithoutWarmUp(StartsAProcess):
    name = "starts-without-warm-up-test"
    warm_up_helps = False


class CannotSay(StartsAProcess):
    name = "cannot-say-test"

    @classmethod
    def planned_start_up_s(cls, num_edges):
        return None




def test_plan_counts_the_start_up_an_engine_declares_and_names_those_that_cannot_say(monkeypatch):
    _register(monkeypatch, StartsAProcess, StartsOnceAQuery, CannotSay, StartsWithoutWarmUp)
    dataset = Dataset("toy", 500, 2000, vertex_labels=3)            # 2,000 edges: 3 s a process
    point = Point("toy-4", dataset, QuerySpec("induced", size=4, count=3))
    q = get_scale("tiny").queries_per_set
    edges = standin_size(dataset, get_scale("tiny").max_edges)[1]
    per_run = 1.0 + edges / 1000
    separate = _toy("separate", (Config.of("p", "starts-a-process-test"),), (point,), limit=1.0, repeats=3)
    one_call = _toy("one-call", (Config.of("o", "starts-once-a-query-test"),), (point,), limit=1.0, repeats=3)
    unknown = _toy("unknown", (Config.of("u", "cannot-say-test"), Config.of("cpu", "cpu")), (point,),
                   limit=1.0, repeats=3)
    first, second, third = plan([separate, one_call, unknown], "tiny")
    assert first.start_up_s == pytest.approx(per_run * (2 + 3 * q))    # warm-up, probe, 3 runs a query
    assert first.worst_s == pytest.approx(first.query_s + first.warmup_s + first.compile_s + first.start_up_s)
    assert second.start_up_s == pytest.approx(per_run * (2 + q))      # a query's runs in one process
    assert third.start_up_s == 0.0 and third.not_estimated == ("cannot-say-test",)
    assert "start-up of cannot-say-test not estimated" in format_plan("testpaper", [first, third])
    (cold,) = plan([_toy("cold", (Config.of("w", "starts-without-warm-up-test"),), (point,), limit=1.0,
                         repeats=3)], "tiny")
    assert cold.start_up_s == pytest.approx(per_run * (1 + 3 * q))     # a probe, no warm-up
    assert cold.warmup_s == 0 and first.warmup_s == 1.0


def test_assign_gpus_puts_every_set_on_exactly_one_gpu_and_balances():
    from experiments import PAPERS

    worst = {paper: sum(line.worst_s for line in plan_set(paper, "tiny")) for paper in PAPERS}
    for gpus in (["0", "1", "2", "3"], ["0", "1"], ["7"], [str(i) for i in range(5)]):
        assignment = assign_gpus(worst, gpus)
        placed = [p for papers in assignment.values() for p in papers]
        assert sorted(placed) == sorted(PAPERS) and set(assignment) == set(gpus)
        assert assignment == assign_gpus(worst, gpus)          # fixed for a given plan
    toy = {"a": 5.0, "b": 4.0, "c": 3.0, "d": 3.0, "e": 2.0, "f": 1.0}
    loads = sorted(sum(toy[p] for p in papers) for papers in assign_gpus(toy, ["0", "1", "2"]).values())
    assert loads == [6.0, 6.0, 6.0]
    with pytest.raises(ValueError):
        assign_gpus(toy, ["0", "0"])


def test_small_scale_fits_four_gpus_of_seven_and_a_half_minutes():
    from experiments import PAPERS

    worst = {paper: sum(line.worst_s for line in plan_set(paper, "small")) for paper in PAPERS}
    assignment = assign_gpus(worst, ["0", "1", "2", "3"])
    assert max(sum(worst[p] for p in papers) for papers in assignment.values()) <= 450.0
    for paper in PAPERS:                                        # every experiment still runs something
        assert all(line.jobs > 0 for line in plan_set(paper, "small"))


def test_a_column_cut_runs_a_column_on_some_datasets_only_and_the_report_says_so(tmp_path):
    """At a scale, ``column_cuts_at`` keeps a column to some datasets: no job, no plan line, no Dask
    cell elsewhere; its other cells read "not run at this scale" and the cut line says why."""
    from experiments.harness.cells import cells_of

    small, large = Dataset("toy", 500, 2000, vertex_labels=3), Dataset("big", 800, 3000, vertex_labels=3)
    spec = QuerySpec("induced", size=3, count=3)
    points = (Point("toy", small, spec), Point("big", large, spec))
    configs = (Config.of("cpu", "cpu"), Config.of("cpu-label", "cpu", filter="label"))
    cut = ColumnCut(("cpu-label",), "its start-up on the big graph", datasets=("toy",), repeats=1)
    experiment = Experiment("test.cut", "testpaper", "Cut", configs, points, Metric("avg_ms"), time_limit_s=60.0,
                            repeats=3, column_cuts_at={"tiny": (cut,)})
    tiny = get_scale("tiny")
    jobs, _ = experiment.jobs(tiny)
    assert sorted((j.config, j.dataset) for j in jobs) == [("cpu", "big"), ("cpu", "toy"), ("cpu-label", "toy")]
    assert experiment.cut_cells(tiny) == {("big", "cpu-label")}
    with pytest.raises(ValueError, match="no cell"):
        experiment.job_for("cpu-label", "big", tiny)
    (line,) = plan([experiment], "tiny")
    assert line.jobs == 3
    assert len(cells_of([experiment], tiny, tmp_path)) == 3
    assert "cpu-label: on toy only, 1 timed run a query (its start-up on the big graph)" in experiment.cuts(tiny)
    assert {(j.config, j.repeats) for j in jobs} == {("cpu", 3), ("cpu-label", 1)}
    assert len(experiment.jobs(get_scale("small"))[0]) == 4                 # other scales: every cell
    outcome = run_experiment(experiment, "tiny", tmp_path, isolation="inline", progress=False)
    assert outcome.table.loc["toy"].notna().all() and pd.isna(outcome.table.loc["big", "cpu-label"])
    markdown = (tmp_path / "testpaper" / "test.cut.tiny.md").read_text()
    measured, solved = markdown.split("## Measured")[1], markdown.split("## Solved queries per cell")[1]
    assert "| big | " in measured and measured.split("| big | ")[1].split("\n")[0].endswith("not run at this scale |")
    assert solved.split("| big | ")[1].split("\n")[0].endswith("not run at this scale |")


def test_budget_skips_pairs_reports_them_as_not_run_and_resume_redoes_them(tmp_path):
    experiment = _tiny_experiment()
    out = tmp_path / "testpaper"
    csv_path = out / "test.toy.tiny.csv"
    skipped = run_experiment(experiment, "tiny", tmp_path, isolation="inline", progress=False,
                             deadline=time.monotonic())
    assert (skipped.raw.status == SKIPPED).all() and (skipped.raw.reason == "budget").all()
    assert len(skipped.raw) == 2 * 2 * get_scale("tiny").queries_per_set
    assert skipped.table.isna().all().all()
    markdown = (out / "test.toy.tiny.md").read_text()
    assert markdown.count("skipped: budget)") == 4 and "budget ran out" in markdown
    # resume: the skipped pairs run now; no skipped row is left and no pair appears twice
    done = run_experiment(experiment, "tiny", tmp_path, isolation="inline", progress=False)
    rows = read_rows(csv_path)
    assert (rows.status == "ok").all() and len(rows) == len(skipped.raw)
    assert not rows.duplicated(["config", "dataset", "query"]).any()
    assert done.table.notna().all().all() and "not run" not in (out / "test.toy.tiny.md").read_text()


def test_budget_that_runs_out_midway_keeps_what_ran(tmp_path, workload):
    from experiments.harness.runner import make_worker

    data, queries = workload
    worker = make_worker("inline")
    asked = []
    answer = worker.ask
    worker.ask = lambda job, index: asked.append(index) or answer(job, index)
    out = tmp_path / "rows.csv"
    first = Job("t", "cpu", "cpu", "tiny", data, tuple(queries[:1]), time_limit_s=30)
    run_jobs([first], out, progress=False, deadline=time.monotonic() + 3600, worker=worker)
    job = Job("t", "cpu", "cpu", "tiny", data, tuple(queries), time_limit_s=30)
    rows = run_jobs([job], out, progress=False, deadline=time.monotonic(), worker=worker)
    assert asked == [0]                                        # nothing started after the deadline
    assert rows.status.tolist() == ["ok"] + [SKIPPED] * (len(queries) - 1)
    rows = run_jobs([job], out, progress=False, worker=worker)
    assert asked == list(range(len(queries)))                  # resume runs only the skipped pairs
    assert rows.status.tolist() == ["ok"] * len(queries)
    assert dict(zip(rows["query"], rows["count"])) == _counts(data, queries)


def test_a_set_records_experiments_it_could_not_run_and_fails(tmp_path):
    missing = Experiment("test.missing", "testpaper", "needs an unbuilt engine",
                         (Config.of("x", "no-such-engine"),), (), Metric("avg_ms"), 1.0)
    outcome = run_set("testpaper", "tiny", tmp_path, experiments=[missing], isolation="inline",
                      progress=False, log=lambda line: None)
    assert outcome.failed and "no-such-engine" in outcome.missing["test.missing"]
    meta = json.loads((tmp_path / "testpaper" / "run.tiny.json").read_text())
    assert "no-such-engine" in meta["experiments"]["test.missing"]["not_run"]
    # a set whose rows were computed elsewhere first (the Dask cells) counts its wall from there
    run_set("testpaper", "tiny", tmp_path, experiments=[missing], isolation="inline", progress=False,
            log=lambda line: None, started=time.monotonic() - 100.0)
    assert json.loads((tmp_path / "testpaper" / "run.tiny.json").read_text())["wall_s"] >= 100.0


def test_identical_runs_of_a_set_are_shared_not_repeated(tmp_path):
    dataset = Dataset("toy", 500, 2000, vertex_labels=3)
    point = Point("toy-4", dataset, QuerySpec("induced", size=4, count=3))
    first = _toy("first", (Config.of("cpu", "cpu"),), (point,), limit=60.0)
    again = _toy("again", (Config.of("reference", "cpu", filter="refine"),), (point,), limit=60.0)
    outcome = run_set("testpaper", "tiny", tmp_path, experiments=[first, again], isolation="inline",
                      progress=False, log=lambda line: None)
    a, b = (o.raw.reset_index(drop=True) for o in outcome.outcomes)
    assert a["count"].tolist() == b["count"].tolist() and a["seconds"].tolist() == b["seconds"].tolist()
    assert all(r.startswith("same run as test.first (cpu)") for r in b["reason"])
    meta = json.loads((tmp_path / "testpaper" / "run.tiny.json").read_text())
    assert meta["gpu"] == _device_name() and meta["scale"] == "tiny"
    assert meta["experiments"]["test.again"]["statuses"] == {"ok": len(b)}


def test_report_header_names_gpu_scale_command_date_and_versions(tmp_path):
    run_experiment(_tiny_experiment(), "tiny", tmp_path, isolation="inline", progress=False,
                   command="gpusm experiment test.toy --scale tiny")
    header = (tmp_path / "testpaper" / "test.toy.tiny.md").read_text().split("## Measured")[0]
    from experiments.harness.report import commit

    assert f"GPU: {_device_name()}; commit: `{commit()}`; scale: `tiny`; date: 20" in header
    assert commit() != "unknown"                               # the checkout is a git repository
    assert "command: `gpusm experiment test.toy --scale tiny`" in header
    assert "numba-cuda 0.30" in header and "numpy " in header and "python 3." in header


@pytest.mark.slow
def test_parallel_launch_pins_each_set_to_a_gpu_and_logs_it(tmp_path):
    from experiments.cli import launch

    papers = ["stwig_lin14", "egsm_sigmod23"]
    code = launch(papers, ["3", "5"], "tiny", str(tmp_path), budget_s=0.0, launcher="test launcher")
    assert code == 0
    pinned = set()
    for paper in papers:
        log = (tmp_path / paper / "run.log").read_text()
        assert f"--paper {paper}" in log and f"{paper} done" in log
        meta = json.loads((tmp_path / paper / "run.tiny.json").read_text())
        assert meta["launched_by"] == "test launcher"
        pinned.add(meta["cuda_visible_devices"])
        assert all(e["statuses"] == {SKIPPED: sum(e["statuses"].values())} for e in meta["experiments"].values())
    assert pinned == {"3", "5"}


def test_stat_report_counts_timed_out_runs_and_shows_skipped_cells_as_not_run(tmp_path):
    from dataclasses import replace as replace_field

    from experiments.harness.report import write_markdown

    experiment = replace_field(_tiny_experiment(), metric=Metric("stat", stat="idle_rate"), figure=None)
    def row(dataset, config, status, idle):
        return {"experiment": experiment.name, "dataset": dataset, "config": config, "query": f"q{len(rows)}",
                "status": status, "count": 1, "seconds": 0.1,
                "stats": "" if idle is None else json.dumps({"idle_rate": idle})}
    rows = []
    for args in (("toy-4", "cpu", "ok", 0.2), ("toy-4", "cpu", "timeout", 0.4),
                 ("toy-4", "cpu-label", SKIPPED, None), ("toy-4", "cpu-label", "ok", 0.9),
                 ("toy-3", "cpu", "ok", 0.1), ("toy-3", "cpu-label", "ok", 0.3)):
        rows.append(row(*args))
    raw = pd.DataFrame(rows)
    scale = get_scale("tiny")
    table = experiment.table(raw, scale)
    assert table.loc["toy-4", "cpu"] == pytest.approx(0.3)     # the timed-out run's 0.4 counts
    assert np.isnan(table.loc["toy-4", "cpu-label"])           # one query not run: no number
    assert table.loc["toy-3", "cpu-label"] == pytest.approx(0.3)
    text = write_markdown(experiment, scale, raw, table, check_counts(raw, {}), tmp_path / "r.md").read_text()
    assert "not run (1 skipped: budget)" in text and "1/2 (+1 timed out, in the stat)" in text
    assert "1/1 (1 not run)" in text and "solved and timed-out queries" in text
    assert "0.9" not in text.split("## Solved")[0].split("## Measured")[1]


def test_report_names_each_configurations_errors_and_unsupported_queries_with_the_first_reason(tmp_path):
    """A crashed or refusing system is named in the report with its first error, not just '-'."""
    from experiments.harness.report import failure_table, write_markdown

    experiment = _tiny_experiment()
    rows = [{"experiment": experiment.name, "dataset": "toy-4", "config": config, "query": query, "status": status,
             "count": 1 if status == "ok" else np.nan, "seconds": 0.1, "reason": reason, "stats": ""}
            for config, query, status, reason in (
                ("cpu", "q0", "ok", ""),
                ("cpu", "q1", "error", "the binary printed no count (rc 188): GPUassert\nmore"),
                ("cpu", "q2", "error", "second crash"),
                ("cpu-label", "q0", "unsupported", "takes at most 5 | vertices"),
                ("cpu-label", "q1", "ok", ""))]
    raw = pd.DataFrame(rows)
    failures = failure_table(raw)
    assert failures[["configuration", "status", "queries"]].values.tolist() == [["cpu", "error", 2],
                                                                                 ["cpu-label", "unsupported", 1]]
    assert failures.reason.tolist() == ["the binary printed no count (rc 188): GPUassert",
                                        "takes at most 5 \\| vertices"]
    scale = get_scale("tiny")
    text = write_markdown(experiment, scale, raw, experiment.table(raw, scale), check_counts(raw, {}),
                          tmp_path / "r.md").read_text()
    section = text.split("## Errors and unsupported queries")[1]
    assert "| cpu | error | 2 | toy-4: q1 | the binary printed no count (rc 188): GPUassert |" in section
    assert "second crash" not in text
    assert "## Errors" not in write_markdown(experiment, scale, raw[raw.status == "ok"],
                                             experiment.table(raw[raw.status == "ok"], scale),
                                             check_counts(raw[raw.status == "ok"], {}), tmp_path / "s.md").read_text()


def test_commit_of_a_tree_inside_another_checkout_is_unknown(tmp_path):
    """An export unpacked in a folder of another git checkout does not take that checkout's HEAD;
    the top of a checkout names its own (``+dirty`` with a changed tracked file)."""
    import subprocess

    from experiments.harness.report import checkout_commit

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("a\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    export = tmp_path / "export"
    export.mkdir()
    assert checkout_commit(export) == "unknown"
    assert checkout_commit(tmp_path) == head
    (tmp_path / "a.txt").write_text("b\n")
    assert checkout_commit(tmp_path) == head + "+dirty"
    assert checkout_commit(tmp_path / "missing") == "unknown"


def test_re_executed_notebooks_do_not_stamp_reports_dirty(tmp_path):
    """The README's steps re-execute notebooks in place; that alone leaves the commit clean."""
    import subprocess

    from experiments.harness.report import checkout_commit

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "tutorial.ipynb").write_text("{}\n")
    (tmp_path / "a.py").write_text("a\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a")
    head = checkout_commit(tmp_path)
    (tmp_path / "notebooks" / "tutorial.ipynb").write_text('{"cells": []}\n')
    assert checkout_commit(tmp_path) == head and "+dirty" not in head
    (tmp_path / "a.py").write_text("b\n")
    assert checkout_commit(tmp_path) == head + "+dirty"


def test_commit_is_named_by_the_environment_for_an_exported_tree(monkeypatch):
    from experiments.harness.report import commit

    commit.cache_clear()
    monkeypatch.setenv("GPUSM_COMMIT", "abc1234")
    try:
        assert commit() == "abc1234"
    finally:
        commit.cache_clear()


_ORPHAN = """import sys, time
sys.path.insert(0, {root!r})
from common import Graph
from common.engine.registry import engine_class
from common.graph.generate import rmat
from experiments.harness.runner import Job, make_worker

data = rmat(300, 3000, seed=3, name="hubs")
star = Graph.from_edges(5, [0, 0, 0, 0], [1, 2, 3, 4], labels=[0] * 5, name="star4")
worker = make_worker("process")
worker._spawn()
cpu = engine_class("cpu")
worker.conn.send(("job", Job("t", "c", "cpu", "hubs", data, (star,), time_limit_s=3.0),
                  f"{{cpu.__module__}}:{{cpu.__qualname__}}"))
print(worker.process.pid, flush=True)
time.sleep(120)
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_a_worker_orphaned_by_a_killed_run_exits_quietly(tmp_path):
    """The run is killed while its worker process prepares a job (a 3 s warm-up query): the
    worker exits with it, without a traceback (a BrokenPipeError, answering nobody) in the log."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    log = tmp_path / "run.log"
    with log.open("w") as handle:
        parent = subprocess.Popen([sys.executable, "-c", _ORPHAN.format(root=str(Path(__file__).parents[1]))],
                                  stdout=subprocess.PIPE, stderr=handle, text=True)
    child = int(parent.stdout.readline())
    try:
        time.sleep(1.0)                       # the worker is in its warm-up query now
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        stop = time.monotonic() + 8
        while _running(child) and time.monotonic() < stop:
            time.sleep(0.1)
        assert not _running(child), "the orphaned worker is still running"
        time.sleep(0.5)
        assert "Traceback" not in log.read_text(), log.read_text()
    finally:
        if _running(child):
            os.kill(child, signal.SIGKILL)
