"""CLI conventions: --version, exit codes, JSON always a list, a backend field everywhere,
`gpusm engines`, progress for a folder of queries."""

import csv
import inspect
import io
import json

import pytest

from _paths import DATA
from common import available_engines, engine_class
from common.cli.main import EXIT_PARTIAL, EXIT_UNSUPPORTED, main
from common.engine.describe import numpydoc_parameters

HPRD = DATA / "hprd"
GH = DATA / "gmatch_test"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("gpusm 0.") and "numba-cuda" in out and "backend" in out


def test_help_documents_exit_codes_and_data(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out and "GPUSM_DATA" in out and "--allow-partial" in out


def test_every_format_names_the_backend(capsys):
    q = HPRD / "queries" / "query_dense_16_1.graph"
    _, out, _ = run(capsys, "match", HPRD / "HPRD.graph", q, "--format", "json")
    rows = json.loads(out)
    assert isinstance(rows, list) and rows[0]["backend"] == "cpu"           # the cpu engine runs on the host
    _, out, _ = run(capsys, "match", HPRD / "HPRD.graph", q, "--format", "csv")
    assert next(csv.DictReader(io.StringIO(out)))["backend"] == "cpu"
    _, out, _ = run(capsys, "match", HPRD / "HPRD.graph", q)
    assert "backend: cpu" in out


def test_gpu_engine_reports_where_it_ran(capsys, tmp_path):
    from common.gpu.runtime import backend_label

    g = tmp_path / "g.graph"
    g.write_text("t 3 3\nv 0 0 2\nv 1 0 2\nv 2 0 2\ne 0 1\ne 1 2\ne 0 2\n")
    code, out, _ = run(capsys, "match", g, g, "--engine", "gsi", "--format", "json")
    [row] = json.loads(out)
    where = backend_label()                    # "simulator", or the GPU's model name
    assert where != "cpu" and not where.startswith("no GPU")
    assert code == 0 and row["count"] == 6 and row["backend"] == where


def test_timeout_exits_non_zero_unless_partial_allowed(capsys):
    args = ["match", GH / "data.graph", GH / "queries" / "Q_9.graph", "--timeout", "0.001",
            "-o", "chunk_steps=1000", "--format", "json"]
    code, out, _ = run(capsys, *args)
    [row] = json.loads(out)
    assert row["status"] == "timeout" and code == EXIT_PARTIAL == 3
    code, out, _ = run(capsys, *args, "--allow-partial")
    assert json.loads(out)[0]["status"] == "timeout" and code == 0


def test_unsupported_query_exits_4(capsys, tmp_path):
    q = tmp_path / "two_edges.graph"          # disconnected: gsi refuses it
    q.write_text("t 4 2\nv 0 0 1\nv 1 0 1\nv 2 0 1\nv 3 0 1\ne 0 1\ne 2 3\n")
    code, out, _ = run(capsys, "match", q, q, "--engine", "gsi", "--format", "json")
    assert json.loads(out)[0]["status"] == "unsupported" and code == EXIT_UNSUPPORTED == 4


def test_an_error_exits_4_even_where_partial_answers_are_allowed():
    from common.cli.main import match_exit_code
    from common.engine.result import Status
    assert match_exit_code({Status.OK, Status.ERROR}) == EXIT_UNSUPPORTED
    assert match_exit_code({Status.TIMEOUT, Status.ERROR}, allow_partial=True) == EXIT_UNSUPPORTED
    assert match_exit_code({Status.UNSUPPORTED, Status.TIMEOUT}, allow_partial=True) == 0


def test_folder_of_queries_shows_progress(capsys, tmp_path):
    folder = tmp_path / "q"
    folder.mkdir()
    for name in ("Q_0.graph", "Q_7.graph"):
        (folder / name).write_bytes((GH / "queries" / name).read_bytes())
    code, out, err = run(capsys, "match", GH / "data.graph", folder, "--limit", "10", "--format", "json")
    assert code == 0 and len(json.loads(out)) == 2
    assert "2/2" in err and "query" in err
    _, _, err = run(capsys, "match", GH / "data.graph", folder, "--limit", "10", "--quiet")
    assert "2/2" not in err


def test_engines_lists_every_option_with_its_default(capsys):
    code, out, _ = run(capsys, "engines", "--format", "json")
    entries = {e["engine"]: e for e in json.loads(out)}
    assert code == 0 and list(entries) == available_engines()
    gsi = {o["name"]: o for o in entries["gsi"]["options"]}
    params = inspect.signature(engine_class("gsi")).parameters
    assert set(gsi) == set(params)
    assert gsi["filter"]["default"] == "signature" and '"signature"' in gsi["filter"]["type"]
    assert "Table IV" in gsi["filter"]["meaning"]
    assert "join_order" in {o["name"] for o in entries["stwig"]["options"]}       # through **options
    egsm = {o["name"]: o for o in entries["egsm"]["options"]}
    assert "NoF3" in egsm["variant"]["type"] and "wedge filter" in egsm["variant"]["meaning"]
    code, out, _ = run(capsys, "engines", "cpu")
    assert code == 0 and "-o filter='refine'" in out and "gsi" not in out.split("\n")[0]
    code, _, err = run(capsys, "engines", "nope")
    assert code == 2 and "unknown engine" in err


def _external_binaries() -> dict:
    from experiments.papers.authors import EGSMAuthors, GMatchAuthors
    from experiments.papers.competitors import COMPETITORS

    return {**COMPETITORS, "egsm-authors": EGSMAuthors, "gmatch-authors": GMatchAuthors}


@pytest.mark.parametrize("name", sorted(set(available_engines()) | set(_external_binaries())))
def test_engines_reads_every_meaning_from_the_class_docstrings(capsys, monkeypatch, name):
    """Every option `gpusm engines` shows has a type and a meaning, and both are the ones the
    numpydoc Parameters sections of the engine class (or the bases its **options reach) give;
    every documented name is a real option. The authors' and the competitors' binaries are
    registered for it as on a host where they are built."""
    from common.engine import registry

    if name not in registry._REGISTRY:
        cls = _external_binaries()[name]
        monkeypatch.setitem(registry._REGISTRY, name, f"{cls.__module__}:{cls.__qualname__}")
    code, out, _ = run(capsys, "engines", name, "--format", "json")
    (entry,) = json.loads(out)
    cls = engine_class(name)
    documented = {}
    for klass in cls.__mro__:
        documented = {**numpydoc_parameters(klass.__dict__.get("__doc__") or ""), **documented}
    options = {o["name"]: o for o in entry["options"]}
    assert code == 0 and options
    for option in options.values():
        assert option["meaning"] and option["type"], f"{name}: -o {option['name']} has no documented meaning"
        assert (option["type"], option["meaning"]) == documented[option["name"]]
    inherited = {n for klass in cls.__mro__ for n in numpydoc_parameters(klass.__dict__.get("__doc__") or "")}
    assert inherited <= set(options), f"{name} documents options it does not take: {inherited - set(options)}"
    text = run(capsys, "engines", name)[1]
    assert all(f"-o {o}=" in text and options[o]["meaning"] in text for o in options)


def test_numpydoc_parameters_reads_names_types_and_descriptions():
    doc = """Summary.

    Parameters
    ----------
    alpha : int
        First line,
        second line.
    beta, gamma : {"x", "y"}
        Shared.

    Notes
    -----
    delta : not a parameter
    """
    assert numpydoc_parameters(doc) == {"alpha": ("int", "First line, second line."),
                                         "beta": ('{"x", "y"}', "Shared."), "gamma": ('{"x", "y"}', "Shared.")}
    assert numpydoc_parameters("No sections here.") == {}
