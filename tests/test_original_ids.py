"""Embeddings name data vertices by the input file's own ids (SNAP lists compact them on reading)."""

import gzip

import numpy as np
import pytest

from _paths import DATA
from common import create_engine, load_graph, match
from common.cli import main as cli
from common.graph.model import Graph

TRIANGLE = "t 3 3\nv 0 0 2\nv 1 0 2\nv 2 0 2\ne 0 1\ne 1 2\ne 0 2\n"


def snap_pairs(path) -> set[tuple[int, int]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        pairs = {tuple(map(int, line.split())) for line in f if line.strip() and not line.startswith("#")}
    return pairs | {(b, a) for a, b in pairs}


def test_cli_collect_on_wiki_vote_writes_edges_of_the_file(tmp_path, capsys):
    wiki = DATA / "snap" / "wiki-Vote.txt.gz"
    (tmp_path / "tri.graph").write_text(TRIANGLE)
    out = tmp_path / "emb.txt"
    code = cli.main(["match", str(wiki), str(tmp_path / "tri.graph"), "--symmetrize", "--limit", "300",
                     "--collect", str(out), "--format", "csv"])
    assert code == 0
    rows = np.loadtxt(out, dtype=np.int64, ndmin=2)
    assert rows.shape == (300, 3)
    edges = snap_pairs(wiki)
    ids = {a for a, _ in edges}
    assert set(rows.ravel()) <= ids and rows.min() >= 3            # wiki-Vote ids run 3..8297
    for a, b, c in rows.tolist():
        assert (a, b) in edges and (b, c) in edges and (a, c) in edges, (a, b, c)
    assert (0, 3) not in edges                                      # compacted ids would fail here


def tiny_snap(tmp_path):
    path = tmp_path / "tiny.txt"
    # A 4-clique on ids 10, 20, 30, 40 plus a pendant 7 -> 40; compacted ids would be 0..4.
    path.write_text("# tiny\n10\t20\n10\t30\n10\t40\n20\t30\n20\t40\n30\t40\n7\t40\n")
    return path


@pytest.mark.parametrize("engine", ["cpu", "gsi", "egsm"])
def test_api_embeddings_in_original_ids(tmp_path, engine):
    path = tiny_snap(tmp_path)
    data = load_graph(path, symmetrize=True)
    query = Graph.from_edges(3, [0, 1, 0], [1, 2, 2])
    result = create_engine(engine).prepare(data).match(query, collect=True)
    assert result.count == 24                                       # 4 triangles x 3! orders
    rows = {tuple(r) for r in result.embeddings.tolist()}
    assert len(rows) == 24
    assert {v for r in rows for v in r} == {10, 20, 30, 40}
    edges = snap_pairs(path)
    assert all((a, b) in edges and (b, c) in edges and (a, c) in edges for a, b, c in rows)


def test_one_call_match_maps_ids_too(tmp_path):
    result = match(str(tiny_snap(tmp_path)), Graph.from_edges(2, [0], [1], directed=True), collect=True)
    # The SNAP file is read directed (edge a->b for each line): 7 arcs.
    assert sorted(map(tuple, result.embeddings.tolist())) == [
        (7, 40), (10, 20), (10, 30), (10, 40), (20, 30), (20, 40), (30, 40)]
