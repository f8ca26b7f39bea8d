"""The large scale: its settings meet the minimums, its plan fits 8 GPU-hours (10 with every external
binary's column), every dataset of a
table is its own graph, a stand-in is cached on disk, repeats share the limit, and a resumed run
keeps its finished queries and sums its calls' wall time. Graphs are built at tiny sizes only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import PAPERS, experiments_of
from experiments.harness.core import at_scale, plan
from experiments.harness.workloads import (
    LARGE_MIN_LIMIT_S,
    LARGE_MIN_QUERIES,
    SCALES,
    Dataset,
    get_scale,
    graph_key,
    standin_edges,
)

LARGE = get_scale("large")
HEADLINE = {"gsi_icde20.fig14", "gsi_icde20.table5_time", "sgsi_tkde22.table5", "sgsi_tkde22.fig17_edges",
            "sgsi_tkde22.fig17_query_size", "sgsi_tkde22.fig17_labels", "egsm_sigmod23.fig8", "egsm_sigmod23.fig9",
            "egsm_sigmod23.table4", "gmatch_pvldb26.fig9", "gmatch_pvldb26.table4", "gmatch_pvldb26.table5",
            "stwig_lin14.fig3a_total", "stwig_lin14.fig3d"}


def test_the_headline_experiments_run_at_large_with_the_minimums():
    large = {e.name: e for e in at_scale(experiments_of(), LARGE)}
    assert HEADLINE <= set(large)
    for experiment in large.values():
        assert experiment.time_limit_for(LARGE) >= LARGE_MIN_LIMIT_S, experiment.name
        assert experiment.repeats_for(LARGE) >= 3, experiment.name
        here = experiment.scale_for(LARGE)
        for point in experiment.points_for(LARGE):
            if point.queries.kind not in ("files", "patterns"):      # a pattern cell is one pattern
                assert point.queries.count_at(here) >= LARGE_MIN_QUERIES, (experiment.name, point.label)
    # the papers' query sizes: EGSM's and gMatch's 12-vertex queries (medium runs 8)
    for name in ("egsm_sigmod23.fig8", "egsm_sigmod23.table4", "gmatch_pvldb26.fig9"):
        assert {p.queries.size for p in large[name].points_for(LARGE)} == {12}, name
    assert "compare" not in {e.paper for e in large.values()}


def test_the_large_plan_fits_eight_gpu_hours(monkeypatch):
    """gpusm's engines (the external binaries left out, built here or not)."""
    without_external_binaries(monkeypatch)
    total = sum(line.worst_s for paper in PAPERS for line in plan(experiments_of(paper), LARGE))
    assert 0 < total <= 8 * 3600


def _external_binaries() -> dict:
    from experiments.papers.authors import EGSMAuthors, GMatchAuthors
    from experiments.papers.competitors import COMPETITORS

    return {**COMPETITORS, "egsm-authors": EGSMAuthors, "gmatch-authors": GMatchAuthors}


def without_external_binaries(monkeypatch):
    """Unregister the authors' and the competitors' binaries, as on a host where none is built
    (a GPU host with ``make authors`` done registers them)."""
    from common.engine import registry

    for name in _external_binaries():
        monkeypatch.delitem(registry._REGISTRY, name, raising=False)


def with_every_external_binary(monkeypatch):
    """Register the authors' and the competitors' binaries, as on a host where they are built: the
    plan reads their declared start-up (a class method), never the binaries."""
    from common.engine import registry

    for name, cls in _external_binaries().items():
        monkeypatch.setitem(registry._REGISTRY, name, f"{cls.__module__}:{cls.__qualname__}")


def test_with_every_external_binary_the_large_plan_fits_ten_gpu_hours(monkeypatch):
    """Their columns add their processes' start-up: gMatch Table 4 keeps them to the claim's T-DFS
    on two graphs at large (``column_cuts_at``); with all of them it would plan 27,000 s more."""
    without_external_binaries(monkeypatch)
    before = sum(line.worst_s for paper in PAPERS for line in plan(experiments_of(paper), LARGE))
    with_every_external_binary(monkeypatch)
    lines = [line for paper in PAPERS for line in plan(experiments_of(paper), LARGE)]
    assert before < sum(line.worst_s for line in lines) <= 10 * 3600
    (table4,) = [line for line in lines if line.experiment == "gmatch_pvldb26.table4"]
    assert table4.jobs == 54 + 2 * 9                                   # gMatch everywhere, T-DFS on pk and lj


def test_medium_fits_thirty_minutes_on_one_gpu_with_three_runs_per_timed_query(monkeypatch):
    without_external_binaries(monkeypatch)
    medium = get_scale("medium")
    lines = [line for paper in PAPERS for line in plan(experiments_of(paper), medium)]
    assert sum(line.worst_s for line in lines) <= 30 * 60
    for experiment in experiments_of():
        if experiment.metric.timed:
            assert experiment.repeats_for(medium) >= 3, experiment.name


