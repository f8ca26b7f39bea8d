"""The gpusm command line, driven through ``experiments.gpusm.main`` (the installed ``gpusm``)
as a user would call it."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from _paths import DATA
from common.cli.main import parse_bytes
from common.cpu.peers import installed_peers
from common.engine.registry import available_engines
from common.graph.io import load_graph, read_expected_counts
from experiments.gpusm import build_parser, main
from experiments.papers.compare import demo_engines


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_match_one_query_json(capsys):
    hprd = DATA / "hprd"
    code, out, _ = run(capsys, "match", hprd / "HPRD.graph", hprd / "queries" / "query_dense_16_2.graph",
                       "--format", "json")
    assert code == 0
    [row] = json.loads(out)                            # JSON is always a list
    expected = read_expected_counts(hprd / "expected_counts_1_100.txt")["query_dense_16_2"]
    assert (row["engine"], row["status"], row["count"]) == ("cpu", "ok", expected)


def test_match_a_folder_as_csv_with_limit(capsys, tmp_path):
    queries = tmp_path / "q"
    queries.mkdir()
    for name in ("Q_0.graph", "Q_7.graph"):
        (queries / name).write_bytes((DATA / "gmatch_test" / "queries" / name).read_bytes())
    code, out, _ = run(capsys, "match", DATA / "gmatch_test" / "data.graph", queries,
                       "--limit", "100", "--format", "csv")
    assert code == 0
    lines = out.strip().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    assert [(r["query"], r["status"], r["count"]) for r in rows] == [
        ("Q_0", "limit", "100"), ("Q_7", "limit", "100")]


def test_match_collects_embeddings_to_npy(capsys, tmp_path):
    hprd = DATA / "hprd"
    out_file = tmp_path / "emb.npy"
    code, out, _ = run(capsys, "match", hprd / "HPRD.graph", hprd / "queries" / "query_dense_16_1.graph",
                       "--collect", out_file)
    assert code == 0 and "status:  ok" in out
    embeddings = np.load(out_file)
    query = load_graph(hprd / "queries" / "query_dense_16_1.graph")
    data = load_graph(hprd / "HPRD.graph")
    assert embeddings.shape == (3, query.num_vertices)
    for row in embeddings:
        assert len(set(row.tolist())) == query.num_vertices
        assert np.array_equal(data.labels[row], query.labels)
        src, dst, _ = query.edges()
        assert all(data.has_edge(int(row[a]), int(row[b])) for a, b in zip(src, dst))


def test_match_reports_a_malformed_file_and_exits_2(capsys, tmp_path):
    bad = tmp_path / "bad.graph"
    bad.write_text("t 2 1\nv 0 0 1\nv 1 0 1\ne 0 x\n")
    code, _, err = run(capsys, "match", bad, bad)
    assert code == 2 and "bad.graph:4" in err


def test_unknown_engine_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["match", "a", "b", "--engine", "nope"])
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_generate_info_convert_round_trip(capsys, tmp_path):
    g_path = tmp_path / "g.graph"
    code, out, _ = run(capsys, "generate", "rmat", "--vertices", 300, "--edges", 1200, "--labels", 5,
                       "--seed", 3, "--out", g_path)
    assert code == 0 and "300 vertices" in out
    graph = load_graph(g_path)
    assert graph.num_vertices == 300 and graph.num_labels <= 5

    code, out, _ = run(capsys, "info", g_path, "--format", "csv")
    header, values = out.strip().splitlines()
    info = dict(zip(header.split(","), values.split(",")))
    assert int(info["|V|"]) == 300 and int(info["|E|"]) == graph.num_edges
    assert int(info["max degree"]) == graph.max_degree

    gsi_path = tmp_path / "g.g"
    assert run(capsys, "convert", g_path, gsi_path, "--to", "gsi")[0] == 0
    back = load_graph(gsi_path, directed=False)
    assert back.same_structure(graph)

    q_dir = tmp_path / "queries"
    code, _, _ = run(capsys, "generate", "queries", g_path, "--count", 3, "--size", 4, "--seed", 1, "--out", q_dir)
    assert code == 0 and len(list(q_dir.glob("*.graph"))) == 3

    code, out, _ = run(capsys, "match", g_path, q_dir, "--format", "json")
    rows = json.loads(out)
    assert len(rows) == 3 and all(r["status"] == "ok" and r["count"] >= 1 for r in rows)


def test_generate_pattern(capsys, tmp_path):
    path = tmp_path / "p9.graph"
    assert run(capsys, "generate", "pattern", "P9", "--out", path)[0] == 0
    k5 = load_graph(path)
    assert (k5.num_vertices, k5.num_edges) == (5, 10)


def test_parse_bytes():
    assert parse_bytes("11G") == 11 << 30
    assert parse_bytes("512MB") == 512 << 20
    assert parse_bytes("1.5GiB") == 3 << 29
    assert parse_bytes("1000") == 1000


@pytest.mark.slow
def test_demo_agrees_with_the_reference(capsys):
    assert main(["demo", "--seed", "3", "--size", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "CUDA simulator" in out or "GPU" in out
    assert "answered" in out and "agreed" in out and "disagreed" in out
    engines = demo_engines()
    assert out.count("answered in") == len(engines)                # a progress line per engine
    assert all(f"] {name}: preparing" in out for name in engines)
    assert not any(f"] {peer}: preparing" in out for peer in installed_peers())   # peers only with --peers


def test_demo_leaves_the_peers_out_unless_asked(monkeypatch):
    from common.engine import registry

    assert demo_engines() == ["cpu", "gsi", "sgsi", "egsm", "gmatch", "stwig", "stwig-cpu"]
    assert set(demo_engines(peers=True)) == set(demo_engines()) | set(installed_peers())
    # an engine registered by other code (an authors' binary, a test's engine) is not the demo's
    monkeypatch.setitem(registry._REGISTRY, "someone-elses", "common.cpu.reference:ReferenceMatcher")
    assert "someone-elses" in available_engines() and "someone-elses" not in demo_engines(peers=True)
    assert build_parser().parse_args(["demo", "--peers"]).peers
    assert not build_parser().parse_args(["demo"]).peers


@pytest.mark.slow
def test_the_shared_layer_does_not_import_the_harness():
    import subprocess
    import sys

    probe = ("import sys, common, common.cli.main, common.cpu.peers, common.graph.io, common.graph.generate; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'experiments'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    common_dir = Path(__file__).resolve().parents[1] / "common"
    importers = [p.name for p in common_dir.glob("*.py")
                 if re.search(r"^\s*(from|import) experiments", p.read_text(), re.M)]
    assert importers == []


def test_cli_errors_name_the_problem(capsys, tmp_path):
    hprd = DATA / "hprd"
    data, query = hprd / "HPRD.graph", hprd / "queries" / "query_dense_16_1.graph"
    code, _, err = run(capsys, "match", data, query, "-o", "bogus=1")
    assert code == 2 and "engine 'cpu' does not take these options" in err and "bogus" in err
    code, _, err = run(capsys, "generate", "queries", data, "--size", 4, "--method", "gsi", "--out", tmp_path / "q")
    assert code == 2 and "--method gsi needs --edges" in err
    two = tmp_path / "two.g"
    from common.graph.io import write_gsi
    write_gsi([load_graph(query).replace(name="a"), load_graph(query).replace(name="b")], two)
    code, _, err = run(capsys, "convert", two, tmp_path / "out.graph", "--to", "graph")
    assert code == 2 and "holds 2 graphs but the graph format holds one" in err


def test_match_reads_every_graph_of_a_multi_graph_query_file_and_collects_into_a_folder(capsys, tmp_path):
    hprd = DATA / "hprd"
    expected = read_expected_counts(hprd / "expected_counts_1_100.txt")
    queries = [load_graph(hprd / "queries" / f"query_dense_16_{i}.graph", name=f"q{i}") for i in (1, 3)]
    from common.graph.io import write_gsi
    multi = tmp_path / "queries.g"
    write_gsi(queries, multi)
    folder = tmp_path / "emb"
    folder.mkdir()
    code, out, _ = run(capsys, "match", hprd / "HPRD.graph", multi, "--format", "json", "--collect", folder)
    assert code == 0
    rows = json.loads(out)
    assert [r["count"] for r in rows] == [expected["query_dense_16_1"], expected["query_dense_16_3"]]
    saved = sorted(p.name for p in folder.iterdir())
    assert len(saved) == 2 and all(name.endswith(".npy") for name in saved)


def test_branch_parts_by_hand_on_the_command_line_add_up(capsys):
    """``-o branch_part=j/m,k/m2`` (the README's by-hand split): the six parts of a two-level cut
    count the whole query, and a third level is refused with the option named."""
    folder = DATA / "gmatch_test"
    query = folder / "queries" / "Q_0.graph"
    expected = read_expected_counts(folder / "expected_counts.txt")["Q_0"]
    total = 0
    for j in range(2):
        for k in range(3):
            code, out, _ = run(capsys, "match", folder / "data.graph", query, "--format", "json",
                               "-o", f"branch_part={j}/2,{k}/3")
            [row] = json.loads(out)
            assert code == 0 and row["status"] == "ok"
            total += row["count"]
    assert total == expected > 0
    code, _, err = run(capsys, "match", folder / "data.graph", query, "-o", "branch_part=0/2,0/2,0/2")
    assert code != 0 and "branch_part" in err
