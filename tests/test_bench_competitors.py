"""experiments/bench/competitors.py: every system on one set, counts checked against the reference,
unsupported queries and missing systems named, the ratio to the base engine, the time budget;
with the stand-in binaries of test_competitors (the cpu engine as the base)."""

from __future__ import annotations

import time

import pytest

import test_competitors
from common import create_engine
from common.graph.generate import rmat
from common.graph.model import Graph
from experiments.bench import competitors as bench
from experiments.harness.workloads import CheckSet
from test_competitors import DIAMOND, STAR4

stand_in = test_competitors.stand_in          # the fixture: binaries that are stand-in scripts
CYCLE4 = Graph.from_edges(4, [0, 1, 2, 3], [1, 2, 3, 0], name="c4")


@pytest.fixture
def small_set(monkeypatch):
    """A set of three queries on a small unlabelled graph: DIAMOND's count known, the others not."""
    data = rmat(40, 160, seed=5, name="u")
    known = create_engine("cpu").prepare(data).match(DIAMOND).count
    chosen = CheckSet("tiny", data, [(DIAMOND, known), (STAR4, None), (CYCLE4, None)])
    for system in ("tdfs-authors", "beep-authors", "stmatch-authors"):
        monkeypatch.setitem(bench.BASE, system, "cpu")
    monkeypatch.setitem(bench.SEARCH_PHASES, "cpu", None)
    monkeypatch.setattr(bench, "REPEAT_S", 1e9)               # every query timed --repeats times
    return data, lambda name: chosen


def _run(loader, systems, deadline=float("inf"), **kw):
    return bench.run_set("tiny", systems, timeout_s=30.0, repeats=2, deadline=deadline, set_loader=loader,
                         log=lambda *a, **k: None, **kw)


def test_counts_are_checked_against_the_known_then_cpu_and_unsupported_queries_named(stand_in, small_set):
    data, loader = small_set
    stand_in("tdfs-authors")
    stand_in("beep-authors")
    rows = {(r.system, r.query): r for r in _run(loader, ["tdfs-authors", "cpu", "beep-authors"])}
    assert rows["tdfs-authors", "diamond"].check == "ok (known)"
    assert rows["tdfs-authors", "star"].check == "ok (cpu)"
    assert rows["tdfs-authors", "star"].runs == 2 and rows["tdfs-authors", "star"].ms == pytest.approx(10, abs=1)
    beep = rows["beep-authors", "c4"]
    assert beep.status == "unsupported" and "central query vertex" in beep.reason
    assert rows["cpu", "c4"].count == create_engine("cpu").prepare(data).match(CYCLE4).count
    table = bench.summary(list(rows.values())).set_index("system")
    assert table.loc["beep-authors", "unsupported"] == 1 and "central" in table.loc["beep-authors", "note"]
    assert table.loc["tdfs-authors", "ok"] == 3 and table.loc["tdfs-authors", "wrong"] == 0
    assert table.loc["tdfs-authors", "base"] == "cpu" and table.loc["tdfs-authors", "ratio_to_base"] > 0


def test_a_wrong_count_is_flagged_and_a_missing_system_named(stand_in, small_set, monkeypatch):
    _, loader = small_set
    stand_in("tdfs-authors")
    monkeypatch.setenv("FAKE_COUNT_OFFSET", "1")
    monkeypatch.setenv("COMPETITORS_WORK", "/nonexistent")
    monkeypatch.delenv("STMATCH_BIN_UNLABELLED", raising=False)
    monkeypatch.delenv("STMATCH_BIN_LABELLED", raising=False)
    rows = _run(loader, ["tdfs-authors", "stmatch-authors"], cpu_timeout_s=0.0)
    checks = {r.query: r.check for r in rows if r.system == "tdfs-authors"}
    assert checks["diamond"] == "WRONG (known)"
    table = bench.summary(rows).set_index("system")
    assert table.loc["tdfs-authors", "wrong"] >= 1
    missing = [r for r in rows if r.system == "stmatch-authors"]
    assert [r.status for r in missing] == ["not built"] and "skipped" in missing[0].reason
    assert table.loc["stmatch-authors", "note"] == missing[0].reason


