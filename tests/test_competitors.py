"""The papers' competitors as engines (experiments/papers/competitors.py): the inputs they write read back
as the binaries read them, their outputs parsed, what they cannot take declared, and the search-time
limit; stand-in binaries (Python scripts) here, not the real ones on a GPU."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from common import create_engine
from common.engine import registry
from common.engine.result import Status
from common.graph.generate import power_law_labels, query_set, rmat
from common.graph.model import Graph
from experiments.papers import competitors as comp
from experiments.papers import gsi_filter

CYCLE4 = Graph.from_edges(4, [0, 1, 2, 3], [1, 2, 3, 0], name="c4")
PATH3 = Graph.from_edges(3, [0, 1], [1, 2], name="p3")
DIAMOND = Graph.from_edges(4, [0, 0, 1, 1, 2], [1, 2, 2, 3, 3], name="diamond")
STAR4 = Graph.from_edges(4, [0, 0, 0], [1, 2, 3], name="star")


def unlabelled(n=40, m=120, seed=3):
    return rmat(n, m, seed=seed, name="u")


def labelled(n=40, m=120, seed=3, labels=3):
    return rmat(n, m, seed=seed, labels=power_law_labels(n, labels, 1.0, seed=seed), name="l")


# A stand-in binary: reads the written inputs as the real one does (the parsers below, taken from the
# binaries' sources), counts embeddings with the cpu engine and prints the binary's output lines.
STAND_IN = '''\
import struct, sys, time, os
sys.path.insert(0, {root!r})
from common import create_engine
from common.graph.model import Graph
from experiments.papers import competitors as comp
kind, args = {kind!r}, sys.argv[1:]
time.sleep(float(os.environ.get("FAKE_STARTUP_S", "0")))
if os.environ.get("FAKE_STARTS"):                  # one line per process started
    open(os.environ["FAKE_STARTS"], "a").write(" ".join(args) + "\\n")

def csr(path):
    raw = open(path, "rb").read()
    n, m = struct.unpack_from("<ii", raw)
    off = struct.unpack_from("<%dQ" % (n + 1), raw, 8)
    labels = struct.unpack_from("<%di" % n, raw, 8 + 8 * (n + 1))
    nbr = struct.unpack_from("<%di" % (2 * m), raw, 8 + 8 * (n + 1) + 4 * n)
    src = [u for u in range(n) for j in range(off[u], off[u + 1]) if u < nbr[j]]
    dst = [nbr[j] for u in range(n) for j in range(off[u], off[u + 1]) if u < nbr[j]]
    assert off[n] == 2 * m and len(src) == m
    return Graph.from_edges(n, src, dst, labels=list(labels))

def text(path):
    labels, edges = comp.read_text_graph(path)
    return Graph.from_edges(len(labels), [a for a, _ in edges], [b for _, b in edges], labels=labels)

def gsi(path, index=0):                            # directed: every edge must come both ways
    labels, edges = comp.read_gsi_graphs(path)[index]
    assert min(labels) >= 1 and min(e[2] for e in edges) >= 1
    assert sorted(edges) == sorted((b, a, lab) for a, b, lab in edges)
    edges = [e for e in edges if e[0] < e[1]]
    elab = [e[2] - 1 for e in edges]               # vertex labels: the ids as written
    return Graph.from_edges(len(labels), [e[0] for e in edges], [e[1] for e in edges], labels=labels,
                            edge_labels=elab)

def mtx(path):
    rows = open(path).read().split("\\n")
    n, _, nnz = map(int, rows[0].split())
    pairs = [tuple(map(int, r.split())) for r in rows[1:] if r.strip()]
    assert len(pairs) == nnz and all((b, a) in pairs for a, b in pairs)
    assert pairs == sorted(pairs)                  # CSRCOO::from_edgelist asserts rows sorted by source
    return Graph.from_edges(n, [a for a, b in pairs if a < b], [b for a, b in pairs if a < b])

if kind in ("stmatch", "tdfs"):
    data, query = text(args[0]), text(args[1])
elif kind == "gsi":
    data, query = gsi(args[0]), gsi(args[1])
elif kind == "beep":
    data, query = text(args[1]), mtx(args[3])
elif len(args) == 1:                               # g2miner: tc_gpu_base DATA.bin
    data, query = csr(args[0]), comp.G2MINER_PATTERNS["triangle"]
elif args[1].isdigit():                            # clique_gpu_base DATA.bin K
    data, query = csr(args[0]), comp.G2MINER_PATTERNS[args[1] + "-clique"]
else:                                              # sgl_gpu_base DATA.bin NAME
    data, query = csr(args[0]), comp.G2MINER_PATTERNS[args[1]]
if kind == "gsi":                                  # labels compared by their signature bit, as GSI does
    from experiments.papers.gsi_filter import gsi_filter_count, gsi_signatures
    graphs = comp.read_gsi_graphs(args[1])           # main/run.cpp matches every query of the file
    copies = len(graphs)
    assert all(g == graphs[0] for g in graphs)
    count = gsi_filter_count(data, query, query.labels, gsi_signatures(data, data.labels))
else:
    copies = 1
    count = create_engine("cpu").prepare(data).match(query).count
count += int(os.environ.get("FAKE_COUNT_OFFSET", "0"))
if os.environ.get("FAKE_CRASH") and query.num_vertices > 3:                # not the start-up probe
    sys.stderr.write("an illegal memory access was encountered\\n"); sys.exit(134)
if os.environ.get("FAKE_PROBE_HANGS") and query.num_vertices <= 3:       # a start-up probe (an edge, a path)
    time.sleep(600)
if os.environ.get("FAKE_SEARCH_S") == "forever" and query.num_vertices > 2:
    time.sleep(600)
searches = [float(t) for t in os.environ.get("FAKE_SEARCH_S", "0.01").split(",")]
searches = [searches[i % len(searches)] if query.num_vertices > 2 else 0.0 for i in range(copies)]
search = searches[0]
if kind != "gsi":
    time.sleep(search)
ms = search * 1000
if kind == "stmatch":
    print("%s\\t%f\\t%d" % (args[1], ms, count)); print("Result: %d" % count); print("Time: %d" % ms)
elif kind == "tdfs":
    print("Execution time (ms): %f" % ms); print("Total matches: %d" % count)
elif kind == "beep":                               # each subgraph once (nauty's symmetry breaking)
    unique = count // comp.automorphisms(query)
    print("[info] final count time %f s" % (ms / 1000)); print("------------- Counter = %d" % unique)
elif kind == "g2miner":
    unique = count // comp.automorphisms(query)
    if len(args) == 1:
        print("runtime [base] = %f sec" % (ms / 1000)); print("total_num_triangles = %d" % unique)
    elif args[1].isdigit():
        print("runtime [gpu] = %f sec" % (ms / 1000)); print("num_%s-cliques = %d" % (args[1], unique))
    else:
        print("runtime [cuda_base] = %f sec" % (ms / 1000)); print("total_num = %d" % unique)
else:
    for search in searches:                        # each query in turn, its lines flushed as it ends
        time.sleep(search)
        print("result: %d %d" % (count, query.num_vertices), flush=True)
        sys.stderr.write("query used: %d ms\\n" % (search * 1000)); sys.stderr.flush()
    sys.stderr.write("match used: %d ms\\n" % (sum(searches) * 1000))
'''


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """stand_in(engine name) -> an engine class whose binaries are the stand-in script."""
    def make(name):
        cls = comp.COMPETITORS[name]
        script = tmp_path / f"{cls.system}.py"
        script.write_text(STAND_IN.format(root=str(Path(__file__).resolve().parents[1]), kind=cls.system))
        exe = tmp_path / f"{cls.system}.sh"
        exe.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
        exe.chmod(0o755)
        for variant in cls.binaries:
            var = f"{cls.env_var}_{variant.upper()}" if len(cls.binaries) > 1 else cls.env_var
            monkeypatch.setenv(var, str(exe))
        monkeypatch.setitem(registry._REGISTRY, name, f"{cls.__module__}:{cls.__qualname__}")
        assert comp.competitor_reason(name) is None
        return cls
    return make


@pytest.mark.parametrize("name, data", [("stmatch-authors", unlabelled()),
                                        ("tdfs-authors", labelled()), ("tdfs-authors", unlabelled()),
                                        ("beep-authors", unlabelled()), ("gsi-authors", labelled())])
def test_the_written_inputs_read_back_and_the_count_is_cpus(stand_in, name, data):
    stand_in(name)
    engine = create_engine(name).prepare(data)
    queries = (DIAMOND, STAR4, PATH3) if name == "beep-authors" else query_set(data, 2, 4, seed=7).queries
    for query in queries:
        expected = create_engine("cpu").prepare(data).match(query).count
        result = engine.match(query, timeout_s=30.0)
        assert (result.status, result.count) == (Status.OK, expected), result.reason
        assert result.phases["enumerate"] == pytest.approx(0.01, abs=1e-3)


def test_g2miner_runs_its_named_patterns_and_multiplies_by_the_automorphisms(stand_in):
    stand_in("g2miner-authors")
    data = unlabelled(60, 300)
    engine = create_engine("g2miner-authors").prepare(data)
    for name, pattern in comp.G2MINER_PATTERNS.items():
        relabelled = Graph.from_edges(pattern.num_vertices, *[list(reversed(a)) for a in pattern.edges()[:2]])
        assert comp.g2miner_pattern(relabelled) == name
        expected = create_engine("cpu").prepare(data).match(pattern).count
        assert engine.match(relabelled).count == expected
    assert [comp.automorphisms(p) for p in comp.G2MINER_PATTERNS.values()] == [6, 24, 120, 8, 4, 2, 10]
    assert [comp.g2miner_program(n)[0] for n in comp.G2MINER_PATTERNS] == ["tc"] + ["clique"] * 2 + ["sgl"] * 4


def test_what_each_binary_cannot_take_is_unsupported_with_the_reason(stand_in):
    for name in comp.COMPETITORS:
        stand_in(name)
    big = Graph.from_edges(6, [0, 1, 2, 3, 4], [1, 2, 3, 4, 5])
    lab = labelled()
    assert "at most 5 query vertices" in create_engine("stmatch-authors").prepare(unlabelled()).match(big).reason
    assert "at most 5 query vertices" in create_engine("tdfs-authors").prepare(unlabelled()).match(big).reason
    path13 = Graph.from_edges(13, list(range(12)), list(range(1, 13)))
    assert "at most 12 query vertices" in create_engine("gsi-authors").prepare(unlabelled()).match(path13).reason
    wide = rmat(40, 120, seed=3, labels=np.arange(40) % 40, name="wide")
    q = query_set(wide, 1, 3, seed=1).queries[0]
    assert "unlabelled graphs only" in create_engine("stmatch-authors").prepare(wide).match(q).reason
    assert create_engine("stmatch-authors").prepare(unlabelled()).match(PATH3).status is Status.OK
    assert create_engine("tdfs-authors").prepare(wide).match(q).status is not Status.UNSUPPORTED
    assert "unlabelled graphs only" in create_engine("beep-authors").prepare(lab).match(PATH3).reason
    assert "unlabelled graphs only" in create_engine("g2miner-authors").prepare(lab).match(CYCLE4).reason
    assert "none of them" in create_engine("g2miner-authors").prepare(unlabelled()).match(PATH3).reason
    assert "central query vertex" in create_engine("beep-authors").prepare(unlabelled()).match(CYCLE4).reason
    elab = Graph.from_edges(3, [0, 1], [1, 2], edge_labels=[1, 2])
    assert "edge labels" in create_engine("tdfs-authors").prepare(elab).match(PATH3).reason
    assert create_engine("gsi-authors").prepare(elab).match(
        Graph.from_edges(2, [0], [1], edge_labels=[2])).count == 2
    for name in comp.COMPETITORS:
        result = create_engine(name).prepare(unlabelled()).match(DIAMOND, collect=True)
        assert result.status is Status.UNSUPPORTED and "only counts" in result.reason


def test_the_limit_is_on_the_printed_search_start_up_apart(stand_in, monkeypatch):
    stand_in("tdfs-authors")
    data = unlabelled()
    engine = create_engine("tdfs-authors").prepare(data)
    query = query_set(data, 1, 4, seed=5).queries[0]
    monkeypatch.setenv("FAKE_STARTUP_S", "0.5")
    monkeypatch.setenv("FAKE_SEARCH_S", "0.1")
    result = engine.match(query, timeout_s=0.3)
    assert result.status is Status.OK and result.stats["startup_ms"] > 400
    assert engine.allowance_s() >= 0.4
    monkeypatch.setenv("FAKE_SEARCH_S", "0.6")
    result = engine.match(query, timeout_s=0.3)
    assert result.status is Status.TIMEOUT and "search took 0.600 s" in result.reason
    monkeypatch.setenv("FAKE_SEARCH_S", "forever")
    result = engine.match(query, timeout_s=0.3)
    assert result.status is Status.TIMEOUT and "killed" in result.reason


@pytest.mark.parametrize("name, data", [("stmatch-authors", unlabelled()), ("gsi-authors", labelled())])
def test_a_binary_that_crashes_is_an_error_naming_its_last_words_not_unsupported(stand_in, monkeypatch, name, data):
    stand_in(name)
    engine = create_engine(name).prepare(data)
    query = query_set(data, 1, 4, seed=5).queries[0]
    engine.allowance_s()                                 # the start-up probe (a path) does not crash
    monkeypatch.setenv("FAKE_CRASH", "1")
    for result in (engine.match(query, timeout_s=1.0), *engine.match_repeats(query, 2, timeout_s=1.0)):
        assert result.status is Status.ERROR and "illegal memory access" in result.reason, result
        assert "rc 134" in result.reason
    monkeypatch.delenv("FAKE_CRASH")
    assert engine.match(query, timeout_s=1.0).status is Status.OK


def test_gsi_runs_a_querys_repeats_in_one_process_each_judged_on_its_printed_time(stand_in, monkeypatch, tmp_path):
    """The authors' GSI loads the data graph once per process and matches every query of its query
    file: a query's repeats are one process over that many copies, each run its own printed time."""
    stand_in("gsi-authors")
    data = labelled()
    engine = create_engine("gsi-authors").prepare(data)
    query = query_set(data, 1, 4, seed=5).queries[0]
    expected = create_engine("cpu").prepare(data).match(query).count
    engine.allowance_s()                                 # the start-up probe's process, before counting
    starts = tmp_path / "starts.txt"
    monkeypatch.setenv("FAKE_STARTS", str(starts))
    monkeypatch.setenv("FAKE_SEARCH_S", "0.05,0.02,0.03")
    runs = engine.match_repeats(query, 3, timeout_s=1.0)
    assert len(starts.read_text().splitlines()) == 1
    assert [r.status for r in runs] == [Status.OK] * 3 and [r.count for r in runs] == [expected] * 3
    assert [r.phases["enumerate"] for r in runs] == [0.05, 0.02, 0.03]
    assert all(r.stats["runs_in_one_process"] == 3 and r.query == query.name for r in runs)
    monkeypatch.setenv("FAKE_SEARCH_S", "0.05,0.6,0.05")           # the second copy passes the limit
    runs = engine.match_repeats(query, 3, timeout_s=0.3)
    assert [r.status for r in runs] == [Status.OK, Status.TIMEOUT] and "search took 0.600 s" in runs[1].reason
    monkeypatch.setenv("FAKE_SEARCH_S", "forever")                  # killed before any copy ended
    runs = engine.match_repeats(query, 3, timeout_s=0.2)
    assert [r.status for r in runs] == [Status.TIMEOUT] and "killed" in runs[0].reason
    assert len(starts.read_text().splitlines()) == 3
    with pytest.raises(ValueError, match="repeats"):
        engine.match_repeats(query, 0)
    path13 = Graph.from_edges(13, list(range(12)), list(range(1, 13)))
    assert [r.status for r in engine.match_repeats(path13, 3)] == [Status.UNSUPPORTED]