@pytest.mark.parametrize("scale", ["small", "medium", "large"])     # tiny shrinks every graph alike
def test_no_two_datasets_of_an_experiment_are_one_graph(scale):
    scale = get_scale(scale)
    for experiment in at_scale(experiments_of(), scale):
        here = experiment.scale_for(scale)
        keys = {}
        for point in experiment.points_for(scale):
            key = graph_key(point.dataset, here)
            other = keys.setdefault(key, point.dataset.name)
            assert other == point.dataset.name, (experiment.name, other, point.dataset.name)


def test_datasets_of_one_size_are_different_graphs_and_variants_keep_their_seed():
    tiny = SCALES["tiny"]
    a, b = Dataset("pk", 1000, 5000), Dataset("lj", 1000, 5000)
    ga, gb = a.load(tiny), b.load(tiny)
    assert ga.num_edges == gb.num_edges
    assert not np.array_equal(ga.neighbors, gb.neighbors)          # same size, another graph
    relabelled = a.with_(name="pk-L8", vertex_labels=8)
    assert relabelled.graph_seed == a.graph_seed
    assert np.array_equal(relabelled.load(tiny).neighbors, ga.neighbors)


def test_large_stand_ins_keep_the_papers_average_degree():
    from experiments.harness.workloads import standin_size

    fr = Dataset("fr", 65_608_366, 1_806_067_135)
    n, m = standin_size(fr, LARGE.max_edges, LARGE.keep_degree)
    assert m == LARGE.max_edges
    assert 2 * m / n == pytest.approx(2 * fr.num_edges / fr.num_vertices, rel=1e-3)


def test_a_large_stand_in_is_cached_on_disk(tmp_path, monkeypatch):
    import experiments.harness.workloads as workloads

    monkeypatch.setenv("GPUSM_GRAPH_CACHE", str(tmp_path))
    monkeypatch.setattr(workloads, "CACHE_MIN_EDGES", 100)
    first = standin_edges(300, 1200, (0.57, 0.19, 0.19, 0.05), 7)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    again = standin_edges(300, 1200, (0.57, 0.19, 0.19, 0.05), 7)
    assert np.array_equal(first.offsets, again.offsets) and np.array_equal(first.neighbors, again.neighbors)
    other = standin_edges(300, 1200, (0.57, 0.19, 0.19, 0.05), 8)
    assert not np.array_equal(first.neighbors, other.neighbors)


def test_the_stand_ins_a_run_loads_are_drawn_ahead_in_parallel_and_equal_the_ones_it_would_draw(tmp_path, monkeypatch):
    """StandinPrefetch: every missing cached stand-in of the selection, in the order the run loads
    them, drawn by a pool into the cache; each equals the graph drawn in this process, edge for
    edge, and one already cached is not drawn again."""
    import time

    import experiments.harness.workloads as workloads
    from common.graph.generate import rmat
    from experiments.harness.core import standin_specs

    monkeypatch.setenv("GPUSM_GRAPH_CACHE", str(tmp_path))
    monkeypatch.setattr(workloads, "CACHE_MIN_EDGES", 100)
    specs = [(300, 1200, (0.57, 0.19, 0.19, 0.05), seed) for seed in (7, 8, 9)]
    workloads.cached_standin(*specs[0])
    with workloads.StandinPrefetch(specs + [specs[1], None], processes=2) as prefetch:
        assert prefetch.specs == specs[1:] and prefetch.processes == 2
        assert "2 stand-ins" in prefetch.describe()
        paths = [workloads.standin_cache_path(*spec) for spec in specs]
        began = time.monotonic()
        while not all(p.exists() for p in paths) and time.monotonic() - began < 120:
            time.sleep(0.1)
    for (n, m, abcd, seed), path in zip(specs, paths):
        cached = workloads.standin_edges(n, m, abcd, seed)
        drawn = rmat(n, m, *abcd, seed=seed)
        assert np.array_equal(cached.offsets, drawn.offsets) and np.array_equal(cached.neighbors, drawn.neighbors)
    medium = get_scale("medium")
    table4 = standin_specs({"gmatch_pvldb26": ["gmatch_pvldb26.table4"]}, medium)
    experiment = next(e for e in experiments_of("gmatch_pvldb26") if e.name == "gmatch_pvldb26.table4")
    loaded = [p.dataset.name for p in experiment.points_for(medium)]
    assert len(table4) == len(dict.fromkeys(loaded)) > 1 and len(set(table4)) == len(table4)
    assert all(m > 100 for _, m, _, _ in table4)


