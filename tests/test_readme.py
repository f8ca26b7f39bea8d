"""Every code block of README.md runs as written, so the README cannot drift from the code.

Blocks are fenced with a language: ``python`` blocks run in a fresh interpreter, ``sh`` blocks
line by line through bash with the installed ``gpusm`` entry point first on PATH, each from an
empty working directory (inputs come from the data folder, as a new user's would). ``text``
blocks (synopses, the layout) are not code. The few commands that need a GPU, a cluster, a
browser, the network or many minutes are listed in :data:`NOT_RUN` with the reason; each entry
must still be in the README, so the list cannot rot.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

#: Commands (or a python block's first distinctive line) deliberately not run here, with why.
NOT_RUN = {
    "make demo": "runs the whole demo (minutes in the simulator): tests/test_cli.py runs `gpusm demo --size tiny`",
    "make test": "the test suite itself",
    "make test-fast": "the test suite itself, less its slow tests",
    "make test-gpu": "needs a GPU",
    "make warmup": "compiles on a GPU (the simulator has nothing to compile): tests/test_kernel_cache.py runs "
        "gpusm warmup",
    "python -m experiments.bench.cold_start": "a GPU benchmark of fresh processes (minutes): tests/test_cold_start.py "
        "runs it on a tiny graph",
    ".venv/bin/pip install -e '.[notebooks]'": "installs packages from the index",
    ".venv/bin/jupyter lab notebooks/tutorial.ipynb": "opens a browser",
    ".venv/bin/jupyter nbconvert --to notebook --execute --inplace notebooks/tutorial.ipynb":
        "rewrites the committed notebook: tests/test_notebooks.py executes it",
    "gpusm match hprd/HPRD.graph hprd/queries --dask local-cuda": "needs GPUs and dask-cuda",
    "gpusm match hprd/HPRD.graph hprd/queries --dask tcp://scheduler:8786 -e gmatch": "needs a running cluster",
    "gpusm match hprd/HPRD.graph hprd/queries --dask local --dask-workers 2":
        "starts a Dask cluster of worker processes: tests/test_distributed.py runs the Dask path",
    "from dask_cuda import LocalCUDACluster": "needs GPUs and dask-cuda",
    "python -m experiments.bench.dask_scaling": "a GPU measurement (minutes on two GPUs)",
    "make experiment-gsi SCALE=small": "GPU minutes per paper: tests/test_experiments.py runs the tiny scale",
    "make experiments SCALE=small GPUS=0,1,2,3 BUDGET=420": "needs four GPUs",
    "make experiment-plan SCALE=small GPUS=0,1,2,3": "plans for four GPUs (tests/test_experiments.py checks --plan)",
    "python -m experiments gsi_icde20.table5_time --scale tiny": "minutes in the simulator: tests/test_experiments.py",
    "python -m experiments --paper egsm_sigmod23 --scale medium --dask local-cuda":
        "needs GPUs and dask-cuda: tests/test_experiment_cells.py runs a set on a Dask cluster",
    "python -m experiments.harness.stress": "kills a run 20 times (about 30 s on an idle host; its own test exists)",
    "python -m experiments.bench.check --engines cpu,gsi,sgsi,egsm,gmatch,stwig":
        "hundreds of queries on every engine: tests/test_check.py runs it with --queries N --smallest",
    "python -m experiments.bench.check --engines gsi,egsm,gmatch,stwig --sets patterns,enron": "GPU-sized queries",
    "python -m experiments.bench.gmatch_heavy --timeout 8": "a GPU benchmark",
    "python -m experiments.bench.small_queries": "a benchmark over hundreds of queries per engine",
    "python -m experiments.bench.regress": "a GPU benchmark of two revisions (minutes): tests/test_regress.py runs "
        "a two-query cpu run of HEAD against itself",
}


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and indented remarks dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in joined.splitlines():
        if not line.strip() or line.startswith(" "):
            continue
        out.append(re.sub(r"\s+#.*$", "", line).strip())
    return out


def skipped(text: str) -> str | None:
    return next((why for key, why in NOT_RUN.items() if text.startswith(key) or key in text.splitlines()), None)


SH = [c for b in blocks("sh") for c in commands(b)]
PYTHON = blocks("python")


def test_every_block_has_a_language_and_the_not_run_list_is_in_the_readme():
    fences = re.findall(r"^```(\S*)", README, flags=re.M)
    openings = fences[0::2]
    assert openings and set(openings) <= {"sh", "python", "text"}, openings
    text = README.replace("\\\n    ", "")
    for key in NOT_RUN:
        assert key in text, f"NOT_RUN names {key!r}, which the README no longer has: update the list"
    run = [c for c in SH if not skipped(c)] + [b for b in PYTHON if not skipped(b)]
    assert len(run) >= 15                         # most blocks do run


def _env(tmp_path: Path) -> dict:
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    env.pop("GPUSM_DATA", None)
    return env


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c in SH if not skipped(c)])
def test_readme_command_runs(command, tmp_path):
    if command.startswith("gpusm generate queries"):        # needs the graph the line before writes
        subprocess.run(["gpusm", "generate", "rmat", "--vertices", "16384", "--edges", "262144", "--labels", "16",
                        "--seed", "1", "--out", "g.graph"], cwd=tmp_path, env=_env(tmp_path), check=True,
                       capture_output=True, timeout=300)
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    if command.startswith("gpusm match hprd/HPRD.graph hprd/queries/query_dense_16_1.graph"):
        assert "count:   3\n" in done.stdout                   # data/hprd/expected_counts_1_100.txt


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in PYTHON if not skipped(b)], ids=lambda b: b.splitlines()[1][:40])
def test_readme_python_block_runs(block, tmp_path):
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{block}\n{done.stderr[-3000:]}"
    if "query_dense_16_1" in block and "networkx" not in block:
        assert done.stdout.startswith("3 ok (3, 16) {'filter'"), done.stdout
    if "networkx" in block:
        assert "[['a' 'b' 'c']\n ['b' 'a' 'c']]" in done.stdout
        counts = re.findall(r"query_dense_16_\d\s+ok\s+(\d+)", done.stdout)
        assert counts == ["3", "80"], done.stdout