def test_an_engine_without_repeats_in_one_call_repeats_match():
    data = labelled()
    query = query_set(data, 1, 4, seed=5).queries[0]
    runs = create_engine("cpu").prepare(data).match_repeats(query, 2, timeout_s=10)
    assert len(runs) == 2 and all(r.status is Status.OK and r.query == query.name for r in runs)


def test_output_parsers_on_the_binaries_lines():
    assert comp.parse_stmatch("q.graph\t12.500000\t42\nResult: 42\nTime: 12\n") == (42, 12.5)
    assert comp.parse_tdfs("[DEBUG] x\nExecution time (ms): 3.25\nTotal matches: 7\n") == (7, 3.25)
    assert comp.parse_beep("\x1b[0m[info] final count time 0.5 s\n------------- Counter = 9\n") == (9, 500.0)
    assert comp.parse_g2miner("runtime [cuda_base] = 0.25 sec\ntotal_num = 3\n") == (3, 250.0)
    assert comp.parse_g2miner("runtime [base] = 0.5 sec\ntotal_num_triangles = 4\n") == (4, 500.0)
    assert comp.parse_g2miner("runtime [gpu] = 1e-3 sec\nnum_5-cliques = 2\n") == (2, 1.0)
    assert comp.parse_gsi("result: 11 4\nmatch used: 8 ms\n") == (11, 8.0)
    assert comp.parse_gsi_runs("result: 11 4\nquery used: 8 ms\nresult: 11 4\nquery used: 3 ms\nresult: 11 4\n"
                               "match used: 12 ms\n") == [(11, 8.0), (11, 3.0)]
    assert comp.parse_tdfs("CUDA Error:\n") == (None, None)


