"""The authors' own EGSM and gMatch binaries as engines of the experiments: a column beside gpusm's.

``make authors`` builds them with the anchors' ``build.sh`` from the authors' sources at the
pinned commits (``docs/authors.md``: MIT-licensed, fetched into a git-ignored
``.anchors/src``, never copied into this repository); it needs a CUDA toolkit (``nvcc``). The
engines here answer one query per call through the anchors' ``run.sh`` (the binary reads the data
graph and the query from ``.graph`` text files): ``enumerate`` is the binary's own search time
(``join_ms``, the figure the authors report), ``filter`` its preprocessing (``pre_ms``), the
process's wall time is the ``wall_ms`` statistic and its start-up (wall minus the two printed
times: graph loading, CUDA context, exit) the ``startup_ms`` statistic.

The time limit is the search's, as for gpusm's engines: the process runs under the limit plus a
start-up allowance (:meth:`AuthorsBinary.allowance_s`), and a query is ``timeout`` only when the
printed search time passed the limit or the process was killed at limit plus allowance.

:func:`authors_configs` gives the column(s) an experiment adds when the binary is there, and
:func:`authors_reason` names why it is not (no toolkit, not built), which the reports print.
Where to look: ``$GPUSM_ANCHORS`` (default ``.anchors`` in the checkout) holds ``run.sh``;
``$ANCHORS_WORK`` (default ``/tmp/anchors``) the build; ``EGSM_BIN`` / ``GMATCH_BIN`` override
a binary's path, as in ``run.sh``.
"""

from __future__ import annotations

import atexit
import csv
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common.engine.base import Engine
from common.engine.registry import register
from common.engine.result import MatchResult, Status
from common.graph.io import write_graph
from common.graph.model import Graph

from ..harness.core import Config

ROOT = Path(__file__).resolve().parents[2]
BINARIES = {"egsm-authors": ("egsm", "EGSM_BIN", "src/egsm/build/EGSM"),
            "gmatch-authors": ("gmatch", "GMATCH_BIN", "src/gmatch/bitmap/build/SubgraphMatching")}
"""Engine name -> (run.sh's engine, the environment variable of its binary, its path under ANCHORS_WORK)."""

PROBE_LIMIT_S = 120.0
"""Process limit of the start-up probe (a one-edge query)."""
UNMEASURED_ALLOWANCE_S = 5.0
"""Start-up allowance while none is measured (the probe printed no search time)."""
ALLOWANCE_FACTOR, ALLOWANCE_MARGIN_S = 2.0, 1.0
"""The process limit is ``limit + ALLOWANCE_FACTOR * allowance + ALLOWANCE_MARGIN_S``: room for a
query whose preprocessing or loading is slower than any measured so far."""


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
                "(make authors copies experiments/anchors/*.sh there; docs/authors.md)")
    return None


def authors_configs(engine: str, label: str) -> tuple:
    """``(Config(label, engine),)``, optional: a column on every host (so the claims and the
    generated results README do not depend on the host), run where the binary is built."""
    return (Config(label, engine, optional=True),)


def failure_line(output: str, width: int = 200) -> str:
    """The line of a binary's output that says why it stopped: the last that names an assertion, an
    error or an exception (else its last line), cut to ``width`` characters from its start."""
    lines = output.strip().splitlines() or [""]
    named = [line for line in lines if re.search(r"assert|error|what\(\)|abort|exception", line, re.I)]
    return (named or lines)[-1].strip()[:width]


def graph_digest(graph: Graph) -> str:
    """A digest of a graph's arrays: the same data graph, whatever object holds it."""
    digest = hashlib.blake2b(digest_size=16)
    for array in (graph.offsets, graph.neighbors, graph.labels, graph.edge_labels):
        digest.update(b"-" if array is None else np.ascontiguousarray(array).tobytes())
    digest.update(b"directed" if graph.directed else b"undirected")
    return digest.hexdigest()


@dataclass
class GraphInputs:
    """What a process keeps of one data graph for one binary across the engines prepared on it (a
    harness worker prepares one per job, and a paper's points share graphs): the folder its input
    files are written in, those files, and the start-up allowance measured on it."""

    folder: Path
    written: dict = field(default_factory=dict)
    allowance_s: float | None = None        # None: not probed yet
    measured: bool = False                  # a run printed its search time


_GRAPH_INPUTS: dict[tuple, GraphInputs] = {}


def graph_inputs(system: str, graph: Graph, binaries=()) -> GraphInputs:
    """The :class:`GraphInputs` of ``system`` (run through the files ``binaries``: another build, or
    one rebuilt since, measures its own allowance) on ``graph`` in this process, made on first use;
    the folders are removed when the process exits."""
    builds = tuple((str(path), Path(path).stat().st_mtime_ns if Path(path).exists() else None) for path in binaries)
    key = (system, builds, graph_digest(graph))
    if key not in _GRAPH_INPUTS or not _GRAPH_INPUTS[key].folder.is_dir():
        _GRAPH_INPUTS[key] = GraphInputs(Path(tempfile.mkdtemp(prefix=f"gpusm-{system}-")))
    return _GRAPH_INPUTS[key]


