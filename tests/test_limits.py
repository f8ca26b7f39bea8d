"""Memory limits under abuse: a limit too small for prepare() is status oom through
match(), sizes are parsed or refused clearly, gMatch's seed pool scales with the graph, and SGSI
takes graphs of any size."""

from __future__ import annotations

import pytest

import common
from common import create_engine, generate
from common.engine import memory_bytes
from common.generate import rmat
from common.result import Status


@pytest.fixture(scope="module")
def tiny():
    data = rmat(12, 20, seed=1, name="tiny")
    return data, generate.random_walk_query(data, 3, seed=0, induced=False)


@pytest.mark.parametrize("name", ["gsi", "sgsi", "egsm", "gmatch"])
def test_a_limit_too_small_for_prepare_is_status_oom(tiny, name):
    data, query = tiny
    engine = create_engine(name, device_memory_limit=4096).prepare(data)     # no exception
    result = engine.match(query)
    assert result.status is Status.OOM and result.count == 0
    assert result.reason.startswith("prepare: device allocation of")
    via_api = common.match(data, query, engine=name, device_memory_limit=4096)
    assert via_api.status is Status.OOM


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
