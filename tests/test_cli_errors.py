"""One-line errors (exit 2) for input/output problems, found before the work starts."""

from __future__ import annotations

import numpy as np
import pytest

import common.cli.main as cli
from common import create_engine
from common.cli.main import main
from common.graph.generate import rmat
from common.graph.io import save_graph


@pytest.fixture
def files(tmp_path):
    data = rmat(40, 120, seed=1, name="d")
    save_graph(data, tmp_path / "d.graph", "graph")
    queries = tmp_path / "queries"
    assert main(["generate", "queries", str(tmp_path / "d.graph"), "--count", "2", "--size", "3",
                 "--out", str(queries)]) == 0
    return tmp_path, tmp_path / "d.graph", queries


def _one_line_error(capsys, argv, *needles) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


def test_a_folder_given_as_the_data_file(files, capsys):
    tmp, _, queries = files
    _one_line_error(capsys, ["match", str(tmp), str(queries)], "gpusm match: error:")


def test_collect_problems_are_found_before_the_search(files, capsys, monkeypatch):
    tmp, data, queries = files
    from common.engine.base import Engine

    searched = []
    prepare = Engine.prepare
    monkeypatch.setattr(Engine, "prepare", lambda self, data: searched.append(1) or prepare(self, data))
    first = sorted(queries.iterdir())[0]
    _one_line_error(capsys, ["match", str(data), str(first), "--collect", str(tmp / "missing" / "e.npy")],
                    "does not exist")
    (tmp / "taken").write_text("x")
    _one_line_error(capsys, ["match", str(data), str(queries), "--collect", str(tmp / "taken")],
                    "exists and is not a folder")
    assert not searched and not any(p.suffix == ".npy" for p in tmp.rglob("*"))


def test_outputs_in_places_that_cannot_be_written(files, capsys):
    tmp, data, _ = files
    _one_line_error(capsys, ["generate", "rmat", "--vertices", "8", "--edges", "8", "--out", "/proc/g.graph"])
    _one_line_error(capsys, ["generate", "rmat", "--vertices", "8", "--edges", "8", "--out", str(tmp)],
                    "is a folder, not a file")
    _one_line_error(capsys, ["convert", str(data), str(tmp / "no" / "where.graph"), "--to", "graph"],
                    "does not exist")


def test_limits_and_sizes_out_of_range(files, capsys):
    _, data, queries = files
    first = str(sorted(queries.iterdir())[0])
    _one_line_error(capsys, ["match", str(data), first, "--limit", str(10**23)],
                    "limit must be a positive whole number")
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(["match", str(data), first, "--device-memory-limit", "0.5"])
    assert stop.value.code == 2 and "less than one byte" in capsys.readouterr().err
    engine = create_engine("cpu").prepare(rmat(20, 40, seed=1))
    with pytest.raises(ValueError, match="positive whole number"):
        engine.match(rmat(3, 2, seed=1), limit=1.5)


def test_negative_budget_is_refused(capsys):
    from experiments.cli import main as experiments_main

    with pytest.raises(SystemExit) as stop:
        experiments_main(["gsi_icde20.table5_time", "--scale", "tiny", "--budget", "-1"])
    assert stop.value.code == 2 and ">= 0" in capsys.readouterr().err


def test_experiment_out_that_is_a_file(tmp_path, capsys):
    from experiments.cli import main as experiments_main

    (tmp_path / "out").write_text("x")
    assert experiments_main(["gsi_icde20.table5_time", "--scale", "tiny", "--out", str(tmp_path / "out")]) == 2
    assert "experiments: error:" in capsys.readouterr().err


def test_ctrl_c_is_one_line_and_exit_130(files, capsys, monkeypatch):
    _, data, _ = files

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_info", interrupted)
    assert main(["info", str(data)]) == 130
    assert capsys.readouterr().err == "gpusm info: interrupted\n"


@pytest.mark.parametrize("engine,option,needle", [
    ("cpu", "chunk_steps=abc", "engine 'cpu': option chunk_steps takes an integer (int, default 4194304), got 'abc'"),
    ("gmatch", "probe_s=fast", "engine 'gmatch': option probe_s takes a number (float, default 0.005), got 'fast'"),
    ("gsi", "write_cache=3", "engine 'gsi': option write_cache takes true or false (bool, default True), got 3"),
    ("egsm", "blocks=many", "engine 'egsm': option blocks takes an integer or none (int | None"),
])
def test_an_option_of_the_wrong_type_names_the_option_and_the_type(files, capsys, engine, option, needle):
    _, data, queries = files
    _one_line_error(capsys, ["match", str(data), str(queries), "-e", engine, "-o", option], needle)


