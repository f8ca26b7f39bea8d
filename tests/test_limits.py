"""Memory limits under abuse: sizes are parsed or refused clearly, gMatch's seed pool scales with
the graph, and SGSI takes graphs of any size (a limit too small for prepare() is status oom on
every engine: tests/test_contract.py)."""

from __future__ import annotations

import pytest

from common import create_engine
from common.engine.base import memory_bytes
from common.engine.result import Status
from common.graph import generate
from common.graph.generate import rmat


@pytest.fixture(scope="module")
def tiny():
    data = rmat(12, 20, seed=1, name="tiny")
    return data, generate.random_walk_query(data, 3, seed=0, induced=False)


def test_memory_sizes_are_parsed_or_refused_with_a_clear_message():
    assert memory_bytes("11G") == 11 << 30 and memory_bytes("512MB") == 512 << 20
    assert memory_bytes(4096) == 4096 and memory_bytes("1.5GiB") == 3 << 29
    assert create_engine("gsi", device_memory_limit="1G").device_memory_limit == 1 << 30
    for bad in ("11X", 0, -1, 0.5, "0.5", True, "lots"):
        with pytest.raises(ValueError, match="device_memory_limit must be at least one byte.*got"):
            create_engine("gsi", device_memory_limit=bad)


def test_gmatch_seed_pool_scales_with_a_small_graph(tiny):
    data, query = tiny
    engine = create_engine("gmatch").prepare(data)
    assert engine.budget.in_use < 1 << 20               # not a fixed 16 MB seed pool per buffer
    assert engine.match(query).count == create_engine("cpu").prepare(data).match(query).count


@pytest.mark.parametrize("n", [2, 5, 16, 17, 33])
def test_sgsi_takes_graphs_of_up_to_16_vertices_without_a_limit(n):
    data = rmat(n, min(n * (n - 1) // 2, 2 * n), seed=1, name=f"n{n}")
    query = generate.random_walk_query(data, 2, seed=0, induced=False)
    result = create_engine("sgsi").prepare(data).match(query)
    assert result.status is Status.OK
    assert result.count == create_engine("cpu").prepare(data).match(query).count
