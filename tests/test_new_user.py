"""What a new user meets on a machine without a GPU: GPU-only commands refuse up front in one line,
benchmarks say they run in the simulator, ``make help``, the generate options' help, a closed pipe."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _subprocess import python_env
from common.gpu import backend

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
no_gpu = pytest.mark.skipif(backend.gpu_missing_reason() is None, reason="a GPU is here: nothing to refuse")


def run(*args, env=None, timeout=120) -> subprocess.CompletedProcess:
    environment = python_env(**(env or {}))
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=environment)


def one_line_refusal(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines[0]


@no_gpu
@pytest.mark.parametrize("command", [
    ["-m", "experiments.profiling.host_timeline", "--limit", "1"],
    ["-m", "experiments.profiling.kernel_times", "--limit", "1"],
    ["-m", "experiments.profiling.host_costs"],
    ["-m", "experiments.profiling.device_check"],
    ["-m", "experiments.bench.dask_scaling"],
    ["-m", "experiments", "--paper", "stwig_lin14", "--scale", "tiny", "--dask", "local-cuda"],
    ["-m", "experiments", "--paper", "stwig_lin14", "--scale", "tiny", "--gpus", "0,1,2,3"],
    ["-m", "experiments.gpusm", "match", "hprd/HPRD.graph", "hprd/queries/query_dense_16_1.graph",
     "--dask", "local-cuda"],
], ids=lambda c: " ".join(c[1:3]) + (" " + c[-1] if c[-1].startswith(("local", "0,")) else ""))
def test_gpu_only_commands_refuse_in_one_line(command, tmp_path):
    if command[1] == "experiments":
        command = [*command, "--out", str(tmp_path)]
    one_line_refusal(run(*command), "needs", "GPU")
    assert not any(tmp_path.iterdir())                        # nothing run, nothing written


@no_gpu
def test_ptx_check_names_what_it_needs():
    one_line_refusal(run("-m", "experiments.profiling.ptx_check"), "NUMBA_ENABLE_CUDASIM=0")
    done = run("-m", "experiments.profiling.ptx_check", env={"NUMBA_ENABLE_CUDASIM": "0"})
    if done.returncode == 0:
        pytest.skip("this machine has NVVM and NVRTC: ptx_check compiled")
    one_line_refusal(done, "numba-cuda[cu12]")


@no_gpu
def test_the_plan_of_four_gpus_is_still_printed():
    done = run("-m", "experiments", "--plan", "--paper", "stwig_lin14", "--scale", "tiny", "--gpus", "0,1,2,3")
    assert done.returncode == 0 and "GPU 3" in done.stdout, done.stderr


@pytest.mark.skipif(backend.BACKEND != "simulator", reason="runs on a GPU: no simulator note")
def test_a_benchmark_says_it_runs_in_the_simulator_and_how_long_its_plan_is(tmp_path, capsys):
    from experiments.bench import check

    assert check.main(["--engines", "cpu", "--sets", "hprd", "--queries", "2", "--smallest",
                       "--timeout", "30"]) == 0
    err = capsys.readouterr().err
    note = [line for line in err.splitlines() if "simulator" in line]
    assert len(note) == 1 and "2 queries x 1 runs" in note[0] and "at most 1 min" in note[0], err


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_gpu_refuses_without_a_gpu_before_installing(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("nvidia-smi answers here")
    done = subprocess.run(["make", "--no-print-directory", "test-gpu", f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "needs an NVIDIA GPU" in done.stderr, done.stderr
    assert not (tmp_path / "venv").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_gpu_runs_per_gpu_workers_on_the_listed_gpus(tmp_path):
    """GPUS spreads the suite over the listed GPUs, PER_GPU test workers each (a dry run, with the
    GPU check satisfied as on a GPU host)."""
    def dry(*settings) -> str:
        done = subprocess.run(["make", "--no-print-directory", "-n", "test-gpu", "CUDA_MAJOR=13",
                               f"VENV={tmp_path / 'venv'}", *settings], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    line = dry("GPUS=0,1", "PER_GPU=4")
    assert line.startswith("GPUSM_TEST_GPUS=0,1 NUMBA_ENABLE_CUDASIM=0 ") and "-n 8 --dist loadfile" in line
    assert "-n 3 --dist loadfile" in dry("GPUS=0,1,2")
    assert dry().endswith("-m pytest -p no:xdist")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_help_names_every_target():
    done = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    makefile = (ROOT / "Makefile").read_text()
    phony = next(line for line in makefile.splitlines() if line.startswith(".PHONY:")).split()[1:]
    for target in set(phony) - {"help", "require-gpu"}:
        assert f"make {target}" in done.stdout or f" {target} " in done.stdout or f"/ {target}" in done.stdout, target
    assert "source .venv/bin/activate" in done.stdout


def test_generate_options_have_help_and_defaults():
    from experiments.gpusm import build_parser

    generate = build_parser()._subparsers._group_actions[0].choices["generate"]
    sub = generate._subparsers._group_actions[0].choices
    for name, options in (("rmat", ("--vertices", "--edges", "--seed", "--out", "--labels")),
                          ("queries", ("--count", "--seed", "--out"))):
        text = " ".join(sub[name].format_help().split())
        for action in sub[name]._actions:
            if action.option_strings and action.option_strings[0] in options:
                assert action.help, f"generate {name} {action.option_strings[0]} has no help"
                if not action.required:
                    assert "default:" in action.help, f"generate {name} {action.option_strings[0]}: no default"
                else:
                    assert "(required)" in action.help
        assert ("default: 100" in text) if name == "queries" else ("default: 0" in text), text


def test_dask_hints_install_the_way_the_readme_does(monkeypatch, capsys):
    from common.cli.main import main

    readme = (ROOT / "README.md").read_text()
    assert "pip install -e '.[dask]'" in readme
    monkeypatch.setattr("common.cli.main.gpu_missing_reason", lambda: None)      # as on a GPU host
    monkeypatch.setitem(sys.modules, "dask_cuda", None)                          # import dask_cuda fails
    code = main(["match", str(DATA / "hprd" / "HPRD.graph"), str(DATA / "hprd" / "queries" / "query_dense_16_1.graph"),
                 "--dask", "local-cuda"])
    assert code == 2 and "pip install -e '.[dask]'" in capsys.readouterr().err


def test_a_closed_pipe_is_not_an_error():
    command = f"{sys.executable} -m experiments.gpusm match hprd/HPRD.graph hprd/queries --quiet | head -2"
    done = subprocess.run(command, shell=True, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=python_env())
    assert len(done.stdout.splitlines()) == 2
    assert "Broken pipe" not in done.stderr and "Traceback" not in done.stderr, done.stderr