def test_a_missing_binary_is_skipped_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPETITORS_WORK", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in comp.COMPETITORS:
        assert "no CUDA toolkit here" in comp.competitor_reason(name)
        assert [(c.engine, c.optional) for c in comp.competitor_configs(name, name)] == [(name, True)]
    (tmp_path / "status.txt").write_text("stmatch built a b\nbeep FAILED main.cu(9): error: no member x\n")
    assert comp.build_status() == {"stmatch": "built a b", "beep": "FAILED main.cu(9): error: no member x"}
    assert comp.competitor_reason("beep-authors").endswith("failed to build it: main.cu(9): error: no member x")
    assert "no CUDA toolkit here" in comp.competitor_reason("stmatch-authors")


def test_the_csr_and_gsi_writers_round_trip(tmp_path):
    data = labelled()
    comp.write_gsi_graph(data, tmp_path / "d.g")
    labels, edges = comp.read_gsi_graph(tmp_path / "d.g")
    assert labels == (data.labels + 1).tolist() and len(edges) == 2 * data.num_edges
    ids = gsi_filter.GSILabelIds(data.label_frequencies)
    comp.write_gsi_edges(data, tmp_path / "e.g")
    comp.write_gsi_graph(data, tmp_path / "d2.g", ids(data.labels), edge_lines=tmp_path / "e.g")
    assert comp.read_gsi_graph(tmp_path / "d2.g") == (ids(data.labels).tolist(), edges)
    comp.write_gsi_graph(data, tmp_path / "d3.g", ids(data.labels), edge_lines=tmp_path / "e.g", copies=3)
    assert comp.read_gsi_graphs(tmp_path / "d3.g") == [(ids(data.labels).tolist(), edges)] * 3
    src, dst, _ = data.edges()
    assert {(a, b) for a, b, _ in edges} == {*zip(src.tolist(), dst.tolist()), *zip(dst.tolist(), src.tolist())}
    comp.write_mtx_query(DIAMOND, tmp_path / "q.mtx")
    rows = (tmp_path / "q.mtx").read_text().split("\n")
    arcs = [tuple(map(int, r.split())) for r in rows[1:] if r]
    assert rows[0] == "4 4 10" and arcs == sorted(arcs) and len(set(arcs)) == 10
    comp.write_text_graph(data, tmp_path / "d.graph")
    labels, edges = comp.read_text_graph(tmp_path / "d.graph")
    assert labels == data.labels.tolist() and len(edges) == data.num_edges
    comp.write_gmatch_binary(data, tmp_path / "d.bin")
    n, m = struct.unpack_from("<ii", (tmp_path / "d.bin").read_bytes())
    assert (n, m) == (data.num_vertices, data.num_edges)


