"""Packaging: the simulator patch fits the installed numba-cuda (fails naming the version when it
does not), pyproject pins numba-cuda to the tested range, SPDX licence, and the Makefile's choice of
the CUDA extra from nvidia-smi."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from _extras import requires
from common.gpu.cudasim import NUMBA_CUDA_TESTED, patch_problems

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_simulator_patch_fits_installed_numba_cuda():
    problems = patch_problems()
    assert not problems, "common/gpu/cudasim.py no longer fits: " + "; ".join(problems)


def test_a_version_outside_the_tested_range_is_named(monkeypatch):
    import importlib.metadata

    import common.gpu.cudasim as cudasim
    monkeypatch.setattr(cudasim, "NUMBA_CUDA_TESTED", ("0.1", "0.2"))
    version = importlib.metadata.version("numba-cuda")
    assert f"numba-cuda {version} is outside the range the simulator patch was tested with (>=0.1,<0.2)" \
        in patch_problems()


def test_pyproject_pins_numba_cuda_to_the_tested_range():
    low, high = NUMBA_CUDA_TESTED
    specs = [d for d in PYPROJECT["project"]["dependencies"] if d.startswith("numba-cuda")]
    extras = PYPROJECT["project"]["optional-dependencies"]
    specs += [d for name in ("cu12", "cu13") for d in extras[name]]
    assert len(specs) == 3
    for spec in specs:
        assert f">={low}" in spec and f"<{high}" in spec, spec


def test_spdx_licence_and_licence_file():
    assert PYPROJECT["project"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    for extra in ("interop", "test"):
        assert any(d.startswith("networkx") for d in PYPROJECT["project"]["optional-dependencies"][extra])


@pytest.mark.slow
@pytest.mark.parametrize("cuda,extras", [("12.4", "test,cu12"), ("13.0", "test,cu13"), (None, "test")])
def test_makefile_picks_the_cuda_extra_from_nvidia_smi(tmp_path, cuda, extras):
    requires("bin:make")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # a stand-in nvidia-smi first on PATH (a real one may share /usr/bin with make and sed):
    # it prints a driver's CUDA version, or nothing and fails, as where no driver is installed
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\necho "| NVIDIA-SMI 580.65  Driver Version: 580.65  CUDA Version: {cuda} |"\n'
                   if cuda else "#!/bin/sh\nexit 127\n")
    smi.chmod(0o755)
    path = os.pathsep.join([str(bin_dir), os.environ["PATH"]])
    env = {k: v for k, v in os.environ.items() if k != "EXTRAS"}
    out = subprocess.run(["make", "-s", "-C", str(ROOT), "cuda-extra"], env=dict(env, PATH=path),
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == f"cuda_major={cuda.split('.')[0] if cuda else ''} extras={extras}"


def test_a_missing_extra_skips_or_under_make_test_fails(monkeypatch):
    monkeypatch.delenv("GPUSM_REQUIRE_EXTRAS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no_such_module"):
        requires("no_such_module")
    monkeypatch.setenv("GPUSM_REQUIRE_EXTRAS", "1")
    with pytest.raises(pytest.fail.Exception, match="no_such_module"):
        requires("no_such_module")
    requires("numpy", "bin:sh")                          # present: nothing happens


def test_gpusm_is_the_public_api_and_the_entry_point():
    """`import gpusm` is the API (re-exports of the packages where the code lives), the installed
    command is gpusm.cli:main, and the distribution installs no top-level name but its own packages."""
    import common
    import gpusm
    import gpusm.cli
    from experiments.gpusm import main

    assert PYPROJECT["project"]["scripts"] == {"gpusm": "gpusm.cli:main"}
    assert gpusm.cli.main is main
    for name in ("load_graph", "match", "match_many", "Graph", "results_frame", "create_engine", "MatchResult",
                 "GraphFormatError", "UnknownEngineError"):
        assert getattr(gpusm, name) is getattr(common, name), name
    assert set(gpusm.__all__) <= set(dir(gpusm))
    assert gpusm.engines() == common.available_engines() and "cpu" in gpusm.engines()
    assert gpusm.__version__ == common.__version__

    from setuptools import find_packages
    found = find_packages(str(ROOT), include=PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"])
    assert {p.split(".")[0] for p in found} == {"gpusm", "common", "gsi", "egsm", "gmatch", "stwig", "experiments"}


@pytest.mark.slow
def test_python_dash_m_gpusm_runs_the_command():
    out = subprocess.run([sys.executable, "-m", "gpusm", "--version"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.startswith("gpusm ")
