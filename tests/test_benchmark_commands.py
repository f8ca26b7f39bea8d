"""The small-query, Dask-scaling, host-cost and kernel-time benchmarks at tiny size (the CPU
reference; GPU numbers come from running them on a device): the small-query table and the Dask
scaling table give exact counts, write their CSV (and plot), and say which backend they ran on;
the host-cost and kernel-time tables need a GPU."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from _extras import requires
from common.engine.base import Engine
from common.engine.registry import create_engine
from common.gpu.runtime import simulator_active
from common.graph.roots import plan_split
from experiments.bench import dask_scaling, small_queries
from experiments.profiling import host_costs, host_timeline, kernel_times


@pytest.mark.slow
def test_small_queries_table_counts_and_csv(tmp_path, capsys):
    out = tmp_path / "small.csv"
    assert small_queries.main(["--engines", "cpu", "--workloads", "github", "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert len(frame) == 11 and frame.exact.all() and set(frame["mode"]) == {"one"}
    printed = capsys.readouterr().out
    assert "backend:" in printed and "total_vs_cpu" in printed


@pytest.mark.slow
def test_small_queries_interleaved_pass_answers_every_query_with_every_engine(tmp_path, capsys):
    data, queries, known = small_queries.load("github")
    engines = {"a": create_engine("cpu").prepare(data), "b": create_engine("cpu").prepare(data)}
    timed = small_queries.time_interleaved(engines, queries, 60.0)
    assert set(timed) == {"a", "b"}
    for answers in timed.values():
        assert [result.count for _, result in answers] == [known[q.name] for q in queries]
        assert all(wall > 0 for wall, _ in answers)
    out = tmp_path / "small.csv"
    assert small_queries.main(["--engines", "cpu", "--workloads", "github", "--interleave",
                               "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert len(frame) == 11 and frame.exact.all()
    table = small_queries.summary(frame)
    assert table.ratio_vs_cpu.tolist() == [1.0]
    assert "ratio_vs_cpu" in capsys.readouterr().out


def test_small_queries_summary_gives_a_batch_its_total_only():
    """A batch's rows hold its total split evenly: the summary compares its total with the CPU's
    and leaves its median and per-query ratio empty; one-at-a-time rows get all three."""
    rows = [{"workload": "w", "engine": e, "mode": m, "query": q, "wall_ms": t, "exact": True}
            for e, m, times in (("cpu", "one", (1.0, 3.0)), ("x", "one", (2.0, 2.0)), ("x", "batched", (0.5, 0.5)))
            for q, t in zip(("q1", "q2"), times)]
    table = small_queries.summary(pd.DataFrame(rows)).set_index(["engine", "mode"])
    assert table.loc[("x", "one"), "median_ms"] == 2.0 and table.loc[("x", "one"), "ratio_vs_cpu"] == (2 + 2 / 3) / 2
    assert table.loc[("x", "batched"), "total_vs_cpu"] == 0.25
    assert pd.isna(table.loc[("x", "batched"), "median_ms"]) and pd.isna(table.loc[("x", "batched"), "ratio_vs_cpu"])


def test_host_timeline_counts_outermost_calls_and_restores_the_engine():
    class Steps:
        def outer(self, n):
            return self.outer(n - 1) + 1 if n else self.inner()

        @staticmethod
        def inner():
            time.sleep(0.002)
            return 0

    timeline = host_timeline.HostTimeline()
    timeline.wrap(Steps, "outer", "outer")
    timeline.wrap(Steps, "inner", "inner")
    assert Steps().outer(3) == 3                       # recursion through the wrapper still works
    taken = timeline.take()
    assert taken["outer"][0] == 1 and taken["inner"][0] == 1      # nested calls of a step count once
    assert taken["outer"][1] >= taken["inner"][1] >= 0.002
    timeline.restore()
    assert "timed" not in Steps.outer.__qualname__ and isinstance(vars(Steps)["inner"], staticmethod)

    original = Engine.match
    data, queries, known = small_queries.load("github")
    frame = host_timeline.measure("cpu", data, queries[:3], 60.0)
    assert Engine.match is original                   # the engine's steps are unwrapped again
    table = host_timeline.summary(frame)
    assert table.loc["Engine.match", "calls_per_query"] == 1.0
    assert table.loc["ReferenceMatcher._match", "median_host_us"] <= table.loc["Engine.match", "median_host_us"]
    assert table.loc["(wall of match, unwrapped)", "median_host_us"] > 0


@pytest.mark.slow
def test_dask_scaling_table_split_and_plot(tmp_path):
    requires("dask", "distributed")
    frame = dask_scaling.run("cpu", [2], ["hprd"], ["P1"], 60.0, [1, 3], cluster_kind="local")
    assert set(frame["run"]) == {"local", "dask"}
    assert (frame.exact == frame.queries).all()                 # every count exact or equal to local
    split = frame[frame.kind == "split"]
    local, dask = split[split.run == "local"], split[split.run == "dask"]
    assert local.speedup.tolist() == [1.0] and dask.exact.tolist() == [1, 1]
    data, query = dask_scaling.heavy_queries(["P1"])[0][:2]     # the parts the split plans: a hub
    cpu = create_engine("cpu").prepare(data)                     # root's range cut into branch parts
    planned = [len(plan_split(data, query, cpu.root_vertex(query), cpu.branch_vertices(query)[0], p)[0])
               for p in (2, 6)]
    assert planned[0] > 2 and planned[1] > 6                         # P1's root has hubs on GitHub
    assert dask.parts_per_worker.tolist() == [1, 3] and dask.parts.tolist() == planned
    # where a split's time went: no part longer than all parts together, every part timed
    assert (0 < dask.largest_part_s).all() and (dask.largest_part_s <= dask.parts_s).all()
    path = tmp_path / "speedup.png"
    dask_scaling.plot(frame, path)
    assert path.stat().st_size > 1000


def test_host_costs_measures_a_gpu_or_says_it_needs_one(capsys):
    if simulator_active():
        with pytest.raises(SystemExit):
            host_costs.main(["--repeat", "20"])
        assert "needs an NVIDIA GPU" in capsys.readouterr().err
        return
    assert host_costs.main(["--repeat", "20"]) == 0
    printed = capsys.readouterr().out
    assert "cuMemcpyHtoD" in printed and "cuLaunchKernel" in printed and "vs_quick_launch" in printed


def test_kernel_times_engine_spec_and_gpu_need(capsys):
    engine = kernel_times.engine_from_spec("egsm:blocks=33+wedge_filter=false")
    assert engine.name == "egsm" and engine.blocks == 33 and engine.wedge_filter is False
    with pytest.raises(ValueError, match="nonsense"):
        kernel_times.engine_from_spec("egsm:nonsense=1")
    if simulator_active():
        with pytest.raises(SystemExit):
            kernel_times.main(["--engines", "cpu", "--workload", "github"])
        assert "needs an NVIDIA GPU" in capsys.readouterr().err
        return
    assert kernel_times.main(["--engines", "gmatch", "--workload", "github", "--limit", "2"]) == 0
    assert "(all kernels)" in capsys.readouterr().out


@pytest.mark.slow
def test_gmatch_split_rows_add_up_to_the_one_launch(hub200):
    """gmatch_split: every split and hub_parts row counts what the one launch counts, a split's
    summed seconds cover its longest part, and the one launch is the ratio's base."""
    from common.graph.generate import random_walk_query
    from experiments.bench import gmatch_split

    data = hub200
    query = random_walk_query(data, 4, seed=2, name="walk4")    # counts its last position: hub parts
    rows = gmatch_split.measure(data, query, parts=(2, 4), hub_parts=(4,), repeats=1,
                                options=dict(seed_pool=8, blocks=2, warps_per_block=2, probe_s=1e-6,
                                             hub_after_s=0))
    frame = pd.DataFrame(rows)
    assert frame.run.tolist() == ["one launch", "split", "split", "hub_parts"]
    assert frame.equal.all() and (frame.status == "ok").all() and frame["count"].iloc[0] > 0
    split = frame[frame.run == "split"]
    assert (split.parts >= split.k).all() and (split.branch_parts > 0).all()
    assert (split.largest_part_s <= split.seconds).all()
    assert frame.ratio.iloc[0] == 1.0 and frame.parts.iloc[3] > 1
    swept = pd.DataFrame(gmatch_split.measure(data, query, parts=(), hub_parts=(4,), hub_after_s=(0.0, 600.0),
                                              repeats=1, options=dict(seed_pool=8, blocks=2, warps_per_block=2,
                                                                      probe_s=1e-6)))
    assert swept.hub_after_s.tolist()[1:] == [0.0, 600.0] and swept.equal.all()
    assert swept.parts.tolist()[1:] == [frame.parts.iloc[3], 1]     # cut at once; done whole within 600 s
    kept = pd.DataFrame(gmatch_split.measure(data, query, parts=(), hub_parts=(4,), hub_whole_s=(0.0, 600.0),
                                             repeats=1, options=dict(seed_pool=8, blocks=2, warps_per_block=2,
                                                                     probe_s=1e-6)))
    assert kept.hub_whole_s.tolist()[1:] == [0.0, 600.0] and kept.equal.all()
    with pytest.raises(ValueError, match="hub_parts=0"):           # the one launch must be one launch
        gmatch_split.measure(data, query, engine=create_engine("gmatch", hub_parts=4))