@pytest.mark.parametrize("name", ["stmatch-authors", "tdfs-authors"])
def test_stmatch_and_tdfs_refuse_two_vertex_queries_and_probe_with_a_path(stand_in, name):
    """Their search loop never ends on a two-vertex pattern: such a query is unsupported with the
    reason, and the start-up probe has three vertices (on a labelled graph, T-DFS's, a path of the data
    graph; STMatch runs on unlabelled graphs only: a triangle) with matches."""
    stand_in(name)
    data = labelled() if name == "tdfs-authors" else unlabelled()
    engine = create_engine(name).prepare(data)
    edge = Graph.from_edges(2, [0], [1], labels=[int(data.labels[0])] * 2)
    assert "two-vertex pattern" in engine.unsupported_reason(edge)
    probe = engine.startup_probe()
    assert probe.num_vertices == 3 and probe.num_edges == (2 if name == "tdfs-authors" else 3)
    assert not engine.unsupported_reason(probe)
    assert create_engine("cpu").prepare(data).match(probe).count > 0
    assert engine.allowance_s() < 5.0                       # measured on the path (5 s: not measured)
    assert comp.path_probe(Graph.from_edges(4, [0, 2], [1, 3])) is None    # no vertex with two neighbours
    plain = unlabelled()
    triangle = comp.three_vertex_probe(plain)                              # unlabelled: a triangle
    assert triangle.num_edges == 3 and create_engine("cpu").prepare(plain).match(triangle).count > 0
    square = Graph.from_edges(4, [0, 1, 2, 3], [1, 2, 3, 0])
    assert comp.three_vertex_probe(square).num_edges == 2                  # no triangle: a path


