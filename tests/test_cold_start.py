"""The cold-start benchmark (experiments/bench/cold_start.py) and what `gpusm match` imports."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.gpu.runtime import simulator_active
from common.graph.generate import power_law_labels, query_set, rmat
from common.graph.io import save_graph
from experiments.bench import cold_start

ROOT = Path(__file__).resolve().parent.parent


def _tiny_files(folder: Path) -> tuple[str, str]:
    data = rmat(64, 200, seed=5, labels=power_law_labels(64, 3, 1.0, seed=5), name="tiny")
    query = query_set(data, 1, 3, seed=6).queries[0]
    save_graph(data, folder / "data.graph", "gsi")
    save_graph(query, folder / "query.graph", "gsi")
    return str(folder / "data.graph"), str(folder / "query.graph")


@pytest.mark.slow
def test_cold_start_measures_each_engine_in_fresh_processes_and_writes_its_table(tmp_path, capsys, monkeypatch):
    data, query = _tiny_files(tmp_path)
    if simulator_active():    # its fresh processes compile no kernels; their host code runs interpreted
        monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    assert cold_start.main(["--data", data, "--query", query, "--engines", "cpu", "gsi", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0].startswith("| engine |") and [line.split("|")[1].strip() for line in table[2:]] == ["cpu", "gsi"]
    with open(tmp_path / "cold_start.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["engine"] for r in rows] == ["cpu", "gsi"] and rows[0]["count"] == rows[1]["count"]
    assert float(rows[0]["cli_vs_cpu"]) == 1.0 and float(rows[1]["cli_s"]) > 0
    gsi = rows[1]
    if simulator_active():
        assert int(gsi["empty_compiled"]) == int(gsi["filled_compiled"]) == 0
    else:                                      # the filled cache compiles nothing and loads instead
        assert int(gsi["empty_compiled"]) > 0 and int(gsi["filled_compiled"]) == 0 and int(gsi["filled_loaded"]) > 0
    assert json.loads((tmp_path / "cold_start.json").read_text())["rows"][1]["engine"] == "gsi"


def test_cold_start_refuses_an_unknown_engine(capsys):
    with pytest.raises(SystemExit) as exit:
        cold_start.main(["--engines", "cpu", "nosuch"])
    assert exit.value.code == 2
    assert "unknown engine(s) nosuch" in capsys.readouterr().err


_HEAVY = ("pandas", "matplotlib", "dask", "distributed", "networkx", "scipy.sparse", "IPython", "igraph")


@pytest.mark.slow
def test_one_query_match_imports_no_harness_or_plotting_library(tmp_path):
    data, query = _tiny_files(tmp_path)
    code = ("import sys; from experiments.gpusm import main; status = main(['match', sys.argv[1], sys.argv[2], "
            f"'--engine', 'cpu']); print(sorted(m for m in sys.modules if m.split('.')[0] in {_HEAVY!r} "
            "or m == 'scipy.sparse'))")
    done = subprocess.run([sys.executable, "-c", code, data, query], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_demo_compiles_in_parallel_only_while_an_engine_has_nothing_cached(monkeypatch, tmp_path):
    from experiments import demo_warmup

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    started = []
    monkeypatch.setattr(demo_warmup, "warmup",
                        lambda engines, **kw: started.append((list(engines), kw["kernels_first"])) or [{}])
    assert demo_warmup.compile_in_parallel(["cpu", "gsi", "sgsi", "egsm", "networkx"], "tiny", 7) == [{}]
    assert started == [(["gsi", "sgsi", "egsm", "cpu"], ())]    # GPU engines, then compiled CPU engines
    demo_warmup.compile_in_parallel(["cpu", "gmatch"], "tiny", 7)
    assert started[-1] == (["gmatch", "cpu"], demo_warmup.KERNELS_FIRST)
    started.clear()
    for package in ("gsi", "egsm"):
        (tmp_path / "gpusm" / package).mkdir(parents=True)
        (tmp_path / "gpusm" / package / "k-1.py311.1.nbc").write_bytes(b"")
    assert demo_warmup.compile_in_parallel(["cpu", "gsi", "sgsi", "egsm"], "tiny", 7) == []
    assert started == []


@pytest.mark.slow
def test_a_kernels_first_process_interprets_host_code_and_answers_the_demo_workload():
    from common.cli.warmup import KERNELS_FIRST_ENV

    code = ("import json, numba, sys; from experiments import demo_warmup; "
            "r = demo_warmup.main(['gmatch', 'tiny', '7', 'candidate_graph=True']); "
            "from gmatch.order import ri_order; "
            "print(json.dumps([r['engine'], r['queries'], numba.config.DISABLE_JIT, hasattr(ri_order, 'py_func')]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **KERNELS_FIRST_ENV})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["gmatch candidate_graph=True", 3, 1, False]


@pytest.mark.slow
def test_demo_warmup_child_runs_the_demo_workload():
    from experiments import demo_warmup

    report = demo_warmup.main(["egsm", "tiny", "7"])
    assert report["engine"] == "egsm" and report["queries"] == 3
    report = demo_warmup.main(["stwig-cpu", "tiny", "7"])
    assert report["engine"] == "stwig-cpu" and report["queries"] == 3 and report["not_launched"] == []
