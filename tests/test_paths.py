"""The bundled data folder: found inside the checkout, overridden by $GPUSM_DATA, used by the CLI."""

import csv
import io
from pathlib import Path

import pytest

from common.cli import main as cli
from common.graph.io import load_graph, read_expected_counts
from common.graph.paths import REPO_DATA, data_dir, resolve_input

ROOT = Path(__file__).resolve().parents[1]


def test_data_lives_in_the_checkout(monkeypatch):
    monkeypatch.delenv("GPUSM_DATA", raising=False)
    assert data_dir() == REPO_DATA == ROOT / "data"
    g = load_graph(REPO_DATA / "hprd" / "HPRD.graph")
    assert (g.num_vertices, g.num_edges, g.num_labels) == (9460, 34998, 307)
    assert len(read_expected_counts(REPO_DATA / "hprd" / "expected_counts_1_100.txt")) == 100


@pytest.mark.parametrize("folder", ["hprd", "yeast", "gmatch_test", "snap"])
def test_every_data_set_states_its_provenance(folder):
    text = (REPO_DATA / folder / "PROVENANCE.md").read_text().lower()
    assert "licence" in text and ("commit" in text or "@" in text)


def test_gpusm_data_overrides(monkeypatch, tmp_path):
    (tmp_path / "hprd").mkdir()
    (tmp_path / "hprd" / "tiny.graph").write_text("t 2 1\nv 0 0 1\nv 1 0 1\ne 0 1\n")
    monkeypatch.setenv("GPUSM_DATA", str(tmp_path))
    assert data_dir() == tmp_path
    assert resolve_input("hprd/tiny.graph") == tmp_path / "hprd" / "tiny.graph"
    assert resolve_input("hprd/HPRD.graph") == Path("hprd/HPRD.graph")     # not in the override


def test_cli_finds_bundled_inputs_by_relative_path(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("GPUSM_DATA", raising=False)
    monkeypatch.chdir(tmp_path)                                          # nothing here
    code = cli.main(["match", "hprd/HPRD.graph", "hprd/queries/query_dense_16_1.graph", "--format", "csv"])
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [int(r["count"]) for r in rows] == [3]                        # expected_counts_1_100: 3
    assert cli.main(["info", "no/such.graph"]) == 2                      # a missing path is still an error


def test_the_api_and_every_command_look_in_the_data_folder(monkeypatch, tmp_path, capsys):
    """gpusm.load_graph, match, info, convert and generate queries take data-folder-relative
    paths; the counts are the data folder's exact counts."""
    import gpusm

    monkeypatch.delenv("GPUSM_DATA", raising=False)
    monkeypatch.chdir(tmp_path)                                          # nothing here
    hprd = gpusm.load_graph("hprd/HPRD.graph")
    assert (hprd.num_vertices, hprd.num_edges) == (9460, 34998)
    expected = read_expected_counts("hprd/expected_counts_1_100.txt")
    assert gpusm.match(hprd, "hprd/queries/query_dense_16_2.graph").count == expected["query_dense_16_2"] == 80
    assert [q.name for q in gpusm.load_query_set("hprd/queries")][:2] == ["query_dense_16_1", "query_dense_16_2"]

    assert cli.main(["info", "hprd/HPRD.graph", "yeast/yeast.graph", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["graph"], int(r["|V|"])) for r in rows] == [("HPRD", 9460), ("yeast", 3112)]

    assert cli.main(["convert", "snap/wiki-Vote.txt.gz", "vote.graph", "--to", "graph", "--symmetrize"]) == 0
    vote = load_graph(tmp_path / "vote.graph")
    assert vote.num_vertices == load_graph(REPO_DATA / "snap" / "wiki-Vote.txt.gz", symmetrize=True).num_vertices

    assert cli.main(["generate", "queries", "yeast/yeast.graph", "--count", "2", "--size", "4",
                     "--out", "qs"]) == 0
    assert len(gpusm.load_query_set(tmp_path / "qs")) == 2


@pytest.mark.parametrize("command", [["info", "HPRD.graph"],
                                     ["convert", "email-Enron.txt.gz", "e.graph", "--to", "graph"],
                                     ["match", "HPRD.graph", "hprd/queries/query_dense_16_1.graph"]])
def test_a_missing_input_names_where_it_looked_and_what_the_data_folder_has(monkeypatch, tmp_path, capsys,
                                                                            command):
    monkeypatch.delenv("GPUSM_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(command) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    name = command[1]
    assert f"looked for {tmp_path / name} and {REPO_DATA / name}" in err
    assert f"the data folder has {'hprd/HPRD.graph' if name == 'HPRD.graph' else 'snap/email-Enron.txt.gz'}" in err


def test_load_graph_names_where_it_looked(monkeypatch, tmp_path):
    import gpusm

    monkeypatch.setenv("GPUSM_DATA", str(tmp_path / "mydata"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"looked for .*query_dense_16_1\.graph and .*mydata"):
        gpusm.load_graph("query_dense_16_1.graph")