def test_stmatch_refuses_a_data_graph_past_its_slot_capacity(stand_in):
    stand_in("stmatch-authors")
    stand_in("tdfs-authors")
    star = Graph.from_edges(5001, [0] * 5000, list(range(1, 5001)), name="star")
    engine = create_engine("stmatch-authors").prepare(star)
    reason = engine.unsupported_reason(Graph.from_edges(3, [0, 0], [1, 2]))
    assert "GRAPH_DEGREE" in reason and "largest degree is 5,000" in reason and "hold 4,096" in reason
    tdfs = create_engine("tdfs-authors").prepare(star)
    assert not tdfs.unsupported_reason(Graph.from_edges(3, [0, 0], [1, 2]))


def test_stmatch_runs_the_smallest_build_that_holds_the_largest_degree(tmp_path, monkeypatch):
    """make competitors builds STMatch once per GRAPH_DEGREE; the engine picks the smallest build
    whose slots hold the data graph's largest degree, and names the builds when none does."""
    monkeypatch.setenv("COMPETITORS_WORK", str(tmp_path))
    for variant in ("LABELLED", "UNLABELLED"):
        monkeypatch.delenv(f"STMATCH_BIN_{variant}", raising=False)
    folder = tmp_path / "src" / "stmatch" / "bin"
    folder.mkdir(parents=True)
    for degree in (4096, 16384):
        for config in ("fig_local_global_unroll", "table_edge_lb"):
            (folder / f"{config}_d{degree}.exe").write_text("")
    cls = comp.COMPETITORS["stmatch-authors"]
    assert sorted(cls.built_degrees("unlabelled")) == [4096, 16384] and cls.reason_missing() is None
    path = Graph.from_edges(3, [0, 0], [1, 2])
    for leaves, degree in ((100, 4096), (5000, 16384)):
        star = Graph.from_edges(leaves + 1, [0] * leaves, list(range(1, leaves + 1)))
        engine = cls().prepare(star)
        assert engine.binary_for("unlabelled") == folder / f"fig_local_global_unroll_d{degree}.exe"
        assert not engine.unsupported_reason(path)
    star = Graph.from_edges(20001, [0] * 20000, list(range(1, 20001)))
    assert "hold 4,096, 16,384" in cls().prepare(star).unsupported_reason(path)