def test_past_the_budget_the_queries_are_skipped(small_set):
    _, loader = small_set
    rows = _run(loader, ["cpu"], deadline=time.monotonic() - 1)
    assert {r.status for r in rows} == {"skipped"}
    assert bench.summary(rows).loc[0, "skipped"] == 3


def test_a_run_that_ended_in_an_error_is_counted_with_its_reason():
    rows = [bench.Row("rw12", "gsi-authors", "q1", "error", reason="the binary printed no count (rc 1)"),
            bench.Row("rw12", "gsi-authors", "q2", "error", reason="an assert"),
            bench.Row("rw12", "gsi-authors", "q3", "timeout")]
    line = bench.summary(rows).iloc[0]
    assert (line["error"], line["timeout"], line["ok"]) == (2, 1, 0)
    assert line["note"] == "error: the binary printed no count (rc 1)"


def test_the_command_refuses_unknown_sets_and_systems(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--sets", "nope"])
    assert "unknown set 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--systems", "vf3"])
    assert "unknown system 'vf3'" in capsys.readouterr().err


def test_the_device_check_finds_a_binary_that_counts_each_subgraph_once(stand_in, tmp_path, monkeypatch):
    stand_in("tdfs-authors")                       # a smaller graph than the device check's: the stand-in
    quiet, size = (lambda *a, **k: None), (60, 300)  # counts with cpu in every process it starts
    table = bench.check_systems(["tdfs-authors"], labelled_queries=1, log=quiet, size=size)
    assert set(table.verdict) == {"equal"} and len(table) == 7 + 1 and (table["cpu"] > 0).all()
    def per_subgraph(self, text, query):
        count, ms = bench.competitors.parse_tdfs(text)
        return count // bench.competitors.automorphisms(query), ms
    monkeypatch.setattr(bench.competitors.TDFSAuthors, "parse", per_subgraph)
    table = bench.check_systems(["tdfs-authors"], labelled_queries=0, log=quiet, size=size)
    assert set(table.verdict) == {"per subgraph"} and len(table) == 7


def test_a_start_up_probe_that_hangs_ends_with_the_budget(stand_in, small_set, monkeypatch):
    """An external system whose one-edge start-up probe never returns is killed when the run's budget
    ends (not at the probe's default limit); the queries past the budget are skipped."""
    _, loader = small_set
    stand_in("tdfs-authors")
    monkeypatch.setenv("FAKE_PROBE_HANGS", "1")
    began = time.monotonic()
    rows = _run(loader, ["tdfs-authors"], deadline=began + 3.0)
    assert time.monotonic() - began < 30.0                   # the probe's default limit is 120 s
    assert [r.status for r in rows] == ["skipped"] * 3
    engine = create_engine("tdfs-authors", probe_limit_s=1.0)
    assert engine.probe_limit_s == 1.0
    with pytest.raises(ValueError, match="probe_limit_s must be positive"):
        create_engine("tdfs-authors", probe_limit_s=0)


def test_each_query_is_answered_by_every_system_before_the_next(stand_in, small_set, monkeypatch):
    """A budget that ends mid-set leaves whole rows: the systems take each query in turn."""
    _, loader = small_set
    stand_in("tdfs-authors")
    monkeypatch.setattr(bench, "REPEAT_S", 0.0)               # one timed run a query
    rows = [r for r in _run(loader, ["tdfs-authors", "cpu"]) if r.status == "ok"]
    assert [(r.query, r.system) for r in rows] == [(q, s) for q in ("diamond", "star", "c4")
                                                   for s in ("cpu", "tdfs-authors")]
    assert {r.runs for r in rows} == {1}


def test_gmatchs_search_time_is_its_probe_and_its_dfs():
    from common.engine.result import MatchResult, Status
    result = MatchResult("gmatch", 1, Status.OK, phases={"filter": 0.004, "probe": 0.002, "enumerate": 0.001})
    assert bench.paper_ms(result, "tdfs-authors") == pytest.approx(3.0)      # its base is gMatch
    assert bench.paper_ms(result, "gsi") == pytest.approx(7.0)               # GSI's paper: the whole query


