"""Every engine honours ``timeout_s`` within a small overrun (issue 19), on a query that is long on
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