def test_a_crash_is_reported_by_the_line_that_names_it():
    out = ("n = 300\nmain.cu.exe: CSRCOO.cuh:59: static CSRCOO from_edgelist(...): "
           "Assertion `src >= csr.rowPtr_.size()' "
           "failed.\n  with EdgeList = std::vector<std::pair<unsigned int, unsigned int> >\n")
    assert comp.failure_line(out).startswith("main.cu.exe: CSRCOO.cuh:59")
    assert comp.failure_line("a\nlast words\n") == "last words"
    assert comp.failure_line("") == ""


def test_gsi_label_ids_give_kept_labels_bits_of_their_own_then_the_data_graphs_while_bits_last():
    """GSI tells labels apart by one bit of 32 (a hash of the id): the ids written give the kept
    labels (a query's), then the data graph's most frequent, bits of their own; past 32 labels the
    rest share a bit no kept label has, and a label on a bit another label has is named."""
    ten = gsi_filter.GSILabelIds(np.ones(10))
    assert len(set(gsi_filter.gsi_label_bit(np.arange(1, 11)).tolist())) < 10      # labels + 1 would share bits
    assert len(set(gsi_filter.gsi_label_bit(ten(np.arange(10))).tolist())) == 10
    assert ten.shared(np.arange(12)) == []                # labels absent from the data: a bit of their own
    forty = gsi_filter.GSILabelIds(np.arange(40, 0, -1))  # label 0 the most frequent
    ids = forty(np.arange(45))
    assert len(set(ids.tolist())) == 45 and (gsi_filter.gsi_label_bit(ids) == [forty.bit(i) for i in range(45)]).all()
    assert len(set(gsi_filter.gsi_label_bit(ids[:31]).tolist())) == 31
    assert forty.shared(np.arange(45)) == list(range(31, 45))
    kept = gsi_filter.GSILabelIds(np.arange(40, 0, -1), kept=[39, 35, 2])
    assert kept.shared([39, 35, 2, 0, 1]) == [] and len(kept.shared(np.arange(40))) == 40 - 31
    assert gsi_filter.GSILabelIds(np.ones(40), kept=np.arange(33)).shared(np.arange(33)) != []
    full = gsi_filter.GSILabelIds(np.ones(32))
    assert full.shared(np.arange(32)) == [] and full.shared([5, 32]) == [32]


