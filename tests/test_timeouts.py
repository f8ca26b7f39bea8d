"""Every engine honours ``timeout_s`` within a small overrun, on a query that is long on
a GPU as well as in the simulator: a 7-vertex star (one label) on a graph with hubs."""

from __future__ import annotations

import time

import numpy as np
import pytest

from common import create_engine
from common.generate import rmat
from common.graph import Graph
from common.result import Status


def _star(leaves: int) -> Graph:
    leaf = np.arange(1, leaves + 1)
    return Graph.from_edges(leaves + 1, np.zeros(leaves, np.int64), leaf,
                            labels=np.zeros(leaves + 1, np.int32), name=f"star{leaves}")


def _timed(engine, query, timeout_s):
    start = time.perf_counter()
    result = engine.match(query, timeout_s=timeout_s)
    return result, time.perf_counter() - start


@pytest.mark.parametrize("parallel", [False, True])
def test_stwig_cpu_stops_inside_a_hub_roots_exploration(parallel):
    # one hub root has about 1200^6 STwig matches: one compiled call exploring it would run for hours
    data = rmat(4096, 40000, seed=1, name="hubs")
    engine = create_engine("stwig-cpu", parallel=parallel).prepare(data)
    engine.match(_star(6), timeout_s=0.05)                    # compile outside the measurement
    result, wall = _timed(engine, _star(6), 0.3)
    assert result.status is Status.TIMEOUT and result.stats["timeout_in"] == "exploration"
    assert wall < 0.3 + 0.5


@pytest.mark.parametrize("name", ["gsi", "sgsi"])
def test_gsi_and_sgsi_stop_within_about_one_slice(name):
    data = rmat(300, 3000, seed=3, name="small-hubs")
    engine = create_engine(name).prepare(data)
    engine.match(_star(2), timeout_s=60)                      # compile outside the measurement
    result, wall = _timed(engine, _star(6), 1.0)
    assert result.status is Status.TIMEOUT
    assert wall < 1.0 + 1.0


def test_cpu_reference_stops_in_its_planning_at_the_deadline():
    """HPRD as its own query: ordering its 9460 vertices takes seconds of planning on the CPU;
    the deadline stops it there, before any search."""
    from common.engine import deadline_slack
    from common.io import load_graph
    from common.reference import DeadlinePassed, matching_order

    hprd = load_graph("hprd/HPRD.graph")
    with pytest.raises(DeadlinePassed):
        matching_order(hprd, np.ones(hprd.num_vertices), "ri", deadline=time.perf_counter() - 1)
    engine = create_engine("cpu").prepare(hprd)
    result, wall = _timed(engine, hprd, 0.5)
    assert result.status is Status.TIMEOUT and result.count == 0
    assert result.reason == "deadline passed before the search began"
    assert result.phases["filter"] + result.phases["plan"] < 0.5 + deadline_slack(0.5)
    assert result.stats["deadline_overrun_s"] <= wall - 0.5 + 1e-3


def test_egsm_counts_its_filter_against_the_deadline():
    data = rmat(300, 3000, seed=3, name="small-hubs")
    engine = create_engine("egsm").prepare(data)
    result = engine.match(_star(3), timeout_s=1e-4)
    assert result.status is Status.TIMEOUT
    assert result.reason.startswith("deadline passed during the filter")
    assert result.stats["deadline_overrun_s"] >= 0


def test_an_overrun_in_the_simulator_is_said_in_the_result():
    from common.backend import BACKEND
    from common.engine import note_overrun
    from common.result import MatchResult

    late = MatchResult("egsm", 5, Status.TIMEOUT, reason="deadline passed while building the index",
                       phases={"index": 4.0})
    note_overrun(late, 1.0)
    assert late.stats["deadline_overrun_s"] == 3.0
    assert ("the CUDA simulator ran a kernel launch to its end" in late.reason) == (BACKEND == "simulator")
    on_time = MatchResult("egsm", 5, Status.TIMEOUT, reason="x", phases={"enumerate": 1.5})
    note_overrun(on_time, 1.0)
    assert on_time.reason == "x" and on_time.stats["deadline_overrun_s"] == 0.5


def test_table_output_marks_a_timed_out_count_as_a_lower_bound(capsys):
    from common import cli

    assert cli.main(["match", "hprd/HPRD.graph", "hprd/HPRD.graph", "--timeout", "0.3"]) == cli.EXIT_PARTIAL
    out = capsys.readouterr().out
    assert "status:  timeout" in out and "count:   >=0 (a lower bound: the search did not finish)" in out
    assert cli.main(["match", "hprd/HPRD.graph", "hprd/queries/query_dense_16_1.graph",
                     "--timeout", "30"]) == cli.EXIT_OK
    assert "count:   3\n" in capsys.readouterr().out
    rows = [{"engine": "cpu", "backend": "cpu", "query": q, "status": s, "count": c, "seconds": 1.0}
            for q, s, c in (("a", "timeout", 7), ("b", "ok", 3), ("c", "limit", 5))]
    cli._print_rows(rows, "table", single=False)
    out = capsys.readouterr().out
    assert ">=7" in out and ">=3" not in out and ">=5" not in out and "a lower bound" in out