@atexit.register
def _remove_graph_inputs() -> None:
    for inputs in _GRAPH_INPUTS.values():
        shutil.rmtree(inputs.folder, ignore_errors=True)


class PrintedSearchBinary(Engine):
    """An external binary judged on the search time it prints (module docstring): its process
    gets the limit plus :data:`ALLOWANCE_FACTOR` start-up allowances (``allowance_s``, measured by
    the subclass) plus :data:`ALLOWANCE_MARGIN_S`.

    Parameters
    ----------
    probe_limit_s : float
        Most seconds of the start-up probe's process (default :data:`PROBE_LIMIT_S`); a caller
        with a time budget (the competitors' bench) passes what is left of it, so no probe
        outlives the budget.
    """

    #: a fresh process every run: nothing of a first run carries over but the operating system's
    #: file cache, and the search time it prints leaves out the load; a warm-up is a wasted process
    warm_up_helps = False

    def __init__(self, *, probe_limit_s: float = PROBE_LIMIT_S, **options):
        super().__init__(**options)
        if not probe_limit_s > 0:
            raise ValueError(f"probe_limit_s must be positive, got {probe_limit_s!r}")
        self.probe_limit_s = float(probe_limit_s)

    @classmethod
    def planned_start_up_s(cls, num_edges: int) -> float | None:
        """Not modelled: the process loads the data graph, in a time of its own per binary."""
        return None

    def _share_inputs(self, system: str, binaries) -> None:
        """Take the folder, written files and allowance this process keeps for ``system``'s
        ``binaries`` on the data graph (:func:`graph_inputs`)."""
        self._inputs = graph_inputs(system, self.data, binaries)
        self._folder = self._inputs.folder

    def allowance_s(self) -> float:
        """Seconds the process needs beside its search on this data graph (start-up, preprocessing, exit).

        Measured, not assumed, once per data graph in this process (:func:`graph_inputs`): the first
        call runs the binary on the subclass's tiny probe query (:meth:`_probe_overhead_s`) and
        takes its wall minus its printed search time; every later run that prints its search time
        raises it to its own wall minus search if that is larger. Until a run prints one,
        :data:`UNMEASURED_ALLOWANCE_S`.
        """
        inputs = self._inputs
        if inputs.allowance_s is None:
            inputs.allowance_s = UNMEASURED_ALLOWANCE_S
            overhead_s = self._probe_overhead_s()
            if overhead_s is not None:
                inputs.allowance_s, inputs.measured = overhead_s, True
        return inputs.allowance_s

    def _probe_overhead_s(self) -> float | None:
        """The wall minus the printed search of one run on a probe query whose search is trivial
        (None: no probe query here, or the run printed no search time)."""
        return None

    def _process_limit(self, timeout_s: float | None) -> float | None:
        if timeout_s is None:
            return None
        return timeout_s + self.wall_beyond_limit_s()

    def wall_beyond_limit_s(self) -> float:
        """The process's room beyond the limit: :data:`ALLOWANCE_FACTOR` start-up allowances plus
        :data:`ALLOWANCE_MARGIN_S` (the allowance measured now if it was not yet)."""
        return ALLOWANCE_FACTOR * self.allowance_s() + ALLOWANCE_MARGIN_S

    def _learn_overhead(self, overhead_s: float) -> None:
        """A run that printed its search time: the allowance is at least its wall minus that search
        (after the probe; before one, the first such run replaces the unmeasured default)."""
        inputs = self._inputs
        if inputs.allowance_s is not None:
            inputs.allowance_s = max(inputs.allowance_s, overhead_s) if inputs.measured else overhead_s
            inputs.measured = True

    def _killed(self, process_limit: float, timeout_s: float, stats: dict) -> MatchResult:
        return MatchResult(self.name, 0, Status.TIMEOUT, stats=stats,
                           reason=(f"the process was killed at {process_limit:.2f} s (limit {timeout_s:g} s "
                                   f"+ start-up allowance) before it printed its search time"))

    def _judged(self, count: int, phases: dict, timeout_s: float | None, stats: dict) -> MatchResult:
        """``ok``, or ``timeout`` (the count kept) when the printed search passed the limit."""
        status, reason = Status.OK, ""
        if timeout_s is not None and phases["enumerate"] > timeout_s:
            status = Status.TIMEOUT
            reason = f"the binary's search took {phases['enumerate']:.3f} s, past the limit of {timeout_s:g} s"
        return MatchResult(self.name, count, status, phases=phases, reason=reason, stats=stats)


