"""The authors' own EGSM and gMatch binaries as engines of the experiments: a column beside gpusm's.

``make authors`` builds them with the anchors' ``build.sh`` from the authors' sources at the
pinned commits (``../shared/anchors/README.md``: MIT-licensed, fetched into a git-ignored
``.anchors/src``, never copied into this repository); it needs a CUDA toolkit (``nvcc``). The
engines here answer one query per call through the anchors' ``run.sh`` (the binary reads the data
graph and the query from ``.graph`` text files): ``enumerate`` is the binary's own search time
(``join_ms``, the figure the authors report), ``filter`` its preprocessing (``pre_ms``), and the
process's wall time (graph loading and CUDA context included) is the ``wall_ms`` statistic.

:func:`authors_configs` gives the column(s) an experiment adds when the binary is there, and
:func:`authors_reason` names why it is not (no toolkit, not built), which the reports print.
Where to look: ``$GPUSM_ANCHORS`` (default ``.anchors`` in the checkout) holds ``run.sh``;
``$ANCHORS_WORK`` (default ``/tmp/anchors``) the build; ``EGSM_BIN`` / ``GMATCH_BIN`` override
a binary's path, as in ``run.sh``.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common.engine import Engine, register
from common.io import write_graph
from common.result import MatchResult, Status

from ..harness.core import Config

ROOT = Path(__file__).resolve().parents[2]
BINARIES = {"egsm-authors": ("egsm", "EGSM_BIN", "src/egsm/build/EGSM"),
            "gmatch-authors": ("gmatch", "GMATCH_BIN", "src/gmatch/bitmap/build/SubgraphMatching")}
"""Engine name -> (run.sh's engine, the environment variable of its binary, its path under ANCHORS_WORK)."""


def anchors_dir() -> Path:
    return Path(os.environ.get("GPUSM_ANCHORS", ROOT / ".anchors"))


def binary(engine: str) -> Path:
    tool, variable, relative = BINARIES[engine]
    return Path(os.environ.get(variable) or Path(os.environ.get("ANCHORS_WORK", "/tmp/anchors")) / relative)


def authors_reason(engine: str) -> str | None:
    """Why the authors' binary behind ``engine`` cannot run here (None: it can)."""
    if not binary(engine).exists():
        if shutil.which("nvcc") is None:
            return ("the authors' column is skipped: no CUDA toolkit here (nvcc not found), "
                    "so make authors cannot build it")
        return f"the authors' column is skipped: {binary(engine)} is not built (run make authors)"
    if not (anchors_dir() / "run.sh").exists():
        return (f"the authors' column is skipped: {anchors_dir() / 'run.sh'} not found "
                "(copy ../shared/anchors/*.sh there; ../shared/anchors/README.md)")
    return None


def authors_configs(engine: str, label: str) -> tuple:
    """``(Config(label, engine),)`` where the binary is built, else ``()``."""
    return (Config.of(label, engine),) if authors_reason(engine) is None else ()


class AuthorsBinary(Engine):
    """One of the authors' binaries, run once per query by the anchors' ``run.sh`` (module docstring)."""

    name = ""
    tool = ""

    def _prepare(self, data) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix=f"gpusm-{self.tool}-"))
        self._data_file = self._folder / "data.graph"
        write_graph(data, self._data_file)

    def _match(self, query, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        if collect or homomorphic or limit is not None:
            return MatchResult(self.name, 0, Status.UNSUPPORTED,
                               reason="the authors' binaries only count embeddings (no limit, collect or homomorphism)")
        queries = self._folder / "queries"
        shutil.rmtree(queries, ignore_errors=True)
        queries.mkdir()
        write_graph(query, queries / "q.graph")
        out = self._folder / "out.csv"
        env = dict(os.environ, LOGDIR="none", DATASET="data")
        limit_s = f"{timeout_s:g}" if timeout_s is not None else "86400"
        start = time.perf_counter()
        done = subprocess.run(["bash", str(anchors_dir() / "run.sh"), self.tool, str(self._data_file),
                               str(queries), "-", str(out), limit_s], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0 or not out.exists():
            return MatchResult(self.name, 0, Status.UNSUPPORTED,
                               reason=f"run.sh failed ({done.returncode}): {done.stderr.strip()[-300:]}")
        row = next(csv.DictReader(out.open()))
        outcome = row.get("correct", "")
        status = {"timeout": Status.TIMEOUT, "unsupported": Status.UNSUPPORTED}.get(outcome, Status.OK)
        if outcome == "error" or (status is Status.OK and not row.get("count")):
            return MatchResult(self.name, 0, Status.UNSUPPORTED,
                               reason=f"the binary printed no count (rc {row.get('rc')})")
        phases = {"filter": float(row.get("pre_ms") or 0) / 1e3, "enumerate": float(row.get("join_ms") or 0) / 1e3}
        return MatchResult(self.name, int(row.get("count") or 0), status, phases=phases,
                           reason="" if status is Status.OK else f"run.sh: {outcome} (rc {row.get('rc')})",
                           stats={"wall_ms": float(row.get("wall_ms") or wall * 1e3),
                                  "binary": str(binary(self.name))})


class EGSMAuthors(AuthorsBinary):
    name = "egsm-authors"
    tool = "egsm"


class GMatchAuthors(AuthorsBinary):
    name = "gmatch-authors"
    tool = "gmatch"


for _engine, _cls in (("egsm-authors", EGSMAuthors), ("gmatch-authors", GMatchAuthors)):
    if authors_reason(_engine) is None:
        register(_engine, _cls)
