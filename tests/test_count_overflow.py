"""Counts past 64 bits: every engine gives the exact count as a Python int, or a status that says
it did not get there (``overflow``: the count passed the engine's counters; ``timeout``/``oom``:
an engine that enumerates every embedding) with a lower bound; never ``ok`` with a wrong number.

The data graphs are stars, so the counts come from combinatorics: a star query whose k leaves
carry k distinct labels, on hubs each adjacent to n vertices of every leaf label, has
hubs * n**k embeddings. The counting engines (``cpu``: a product over the query's trailing
levels; ``gmatch``: leaf counting over its candidate graph) must answer exactly; the others
cannot enumerate 10^20 embeddings and must say so.

On a GPU: ``NUMBA_ENABLE_CUDASIM=0 pytest tests/test_count_overflow.py``.
"""

import json

import numpy as np
import pytest

from common import match_many
from common.cli.main import EXIT_PARTIAL, _count_text, _lower_bound_note, match_exit_code
from common.engine.registry import BUILTIN_ENGINES, PEER_ENGINES, available_engines, create_engine
from common.engine.result import MatchResult, Status, results_frame
from common.gpu.backend import BACKEND
from common.graph.io import write_graph
from common.graph.model import Graph
from experiments.gpusm import main

#: engines that count without enumerating (products of candidate counts): they must be exact
COUNTING = {"cpu", "gmatch"}
#: per-engine options: gMatch searches the star whole (its hub parts, each a tenth of the count,
#: cost a filter launch each in the simulator; test_gmatch_hub_parts_add_up_past_2_64 runs them)
OPTIONS = {"gmatch": {"hub_parts": 0}}
#: seconds an enumerating engine gets (it times out: 10^20 embeddings)
ENUMERATION_S = 2.0


def star_data(k: int, n: int, hubs: int = 1) -> Graph:
    """``hubs`` vertices of label 0 (ids 0..hubs-1), each adjacent to the same n vertices of
    every label 1..k."""
    leaves = np.arange(hubs, hubs + k * n)
    labels = np.concatenate([np.zeros(hubs, np.int32), np.repeat(np.arange(1, k + 1, dtype=np.int32), n)])
    src = np.repeat(np.arange(hubs), k * n)
    dst = np.tile(leaves, hubs)
    return Graph.from_edges(hubs + k * n, src, dst, labels=labels, name=f"hubs{hubs}-k{k}-n{n}")


def star_query(k: int) -> Graph:
    """A centre of label 0 with k leaves of labels 1..k."""
    return Graph.from_edges(k + 1, np.zeros(k, np.int64), np.arange(1, k + 1),
                            labels=np.arange(k + 1, dtype=np.int32), name=f"star{k}")


def check(result: MatchResult, exact: int, must_be_exact: bool) -> None:
    assert isinstance(result.count, int)
    if must_be_exact:
        assert (result.status, result.count) == (Status.OK, exact), result
        return
    if result.status is Status.OK:
        assert result.count == exact, result
        return
    assert result.status in (Status.OVERFLOW, Status.TIMEOUT, Status.OOM), result
    assert 0 <= result.count <= exact, result
    if result.status is not Status.TIMEOUT:
        assert result.reason, result


# ---------------------------------------------------------------------- one test per engine
K, N = 20, 10
EXACT = N ** K                                   # 10^20 > 2^64


@pytest.fixture(scope="module")
def star20():
    return star_data(K, N), star_query(K)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")   # the simulator's wrapping atomics
@pytest.mark.parametrize("name", [n for n in available_engines() if n in BUILTIN_ENGINES or n in PEER_ENGINES])
def test_a_count_past_2_64_is_exact_or_said_to_be_a_lower_bound(name, star20):
    data, query = star20
    assert EXACT > 2 ** 64
    engine = create_engine(name, **OPTIONS.get(name, {})).prepare(data)
    result = engine.match(query, timeout_s=None if name in COUNTING else ENUMERATION_S)
    check(result, EXACT, name in COUNTING)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(COUNTING))