def test_options_of_the_right_type_pass_the_check():
    assert create_engine("gmatch", probe_s=1, max_registers=None, candidate_graph="auto", work_stealing=False)
    assert create_engine("cpu", chunk_steps=np.int64(8), root_range="0:4").chunk_steps == 8


def test_unknown_engine_names_the_registered_ones_without_quotes(capsys):
    # what is registered depends on the host (the authors' and competitors' binaries register where
    # built, once experiments.papers is imported): the message names all of them, the CLI sorted
    from common.engine.describe import describe_engines
    from common.engine.registry import available_engines

    listed = sorted(e["engine"] for e in describe_engines())
    assert {"cpu", "egsm", "gsi"} <= set(listed)
    err = _one_line_error(capsys, ["engines", "nosuch"], "gpusm engines: error: unknown engine 'nosuch'; "
                                                          f"registered engines: {', '.join(listed)}\n")
    assert not err.startswith('"') and '"' not in err
    registered = ", ".join(available_engines())
    with pytest.raises(ValueError, match=f"unknown engine 'nosuch'; registered engines: {registered}$"):
        create_engine("nosuch")


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_a_query_file_that_holds_no_graph(files, capsys, tmp_path, fmt):
    _, data, _ = files
    (tmp_path / "empty.g").write_text("t # -1\n")
    _one_line_error(capsys, ["match", str(data), str(tmp_path / "empty.g"), "--format", fmt],
                    "empty.g: the file holds no graph")


def test_a_fifo_as_the_data_file_is_refused(files, capsys, tmp_path):
    import os

    _, _, queries = files
    os.mkfifo(tmp_path / "pipe")
    _one_line_error(capsys, ["match", str(tmp_path / "pipe"), str(queries)], "not a regular file")


def test_directed_data_with_an_undirected_query_says_to_symmetrize(files, capsys, tmp_path):
    _, _, queries = files
    (tmp_path / "d.txt").write_text("# SNAP\n0 1\n1 2\n2 0\n")
    _one_line_error(capsys, ["match", str(tmp_path / "d.txt"), str(queries)], "--symmetrize")
    assert main(["match", str(tmp_path / "d.txt"), str(queries), "--symmetrize", "-q"]) == 0


def test_converted_files_match_alike_and_a_directed_data_file_suggests_symmetrize(files, capsys):
    import json

    tmp, data, queries = files
    first = str(sorted(queries.iterdir())[0])
    counts = []
    for fmt in ("graph", "gsi", "daf", "gmatch-binary"):      # data and query converted alike
        assert main(["convert", str(data), str(tmp / f"d.{fmt}"), "--to", fmt]) == 0
        assert main(["convert", first, str(tmp / f"q.{fmt}"), "--to", fmt]) == 0
        capsys.readouterr()
        assert main(["match", str(tmp / f"d.{fmt}"), str(tmp / f"q.{fmt}"), "--format", "json"]) == 0
        counts.append(json.loads(capsys.readouterr().out)[0]["count"])
    assert len(set(counts)) == 1 and counts[0] > 0, counts
    # a gsi file written before undirected graphs were marked: directed, with each edge once
    lines = (tmp / "d.gsi").read_text().splitlines()[:-1]
    lines = [line for line in lines if not line.startswith("e ") or int(line.split()[1]) < int(line.split()[2])]
    nv, ne, *rest = lines[1].split()
    lines[1] = " ".join([nv, str(int(ne) // 2), *rest])
    (tmp / "old.g").write_text("\n".join(lines) + "\n")
    _one_line_error(capsys, ["match", str(tmp / "old.g"), first], "directed (a gsi file", "--symmetrize")
    capsys.readouterr()
    assert main(["match", str(tmp / "old.g"), first, "--symmetrize", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["count"] == counts[0]
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    assert "gsi" in capsys.readouterr().out.split("--symmetrize")[-1]