def test_gmatch_heavy_targets_name_the_worst_probe_share_and_count_over_enumerate():
    import pandas as pd

    from experiments.bench.gmatch_heavy import targets

    rows = [dict(variant=v, query=q, status="ok", wall_ms=w, probe_ms=p, a_search_ms=a, a_process_ms=10.0)
            for v, q, w, p, a in [("enumerate", "q1", 40.0, 2.0, 50.0), ("count", "q1", 30.0, 6.0, 50.0),
                                  ("enumerate", "q2", 10.0, 5.0, 5.0), ("count", "q2", 12.0, 5.0, 5.0)]]
    assert "probe past its end" not in targets(pd.DataFrame(rows))         # a table without the stages
    for row, past in zip(rows, (0.0, 1.5, 9.0, 0.0)):
        row.update(probe_direct_ms=0.5, probe_look_ms=past + 3.0, probe_pool_ms=1.0, probe_past_end_ms=past)
    text = targets(pd.DataFrame(rows))
    assert "max 20.0% (count q1, 6.0 of 30.0 ms), over 2 runs" in text      # q2 is under 20 ms
    assert "probe past its end: max 1.5 ms (count q1: direct 0.5, look 4.5 of which seed pool 1.0 ms)" in text
    for row in rows:
        row.update(probe_pool_rows=70000, probe_pool_growths=2)
    assert "seed pool 1.0 ms, 70,000 rows, 2 buffer growths)" in targets(pd.DataFrame(rows))
    assert "count / enumerate: median 0.97, max 1.20 (q2); 1 of 2 over 1.0: q2 1.20" in text
    assert "past the runs' spread" not in text                              # no runs listed: not judged
    for row, runs in zip(rows, ("39.0 40.0 41.0", "30.0 31.0 29.0", "9.5 10.0 11.0", "11.5 12.0 12.5")):
        row["wall_runs_ms"] = runs
    assert "past the runs' spread (its fastest run slower than enumeration's slowest): 1 of 2, q2" in \
        targets(pd.DataFrame(rows))
    rows[3]["wall_runs_ms"] = "10.5 12.0 12.5"                                # overlaps enumeration's 11.0
    assert "past the runs' spread (its fastest run slower than enumeration's slowest): 0 of 2" in \
        targets(pd.DataFrame(rows))
    assert "enumerate / authors' search: median 1.40 over 2; / (search + preprocessing): max 0.67 (q1)" in text
    assert "probe ran on" not in text                                       # rows without the bet's record
    for row, ran_on, finished in zip(rows, (False, True, True, False), (False, False, True, True)):
        row.update(probe_ran_on=ran_on, probe_finished=finished)
    assert "probe ran on to probe_s: 2 of 4 rows, 1 ended in the probe; lost: count q1 (6.0 of 30.0 ms)" in \
        targets(pd.DataFrame(rows))