def test_a_sets_queries_get_their_share_of_the_budget_after_its_warm_ups(small_set):
    """With the budget left shared among a huge number of sets, this set's queries get almost
    nothing: its engines are prepared and warmed, and every query is skipped for the budget."""
    _, loader = small_set
    rows = _run(loader, ["cpu"], deadline=time.monotonic() + 600, sets_left=10**9)
    assert [r.status for r in rows] == ["skipped"] * 3 and "budget" in rows[0].reason
    assert {r.status for r in _run(loader, ["cpu"], deadline=time.monotonic() + 600, sets_left=1)} == {"ok"}


class CompilesPerQuerySize:
    """An engine whose first run of each query size compiles (seconds on the compile clock) and takes
    ``COMPILE_MS`` longer; its other runs take ``RUN_MS``."""

    COMPILE_MS, RUN_MS = 900.0, 2.0
    repeats_in_one_call = False

    def __init__(self):
        self.sizes = set()

    def match(self, query, timeout_s=None):
        from common.engine.result import MatchResult
        from common.gpu.compile_clock import compile_clock

        ms = self.RUN_MS
        if query.num_vertices not in self.sizes:
            self.sizes.add(query.num_vertices)
            compile_clock.seconds += self.COMPILE_MS / 1e3
            ms += self.COMPILE_MS
        return MatchResult("gsi", 1, phases={"enumerate": ms / 1e3})


def test_a_run_that_compiled_is_run_again_and_not_timed():
    """The warm-up reaches one query size; the first run of another size compiles a kernel: it is not
    the engine's time, even when its length stops the repeats (as on P5, the first 5-vertex pattern)."""
    engine = CompilesPerQuerySize()
    first, times = bench.time_query(engine, "gsi", DIAMOND, timeout_s=5.0, repeats=3)
    assert times == [pytest.approx(CompilesPerQuerySize.RUN_MS)] * 3 and first.count == 1
    first, times = bench.time_query(engine, "gsi", CYCLE4, timeout_s=5.0, repeats=3)   # the same size
    assert times == [pytest.approx(CompilesPerQuerySize.RUN_MS)] * 3


def test_a_resumed_run_keeps_the_earlier_rows_and_runs_only_the_rest(stand_in, small_set, monkeypatch, tmp_path):
    """--resume: the rows of an earlier run are carried over as they were (counts, checks, times);
    only its skipped rows run again, and a system with nothing left is not started."""
    _, loader = small_set
    stand_in("tdfs-authors")
    first = _run(loader, ["cpu", "tdfs-authors"])
    frame = bench.rows_frame(first)
    redo = (frame.system == "tdfs-authors") & (frame["query"] == "star")
    frame.loc[redo, ["status", "count", "ms", "check"]] = ["skipped", None, None, ""]
    path = tmp_path / "earlier.csv"
    frame.to_csv(path, index=False)
    timed = []
    real = bench.time_query
    monkeypatch.setattr(bench, "time_query", lambda engine, system, query, *a: timed.append((system, query.name))
                        or real(engine, system, query, *a))
    started = []
    real_create = bench.create_engine
    monkeypatch.setattr(bench, "create_engine", lambda system, **kw: started.append(system)
                        or real_create(system, **kw))
    carried = bench.carried_rows(path)
    assert len(carried) == 5 and ("tiny", "tdfs-authors", "star") not in carried
    rows = _run(loader, ["cpu", "tdfs-authors"], carried=carried)
    assert timed == [("tdfs-authors", "star")]
    assert started == ["cpu", "tdfs-authors"]      # cpu: the reference count of star only, not as a system
    def kept(of):
        return [(r.system, r.query, r.status, r.count, r.ms) for r in of
                if (r.system, r.query) != ("tdfs-authors", "star")]
    assert kept(rows) == kept(first)
    star = next(r for r in rows if (r.system, r.query) == ("tdfs-authors", "star"))
    assert star.status == "ok" and star.check == "ok (cpu)"
    big = bench.Row("tiny", "cpu", "q", "ok", count=2**62 + 1)     # past a float's exact integers
    bench.rows_frame([big, bench.Row("tiny", "cpu", "r", "timeout")]).to_csv(path, index=False)
    assert bench.carried_rows(path)["tiny", "cpu", "q"].count == 2**62 + 1


def test_a_resume_file_that_is_not_the_benchs_is_refused(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("set,system,query\ntiny,cpu,diamond\n")
    with pytest.raises(ValueError, match="not a competitors' bench CSV: no column .*count"):
        bench.carried_rows(path)