def test_leaving_a_prefetch_stops_its_draws_and_leaves_no_partial_file(tmp_path, monkeypatch):
    import time

    import experiments.harness.workloads as workloads

    monkeypatch.setenv("GPUSM_GRAPH_CACHE", str(tmp_path))
    specs = [(400_000, 2_500_000, (0.57, 0.19, 0.19, 0.05), seed) for seed in (1, 2)]
    killed = workloads.standin_cache_path(*specs[0])
    killed.parent.mkdir(parents=True, exist_ok=True)
    killed.with_name(f".{killed.name}.99999.tmp.npz").write_bytes(b"half a write")   # a writer killed earlier
    began = time.monotonic()
    with workloads.StandinPrefetch(specs, processes=2):
        pass                                     # the run ended at once: the draws are stopped
    assert time.monotonic() - began < 20         # not waiting for the draws (each about 3 s here)
    assert not list(tmp_path.glob("*.tmp.npz"))
    for spec in specs:
        path = workloads.standin_cache_path(*spec)
        assert not path.exists() or len(workloads.standin_edges(*spec).neighbors) == 2 * spec[1]


class _Clock:
    """An engine whose runs take the listed seconds (status ok unless past its timeout)."""

    repeats_in_one_call = False

    def __init__(self, seconds):
        self.seconds = list(seconds)

    def match(self, query, timeout_s=None):
        from common.engine.result import MatchResult, Status

        took = self.seconds.pop(0)
        status = Status.OK if timeout_s is None or took <= timeout_s else Status.TIMEOUT
        return MatchResult("clock", count=1, status=status, phases={"enumerate": took})


@pytest.mark.parametrize("seconds, runs, cut", [((1.0, 1.0, 1.0), 3, False), ((4.0, 4.0), 2, True),
                                                 ((6.0,), 1, True), ((3.0, 3.0, 5.0), 2, True)])
def test_repeats_share_the_query_limit(seconds, runs, cut):
    from experiments.harness.runner import Job, _answer

    job = Job("e", "c", "cpu", "d", None, (), time_limit_s=10.0, repeats=3, share_limit=True)
    row = _answer(_Clock(seconds), None, job)
    stats = json.loads(row["stats"])
    assert len(stats.get("repeat_s", [seconds[0]])) == runs
    assert bool(stats.get("repeats_cut")) == cut
    assert sum(stats.get("repeat_s", [seconds[0]])) <= 10.0


def test_a_resumed_run_sums_its_calls_wall_time(tmp_path):
    from experiments.harness.core import run_set

    names = ["stwig_lin14.fig3a_total"]
    run_set("stwig_lin14", "tiny", tmp_path, names=names, isolation="inline", progress=False, log=lambda _: None)
    first = json.loads((tmp_path / "stwig_lin14" / "run.tiny.json").read_text())
    assert len(first["calls"]) == 1
    run_set("stwig_lin14", "tiny", tmp_path, names=names, isolation="inline", progress=False, log=lambda _: None)
    again = json.loads((tmp_path / "stwig_lin14" / "run.tiny.json").read_text())
    assert len(again["calls"]) == 2
    assert again["wall_s"] == pytest.approx(sum(c["wall_s"] for c in again["calls"]), abs=0.11)
    assert again["calls"][0] == first["calls"][0]


def test_an_unfinished_tasks_rows_are_recovered_into_every_cell_of_its_group(tmp_path):
    from experiments.harness.cells import Cell, partial_path, recover_partials
    from experiments.harness.runner import ROW_FIELDS, read_rows
    from experiments.harness.store import RowFile

    group = [Cell("p.a", "GPU", "x", 3, frozenset(), 1.0, ("key",)),
             Cell("p.b", "GPU", "x", 3, frozenset({"q0"}), 1.0, ("key",))]
    path = partial_path(tmp_path, "large", group)
    path.parent.mkdir(parents=True)
    with RowFile(path, ROW_FIELDS) as writer:
        for q in ("q0", "q1"):
            writer.write({"experiment": "p.a", "config": "GPU", "engine": "stwig", "dataset": "x", "query": q,
                          "status": "ok", "count": 1, "seconds": 0.5, "stats": "{}"})
    assert recover_partials(tmp_path, "large", {"p.a": "paper", "p.b": "paper"}, [group]) == 2
    assert not path.exists()
    assert sorted(read_rows(tmp_path / "paper" / "p.a.large.csv")["query"]) == ["q0", "q1"]
    assert sorted(read_rows(tmp_path / "paper" / "p.b.large.csv")["query"]) == ["q1"]    # q0 was there


@pytest.mark.parametrize("papers, calls", [(None, [["--paper", "stwig_lin14"]]),
                                           ("gsi_icde20 egsm_sigmod23", [["--paper", "gsi_icde20"],
                                                                         ["--paper", "egsm_sigmod23"]]),
                                           ("all", [["--all"]])])