def test_gmatch_heavy_takes_the_median_of_interleaved_repeats(rmat40, monkeypatch, capsys):
    """Each variant answers each query ``--repeats`` times, the variants taking turns; the row is
    the median run's, every run's wall listed, the count exact."""
    import argparse

    from common.graph.generate import random_walk_query
    from experiments.bench import gmatch_heavy

    cpu = create_engine("cpu").prepare(rmat40)
    assert gmatch_heavy.median_run([(3.0, "c", 0), (1.0, "a", 0), (2.0, "b", 0)])[1] == "b"
    assert gmatch_heavy.median_run([(2.0, "b", 0), (1.0, "a", 0)])[1] == "a"      # the lower middle
    small = "seed_pool=8+blocks=2+warps_per_block=2"
    monkeypatch.setattr(gmatch_heavy, "VARIANTS", {"enumerate": gmatch_heavy.variant_options(
        small + "+leaf_counting=False+count_last=False"), "count": gmatch_heavy.variant_options(small)})
    queries = [("walks", f"walk{k}", random_walk_query(rmat40, k, seed=k, name=f"walk{k}"), None, None)
               for k in (3, 4)]
    args = argparse.Namespace(variants="enumerate,count", repeats=3, timeout=60.0, label="t")
    rows: list = []
    gmatch_heavy._measure(args, rmat40, queries, {}, rows)
    assert [(r["variant"], r["query"]) for r in rows] == [(v, q) for q in ("walk3", "walk4")
                                                         for v in ("enumerate", "count")]
    for row, (_, _, query, _, _) in zip(rows, [q for q in queries for _ in range(2)]):
        walls = [float(w) for w in row["wall_runs_ms"].split()]
        assert len(walls) == 3 and row["wall_ms"] == pytest.approx(sorted(walls)[1], abs=0.01)
        assert row["status"] == "ok" and row["count"] == cpu.match(query).count
    with pytest.raises(SystemExit):
        gmatch_heavy.main(["--repeats", "0"])
    assert "--repeats must be at least 1" in capsys.readouterr().err