class AuthorsBinary(PrintedSearchBinary):
    """One of the authors' binaries, run once per query by the anchors' ``run.sh`` (module docstring)."""

    name = ""
    tool = ""

    def _prepare(self, data) -> None:
        self._share_inputs(self.tool, (binary(self.name), anchors_dir() / "run.sh"))
        self._data_file = self._folder / "data.graph"
        if "data" not in self._inputs.written:
            write_graph(data, self._data_file)
            self._inputs.written["data"] = self._data_file

    def _probe_overhead_s(self) -> float | None:
        """On a one-edge query of the data graph (:func:`probe_query`)."""
        probe = probe_query(self.data)
        if probe is None:
            return None
        row, _ = self._run(probe, self.probe_limit_s)
        return _overhead_s(row) if row is not None and row.get("count") and row.get("join_ms") else None

    def _run(self, query, process_limit_s: float | None):
        """run.sh on one query: (its CSV row, None) or (None, why it failed)."""
        queries = self._folder / "queries"
        shutil.rmtree(queries, ignore_errors=True)
        queries.mkdir()
        write_graph(query, queries / "q.graph")
        out = self._folder / "out.csv"
        out.unlink(missing_ok=True)
        logs = self._folder / "logs"                 # run.sh's per-query output: q.log
        shutil.rmtree(logs, ignore_errors=True)
        env = dict(os.environ, LOGDIR=str(logs), DATASET="data")
        limit_s = f"{process_limit_s:.3f}" if process_limit_s is not None else "86400"
        done = subprocess.run(["bash", str(anchors_dir() / "run.sh"), self.tool, str(self._data_file),
                               str(queries), "-", str(out), limit_s], env=env, capture_output=True, text=True)
        if done.returncode != 0 or not out.exists():
            return None, f"run.sh failed ({done.returncode}): {done.stderr.strip()[-300:]}"
        return next(csv.DictReader(out.open())), None

    def _match(self, query, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        if collect or homomorphic or limit is not None:
            return MatchResult(self.name, 0, Status.UNSUPPORTED,
                               reason="the authors' binaries only count embeddings (no limit, collect or homomorphism)")
        process_limit = self._process_limit(timeout_s)
        start = time.perf_counter()
        row, failure = self._run(query, process_limit)
        wall = time.perf_counter() - start
        if row is None:
            return MatchResult(self.name, 0, Status.ERROR, reason=failure)
        outcome = row.get("correct", "")
        if outcome == "unsupported":
            return MatchResult(self.name, 0, Status.UNSUPPORTED, reason=f"run.sh: unsupported (rc {row.get('rc')})")
        stats = {"wall_ms": float(row.get("wall_ms") or wall * 1e3), "binary": str(binary(self.name))}
        if process_limit is not None:
            stats["process_limit_s"] = round(process_limit, 3)
        if outcome == "timeout":
            return self._killed(process_limit, timeout_s, stats)
        if outcome == "error" or not row.get("count"):
            log = self._folder / "logs" / "q.log"
            said = failure_line(log.read_text(errors="replace")) if log.exists() else ""
            said = f": {said}" if said else ""
            return MatchResult(self.name, 0, Status.ERROR,
                               reason=f"the binary printed no count (rc {row.get('rc')}){said}")
        phases = {"filter": float(row.get("pre_ms") or 0) / 1e3, "enumerate": float(row.get("join_ms") or 0) / 1e3}
        if row.get("join_ms"):
            stats["startup_ms"] = round(stats["wall_ms"] - float(row.get("pre_ms") or 0) - float(row["join_ms"]), 1)
            self._learn_overhead(_overhead_s(row))
        return self._judged(int(row["count"]), phases, timeout_s, stats)

    def match_batch(self, queries, **options) -> list[MatchResult]:
        """The base class's, with ``deadline_overrun_s`` the printed search's overrun (none for a killed process)."""
        results = super().match_batch(queries, **options)
        timeout_s = options.get("timeout_s")
        for result in results:
            if result.status is Status.TIMEOUT and timeout_s is not None:
                if "enumerate" in result.phases:
                    result.stats["deadline_overrun_s"] = round(max(0.0, result.phases["enumerate"] - timeout_s), 3)
                else:
                    result.stats.pop("deadline_overrun_s", None)
        return results


def _overhead_s(row: dict) -> float:
    """A run.sh row's process wall minus the binary's printed search time, in seconds."""
    return max(0.0, float(row.get("wall_ms") or 0) - float(row.get("join_ms") or 0)) / 1e3


def probe_query(data: Graph) -> Graph | None:
    """A one-edge query whose labels are those of the data graph's rarest edge label pair (None without edges)."""
    src, dst, elab = data.edges()
    if len(src) == 0:
        return None
    a, b = data.labels[src].astype(np.int64), data.labels[dst].astype(np.int64)
    pairs = np.minimum(a, b) * (int(data.labels.max()) + 1) + np.maximum(a, b)
    _, inverse, counts = np.unique(pairs, return_inverse=True, return_counts=True)
    i = int(np.argmin(counts[inverse]))
    return Graph.from_edges(2, [0], [1], labels=[a[i], b[i]], edge_labels=None if elab is None else [elab[i]],
                            name="startup-probe")


class EGSMAuthors(AuthorsBinary):
    name = "egsm-authors"
    tool = "egsm"


class GMatchAuthors(AuthorsBinary):
    name = "gmatch-authors"
    tool = "gmatch"


for _engine, _cls in (("egsm-authors", EGSMAuthors), ("gmatch-authors", GMatchAuthors)):
    if authors_reason(_engine) is None:
        register(_engine, _cls)
