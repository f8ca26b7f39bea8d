"""Where engines stop at a deadline: STwig's CPU baseline inside a hub root's exploration, the cpu
reference in its planning, EGSM in its filter; how an overrun and a timed-out count are reported.
That every engine answers a deadline with status ``timeout`` is tests/test_contract.py's check."""

from __future__ import annotations

import time

import numpy as np
import pytest

from common import create_engine
from common.engine.result import Status
from common.graph.generate import rmat
from common.graph.model import Graph


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


def test_cpu_reference_stops_in_its_planning_at_the_deadline():
    """HPRD as its own query: ordering its 9460 vertices takes seconds of planning on the CPU;
    the deadline stops it there, before any search."""
    from common.cpu.reference import matching_order
    from common.engine.base import deadline_slack
    from common.engine.deadline import Deadline, Stop
    from common.graph.io import load_graph

    hprd = load_graph("hprd/HPRD.graph")
    with pytest.raises(Stop) as stopped:
        matching_order(hprd, np.ones(hprd.num_vertices), "ri", deadline=Deadline(-1.0))
    assert stopped.value.status is Status.TIMEOUT
    engine = create_engine("cpu").prepare(hprd)
    result, wall = _timed(engine, hprd, 0.5)
    assert result.status is Status.TIMEOUT and result.count == 0
    assert result.reason == "deadline passed before the search began"
    assert result.phases["filter"] + result.phases["plan"] < 0.5 + deadline_slack(0.5)
    assert result.stats["deadline_overrun_s"] <= wall - 0.5 + 1e-3


def test_egsm_counts_its_filter_against_the_deadline(hubs):
    engine = create_engine("egsm").prepare(hubs)
    result = engine.match(_star(3), timeout_s=1e-4)
    assert result.status is Status.TIMEOUT
    assert result.reason.startswith("deadline passed during the filter")
    assert result.stats["deadline_overrun_s"] >= 0


def test_an_overrun_in_the_simulator_is_said_in_the_result():
    from common.engine.base import note_overrun
    from common.engine.result import MatchResult
    from common.gpu.backend import BACKEND

    late = MatchResult("egsm", 5, Status.TIMEOUT, reason="deadline passed while building the index",
                       phases={"index": 4.0})
    note_overrun(late, 1.0)
    assert late.stats["deadline_overrun_s"] == 3.0
    assert ("the CUDA simulator ran a kernel launch to its end" in late.reason) == (BACKEND == "simulator")
    on_time = MatchResult("egsm", 5, Status.TIMEOUT, reason="x", phases={"enumerate": 1.5})
    note_overrun(on_time, 1.0)
    assert on_time.reason == "x" and on_time.stats["deadline_overrun_s"] == 0.5


def test_table_output_marks_a_timed_out_count_as_a_lower_bound(capsys):
    from common.cli import main as cli

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