def test_the_large_run_script_runs_the_sets_asked_for_through_dask(tmp_path, papers, calls):
    """experiments/large_proof.sh: STwig's proof by default, PAPERS="a b" one set after the other,
    PAPERS=all every paper's large set; each through Dask on GPUS, resumable (--yes, --quiet)."""
    import os
    import subprocess
    from pathlib import Path

    log = tmp_path / "calls"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    env = dict(os.environ, PYTHON=str(fake), GPUS="0,1", BUILD="0", GPUSM_COMMIT="test")
    env.pop("PAPERS", None)
    if papers is not None:
        env["PAPERS"] = papers
    root = Path(__file__).resolve().parents[1]
    subprocess.run(["bash", str(root / "experiments" / "large_proof.sh")], env=env, check=True, timeout=60)
    lines = log.read_text().splitlines()
    assert [line.split()[2:2 + len(c)] for line, c in zip(lines, calls)] == calls and len(lines) == len(calls)
    assert all("--scale large --dask local-cuda --gpus 0,1 --quiet --yes" in line for line in lines)


@pytest.mark.parametrize("rerun", [None, "1"])
def test_the_large_run_script_passes_rerun_changed_only_when_asked(tmp_path, rerun):
    """RERUN_CHANGED=1 adds --rerun-changed (rows of results/ measured under other settings are set
    aside and run again); without it a resumed run stops on them."""
    import os
    import subprocess
    from pathlib import Path

    log = tmp_path / "calls"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    env = dict(os.environ, PYTHON=str(fake), GPUS="0", PAPERS="all", BUILD="0", GPUSM_COMMIT="test")
    env.pop("RERUN_CHANGED", None)
    if rerun is not None:
        env["RERUN_CHANGED"] = rerun
    root = Path(__file__).resolve().parents[1]
    subprocess.run(["bash", str(root / "experiments" / "large_proof.sh")], env=env, check=True, timeout=60)
    (line,) = log.read_text().splitlines()
    assert ("--rerun-changed" in line.split()) == (rerun is not None), line


@pytest.mark.parametrize("toolkit, build", [(True, None), (True, "0"), (False, None)])
def test_the_large_run_script_builds_the_binaries_of_the_columns_first(tmp_path, toolkit, build):
    """PAPERS other than STwig's proof: make authors competitors first where nvcc is found (BUILD=0
    skips it), else one line saying their columns are not built; the sets run either way."""
    import os
    import subprocess
    from pathlib import Path

    log = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, present in (("python", True), ("make", True), ("nvcc", toolkit)):
        if present:
            (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $@" >> {log}\n')
            (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PYTHON=str(bin_dir / "python"), GPUS="0", PAPERS="all", GPUSM_COMMIT="test",
               PATH=f"{bin_dir}:/usr/bin:/bin")
    env.pop("BUILD", None)
    if build is not None:
        env["BUILD"] = build
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(["bash", str(root / "experiments" / "large_proof.sh")], env=env, check=True, timeout=60,
                          capture_output=True, text=True)
    lines = log.read_text().splitlines()
    built = toolkit and build is None
    assert (lines[0] == "make authors competitors") == built and lines[-1].startswith("python -m experiments --all")
    assert ("not built" in done.stdout) == (not toolkit)


def test_the_large_run_script_refuses_a_tree_that_differs_from_its_head_unless_told_its_commit(tmp_path):
    """A device host's copy of a checkout can carry a stale .git: the reports would name a wrong or
    dirty commit. The script stops (exit 2, one line naming GPUSM_COMMIT) unless GPUSM_COMMIT is set."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    repo = tmp_path / "checkout"
    (repo / "experiments").mkdir(parents=True)
    shutil.copy(root / "experiments" / "large_proof.sh", repo / "experiments" / "large_proof.sh")
    (repo / "engine.py").write_text("measured = 1\n")
    git = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "c"]):
        subprocess.run(["git", "-C", str(repo), *args], env=git, check=True)
    log = tmp_path / "calls"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    env = dict(os.environ, PYTHON=str(fake), GPUS="0", BUILD="0")
    env.pop("GPUSM_COMMIT", None)
    script = ["bash", str(repo / "experiments" / "large_proof.sh")]
    assert subprocess.run(script, env=env, timeout=60).returncode == 0            # clean: runs
    (repo / "engine.py").write_text("measured = 2\n")                              # changed since HEAD
    done = subprocess.run(script, env=env, timeout=60, capture_output=True, text=True)
    assert done.returncode == 2 and "GPUSM_COMMIT" in done.stderr and len(log.read_text().splitlines()) == 1
    assert subprocess.run(script, env=dict(env, GPUSM_COMMIT="abc1234"), timeout=60).returncode == 0
    assert len(log.read_text().splitlines()) == 2
