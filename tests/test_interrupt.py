"""Ctrl-C keeps what finished and says how to resume; the simulator gets a scale it can run.

The Ctrl-C tests run real commands in subprocesses on tiny inputs, send SIGINT once some work is
done, and expect exit 130 within seconds, no traceback, the finished rows and a resume line.
"""

from __future__ import annotations

import importlib.util
import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from _subprocess import python_env
from common.gpu.backend import BACKEND
from common.graph.generate import pattern, rmat
from common.graph.io import write_graph
from common.interrupt import INTERRUPTED, Tally, interruptible

ROOT = Path(__file__).resolve().parents[1]
simulator_only = pytest.mark.skipif(BACKEND != "simulator", reason="the simulator's defaults")


class Running:
    """A command whose stdout and stderr are read as they come."""

    def __init__(self, command: list[str], cwd: Path, extra_env: dict | None = None, **options):
        env = python_env(PYTHONUNBUFFERED="1", **(extra_env or {}))
        self.proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, **options)
        self.out, self.err = bytearray(), bytearray()
        self.readers = [threading.Thread(target=self._read, args=(s, b), daemon=True)
                        for s, b in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream, into: bytearray) -> None:
        for chunk in iter(lambda: stream.read1(4096), b""):
            into.extend(chunk)

    def wait_for(self, pattern: str, seconds: float = 240) -> None:
        ends = time.monotonic() + seconds
        while not re.search(pattern.encode(), bytes(self.out + self.err)):
            assert self.proc.poll() is None, f"ended first: {self.text()}"
            assert time.monotonic() < ends, f"no {pattern!r} in {seconds} s: {self.text()}"
            time.sleep(0.1)

    def interrupt(self) -> float:
        """SIGINT; the seconds until the command ended."""
        began = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        for reader in self.readers:
            reader.join(5)
        return time.monotonic() - began

    def text(self) -> str:
        return (self.out + self.err).decode(errors="replace")


def test_interruptible_saves_prints_and_exits_130(capsys):
    saved = []
    with pytest.raises(SystemExit) as stop:
        with interruptible("cmd --resume", save=lambda t: saved.append(list(t.rows)), total=3, unit="rows") as tally:
            tally.rows.append(1)
            tally.done = 1
            raise KeyboardInterrupt
    assert stop.value.code == INTERRUPTED and saved == [[1]]
    assert capsys.readouterr().err.strip() == "interrupted: 1 of 3 rows done; resume with: cmd --resume"
    assert isinstance(tally, Tally)


