"""Graph file formats (common/graph/io.py): real data against independent parsers, round trips through
every writer, detection by content, and one test per kind of malformed file."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pytest

from _graphs import random_graph
from _paths import DATA
from common.errors import GraphFormatError, InvalidGraphError
from common.graph.io import (
    detect_format,
    load_graph,
    load_graphs,
    load_query_set,
    read_expected_counts,
    save_graph,
    write_gmatch_binary,
    write_graph,
    write_gsi,
)
from common.graph.model import Graph

# ---------------------------------------------------------------------------------- oracles


def oracle_graph_file(path: Path) -> Graph:
    """A plain line-by-line reader of the .graph format, independent of common.graph.io."""
    n, labels, src, dst, elab = 0, None, [], [], []
    for line in path.read_text().splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "t":
            n = int(f[1])
            labels = [0] * n
        elif f[0] == "v":
            labels[int(f[1])] = int(f[2])
        elif f[0] == "e":
            src.append(int(f[1]))
            dst.append(int(f[2]))
            elab.append(int(f[3]) if len(f) > 3 else 0)
    return Graph.from_edges(n, src, dst, labels, elab, directed=False)


def oracle_snap_pairs(path: Path) -> list[tuple[int, int]]:
    with gzip.open(path, "rt") as f:
        return [tuple(int(x) for x in line.split()) for line in f if not line.startswith("#")]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def raises_format_error(path: Path, **options) -> GraphFormatError:
    with pytest.raises(GraphFormatError) as info:
        load_graphs(path, **options)
    return info.value


@pytest.fixture(scope="module")
def hprd() -> Graph:
    return load_graph(DATA / "hprd" / "HPRD.graph")


# ---------------------------------------------------------------------------------- real data


@pytest.mark.parametrize("rel, n, m, nlabels", [
    ("hprd/HPRD.graph", 9460, 34998, 307),
    ("yeast/yeast.graph", 3112, 12519, 71),
    ("gmatch_test/data.graph", 37700, 289003, 16),
])
def test_real_data_graphs_have_the_published_sizes(rel, n, m, nlabels):
    g = load_graph(DATA / rel)
    assert detect_format(DATA / rel) == "graph"
    assert (g.num_vertices, g.num_edges, np.unique(g.labels).size) == (n, m, nlabels)
    assert not g.directed and g.edge_labels is None
    assert g.name == Path(rel).stem and g.meta["format"] == "graph"


@pytest.mark.parametrize("rel", ["hprd/HPRD.graph", "yeast/yeast.graph"])
def test_real_graphs_equal_an_independent_line_parser(rel):
    assert load_graph(DATA / rel).same_structure(oracle_graph_file(DATA / rel))


def test_yeast_queries_with_edge_label_field_load_edge_unlabelled():
    folder = DATA / "yeast" / "queries"
    assert (folder / "query_dense_4_1.graph").read_text().splitlines()[-1].count(" ") == 3  # e u v 0
    queries = load_query_set(folder)
    assert len(queries) == 500
    for q in queries[::25]:
        assert q.edge_labels is None
        assert q.same_structure(oracle_graph_file(folder / f"{q.name}.graph"))


def test_query_sets_are_named_by_stem_in_natural_order_and_match_the_count_files():
    hprd_queries = load_query_set(DATA / "hprd" / "queries")
    assert [q.name for q in hprd_queries] == [f"query_dense_16_{i}" for i in range(1, 101)]
    # The data README says 24-34 edges; the files have 24-36.
    assert all(q.num_vertices == 16 and q.num_edges >= 24 for q in hprd_queries)
    assert set(read_expected_counts(DATA / "hprd" / "expected_counts_1_100.txt")) == \
        {q.name for q in hprd_queries}
    yeast_counts = read_expected_counts(DATA / "yeast" / "expected_counts.txt")
    yeast_names = {q.name for q in load_query_set(DATA / "yeast" / "queries")}
    assert set(yeast_counts) <= yeast_names and len(yeast_counts) == 497
    gm = load_query_set(DATA / "gmatch_test" / "queries")
    assert [q.name for q in gm] == [f"Q_{i}" for i in range(11)]
    assert set(read_expected_counts(DATA / "gmatch_test" / "expected_counts.txt")) == {q.name for q in gm}


@pytest.mark.parametrize("rel", ["hprd/expected_counts_1_100.txt", "yeast/expected_counts.txt",
                                 "gmatch_test/expected_counts.txt"])
def test_expected_counts_equal_a_regex_parse_of_the_file(rel):
    text = (DATA / rel).read_text()
    pairs = re.findall(r"^(\S+?)(?:\.graph)?[: ](\d+)$", text, flags=re.M)
    assert len(pairs) == len(text.splitlines())
    assert read_expected_counts(DATA / rel) == {k: int(v) for k, v in pairs}


def test_gmatch_patterns_without_extension_load_in_order():
    folder = DATA / "gmatch_test" / "patterns"
    patterns = load_query_set(folder)
    assert [p.name for p in patterns] == [f"p{i}" for i in range(1, 10)]
    for p in patterns:
        assert detect_format(folder / p.name) == "graph"
        assert p.same_structure(oracle_graph_file(folder / p.name))
        assert p.is_connected() and int(p.labels.max()) == 0


@pytest.mark.parametrize("stem, n, directed_m, undirected_m, id_range", [
    ("email-Enron", 36692, 367662, 183831, (0, 36691)),
    ("wiki-Vote", 7115, 103689, 100762, (3, 8297)),
])
def test_snap_graphs_match_provenance_and_keep_original_ids(stem, n, directed_m, undirected_m, id_range):
    path = DATA / "snap" / f"{stem}.txt.gz"
    assert detect_format(path) == "snap"
    g = load_graph(path)
    assert g.directed and g.name == stem
    assert (g.num_vertices, g.num_edges) == (n, directed_m)
    ids = g.meta["original_ids"]
    assert (int(ids[0]), int(ids[-1])) == id_range and np.all(np.diff(ids) > 0)
    assert g.meta["dropped_self_loops"] == 0 and g.meta["dropped_repeated_edges"] == 0
    pairs = oracle_snap_pairs(path)
    index = {int(x): i for i, x in enumerate(ids)}
    for a, b in pairs[:: len(pairs) // 200]:
        assert g.has_edge(index[a], index[b])
    u = load_graph(path, symmetrize=True)
    assert not u.directed and (u.num_vertices, u.num_edges) == (n, undirected_m)
    assert load_graph(path, directed=False).same_structure(u)
    assert int(u.labels.max()) == 0


# ---------------------------------------------------------------------------------- round trips


def test_graph_format_round_trip_real_and_edge_labelled(tmp_path, hprd):
    write_graph(hprd, tmp_path / "h.graph")
    assert load_graph(tmp_path / "h.graph").same_structure(hprd)
    # The writer's layout (vertex lines, then edges sorted with u < v) is the study's own.
    assert (tmp_path / "h.graph").read_bytes() == (DATA / "hprd" / "HPRD.graph").read_bytes()
    g = random_graph(60, 300, 5, 4, False, 1, label_base=1)
    save_graph(g, tmp_path / "g.graph", "graph")
    back = load_graph(tmp_path / "g.graph")
    assert back.same_structure(g) and back.edge_labels is not None


def test_gsi_round_trip_several_directed_labelled_graphs(tmp_path):
    graphs = [random_graph(30 + s, 150, 4, 3, True, s, label_base=1, edge_label_base=1)
              for s in range(3)]
    write_gsi(graphs, tmp_path / "q.g")
    assert detect_format(tmp_path / "q.g") == "gsi"
    back = load_graphs(tmp_path / "q.g")
    assert len(back) == 3
    for i, (a, b) in enumerate(zip(graphs, back)):
        assert b.directed and b.same_structure(a)
        assert b.name == f"q_{i}" and b.meta["graph_id"] == i
    with pytest.raises(GraphFormatError, match="load_graphs"):
        load_graph(tmp_path / "q.g")


def test_gsi_round_trip_of_an_undirected_graph_reads_back_undirected(tmp_path, hprd):
    save_graph(hprd, tmp_path / "h.g", "gsi")
    back = load_graph(tmp_path / "h.g")
    assert back.same_structure(hprd) and back.name == "h"
    assert load_graph(tmp_path / "h.g", directed=False).same_structure(hprd)
    # both arcs of every edge, then the marker after 't # -1' (where GSI's own reader stops)
    lines = (tmp_path / "h.g").read_text().splitlines()
    assert lines[1].split()[:2] == [str(hprd.num_vertices), str(2 * hprd.num_edges)]
    assert lines[-2:] == ["t # -1", "# undirected: every edge is written as its two arcs"]
    as_directed = load_graph(tmp_path / "h.g", directed=True)
    assert as_directed.directed and as_directed.num_edges == 2 * hprd.num_edges


def test_gsi_and_snap_direction_markers(tmp_path):
    unmarked = write(tmp_path, "u.g", "t # 0\n2 1 1 0\nv 0 1\nv 1 1\ne 0 1 0\nt # -1\n# a comment\n")
    assert load_graph(unmarked).directed
    marked = write(tmp_path, "m.g", "t # 0\n2 2 1 0\nv 0 1\nv 1 1\ne 0 1 0\ne 1 0 0\nt # -1\n# Undirected\n")
    assert not load_graph(marked).directed and load_graph(marked).num_edges == 1
    with pytest.raises(GraphFormatError, match="unknown line type '#'"):     # only after 't # -1'
        load_graph(write(tmp_path, "x.g", "t # 0\n2 0 1 0\n# undirected\nv 0 1\nv 1 1\nt # -1\n"))
    assert load_graph(write(tmp_path, "d.txt", "# Directed graph: x\n1\t2\n2\t1\n")).num_edges == 2
    undirected = load_graph(write(tmp_path, "n.txt", "# Undirected graph: x\n1\t2\n2\t3\n"))
    assert not undirected.directed and undirected.num_edges == 2
    assert load_graph(write(tmp_path, "n.txt", "# Undirected graph: x\n1\t2\n"), directed=True).directed


def test_gsi_file_with_no_graph(tmp_path):
    path = write(tmp_path, "none.g", "t # -1\n")
    assert load_graphs(path) == []
    with pytest.raises(GraphFormatError, match="holds no graph"):
        load_graph(path)


def test_gsi_read_undirected_merges_reverse_edges_with_equal_labels(tmp_path):
    path = write(tmp_path, "r.g", "t # 0\n3 3 1 2\nv 0 1\nv 1 1\nv 2 1\ne 0 1 2\ne 1 0 2\ne 1 2 1\nt # -1\n")
    g = load_graph(path, symmetrize=True)
    assert not g.directed and g.num_edges == 2
    assert g.neighbors_of(1).tolist() == [0, 2]
    assert g.edge_labels[g.offsets[1]:g.offsets[2]].tolist() == [2, 1]
    assert load_graph(path).num_edges == 3


def test_gmatch_binary_round_trip_and_layout(tmp_path, hprd):
    path = tmp_path / "h.bin"
    write_gmatch_binary(hprd, path)
    assert path.stat().st_size == 8 + 8 * (hprd.num_vertices + 1) + 4 * hprd.num_vertices + 8 * hprd.num_edges
    header = np.fromfile(path, dtype="<i4", count=2)
    assert header.tolist() == [hprd.num_vertices, hprd.num_edges]
    assert detect_format(path) == "gmatch-binary"
    assert load_graph(path).same_structure(hprd)
    tiny = Graph.from_edges(0, [], [])
    save_graph(tiny, tmp_path / "empty.bin", "gmatch-binary")
    assert load_graph(tmp_path / "empty.bin").same_structure(tiny)


def test_writers_refuse_what_their_format_cannot_hold(tmp_path):
    directed = random_graph(10, 30, 2, 0, True, 2, label_base=1)
    labelled = random_graph(10, 30, 2, 3, False, 3, label_base=1, edge_label_base=1)
    with pytest.raises(ValueError, match="undirected"):
        write_graph(directed, tmp_path / "d.graph")
    with pytest.raises(ValueError, match="edge labels"):
        write_gmatch_binary(labelled, tmp_path / "l.bin")
    with pytest.raises(ValueError, match="snap format has no edge labels"):
        save_graph(labelled, tmp_path / "x", "snap")
    with pytest.raises(ValueError, match="no writer"):
        save_graph(labelled, tmp_path / "x", "dot")


def test_gzip_is_detected_by_magic_bytes(tmp_path, hprd):
    write_graph(hprd, tmp_path / "h.graph")
    (tmp_path / "h.dat").write_bytes(gzip.compress((tmp_path / "h.graph").read_bytes()))
    assert detect_format(tmp_path / "h.dat") == "graph"
    assert load_graph(tmp_path / "h.dat").same_structure(hprd)


def test_whitespace_variants_parse_identically(tmp_path):
    g = random_graph(40, 120, 6, 3, False, 4, label_base=1)
    write_graph(g, tmp_path / "plain.graph")
    text = (tmp_path / "plain.graph").read_text()
    variants = {
        "crlf": text.replace("\n", "\r\n"),
        "tabs_and_runs": text.replace(" ", " \t  "),
        "blank_lines_and_indent": "\n\n" + text.replace("\n", "\n\n   "),
        "no_final_newline": text.rstrip("\n"),
    }
    for name, variant in variants.items():
        assert load_graph(write(tmp_path, name, variant)).same_structure(g), name


def test_graph_header_with_fourth_field_and_vertex_lines_without_degree(tmp_path):
    path = write(tmp_path, "q", "t 3 2 7\nv 0 5\nv 1 6 2\nv 2 5\ne 0 1 3\ne 1 2\n")
    g = load_graph(path)
    expected = Graph.from_edges(3, [0, 1], [1, 2], [5, 6, 5], [3, 0])
    assert g.same_structure(expected) and g.edge_labels is not None


# ---------------------------------------------------------------------------------- detection

DAF_TEXT = ("t 0 4 8\n0 37 1 1 \n1 37 3 0 2 3 \n2 19 2 1 3 \n3 19 2 1 2 \n"
            "t 1 3 4\n0 9 2 1 2 \n1 13 1 0 \n2 13 1 0 \n")


def test_detection_reads_content_not_extension(tmp_path, hprd):
    write_graph(hprd, tmp_path / "a.txt")
    write_gsi(hprd, tmp_path / "b.graph")
    write_gmatch_binary(hprd, tmp_path / "c.graph")
    write(tmp_path, "d.g", "# comment\n5\t7\n7\t9\n")
    write(tmp_path, "e.graph", DAF_TEXT)
    found = {p.name: detect_format(p) for p in sorted(tmp_path.iterdir())}
    assert found == {"a.txt": "graph", "b.graph": "gsi", "c.graph": "gmatch-binary", "d.g": "snap",
                     "e.graph": "daf"}
    assert load_graph(tmp_path / "a.txt").same_structure(hprd)
    assert load_graph(tmp_path / "b.graph", directed=False).same_structure(hprd)


def test_daf_multi_graph_file_loads_every_graph(tmp_path):
    path = write(tmp_path, "human_mini", DAF_TEXT)
    first, second = load_graphs(path)
    assert first.same_structure(Graph.from_edges(4, [0, 1, 1, 2], [1, 2, 3, 3], [37, 37, 19, 19]))
    assert second.same_structure(Graph.from_edges(3, [0, 0], [1, 2], [9, 13, 13]))
    assert (first.name, second.name) == ("human_mini_0", "human_mini_1")
    with pytest.raises(GraphFormatError, match="holds 2 graphs; call load_graphs"):
        load_graph(path)


def test_query_set_from_folder_file_or_list(tmp_path):
    folder = tmp_path / "qs"
    folder.mkdir()
    g = random_graph(8, 12, 3, 0, False, 5, label_base=1)
    for i in (10, 2, 1):
        write_graph(g, folder / f"query_dense_16_{i}.graph")
    (folder / ".hidden").write_text("not a graph")
    assert [q.name for q in load_query_set(folder)] == ["query_dense_16_1", "query_dense_16_2",
                                                        "query_dense_16_10"]
    files = [folder / "query_dense_16_10.graph", folder / "query_dense_16_1.graph"]
    assert [q.name for q in load_query_set(files)] == ["query_dense_16_10", "query_dense_16_1"]
    write_gsi([g, g], tmp_path / "many.g")
    assert [q.name for q in load_query_set(tmp_path / "many.g", directed=False)] == ["many_0", "many_1"]


def test_direction_options_are_checked(tmp_path, hprd):
    write_graph(hprd, tmp_path / "h.graph")
    with pytest.raises(ValueError, match="undirected"):
        load_graph(tmp_path / "h.graph", directed=True)
    with pytest.raises(ValueError, match="contradicts"):
        load_graph(DATA / "snap" / "wiki-Vote.txt.gz", directed=True, symmetrize=True)


# ---------------------------------------------------------------------------------- malformed text

BAD_FILES = {
    # name: (content, 1-based line or None, phrase of the message)
    "graph_wrong_field_count": ("t 2 1\nv 0 1 1\nv 1 1 1 9\ne 0 1\n", 3, "found 5 fields"),
    "graph_truncated_edge_line": ("t 2 1\nv 0 1 1\nv 1 1 1\ne 0\n", 4, "'e u v [label]', found 2"),
    "graph_non_integer_token": ("t 2 1\nv 0 1 1\nv 1 x 1\ne 0 1\n", 3, "non-integer token 'x'"),
    "graph_error_after_leading_blank_lines": ("\n \n\nt 2 1\nv 0 1 1\n\nv 1 y 1\ne 0 1\n", 7,
                                              "non-integer token 'y'"),
    "graph_float_token": ("t 2 1\nv 0 1 1\nv 1 1.5 1\ne 0 1\n", 3, "non-integer token '1.5'"),
    "graph_unknown_line_type": ("t 2 1\nv 0 1 1\nv 1 1 1\nx 0 1\n", 4, "unknown line type 'x'"),
    "graph_missing_header": ("v 0 1 1\nv 1 1 1\ne 0 1\n", 1, "expected the header"),
    "graph_second_header": ("t 2 1\nv 0 1 1\nv 1 1 1\ne 0 1\nt 1 0\nv 0 0\n", 5, "second 't' header"),
    "graph_vertex_count_mismatch": ("t 3 1\nv 0 1 1\nv 1 1 1\ne 0 1\n", 1, "declares 3 vertices but"),
    "graph_edge_count_mismatch": ("t 2 2\nv 0 1 1\nv 1 1 1\ne 0 1\n", 1, "declares 2 edges but"),
    "graph_degree_mismatch": ("t 3 2\nv 0 1 1\nv 1 1 1\nv 2 1 2\ne 0 1\ne 1 2\n", 3,
                              "vertex 1 declares degree 1 but has 2"),
    "graph_vertex_id_out_of_range": ("t 2 1\nv 0 1 1\nv 2 1 1\ne 0 1\n", 3, "vertex id 2 out of range"),
    "graph_duplicate_vertex": ("t 2 0\nv 1 1\nv 1 1\n", 3, "vertex 1 is defined twice (first on line 2)"),
    "graph_edge_endpoint_out_of_range": ("t 2 1\nv 0 1\nv 1 1\ne 0 7\n", 4, "endpoint 7 out of range"),
    "graph_duplicate_edge_reversed": ("t 3 3\nv 0 1\nv 1 1\nv 2 1\ne 0 1\ne 1 2\ne 1 0\n", 7,
                                      "duplicate edge: the same edge is on line 5"),
    "graph_self_loop": ("t 2 1\nv 0 1\nv 1 1\ne 1 1\n", 4, "self-loop on vertex 1"),
    "graph_integer_too_large": ("t 2 1\nv 0 1\nv 1 1234567890123456789012\ne 0 1\n", 3,
                                "integer 1234567890123456789012 is too large"),
    "graph_label_beyond_int32": ("t 2 1\nv 0 1\nv 1 4294967296\ne 0 1\n", 3,
                                 "vertex label 4294967296 is above the largest supported label"),
    "graph_label_beyond_max_label": ("t 2 1\nv 0 1\nv 1 16777216\ne 0 1\n", 3,
                                     "vertex label 16777216 is above the largest supported label"),
    "graph_negative_label": ("t 2 1\nv 0 -4\nv 1 1\ne 0 1\n", 2, "vertex label -4 is negative"),
    "gsi_missing_end": ("t # 0\n2 1 1 1\nv 0 1\nv 1 1\ne 0 1 1\n", 5, "missing the closing 't # -1'"),
    "gsi_content_after_end": ("t # 0\n1 0 1 1\nv 0 1\nt # -1\nv 1 1\n", 5, "content after the closing"),
    "gsi_bad_graph_header": ("t # 0 0\n1 0 1 1\nv 0 1\nt # -1\n", 1, "'t # <id>'"),
    "gsi_missing_counts_line": ("t # 0\nv 0 1\nt # -1\n", 1, "followed by the counts line"),
    "gsi_vertex_count_mismatch": ("t # 0\n3 0 1 1\nv 0 1\nv 1 1\nt # -1\n", 2, "declares 3 vertices"),
    "gsi_edge_count_mismatch": ("t # 0\n2 2 1 1\nv 0 1\nv 1 1\ne 0 1 1\nt # -1\n", 2, "declares 2 edges"),
    "gsi_edge_line_fields": ("t # 0\n2 1 1 1\nv 0 1\nv 1 1\ne 0 1\nt # -1\n", 5, "'e from to label'"),
    "gsi_label_above_header_max": ("t # 0\n2 1 1 1\nv 0 1\nv 1 3\ne 0 1 1\nt # -1\n", 4,
                                   "vertex label 3 is above the header's maximum 1"),
    "gsi_duplicate_directed_edge": ("t # 0\n2 2 1 1\nv 0 1\nv 1 1\ne 0 1 1\ne 0 1 1\nt # -1\n", 6,
                                    "duplicate edge"),
    "gsi_repeated_graph_id": ("t # 0\n1 0 1 1\nv 0 1\nt # 0\n1 0 1 1\nv 0 1\nt # -1\n", 4,
                              "graph id 0 repeats (first on line 1)"),
    "gsi_second_graph_error": ("t # 0\n1 0 1 1\nv 0 1\nt # 1\n2 1 1 1\nv 0 1\nv 1 1\ne 0 5 1\nt # -1\n",
                               8, "endpoint 5 out of range"),
    "daf_degree_mismatch": ("t 0 2 2\n0 1 2 1\n1 1 1 0\n", 2, "vertex 0 declares degree 2 but lists 1"),
    "daf_asymmetric": ("t 0 3 3\n0 1 1 1\n1 1 2 0 2\n2 1 0\n", 3, "but 2 does not list 1"),
    "daf_degree_sum_mismatch": ("t 0 2 4\n0 1 1 1\n1 1 1 0\n", 1, "degree sum of 4"),
    "daf_vertex_count_mismatch": ("t 0 3 2\n0 1 1 1\n1 1 1 0\n", 1, "declares 3 vertices but"),
    "daf_neighbour_out_of_range": ("t 0 2 2\n0 1 1 9\n1 1 1 0\n", 2, "neighbour 9 out of range"),
    "daf_duplicate_neighbour": ("t 0 2 3\n0 1 2 1 1\n1 1 1 0\n", 2, "neighbour 1 is listed twice"),
    "snap_three_fields": ("# c\n1\t2\n2\t3\t7\n", 3, "'u v', found 3 fields"),
    "snap_non_integer": ("# c\n1\t2\n2\tz\n", 3, "non-integer token 'z'"),
    "snap_negative_id": ("1 2\n-2 3\n", 2, "negative vertex id"),
    "snap_header_count_mismatch": ("# Nodes: 3 Edges: 5\n1\t2\n2\t3\n", 1, "says 3 nodes and 5 edges"),
    "unknown_format": ("hello world\n1 2\n", None, "unknown format"),
    "empty_file": ("  \n\n", None, "empty file"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_malformed_text_names_the_line_and_problem(tmp_path, kind):
    content, line, phrase = BAD_FILES[kind]
    path = write(tmp_path, kind, content)
    error = raises_format_error(path)
    assert error.path == str(path) and error.line == line
    assert phrase in error.problem, error.problem
    prefix = f"{path}:{line}: " if line is not None else f"{path}: "
    assert str(error).startswith(prefix)


def test_gsi_read_undirected_rejects_reverse_edge_with_another_label(tmp_path):
    path = write(tmp_path, "r.g", "t # 0\n2 2 1 2\nv 0 1\nv 1 1\ne 0 1 1\ne 1 0 2\nt # -1\n")
    assert load_graph(path).num_edges == 2
    error = raises_format_error(path, directed=False)
    assert error.line == 6 and "reverses the edge on line 5 with another label" in error.problem


def test_snap_drops_self_loops_and_repeated_lines_and_counts_them(tmp_path):
    g = load_graph(write(tmp_path, "s.txt", "10 20\n20 20\n10 20\n30 10\n"))
    assert g.meta["dropped_self_loops"] == 1 and g.meta["dropped_repeated_edges"] == 1
    assert g.meta["original_ids"].tolist() == [10, 20, 30]
    assert g.num_edges == 2 and g.has_edge(0, 1) and g.has_edge(2, 0) and not g.has_edge(1, 0)


def test_corrupt_gzip_is_a_format_error(tmp_path):
    path = tmp_path / "bad.gz"
    path.write_bytes(gzip.compress(b"1 2\n" * 1000)[:40])
    error = raises_format_error(path)
    assert error.line is None and "corrupt gzip" in error.problem


# ---------------------------------------------------------------------------------- malformed binary


def binary_file(tmp_path: Path, graph: Graph, edit=None, name="g.bin") -> Path:
    path = tmp_path / name
    write_gmatch_binary(graph, path)
    if edit is not None:
        raw = bytearray(path.read_bytes())
        edit(raw, graph)
        path.write_bytes(bytes(raw))
    return path


def _adj_at(graph: Graph) -> int:
    return 8 + 8 * (graph.num_vertices + 1) + 4 * graph.num_vertices


def _put_i32(raw: bytearray, at: int, value: int) -> None:
    raw[at:at + 4] = np.int32(value).tobytes()


SMALL = Graph.from_edges(4, [0, 0, 1, 2], [1, 2, 2, 3], [1, 2, 1, 0])


def test_truncated_binary_is_reported_with_sizes(tmp_path):
    path = binary_file(tmp_path, SMALL, lambda raw, g: raw.__delitem__(slice(-4, None)))
    error = raises_format_error(path)
    assert error.line is None and "binary data" in error.problem and "truncated?" in error.problem
    forced = raises_format_error(path, fmt="gmatch-binary")
    assert "truncated or corrupt gMatch binary CSR" in forced.problem


@pytest.mark.parametrize("edit, phrase", [
    (lambda raw, g: raw.__setitem__(slice(16, 24), np.uint64(5).tobytes()), "offsets decrease"),
    (lambda raw, g: raw.__setitem__(slice(8, 16), np.uint64(1).tobytes()), "offsets must run from 0"),
    (lambda raw, g: _put_i32(raw, 8 + 8 * 5, -3), "negative label"),
    (lambda raw, g: _put_i32(raw, _adj_at(g), 9), "outside 0..3"),
    (lambda raw, g: (_put_i32(raw, _adj_at(g), 2), _put_i32(raw, _adj_at(g) + 4, 1)),
     "not strictly increasing"),
    (lambda raw, g: _put_i32(raw, _adj_at(g) + 4 * 3, 3), "not symmetric"),
], ids=["offsets-decrease", "offsets-start", "negative-label", "neighbour-range", "unsorted",
        "asymmetric"])
def test_corrupt_binary_gives_format_error_not_graph_error(tmp_path, edit, phrase):
    path = binary_file(tmp_path, SMALL, edit)
    assert detect_format(path) == "gmatch-binary"
    with pytest.raises(GraphFormatError) as info:
        load_graph(path)
    assert not isinstance(info.value, InvalidGraphError)
    assert info.value.line is None and str(path) in str(info.value) and phrase in info.value.problem


# ---------------------------------------------------------------------------------- count files


@pytest.mark.parametrize("content, line, phrase", [
    ("q1:5\nq2 7 9\n", 2, "expected 'name:count' or 'name count'"),
    ("q1:5\nq2:many\n", 2, "count 'many' is not a non-negative integer"),
    ("q1.graph 5\nq1 6\n", 2, "'q1' is listed twice (first on line 1)"),
])
def test_malformed_count_files(tmp_path, content, line, phrase):
    path = write(tmp_path, "counts.txt", content)
    with pytest.raises(GraphFormatError) as info:
        read_expected_counts(path)
    assert info.value.line == line and phrase in info.value.problem


def test_only_regular_files_are_read(tmp_path):
    import os
    import threading

    fifo = tmp_path / "pipe.graph"
    os.mkfifo(fifo)
    outcome = []

    def read():
        try:
            load_graph(fifo)
        except GraphFormatError as exc:
            outcome.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert outcome and "not a regular file" in outcome[0]
    with pytest.raises(GraphFormatError, match="not a regular file"):
        load_graph("/dev/zero")
    with pytest.raises(GraphFormatError, match="a folder"):
        load_graphs(tmp_path)


def test_a_file_larger_than_the_memory_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import common.graph.io as io

    path = write(tmp_path, "g.graph", "t 2 1\nv 0 0\nv 1 0\ne 0 1\n")
    monkeypatch.setattr(io, "_available_memory", lambda: 10)
    with pytest.raises(GraphFormatError, match="too large to read: 24 bytes, but only 10 bytes"):
        load_graph(path)
    assert detect_format(path) == "graph"                          # the first bytes are still read


def test_a_query_file_that_holds_no_graph_is_an_error(tmp_path):
    path = write(tmp_path, "none.g", "t # -1\n")
    with pytest.raises(GraphFormatError, match="none.g: the file holds no graph"):
        load_query_set(path)
    write(tmp_path, "q.graph", "t 2 1\nv 0 0\nv 1 0\ne 0 1\n")
    with pytest.raises(GraphFormatError, match="holds no graph"):
        load_query_set(tmp_path)


def test_a_utf8_bom_is_skipped(tmp_path):
    text = "t 2 1\nv 0 0\nv 1 1\ne 0 1\n"
    (tmp_path / "bom.graph").write_bytes(b"\xef\xbb\xbf" + text.encode())
    plain = write(tmp_path, "plain.graph", text)
    assert detect_format(tmp_path / "bom.graph") == "graph"
    assert load_graph(tmp_path / "bom.graph").same_structure(load_graph(plain))
    (tmp_path / "counts.txt").write_bytes(b"\xef\xbb\xbfq1:3\n")
    assert read_expected_counts(tmp_path / "counts.txt") == {"q1": 3}


@pytest.mark.parametrize("header", ["t 0", "t #0", "t"])
def test_a_gsi_header_without_its_hash_gets_gsi_wording(tmp_path, header):
    path = write(tmp_path, "q.g", f"{header}\n2 1 0 0\nv 0 0\nv 1 0\ne 0 1 0\nt # -1\n")
    with pytest.raises(GraphFormatError, match=r"q.g:1: graph header needs the form 't # <id>'"):
        load_graphs(path)


# ---------------------------------------------------------------------------------- every pair of formats

def _covering(n: int, extra: int, *, directed: bool, seed: int) -> Graph:
    """An unlabelled graph where every vertex has an edge (a path plus random edges)."""
    rng = np.random.default_rng(seed)
    src = np.concatenate([np.arange(n - 1), rng.integers(0, n, extra)])
    dst = np.concatenate([np.arange(1, n), rng.integers(0, n, extra)])
    return Graph.from_edges(n, src, dst, directed=directed, name=f"cover{int(directed)}")


#: what each format holds: (directed, vertex labels, edge labels, isolated vertices)
HOLDS = {"graph": (False, True, True, True), "gsi": (True, True, True, True), "snap": (True, False, False, False),
         "gmatch-binary": (False, True, False, True), "daf": (False, True, False, True)}


def _needs(g: Graph) -> tuple[bool, bool, bool, bool]:
    isolated = (g.degrees == 0) & (np.diff(g.in_csr[0]) == 0)
    return g.directed, bool(g.labels.any()), g.has_edge_labels, bool(isolated.any())


def _holds(fmt: str, g: Graph) -> bool:
    return all(can or not need for can, need in zip(HOLDS[fmt], _needs(g)))


def test_every_pair_of_formats_round_trips_labels_and_direction(tmp_path, capsys):
    """``gpusm convert`` from every format to every format: the graph read back is the one written
    (vertex and edge labels, direction), or, where the target cannot hold it (HOLDS), the
    conversion fails with a one-line error naming what is lost."""
    from common.cli.main import main
    from common.graph.io import FORMATS, WRITERS

    assert set(HOLDS) == set(FORMATS) == set(WRITERS)
    samples = [random_graph(30, 90, 4, 3, False, 11, label_base=1, edge_label_base=1),
               random_graph(30, 90, 4, 0, False, 12, label_base=1),
               random_graph(30, 120, 4, 3, True, 13, label_base=1, edge_label_base=1),
               random_graph(30, 120, 4, 0, True, 14, label_base=1),
               _covering(25, 40, directed=True, seed=1), _covering(25, 40, directed=False, seed=2),
               Graph.from_edges(4, [0, 1], [1, 2], name="isolated")]
    assert all(any(not _holds(fmt, g) for g in samples) for fmt in FORMATS if fmt != "gsi")
    pairs = 0
    for source in FORMATS:
        for i, graph in enumerate(samples):
            if not _holds(source, graph):
                with pytest.raises(ValueError):
                    save_graph(graph, tmp_path / "refused", source)
                continue
            src_path = tmp_path / f"{i}.{source}"
            save_graph(graph, src_path, source)
            assert detect_format(src_path) == source
            assert load_graph(src_path).same_structure(graph), (source, i)
            for target in FORMATS:
                out = tmp_path / f"{i}.{source}.{target}"
                code = main(["convert", str(src_path), str(out), "--to", target])
                _, err = capsys.readouterr()
                if _holds(target, graph):
                    assert code == 0, (source, target, i, err)
                    assert load_graph(out).same_structure(graph), (source, target, i)
                    pairs += 1
                else:
                    assert code == 2 and len(err.strip().splitlines()) == 1, (source, target, i, err)
                    assert re.search(rf"the {target} format (is undirected|has no)|snap edge list holds only", err)
    assert pairs >= 50