def test_many_partial_counts_carry_past_2_64(name):
    # 32 hubs of 8^20 = 2^60 embeddings each: every product fits in 62 bits, their sum is 2^65
    data, query = star_data(20, 8, hubs=32), star_query(20)
    result = create_engine(name, **OPTIONS.get(name, {})).prepare(data).match(query)
    check(result, 32 * 8 ** 20, True)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_gmatch_hub_parts_add_up_past_2_64(star20):
    # the default gMatch cuts the hub-rooted star into parts (their counts are Python ints)
    data, query = star20
    result = create_engine("gmatch").prepare(data).match(query)
    check(result, EXACT, True)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_past_128_bits_cpu_is_exact_and_gmatch_says_overflow():
    # 17^31 > 2^124: past gMatch's 128-bit count; the cpu engine multiplies in Python ints
    k, n = 31, 17
    exact = n ** k
    data, query = star_data(k, n), star_query(k)
    check(create_engine("cpu").prepare(data).match(query), exact, True)
    result = create_engine("gmatch", hub_parts=0).prepare(data).match(query)
    assert result.status is Status.OVERFLOW, result
    assert 2 ** 124 <= result.count <= exact
    assert "2^124" in result.reason


@pytest.mark.skipif(BACKEND != "simulator", reason="device functions run on the host in the simulator only")
def test_gmatch_limb_product_matches_python_ints():
    from gmatch.enumerate import COUNT_LIMB, mul_limbs

    rng = np.random.default_rng(0)
    for _ in range(200):
        hi, lo = int(rng.integers(0, 1 << 40)), int(rng.integers(0, COUNT_LIMB))
        c = int(rng.integers(0, 1 << 31))
        got_hi, got_lo = mul_limbs(np.int64(hi), np.int64(lo), np.int64(c))
        value = (hi * COUNT_LIMB + lo) * c
        if value >= 1 << 124:
            assert got_hi == -1
        else:
            assert 0 <= got_lo < COUNT_LIMB and int(got_hi) * COUNT_LIMB + int(got_lo) == value


# ---------------------------------------------------------------------- callers of big counts
def test_match_many_and_frames_carry_the_exact_big_count(star20):
    data, query = star20
    results = match_many(data, [query, query], engine="cpu")
    assert [r.count for r in results] == [EXACT, EXACT]
    row = results[0].to_row()
    assert json.loads(json.dumps(row))["count"] == EXACT
    assert results_frame(results)["count"].tolist() == [EXACT, EXACT]


@pytest.mark.parametrize("fmt", ["json", "csv", "table"])
def test_cli_prints_a_count_past_2_64(fmt, star20, tmp_path, capsys):
    data, query = star20
    write_graph(data, tmp_path / "data.graph")
    write_graph(query, tmp_path / "star.graph")
    folder = tmp_path / "queries"
    folder.mkdir()
    write_graph(query, folder / "a.graph")
    write_graph(query, folder / "b.graph")
    for target in (tmp_path / "star.graph", folder):
        code = main(["match", str(tmp_path / "data.graph"), str(target), "--format", fmt, "--quiet"])
        out = capsys.readouterr().out
        assert code == 0
        assert str(EXACT) in out
        if fmt == "json":
            assert {row["count"] for row in json.loads(out)} == {EXACT}


def test_overflow_is_a_partial_status_everywhere():
    assert Status("overflow") is Status.OVERFLOW and str(Status.OVERFLOW) == "overflow"
    assert match_exit_code({Status.OK, Status.OVERFLOW}) == EXIT_PARTIAL
    assert match_exit_code({Status.OVERFLOW}, allow_partial=True) == 0
    row = MatchResult("gmatch", 2 ** 124, Status.OVERFLOW, reason="past 128 bits").to_row()
    assert _count_text(row) == f">={2 ** 124}"
    assert "counters" in _lower_bound_note(row["status"])
    from common.distributed import _SEVERITY

    assert set(_SEVERITY) == set(Status)
    frame = results_frame([MatchResult("gmatch", 2 ** 124, Status.OVERFLOW)])
    assert not frame["exact"].any()