@pytest.mark.slow
def test_ctrl_c_in_a_folder_run_of_gpusm_match_prints_the_finished_rows(tmp_path):
    write_graph(rmat(300, 3000, seed=3, name="hubs"), tmp_path / "data.graph")
    (tmp_path / "q").mkdir()
    for i in range(12):                      # each runs to its 0.5 s timeout on the cpu engine
        write_graph(pattern("P4" if i % 2 else "P5"), tmp_path / "q" / f"q{i:02d}.graph")
    run = Running([sys.executable, "-m", "gpusm", "match", "data.graph", "q", "-e", "cpu", "--timeout", "0.5",
                   "--format", "csv"], tmp_path)
    run.wait_for(r"\b3/12\b")
    seconds = run.interrupt()
    err = run.err.decode()
    assert run.proc.returncode == 130 and seconds < 5, run.text()
    assert "Traceback" not in err
    done = pd.read_csv(__import__("io").StringIO(run.out.decode()))
    assert len(done) >= 3 and list(done["query"]) == [f"q{i:02d}" for i in range(len(done))]
    line = re.search(r"interrupted: (\d+) of 12 queries done.*resume with: gpusm match .* --skip (\d+)", err)
    assert line and int(line[1]) == int(line[2]) == len(done), err


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("greenlet") is None, reason="the CUDA simulator needs greenlet")
def test_ctrl_c_in_bench_check_writes_the_rows_and_resume_finishes(tmp_path):
    command = [sys.executable, "-m", "experiments.bench.check", "--engines", "cpu,gsi", "--sets", "hprd",
               "--queries", "8", "--smallest"]
    slow = {"NUMBA_ENABLE_CUDASIM": "1"}     # on a GPU the eight queries end before a Ctrl-C can land
    run = Running(command, tmp_path, slow)
    run.wait_for(r"gsi +query_dense_16_\d+ +ok")
    seconds = run.interrupt()
    err = run.err.decode()
    assert run.proc.returncode == 130 and seconds < 5, run.text()
    assert "Traceback" not in err
    rows = pd.read_csv(tmp_path / "check.partial.csv")
    assert len(rows) >= 9 and set(rows["engine"]) == {"cpu", "gsi"}
    assert f"interrupted: {len(rows)} of 16 rows done" in err
    resume = re.search(r"resume with: python -m experiments.bench.check (.*)$", err, re.M)
    assert resume and "--out check.partial.csv --resume" in resume[1]
    again = subprocess.run([sys.executable, "-m", "experiments.bench.check", *resume[1].split()], cwd=tmp_path,
                           env=python_env(**slow), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("  cpu ") == 0 and "no wrong count" in again.stdout      # only the rest ran
    assert len(pd.read_csv(tmp_path / "check.partial.csv")) == 16


@pytest.mark.slow
def test_ctrl_c_stops_the_parallel_launcher_and_its_sets(tmp_path):
    # the launcher itself (python -m experiments --gpus refuses on a machine without GPUs)
    script = ("import sys; from experiments import PAPERS; from experiments.cli import launch; "
              "sys.exit(launch(list(PAPERS), ['0'], 'tiny', 'out', None, 'python -m experiments --all'))")
    run = Running([sys.executable, "-c", script], tmp_path)
    run.wait_for(r"GPU 0: ")
    first = tmp_path / "out" / "gsi_icde20" / "run.log"
    ends = time.monotonic() + 120
    while not (first.exists() and "gsi_icde20." in first.read_text()):   # the set has started
        assert run.proc.poll() is None and time.monotonic() < ends, run.text()
        time.sleep(0.2)
    seconds = run.interrupt()
    err = run.err.decode()
    assert run.proc.returncode == 130 and seconds < 5, run.text()
    assert "Traceback" not in err
    assert re.search(r"interrupted: 0 of 6 sets done .*; resume with: python -m experiments --all", err), err
    time.sleep(3)                            # nothing more is launched
    logs = sorted(p.parent.name for p in (tmp_path / "out").glob("*/run.log"))
    assert logs == ["gsi_icde20"], logs
    assert "interrupted" in first.read_text()      # the set was stopped, not left running


@simulator_only
def test_the_default_scale_follows_the_backend(tmp_path):
    from experiments.cli import default_scale

    assert default_scale() == "tiny"
    make = subprocess.run(["make", "-n", "experiment-gsi", "STAMP="], cwd=ROOT, capture_output=True, text=True)
    if make.returncode == 0:                 # make installed: the Makefile no longer forces small
        assert "--scale" not in make.stdout and "--paper gsi_icde20" in make.stdout


@simulator_only
def test_a_larger_scale_in_the_simulator_warns_and_goes_on_without_a_terminal(tmp_path):
    out = subprocess.run([sys.executable, "-m", "experiments", "--paper", "stwig_lin14", "--scale", "small",
                          "--budget", "0", "--out", str(tmp_path), "--quiet"], stdin=subprocess.DEVNULL,
                         env=python_env(), capture_output=True, text=True, timeout=600)
    warning = re.search(r"warning: no GPU, kernels run in the CUDA simulator: --scale small takes about (\d+) min",
                        out.stderr)
    assert warning and "--scale tiny about" in out.stderr, out.stderr
    assert (tmp_path / "stwig_lin14" / "run.small.json").exists()       # it went on


@simulator_only
def test_a_larger_scale_in_the_simulator_asks_at_a_terminal(tmp_path):
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "experiments", "--paper", "stwig_lin14", "--scale", "small",
                             "--out", str(tmp_path)], stdin=secondary, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=python_env(), text=True)
    os.close(secondary)
    os.write(primary, b"n\n")
    _, err = proc.communicate(timeout=300)
    os.close(primary)
    assert proc.returncode == 1 and "warning: no GPU" in err and "not run" in err, err
    assert not (tmp_path / "stwig_lin14").exists()


@pytest.mark.slow
@simulator_only
def test_the_simulator_plan_is_within_2x_of_a_tiny_run(tmp_path):
    from experiments.cli import simulator_plan

    estimate = simulator_plan({"stwig_lin14": None}, "tiny")["stwig_lin14"]
    for out in ("first", "timed"):           # the first fills numba's disk cache (a fresh clone's first run)
        began = time.monotonic()
        subprocess.run([sys.executable, "-m", "experiments", "--paper", "stwig_lin14", "--out", str(tmp_path / out),
                        "--quiet"], env=python_env(), capture_output=True, timeout=600,
                       check=True)
        took = time.monotonic() - began
    assert estimate / 2 <= took <= estimate * 2, (estimate, took)