def test_gsi_counts_exactly_on_labels_it_would_confuse(stand_in):
    """With the stand-in comparing labels as GSI does (their signature bit, the neighbour counters),
    the count is cpu's on ten labels (whose ids plus one would share bits) and on forty (more than
    GSI's 32 bits), queries with rare labels included: each query's labels get bits of their own."""
    stand_in("gsi-authors")
    cpu = create_engine("cpu")
    ten = labelled(60, 240, labels=10)
    labels = np.random.default_rng(5).permutation(np.repeat(np.arange(40), [2] * 31 + [1] * 9))
    forty = rmat(len(labels), 400, seed=5, labels=labels, name="forty")
    src, dst, _ = forty.edges()
    rare = [Graph.from_edges(2, [0], [1], labels=forty.labels[[u, v]].tolist())
            for u, v in zip(src.tolist(), dst.tolist()) if max(forty.labels[[u, v]]) >= 31][:2]
    for data, queries in ((ten, query_set(ten, 4, 4, seed=2).queries),
                          (forty, query_set(forty, 3, 3, seed=2).queries + rare)):
        engine = create_engine("gsi-authors").prepare(data)
        for query in queries:
            result = engine.match(query, timeout_s=30.0)
            assert (result.status, result.count) == (Status.OK, cpu.prepare(data).match(query).count), result.reason


def test_the_gsi_filter_emulation_gives_the_authors_binarys_counts():
    """GSI Fig. 14's medium Enron queries written with labels + 1: the counts the authors' GSI printed
    on an H200 (bf66661's run; cpu's in parentheses) are the emulation's; with the engine's ids, cpu's."""
    from experiments.harness.workloads import SCALES
    from experiments.papers.gsi_icde20 import DATASETS, QUERIES

    printed = {"walk_12_0": 72, "walk_12_3": 15, "walk_12_7": 918, "walk_12_14": 2,   # (72, 10, 612, 1,
               "walk_12_16": 66}                                                   # 51)
    data = DATASETS[0].load(SCALES["medium"])
    queries = {q.name: q for q in QUERIES.build(data, DATASETS[0], SCALES["medium"])[0]}
    plus_one = gsi_filter.gsi_signatures(data, data.labels.astype(np.int64) + 1)
    cpu = create_engine("cpu").prepare(data)
    for name, count in printed.items():
        query = queries[name]
        assert gsi_filter.gsi_filter_count(data, query, query.labels.astype(np.int64) + 1, plus_one) == count, name
        ids = gsi_filter.GSILabelIds(data.label_frequencies, kept=np.unique(query.labels))
        chosen = gsi_filter.gsi_signatures(data, ids(data.labels))
        assert gsi_filter.gsi_filter_count(data, query, ids(query.labels), chosen) == cpu.match(query).count, name