def test_gmatch_heavy_authors_csv_is_read_without_authors_and_named_when_missing(tmp_path, monkeypatch, capsys):
    """``--authors-csv`` alone reads the authors' rows (no binary is run); a file that is not there
    without ``--authors`` is an error that names it, before any graph is loaded."""
    from experiments.bench import gmatch_heavy

    missing = tmp_path / "none.csv"
    with pytest.raises(SystemExit):
        gmatch_heavy.main(["--authors-csv", str(missing)])
    assert f"--authors-csv {missing} does not exist" in capsys.readouterr().err
    path = tmp_path / "authors.csv"
    path.write_text("workload,query,a_status,a_count,a_search_ms,a_process_ms\nw,q,ok,5,2.0,1.0\n")
    read = gmatch_heavy.run_authors([], None, 1.0, path)
    assert read.to_dict("records") == [dict(workload="w", query="q", a_status="ok", a_count=5, a_search_ms=2.0,
                                            a_process_ms=1.0)]

    class Stop(Exception):
        pass

    def authors_then_stop(queries, data, timeout, csv_path):
        assert csv_path == path
        raise Stop

    monkeypatch.setattr(gmatch_heavy, "check_set", lambda *a: type("S", (), {"data": None})())
    monkeypatch.setattr(gmatch_heavy, "workloads", lambda *a: [])
    monkeypatch.setattr(gmatch_heavy, "run_authors", authors_then_stop)
    with pytest.raises(Stop):                     # the rows are taken without --authors
        gmatch_heavy.main(["--authors-csv", str(path), "--workloads", "dense12"])


def test_gmatch_heavy_does_not_repeat_a_run_that_did_not_finish(rmat40, monkeypatch):
    """A variant whose first run timed out answers that query once; the other variant still runs
    ``--repeats`` times."""
    import argparse

    from common.engine.result import MatchResult
    from common.graph.generate import random_walk_query
    from experiments.bench import gmatch_heavy

    class Answers:
        def __init__(self, status):
            self.status, self.calls = status, 0

        def match(self, query, timeout_s=None):
            self.calls += 1
            return MatchResult(engine="gmatch", count=5, status=self.status, query=query.name)

    engines = {"enumerate": Answers("timeout"), "count": Answers("ok")}
    monkeypatch.setattr(gmatch_heavy, "_prepared", lambda args, data, queries: engines)
    query = random_walk_query(rmat40, 3, seed=1, name="walk3")
    args = argparse.Namespace(variants="enumerate,count", repeats=3, timeout=1.0, label="t")
    rows: list = []
    gmatch_heavy._measure(args, rmat40, [("walks", "walk3", query, None, None)], {"walk3": 0}, rows)
    assert (engines["enumerate"].calls, engines["count"].calls) == (1, 3)
    runs = {row["variant"]: row["wall_runs_ms"].split() for row in rows}
    assert len(runs["enumerate"]) == 1 and len(runs["count"]) == 3
    assert {row["variant"]: row["status"] for row in rows} == {"enumerate": "timeout", "count": "ok"}


def test_process_levels_sums_each_querys_median_and_the_host_build(rmat40, capsys):
    """A process's sums: every query's median wall, its index phase and, inside that, the host's
    candidate-graph build; bad arguments are errors that name them."""
    from common.graph.generate import random_walk_query
    from experiments.bench import process_levels

    engine = create_engine("gmatch", candidate_graph=True, probe_s=0, seed_pool=8, blocks=2,
                           warps_per_block=2).prepare(rmat40)
    queries = [random_walk_query(rmat40, k, seed=k, name=f"walk{k}") for k in (3, 4)]
    sums = process_levels.process_sums(engine, queries, repeats=3, timeout=60.0)
    assert sums["queries"] == 2
    assert sums["wall"] >= sums["index"] >= sums["candidate_graph_build"] > 0
    assert sums["enumerate"] > 0 and sums["probe"] == 0
    for argv, message in ((["--processes", "0"], "--processes and --repeats must be at least 1"),
                          (["--env", "MALLOC"], "--env takes NAME=VALUE, got 'MALLOC'"),
                          (["--option", "probe_s"], "engine option must be key=value, got 'probe_s'")):
        with pytest.raises(SystemExit):
            process_levels.main(argv)
        assert message in capsys.readouterr().err
