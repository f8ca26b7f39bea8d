"""The bundled data folder: found inside the checkout, overridden by $GPUSM_DATA, used by the CLI."""

import csv
import io
from pathlib import Path

import pytest

from common import cli
from common.io import load_graph, read_expected_counts
from common.paths import REPO_DATA, data_dir, resolve_input

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