def test_the_gsi_filter_command_prints_cpus_count_for_the_engines_ids(capsys):
    from experiments.bench import gsi_filter as command

    assert command.main(["--scale", "tiny", "--queries", "2"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert len(rows) == 4 and all(row[2] == row[4] and int(row[3]) >= int(row[2]) for row in rows)


def test_start_up_rows_sit_beside_their_graphs_edges_and_fit_a_line(tmp_path, capsys):
    """experiments.bench.start_up: each row's start-up beside its data graph's edges at the row's
    scale, and per engine seconds = fixed + per million edges through the graphs' medians."""
    import json

    import pandas as pd

    from experiments.bench import start_up
    from experiments.harness.workloads import SCALES, standin_size
    from experiments.papers.gsi_icde20 import DATASETS

    medium = SCALES["medium"]
    edges = {d.name: standin_size(d, medium.max_edges, medium.keep_degree)[1] for d in DATASETS}
    rows = []
    for name in ("Enron", "gowalla", "WatDiv"):
        seconds = 0.5 + 2.0 * edges[name] / 1e6
        for spread in (-0.1, 0.0, 0.1):
            stats = json.dumps({"startup_ms": 1e3 * (seconds + spread)})
            rows.append(dict(engine="gsi-authors", dataset=name, stats=stats))
        rows.append(dict(engine="gsi", dataset=name, stats=json.dumps({"order": [0, 1]})))
    (tmp_path / "gsi_icde20").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "gsi_icde20" / "gsi_icde20.fig14.medium.csv", index=False)
    pd.DataFrame(rows).to_csv(tmp_path / "gsi_icde20" / "no_such.fig99.medium.csv", index=False)
    found = start_up.start_up_rows([tmp_path])
    assert set(found.engine) == {"gsi-authors"} and len(found) == 9
    assert dict(zip(found.dataset, found.edges)) == {name: edges[name] for name in ("Enron", "gowalla", "WatDiv")}
    (line,) = start_up.fit(found).itertuples()
    assert line.fixed_s == pytest.approx(0.5, abs=1e-3) and line.per_million_edges_s == pytest.approx(2.0, abs=1e-3)
    assert start_up.main(["--results", str(tmp_path)]) == 0 and "gsi-authors" in capsys.readouterr().out


def test_every_competitor_declares_its_start_up_for_the_plan_growing_with_the_graph():
    for cls in comp.COMPETITORS.values():
        small, large = cls.planned_start_up_s(10**5), cls.planned_start_up_s(4 * 10**6)
        assert 0 < small < large, cls.name
    assert comp.STMatchAuthors.planned_start_up_s(4 * 10**6) == pytest.approx(5.5)      # measured 5.4 s


def test_engines_on_the_same_data_graph_share_its_files_and_its_start_up_allowance(stand_in, monkeypatch, tmp_path):
    """A harness worker prepares an engine per job, and a paper's points share data graphs: the
    data file is written once and the start-up probe runs once per graph (and build) in a process."""
    stand_in("tdfs-authors")
    data = unlabelled()
    query = query_set(data, 1, 4, seed=5).queries[0]
    starts = tmp_path / "starts.txt"
    monkeypatch.setenv("FAKE_STARTS", str(starts))
    first = create_engine("tdfs-authors").prepare(data)
    assert first.match(query, timeout_s=5.0).status is Status.OK
    assert len(starts.read_text().splitlines()) == 2                    # the probe, the query
    written = {path: path.stat().st_mtime_ns for path in first._folder.glob("data-*")}
    second = create_engine("tdfs-authors").prepare(unlabelled())         # the same graph, another object
    assert second._folder == first._folder and second.allowance_s() == first.allowance_s()
    assert second.match(query, timeout_s=5.0).status is Status.OK
    assert len(starts.read_text().splitlines()) == 3                    # no second probe
    assert {path: path.stat().st_mtime_ns for path in first._folder.glob("data-*")} == written
    other = create_engine("tdfs-authors").prepare(unlabelled(seed=4))
    assert other._folder != first._folder
    other.allowance_s()
    assert len(starts.read_text().splitlines()) == 4                    # its own probe
