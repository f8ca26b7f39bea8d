"""Every code block of README.md runs as written, so the README cannot drift from the code.

Blocks are fenced with a language and run the way the README tells a reader to: in a new ``bash``
whose only setup is the README's own activation line (``source .venv/bin/activate``), ``sh``
blocks line by line and ``python`` blocks through that shell's ``python``, each from an empty
working directory (inputs come from the data folder, as a new user's would). ``text``
blocks (synopses, the layout) are not code. The few commands that need a GPU, a cluster, a
browser, the network or many minutes are listed in :data:`NOT_RUN` with the reason; each entry
must still be in the README, so the list cannot rot.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from _extras import unavailable

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

#: Commands (or a python block's first distinctive line) deliberately not run here, with why.
NOT_RUN = {
    "source .venv/bin/activate": "the setup step: every other block runs after it (in_new_shell)",
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


#: The README's own setup step for a new shell.
ACTIVATE = "source .venv/bin/activate"
#: The environment the suite runs in: the checkout's .venv, else the one running the tests.
VENV = ROOT / ".venv" if (ROOT / ".venv" / "bin" / "activate").exists() else Path(sys.prefix)


def _env(tmp_path: Path) -> dict:
    """A new login's environment: no virtual environment on PATH, none of the suite's variables
    (PYTHONPATH only where the suite itself was pointed at this tree)."""
    venvs = {str(VENV / "bin"), str(Path(sys.executable).parent)}
    path = os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if p not in venvs)
    env = {"PATH": path, "HOME": os.environ.get("HOME", str(tmp_path)), "LANG": os.environ.get("LANG", "C.UTF-8")}
    for name in ("PYTHONPATH", "TMPDIR", "NUMBA_CACHE_DIR", "NUMBA_ENABLE_CUDASIM"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def needs_the_install() -> None:
    """The ``gpusm`` script of the environment the suite runs in, which ``make install`` puts
    there: without it (the suite run outside the project's install) skip, under ``make test`` fail."""
    if not (VENV / "bin" / "gpusm").exists():
        unavailable(f"needs the project installed (make install): no gpusm script in {VENV / 'bin'}")


def in_new_shell(command: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    """``command`` in a new bash after the README's activation line only (run in the checkout)."""
    assert ACTIVATE in SH, f"the README no longer says {ACTIVATE!r}"
    setup = ACTIVATE.replace(".venv", shlex.quote(str(VENV)))
    script = f"cd {shlex.quote(str(ROOT))} && {setup} && cd {shlex.quote(str(cwd))} && {command}"
    return subprocess.run(["bash", "--noprofile", "--norc", "-c", script], cwd=cwd, env=_env(cwd),
                          capture_output=True, text=True, timeout=300, **kwargs)


def test_the_readme_commands_need_its_activation_step_and_work_after_it(tmp_path):
    """After ``make demo``, a new shell finds ``gpusm`` and the experiments' dependencies only
    through the README's activation line."""
    bare = subprocess.run(["bash", "--noprofile", "--norc", "-c", "gpusm --version"], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    if bare.returncode == 0:
        pytest.skip("gpusm is on this machine's PATH without the virtual environment")
    assert bare.returncode == 127 and "command not found" in bare.stderr
    needs_the_install()
    done = in_new_shell("gpusm --version && python -c 'import pandas, gpusm'", tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("gpusm "), done.stderr
    assert ACTIVATE in README.split("```sh\nmake demo")[1].split("## Count semantics")[0]


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c in SH if not skipped(c)])
def test_readme_command_runs(command, tmp_path):
    if command.split()[0] == "gpusm":
        needs_the_install()
    if command.startswith("gpusm generate queries"):        # needs the graph the line before writes
        assert in_new_shell("gpusm generate rmat --vertices 16384 --edges 262144 --labels 16 --seed 1 "
                            "--out g.graph", tmp_path).returncode == 0
    done = in_new_shell(command, tmp_path)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    if command.startswith("gpusm match hprd/HPRD.graph hprd/queries/query_dense_16_1.graph"):
        assert "count:   3\n" in done.stdout                   # data/hprd/expected_counts_1_100.txt


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in PYTHON if not skipped(b)], ids=lambda b: b.splitlines()[1][:40])
def test_readme_python_block_runs(block, tmp_path):
    done = in_new_shell("python -", tmp_path, input=block)
    assert done.returncode == 0, f"{block}\n{done.stderr[-3000:]}"
    if "query_dense_16_1" in block and "networkx" not in block:
        assert done.stdout.startswith("3 ok (3, 16) {'filter'"), done.stdout
    if "check_engine" in block:                           # the toy engine passes and counts as cpu does
        assert done.stdout.startswith("{'passed'}\n"), done.stdout
        assert done.stdout.endswith("\n2\n"), done.stdout
    if "networkx" in block:
        assert "[['a' 'b' 'c']\n ['b' 'a' 'c']]" in done.stdout
        counts = re.findall(r"query_dense_16_\d\s+ok\s+(\d+)", done.stdout)
        assert counts == ["3", "80"], done.stdout


def test_the_docs_say_what_is_in_the_places_meant_for_it():
    """docs/performance.md holds one current table per workload (at most 400 lines; older runs are
    in git history); docs/design.md and the README carry no commit-stamped measurements."""
    assert len((ROOT / "docs" / "performance.md").read_text().splitlines()) <= 400
    commit = re.compile(r"(?<![0-9a-zA-Z_/.-])[0-9a-f]{7}(?![0-9a-zA-Z_])")
    for name in ("README.md", "docs/design.md"):
        stamped = [line for line in (ROOT / name).read_text().splitlines()
                   if commit.search(line) and re.search(r"[a-f]", commit.search(line).group())]
        assert not stamped, f"{name} names commits: {stamped[:3]}"
