"""Regression gate: every engine of the working tree against a baseline revision, on one GPU, in
one run.

``python -m experiments.bench.regress [--baseline REV] [--engines gsi,egsm] [--groups small,heavy]``

The baseline (default: the commit in ``docs/baseline.txt``) is exported with ``git archive``. One
worker process per revision keeps each engine prepared on each data graph; the parent sends both
workers the same queries, one at a time, alternating which goes first. Every query is answered
once untimed, then timed ``--repeats`` times per revision with ``--limit-s`` as the deadline.
Workers speak JSON lines and use only the public API, so any revision with it can be the baseline.

Workloads (:func:`workloads`): ``small`` (HPRD dense-16, GitHub Q_0-Q_10, yeast dense-8) and
``heavy`` (the 11 rw12 queries the gMatch authors' build solves in 8 s, P1-P9 on unlabelled
GitHub, yeast's dense-16 and sparse-16 queries with the largest known counts up to
:data:`YEAST_HEAVY_CAP`, and the first :data:`FAMILY_QUERIES` of each generated slow-path
family on GitHub, :data:`experiments.harness.workloads.HEAVY_FAMILIES`, no known counts: the
revisions must agree). A query neither revision finishes is left out of the ratios; one only
one finishes counts with the limit as the other's time (a lower bound, marked ``>``).

``--processes K`` measures each revision in K worker processes, each holding the card in its
turn, and pools their runs: a query's median over K processes (docs/decisions.md, "The regression
gate's run shape", processes per revision). The workers run on the host CPUs of the GPU's NUMA
node where sysfs names them (``--pin gpu``, the default).

Output: per engine and workload the queries compared, median and worst ratio new/old of the
median wall of ``match()``, the worst query and the count check; a CSV of every query with each
timed run's wall (``--out``).
Exit status 1 on a wrong or disagreeing count. docs/decisions.md ("The regression gate's run
shape") says why the revisions share one run and, by default, hold the card in turns.

``--gpus 0,1,2,3`` spreads the gate over GPUs of one host: each (engine, group) is one run of
this command on one GPU (``CUDA_VISIBLE_DEVICES``), both revisions in it as on one GPU, the GPUs
taking the next pair as they finish, heavy groups first; the summaries join into one table
(:func:`run_on_gpus`).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common.engine.registry import gpu_engines, kernel_packages
from common.gpu.backend import gpu_local_cpus
from common.interrupt import INTERRUPTED, command_line, interruptible

from . import note_simulator

ROOT = Path(__file__).resolve().parents[2]
BASELINE_FILE = ROOT / "docs" / "baseline.txt"
ENGINES = gpu_engines()
GROUPS = ("small", "heavy")
#: Targets of the gate: a heavy query's worst ratio and a small workload's median ratio.
HEAVY_WORST = 1.10
#: yeast's heavy queries: the largest known counts up to this (enumerable within seconds).
YEAST_HEAVY_CAP = 2 * 10**9
#: queries of each generated heavy family (``github-dense12``, ``github-cyclic8``) in the heavy group.
FAMILY_QUERIES = 12
#: Deadline of a workload's ``before`` query: short enough that every engine times out on it.
BEFORE_S = 0.25
SMALL_MEDIAN = 1.05
#: Seconds a run interrupted by ``--stop-after-s`` has to save its finished workloads.
STOP_GRACE_S = 60.0


# ---------------------------------------------------------------------- workloads
@dataclass
class Workload:
    """A data graph (a file both revisions can read) and its queries (name, file, known count)."""

    name: str
    group: str
    data: str
    queries: list = field(default_factory=list)
    #: a query file run (untimed, :data:`BEFORE_S` deadline, so it times out) before every run of
    #: every query: the engine's state after a timed-out query is what those runs meet
    before: str | None = None


def _largest_yeast(kind: str, keep: int, cap: int) -> tuple:
    """yeast's ``kind`` queries with the ``keep`` largest known counts of at most ``cap``."""
    from experiments.harness.workloads import yeast_queries

    spec = yeast_queries(kind, max_known_count=cap)
    queries, known = spec.build(None, None, _full())
    ranked = sorted(queries, key=lambda q: -known[q.name])
    return ranked[:keep], known


def _full():
    from experiments.harness.workloads import SCALES

    return SCALES["full"]


def workloads(groups, workdir: Path, max_queries: int | None = None) -> list[Workload]:
    """The regression workloads of ``groups``, with derived graphs written under ``workdir``.

    ``max_queries`` keeps the first that many queries of each workload (a quick run)."""
    from common.graph.io import save_graph
    from experiments.harness import workloads as w

    out = []
    files = {}

    def write(graph, name: str) -> str:
        if name not in files:
            path = workdir / f"{name}.graph"
            save_graph(graph, path, "graph")
            files[name] = str(path)
        return files[name]

    def add(name, group, data_path, queries, known):
        picked = queries if max_queries is None else queries[:max_queries]
        out.append(Workload(name, group, data_path, [
            (q.name, write(q, f"{name}-{i}-q"), known.get(q.name)) for i, q in enumerate(picked)]))

    data_root = w.data_dir()
    if "small" in groups:
        for name, dataset, spec in (("hprd-dense16", w.HPRD, w.HPRD_DENSE_16),
                                    ("github-q", w.GITHUB, w.GITHUB_Q),
                                    ("yeast-dense8", w.YEAST, w.yeast_queries("dense_8"))):
            queries, known = spec.build(None, dataset, _full())
            add(name, "small", str(data_root / dataset.path), queries, known)
    if "heavy" in groups:
        rw12, known = w.GITHUB_RW12.build(None, w.GITHUB, _full())
        queries = [q for q in rw12 if q.name in known]      # the 11 the authors' gMatch solves in 8 s
        add("github-rw12", "heavy", str(data_root / w.GITHUB.path), queries, known)
        unsolved = [q for q in rw12 if q.name not in known][:1]   # hours for every engine: a timeout
        if unsolved:
            add("github-rw12-after-timeout", "heavy", str(data_root / w.GITHUB.path), queries, known)
            out[-1].before = write(unsolved[0], "github-rw12-unsolved-q")
        dataset, (spec,) = w.CROSS_CHECKED["patterns"]
        data = dataset.load(_full())
        queries, known = spec.build(data, dataset, _full())
        add("github-patterns", "heavy", write(data, "github-unlabelled"), queries, known)
        yq, yk = [], {}
        for kind in ("dense_16", "sparse_16"):
            queries, known = _largest_yeast(kind, 4, YEAST_HEAVY_CAP)
            yq += queries
            yk.update(known)
        add("yeast-16", "heavy", str(data_root / w.YEAST.path), yq, yk)
        github = w.GITHUB.load(_full())
        for family in w.HEAVY_FAMILIES:
            add(f"github-{family}", "heavy", str(data_root / w.GITHUB.path),
                w.heavy_family(github, family, FAMILY_QUERIES), {})
    return out


# ---------------------------------------------------------------------- revisions and workers
def baseline_default() -> str:
    """The commit named in ``docs/baseline.txt`` (its first word)."""
    return BASELINE_FILE.read_text().split()[0]


#: What a worker imports: the revision's packages (data files are read from the working tree).
CODE = (*kernel_packages(), "experiments", "pyproject.toml")


def export(rev: str, dest: Path) -> Path:
    """The code (:data:`CODE`) of ``rev`` extracted into ``dest`` with ``git archive``; returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "--", *CODE], check=True,
                             capture_output=True).stdout
    tar_path = dest.with_suffix(".tar")
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(dest, filter="data")
    tar_path.unlink()
    return dest


def resolve(rev: str, dest: Path) -> tuple[str, Path]:
    """(label, code folder) of a revision argument: ``REV`` is exported into ``dest``;
    ``LABEL=FOLDER`` names a folder exported earlier (e.g. where the run has no git history)."""
    if "=" in rev:
        label, folder = rev.split("=", 1)
        if not (Path(folder) / "common").is_dir():
            raise SystemExit(f"regress: {folder} holds no exported revision (no common/ package)")
        return label, Path(folder).resolve()
    return describe(rev), export(rev, dest)


def describe(rev: str) -> str:
    """``rev``'s short hash (``working tree`` for the checkout, with ``+changes`` when dirty)."""
    if rev == "HEAD+":
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + ("+changes" if dirty else "")
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev],
                          capture_output=True, text=True, check=True).stdout.strip()


# The worker: reads one JSON request a line, answers one JSON line. Only the public API.
WORKER = r"""
import json, os, sys, time, traceback
if os.environ.get("GPUSM_PIN_CPUS"):
    os.sched_setaffinity(0, {int(c) for c in os.environ["GPUSM_PIN_CPUS"].split(",")})
sys.path.insert(0, sys.argv[1])
import common
graphs, engines = {}, {}
out = sys.stdout
sys.stdout = sys.stderr
for line in sys.stdin:
    req = json.loads(line)
    try:
        if req["op"] == "prepare":
            key = (req["engine"], req["data"])
            if key not in engines:
                if req["data"] not in graphs:
                    graphs[req["data"]] = common.load_graph(req["data"])
                engines[key] = common.create_engine(req["engine"], **req.get("options", {}))
                engines[key].prepare(graphs[req["data"]])
            answer = {"ok": True}
        elif req["op"] == "match":
            engine = engines[(req["engine"], req["data"])]
            query = graphs.get(req["query"]) or common.load_graph(req["query"])
            graphs[req["query"]] = query
            if req.get("before"):
                before = graphs.get(req["before"]) or common.load_graph(req["before"])
                graphs[req["before"]] = before
                engine.match(before, timeout_s=req["before_s"])
            began = time.perf_counter()
            r = engine.match(query, timeout_s=req["timeout"])
            wall = time.perf_counter() - began
            answer = {"ok": True, "count": int(r.count), "status": r.status.value, "wall": wall,
                      "seconds": float(r.seconds), "peak": int(getattr(r, "peak_device_bytes", 0) or 0)}
        elif req["op"] == "drop":
            engines.clear()
            import gc
            gc.collect()
            try:
                from numba import cuda
                cuda.current_context().deallocations.clear()
            except Exception:
                pass
            answer = {"ok": True}
        else:
            answer = {"ok": False, "error": "unknown op"}
    except Exception as exc:
        answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
    out.write(json.dumps(answer) + "\n")
    out.flush()
"""


def worker_env(tree: Path, cpus: set[int] | None = None) -> dict:
    """A worker's environment: the revision's code first on the path, its CPUs, and a kernel
    cache of its own tree (``NUMBA_CACHE_DIR`` under this user's cache root, one folder per
    tree). The cache is keyed by the content of the kernel packages, one version per folder:
    revisions sharing a folder would each find the other's kernels stale and compile again in
    every process (``--processes``), a share of the gate's time measuring nothing."""
    from common.gpu.kernel_cache import cache_root

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))
    tag = hashlib.sha1(str(Path(tree).resolve()).encode()).hexdigest()[:12]
    env["NUMBA_CACHE_DIR"] = str(cache_root() / "gpusm-regress" / tag)
    if cpus:                                   # the worker pins itself before it imports anything
        env["GPUSM_PIN_CPUS"] = ",".join(str(c) for c in sorted(cpus))
    return env


class Worker:
    """One revision's worker process (module docstring)."""

    def __init__(self, label: str, tree: Path, log, cpus: set[int] | None = None):
        self.label, self.tree = label, tree
        env = worker_env(tree, cpus)
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, str(tree)], cwd=tree, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)

    def send(self, **request) -> None:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.label} exited (see its log)")
        return json.loads(line)

    def ask(self, **request) -> dict:
        """One request answered; the answer names this worker's process (``process``), so that a
        revision's runs pooled over several processes keep each one's level (:func:`process_levels`)."""
        self.send(**request)
        return dict(self.receive(), process=self.proc.pid)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:                        # killed (Ctrl-C) with a request unread
            pass
        self.proc.wait(timeout=60)


# ---------------------------------------------------------------------- measuring
@dataclass
class QueryRun:
    """One query on one engine: per revision, the statuses, counts and timed walls."""

    engine: str
    workload: str
    group: str
    query: str
    known: int | None
    runs: dict = field(default_factory=dict)          # label -> list of answers
    error: str = ""                                   # why the query was not run (an engine's prepare)

    def status(self, label: str) -> str:
        answers = self.runs.get(label, [])
        bad = [a["status"] for a in answers if a["status"] != "ok"]
        return bad[0] if bad else ("ok" if answers else "missing")

    def wall(self, label: str) -> float:
        walls = [a["wall"] for a in self.runs.get(label, []) if a["status"] == "ok"]
        return statistics.median(walls) if walls else math.nan

    def counts(self, label: str) -> set:
        return {a["count"] for a in self.runs.get(label, []) if a["status"] == "ok"}

    def peak(self, label: str) -> int:
        """The largest peak device memory (bytes) of the revision's timed runs (0: none)."""
        return max((a.get("peak", 0) for a in self.runs.get(label, [])), default=0)


def memory_share(revisions: int, reserve: int = 3 << 30, spare: float = 0.15) -> int | None:
    """Equal device memory per revision's engines: the GPU's free memory less a ``spare`` fraction
    (memory not yet returned to the driver after an engine is dropped), divided among them, less
    ``reserve`` (each process's CUDA context); None without a GPU (nvidia-smi).

    Engines grow their pools on demand and keep them (their budget is the card's free memory when
    they are prepared); with one process per revision on one card, the one that grew first
    starves the others, so each revision's engines get the same ``device_memory_limit``
    (``--own-memory`` turns this off; docs/decisions.md, "The regression gate's run shape")."""
    try:
        free_mib = subprocess.run(["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True, check=True).stdout.split()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return None
    return max(1 << 30, int((int(free_mib) << 20) * (1 - spare)) // revisions - reserve)


MODES = ("turns", "interleave", "share")


def measure(workers: list[Worker], engines, loads: list[Workload], *, repeats: int, limit_s: float,
            warm_s: float | None = None, options: dict | None = None, mode: str = "turns",
            progress=print, results: list | None = None, skip=frozenset()) -> list[QueryRun]:
    """Warm, then time every query of every workload on every engine.

    ``mode`` "turns" (the default): the revisions hold the card in turns, each (engine, workload)
    answered by one revision's engines alone, prepared and then dropped, the first revision one
    further on per workload; "interleave" and "share": every revision prepared at once, the
    queries alternating between them (see :func:`_measure_workload`). Each finished (engine,
    workload) is appended to ``results`` (a caller's list, kept when interrupted); the (engine,
    workload) pairs in ``skip`` are left out (measured by an earlier run, :func:`done_pairs`)."""
    results = [] if results is None else results
    labels = list(dict.fromkeys(w.label for w in workers))    # several processes may share a revision
    for engine in engines:
        for li, wl in enumerate(loads):
            if not wl.queries or (engine, wl.name) in skip:
                continue
            began = time.perf_counter()
            if mode == "turns":
                k = li % len(workers)
                groups = [[w] for w in workers[k:] + workers[:k]]
            else:
                groups = [workers]
            runs: list[QueryRun] = []
            for group in groups:
                got = _measure_workload(group, engine, wl, repeats=repeats, limit_s=limit_s,
                                        warm_s=warm_s, options=options, progress=progress)
                if not runs:
                    runs = got
                    continue
                for run, more in zip(runs, got):
                    for label, answers in more.runs.items():     # a revision's processes pooled
                        run.runs.setdefault(label, []).extend(answers)
                    run.error = "; ".join(e for e in (run.error, more.error) if e)
            results += runs
            table, _ = summarise(runs, labels[0], labels[1], limit_s)
            row = table.iloc[0]
            progress(f"  {engine:7s} {wl.name:18s} {len(wl.queries):4d} queries  "
                     f"{time.perf_counter() - began:6.1f} s  median {row['median']:.2f} worst {row['worst']:.2f} "
                     f"({row['worst_query']}) over limit new/old {row['over_limit_new']}/{row['over_limit_old']} "
                     f"counts {row['counts']}")
    return results


def _measure_workload(workers: list[Worker], engine: str, wl: Workload, *, repeats: int, limit_s: float,
                      warm_s: float | None, options: dict | None, progress) -> list[QueryRun]:
    """One (engine, workload) on ``workers``, prepared together and dropped at the end.

    One query answered by every worker at once first (the compile); then each query is answered
    once untimed by each revision in turn, with ``warm_s`` (default: twice the limit) as its
    deadline, since a first run also grows the engine's buffers (a revision that does not finish
    it is not timed: that timeout is its measurement), and ``repeats`` timed rounds follow with
    ``limit_s`` in the same order, so that with several workers every run follows another
    revision's run. Each query starts one revision further on than the one before. A timed run
    over the limit is a timeout. A workload's ``before`` query runs before every run."""
    warm_s = 2 * limit_s if warm_s is None else warm_s
    before = dict(before=wl.before, before_s=BEFORE_S) if wl.before else {}
    results = []
    began = time.perf_counter()
    for w in workers:
        w.send(op="prepare", engine=engine, data=wl.data, options=options or {})
    failed = []
    for w in workers:
        answer = w.receive()
        if not answer["ok"]:
            failed.append(f"{w.label}: {answer['error']}")
    if failed:                                 # a row that says so; the run goes on
        progress(f"  {engine:7s} {wl.name:18s} not run: prepare failed ({'; '.join(failed)})")
        for w in workers:
            w.ask(op="drop")
        return [QueryRun(engine, wl.name, wl.group, name, known, error="; ".join(failed))
                for name, _, known in wl.queries]
    prepared = time.perf_counter()
    first = dict(op="match", engine=engine, data=wl.data, query=wl.queries[0][1], timeout=warm_s)
    for w in workers:                          # compiles, all revisions at once
        w.send(**first)
    for w in workers:
        w.receive()
    progress(f"    {'/'.join(w.label for w in workers)}: prepared in {prepared - began:.1f} s, "
             f"first query (compiles) {time.perf_counter() - prepared:.1f} s")
    for qi, (name, path, known) in enumerate(wl.queries):
        run = QueryRun(engine, wl.name, wl.group, name, known)
        request = dict(op="match", engine=engine, data=wl.data, query=path, timeout=limit_s, **before)
        k = qi % len(workers)
        order = workers[k:] + workers[:k]      # this query's first revision: one further on
        warm = {}
        for w in order:
            pair = [warm.get(v.label) for v in workers[:2]]
            if len(workers) > 2 and w not in workers[:2] and all(a is not None and a["status"] != "ok"
                                                                 for a in pair):
                continue                       # new and old both over the limit: the rest untried
            warm[w.label] = w.ask(**dict(request, timeout=warm_s))
            if not warm[w.label]["ok"]:
                raise RuntimeError(f"{w.label}: {engine} {wl.name} {name}: {warm[w.label]['error']}")
        if all(a["status"] != "ok" for a in warm.values()):
            for label, a in warm.items():      # none finishes: no timing
                run.runs[label] = [a]
            results.append(run)
            progress(f"    {name}  over the limit: " + ", ".join(warm))
            continue
        for w in workers:
            if warm[w.label]["status"] != "ok":   # its timeout is its measurement
                run.runs[w.label] = [warm[w.label]]
        for r in range(repeats):
            for w in order:
                if warm.get(w.label, {}).get("status") == "ok":
                    run.runs.setdefault(w.label, []).append(w.ask(**request))
        results.append(run)
        progress("    " + name + "  " + "  ".join(
            f"{w.label} {run.status(w.label)} {1e3 * run.wall(w.label):.1f} ms" for w in workers))
    for w in workers:                          # its device memory back before the next graph
        w.ask(op="drop")
    return results


# ---------------------------------------------------------------------- summarising
def ratio(run: QueryRun, new: str, old: str, limit_s: float) -> tuple[float, bool]:
    """new/old median wall; (ratio, is_bound): a side that did not finish counts as the limit."""
    sn, so = run.status(new), run.status(old)
    if sn == "ok" and so == "ok":
        return run.wall(new) / run.wall(old), False
    if sn == "ok":
        return run.wall(new) / limit_s, True     # old timed out: at most this
    if so == "ok":
        return limit_s / run.wall(old), True     # new timed out: at least this
    return math.nan, False


def count_problems(run: QueryRun, labels) -> list[str]:
    """Wrong or disagreeing counts of one query run."""
    problems = []
    finished = {label: run.counts(label) for label in labels if run.status(label) == "ok"}
    for label, counts in finished.items():
        if len(counts) > 1:
            problems.append(f"{label} counted {sorted(counts)} on repeats")
        if run.known is not None and counts and counts != {run.known}:
            problems.append(f"{label} counted {sorted(counts)}, exact {run.known}")
    values = {tuple(sorted(c)) for c in finished.values()}
    if len(values) > 1:
        problems.append(f"revisions disagree: {dict((k, sorted(v)) for k, v in finished.items())}")
    return [f"{run.engine} {run.workload} {run.query}: {p}" for p in problems]


def summarise(results: list[QueryRun], new: str, old: str, limit_s: float, noise: str | None = None):
    """Rows (engine, workload, group, compared, median, worst, worst query, over limit, counts)
    and the list of count problems; with ``noise``, a second copy of ``old`` timed in the same
    run, its median and worst ratio to ``old`` (the spread a revision shows against itself)."""
    import pandas as pd

    rows, problems = [], []
    keys = sorted({(r.engine, r.workload, r.group) for r in results},
                  key=lambda k: (ENGINES.index(k[0]) if k[0] in ENGINES else 99, k[2] != "small", k[1]))
    for engine, workload, group in keys:
        runs = [r for r in results if (r.engine, r.workload) == (engine, workload)]
        ratios = [(ratio(r, new, old, limit_s), r) for r in runs]
        compared = [(x, bound, r) for (x, bound), r in ratios if not math.isnan(x)]
        per_query = [count_problems(r, (new, old)) for r in runs]
        bad = [q for q in per_query if q]
        problems += [p for q in bad for p in q]
        worst = max(compared, key=lambda c: c[0]) if compared else None
        exact = sum(1 for r in runs if r.known is not None and r.status(new) == "ok")
        rows.append({
            "engine": engine, "workload": workload, "group": group, "queries": len(runs),
            "compared": len(compared),
            "median": statistics.median(c[0] for c in compared) if compared else math.nan,
            "worst": worst[0] if worst else math.nan,
            "worst_is_bound": bool(worst and worst[1]),
            "worst_query": worst[2].query if worst else "",
            "new_ms_median": 1e3 * statistics.median(r.wall(new) for _, _, r in compared if r.status(new) == "ok")
            if any(r.status(new) == "ok" for _, _, r in compared) else math.nan,
            "over_limit_new": sum(r.status(new) != "ok" for r in runs),
            "over_limit_old": sum(r.status(old) != "ok" for r in runs),
            "new_peak_mb": max((r.peak(new) for r in runs), default=0) / 2**20,
            "peak_ratio_worst": max((r.peak(new) / r.peak(old) for r in runs if r.peak(old)), default=math.nan),
            "exact_checked": exact,
            "counts": ("not run" if all(r.error for r in runs) else "ok" if not bad else f"{len(bad)} wrong"),
            **_noise_columns(runs, noise, old, limit_s),
            **_level_columns(runs, new, old, noise),
        })
    return pd.DataFrame(rows), problems


def _noise_columns(runs: list[QueryRun], noise: str | None, old: str, limit_s: float) -> dict:
    """``noise_median``, ``noise_worst`` and ``noise_best``: the noise copy's ratios to ``old``
    (NaN without one)."""
    found = [x for x, _ in (ratio(r, noise, old, limit_s) for r in runs if noise in r.runs) if not math.isnan(x)]
    return {"noise_median": statistics.median(found) if found else math.nan,
            "noise_worst": max(found) if found else math.nan,
            "noise_best": min(found) if found else math.nan}


def process_levels(runs: list[QueryRun], label: str, old: str) -> list[float]:
    """The level of each of ``label``'s worker processes: the median over the queries both
    ``label`` and ``old`` finished of that process's own median wall over ``old``'s median (all of
    ``old``'s processes pooled), in the order the processes first answered. Answers that name no
    process count as one."""
    per_process: dict = {}
    for run in runs:
        if run.status(label) != "ok" or run.status(old) != "ok":
            continue
        walls: dict = {}
        for answer in run.runs.get(label, []):
            walls.setdefault(answer.get("process", 0), []).append(answer["wall"])
        for process, own in walls.items():
            per_process.setdefault(process, []).append(statistics.median(own) / run.wall(old))
    return [statistics.median(ratios) for ratios in per_process.values()]


def level_shift_p(new: list[float], same_code: list[float]) -> float:
    """Exact one-sided probability that ``len(new)`` process levels drawn from the pooled levels
    are ranked at least as high above the rest as ``new`` is (a Mann-Whitney U over processes, by
    enumeration): how often the baseline's own process-to-process spread looks like this slowdown.
    Three processes against six (old and its copy) reach 1/84 when every new process is slower.
    Past :data:`LEVEL_DRAWS` ways of drawing, that many seeded random draws estimate it."""
    pooled, k = list(new) + list(same_code), len(new)

    def u(chosen) -> float:
        inside = [pooled[i] for i in chosen]
        outside = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        return sum((a > b) + 0.5 * (a == b) for a in inside for b in outside)

    observed = u(range(k))
    if math.comb(len(pooled), k) <= LEVEL_DRAWS:
        ways = itertools.combinations(range(len(pooled)), k)
    else:
        rng = np.random.default_rng(0)
        ways = (rng.choice(len(pooled), size=k, replace=False) for _ in range(LEVEL_DRAWS))
    draws = [u(set(int(i) for i in c)) >= observed - 1e-9 for c in ways]
    return sum(draws) / len(draws)


def _level_columns(runs: list[QueryRun], new: str, old: str, noise: str | None) -> dict:
    """Each revision's process levels (:func:`process_levels`, as text) and, with two processes or
    more per revision and a noise copy, ``level_p`` (:func:`level_shift_p` of new's levels against
    old's and the copy's); NaN otherwise."""
    levels = {name: process_levels(runs, label, old) for name, label in (("new", new), ("old", old), ("noise", noise))
              if label is not None}
    p = (level_shift_p(levels["new"], levels["old"] + levels["noise"])
         if noise is not None and len(levels["new"]) >= 2 and len(levels["old"]) >= 2 else math.nan)
    return {**{f"levels_{name}": " ".join(f"{x:.2f}" for x in value) for name, value in levels.items()},
            "level_p": p}


#: Ways of drawing the new revision's process levels that :func:`level_shift_p` enumerates; past
#: this many it samples as many at random (ten processes a revision with a copy: 30 choose 10).
LEVEL_DRAWS = 20_000
#: A small workload's miss is beyond the noise when its process levels are this unlikely under
#: the baseline's own spread (:func:`level_shift_p`).
LEVEL_P = 0.05


def verdicts(table, small_median: float = SMALL_MEDIAN, heavy_worst: float = HEAVY_WORST) -> list[str]:
    """The rows that miss the gate's targets (module constants), as sentences. Where a noise copy
    ran, a miss is within the noise when the copy strays from the baseline as far, either way (a
    copy at 0.8 of the baseline is a spread of 1.25); a small workload's median, with several
    processes per revision, is judged by its process levels instead (:func:`level_shift_p`)."""
    misses = []
    for row in table.itertuples():
        noise_median = getattr(row, "noise_median", math.nan)
        noise_worst = getattr(row, "noise_worst", math.nan)
        noise_best = getattr(row, "noise_best", math.nan)
        level_p = getattr(row, "level_p", math.nan)
        if row.group == "small" and row.median > small_median:
            misses.append(f"{row.engine} {row.workload}: median ratio {row.median:.2f} > {small_median}"
                          + (_levels(row) if not _isnan(level_p) else
                             _within(row.median, max(noise_median, 1 / noise_median), noise_median, "median")))
        if row.group == "heavy" and row.worst > heavy_worst:
            misses.append(f"{row.engine} {row.workload}: worst ratio {'>' if row.worst_is_bound else ''}"
                          f"{row.worst:.2f} > {heavy_worst} ({row.worst_query})"
                          + _within(row.worst, max(noise_worst, 1 / noise_best), noise_worst, "worst"))
    return misses


def _isnan(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _within(value: float, band: float, noise: float, what: str) -> str:
    if math.isnan(noise):
        return ("; no noise copy ran: one process's own level can move short queries this far, confirm "
                "with --processes 3 and --also (docs/decisions.md, \"The regression gate's run shape\")")
    side = "within" if value <= band else "beyond"
    return f"; {side} the noise (the baseline's copy reads {noise:.2f} as its {what}, a spread of {band:.2f})"


def _levels(row) -> str:
    side = "beyond" if row.level_p <= LEVEL_P else "within"
    return (f"; {side} the noise by process levels (new {row.levels_new}; old {row.levels_old}; copy "
            f"{row.levels_noise}: the baseline's own spread ranks them so with p = {row.level_p:.3f})")


def per_query_frame(results: list[QueryRun], labels):
    import pandas as pd

    rows = []
    for r in results:
        row = {"engine": r.engine, "workload": r.workload, "group": r.group, "query": r.query,
               "known": r.known}
        for label in labels:
            row[f"status[{label}]"] = r.status(label)
            row[f"ms[{label}]"] = 1e3 * r.wall(label)
            finished = [a for a in r.runs.get(label, []) if a["status"] == "ok"]
            row[f"runs_ms[{label}]"] = " ".join(f"{1e3 * a['wall']:.2f}" for a in finished)
            ordinal = {}                              # each run's process, numbered as they first answered
            row[f"runs_process[{label}]"] = " ".join(
                str(ordinal.setdefault(a.get("process", 0), len(ordinal))) for a in finished)
            counts = sorted(r.counts(label)) or [a["count"] for a in r.runs.get(label, [])][:1]
            row[f"count[{label}]"] = counts[0] if counts else None
            row[f"peak_mb[{label}]"] = r.peak(label) / 2**20
        rows.append(row)
    return pd.DataFrame(rows)


def write_tables(out: Path, results: list[QueryRun], labels: list[str], limit_s: float):
    """Write the per-query CSV, the summary (new ``labels[0]`` against old ``labels[1]``) and the
    labels into ``out``; returns (summary, per-query frame, count problems)."""
    table, problems = summarise(results, labels[0], labels[1], limit_s, labels[2] if len(labels) > 2 else None)
    frame = per_query_frame(results, labels)
    frame.to_csv(out / "regress_queries.csv", index=False)
    table.to_csv(out / "regress_summary.csv", index=False)
    (out / "labels.json").write_text(json.dumps(labels[:2]))
    return table, frame, problems


def render(table, new_label: str, old_label: str) -> str:
    noisy = "noise_median" in table and table["noise_median"].notna().any()
    lines = [f"new = {new_label}, old = {old_label}; ratio = new/old median wall of match(); "
             "'>' = a bound (one side over the limit); peak = the largest peak device memory of a query "
             "(new, MiB) and the worst new/old ratio of a query's peak"
             + ("; copy = the baseline's second copy over old, median/worst (the noise)" if noisy else ""),
             f"{'engine':7s} {'workload':18s} {'group':5s} {'q':>4s} {'cmp':>4s} {'median':>7s} {'worst':>8s} "
             f"{'worst query':22s} {'new ms':>8s} {'lim new/old':>11s} {'peak MiB':>9s} {'peak x':>6s} {'counts':>8s}"
             + (f" {'copy':>9s}" if noisy else "")]
    for row in table.itertuples():
        worst = f"{'>' if row.worst_is_bound else ''}{row.worst:.2f}"
        lines.append(f"{row.engine:7s} {row.workload:18s} {row.group:5s} {row.queries:4d} {row.compared:4d} "
                     f"{row.median:7.2f} {worst:>8s} {row.worst_query[:22]:22s} {row.new_ms_median:8.2f} "
                     f"{row.over_limit_new:5d}/{row.over_limit_old:<5d} {row.new_peak_mb:9.1f} "
                     f"{row.peak_ratio_worst:6.2f} {row.counts:>8s}"
                     + (f" {row.noise_median:4.2f}/{row.noise_worst:4.2f}" if noisy else ""))
    return "\n".join(lines)


def done_pairs(folder: Path) -> set[tuple[str, str]]:
    """The (engine, workload) pairs an earlier run under ``folder`` finished: the rows of every
    ``regress_summary.csv`` in it or below it (one per (engine, workload); an interrupted run
    writes its finished ones)."""
    import pandas as pd

    pairs: set[tuple[str, str]] = set()
    for summary in sorted(Path(folder).rglob("regress_summary.csv")):
        if summary.stat().st_size > 1:
            frame = pd.read_csv(summary, usecols=["engine", "workload"])
            pairs |= set(zip(frame.engine, frame.workload))
    return pairs


# ---------------------------------------------------------------------- several GPUs
def gpu_tasks(engines, groups) -> list[tuple[str, str]]:
    """The (engine, group) runs of a gate spread over GPUs, heavy groups first (the longest
    runs start first, so the GPUs finish close together)."""
    order = sorted(groups, key=lambda g: g != "heavy")
    return [(engine, group) for group in order for engine in engines]


def _without_options(argv: list[str], names) -> list[str]:
    """``argv`` without the options ``names`` and their values (``--x v`` and ``--x=v``)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in names:
            skip = True
        elif not any(arg.startswith(f"{name}=") for name in names):
            kept.append(arg)
    return kept


def run_on_gpus(argv: list[str], gpus: list[str], engines, groups, out: Path,
                stop_after_s: float | None = None) -> int:
    """Run the gate once per (engine, group) (:func:`gpu_tasks`), each on one of ``gpus`` with
    ``CUDA_VISIBLE_DEVICES`` set, as many at once as there are GPUs, into ``out/ENGINE-GROUP``;
    print one summary table of them all. With ``stop_after_s``, runs still going that long after
    the start are interrupted (Ctrl-C: each keeps its finished workloads) and runs not started
    by then are not started. Exit status 1 when any run's counts are wrong or a run failed or
    was stopped."""
    import concurrent.futures
    import queue

    import pandas as pd

    base = _without_options(argv, ("--gpus", "--engines", "--groups", "--out", "--stop-after-s"))
    free: queue.Queue = queue.Queue()
    for gpu in gpus:
        free.put(gpu)
    stop_at = None if stop_after_s is None else time.monotonic() + stop_after_s

    def run(task: tuple[str, str]) -> tuple[tuple[str, str], int | None, Path]:
        engine, group = task
        folder = out / f"{engine}-{group}"
        folder.mkdir(parents=True, exist_ok=True)
        gpu = free.get()
        try:
            if stop_at is not None and time.monotonic() >= stop_at:
                print(f"  {engine} {group}: not started (--stop-after-s)", flush=True)
                return task, None, folder
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu)
            with open(folder / "output.log", "w") as log:
                child = subprocess.Popen([sys.executable, "-m", "experiments.bench.regress", *base,
                                          "--engines", engine, "--groups", group, "--out", str(folder)],
                                         cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
                try:
                    code = child.wait(None if stop_at is None else max(0.0, stop_at - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.send_signal(signal.SIGINT)       # keeps its finished workloads
                    try:
                        code = child.wait(STOP_GRACE_S)
                    except subprocess.TimeoutExpired:
                        child.kill()
                        code = child.wait()
        finally:
            free.put(gpu)
        print(f"  {engine} {group} on GPU {gpu}: exit {code} ({folder / 'output.log'})", flush=True)
        return task, code, folder

    tasks = gpu_tasks(engines, groups)
    print(f"regress on GPUs {','.join(gpus)}: {len(tasks)} runs (engine, group)", flush=True)
    with concurrent.futures.ThreadPoolExecutor(len(gpus)) as pool:
        done = list(pool.map(run, tasks))
    tables, labels, failed = [], None, []
    for (engine, group), code, folder in done:
        summary = folder / "regress_summary.csv"
        if summary.exists() and summary.stat().st_size > 1:
            tables.append(pd.read_csv(summary, dtype={"worst_query": str}).fillna({"worst_query": ""}))
        if labels is None and code is not None and (folder / "labels.json").exists():
            labels = json.loads((folder / "labels.json").read_text())
        if code is None:
            failed.append(f"{engine} {group} (not started: --stop-after-s)")
        elif code:
            failed.append(f"{engine} {group} ({'stopped' if code == INTERRUPTED else 'exit'} {code}; "
                          f"{folder / 'output.log'})")
    if not tables:
        print("no run finished:", "; ".join(failed))
        return 1
    table = pd.concat(tables, ignore_index=True)
    table.to_csv(out / "regress_summary.csv", index=False)
    print()
    print(render(table, *(labels or ("new", "old"))))
    for line in verdicts(table):
        print("over target:", line)
    for line in failed:
        print("FAILED OR COUNT PROBLEMS:", line)
    return 1 if failed else 0


# ---------------------------------------------------------------------- command line
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.regress", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=None,
                        help="revision to compare against (default: docs/baseline.txt), or LABEL=FOLDER of "
                             "an exported one (python -m experiments.bench.regress --export REV FOLDER)")
    parser.add_argument("--export", nargs=2, metavar=("REV", "FOLDER"),
                        help="only export REV's code into FOLDER (for a machine without git history) and exit")
    parser.add_argument("--new", default=None,
                        help="revision to measure instead of the working tree (exported like the baseline)")
    parser.add_argument("--also", action="append", default=[],
                        help="another revision timed in the same rounds (repeatable; per-query CSV and --per-query)")
    parser.add_argument("--per-query", action="store_true", help="also print each query's median ms per revision")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated engines")
    parser.add_argument("--groups", default=",".join(GROUPS), help="small, heavy or both")
    parser.add_argument("--workloads", default=None, help="comma-separated workload names to keep")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per query and revision")
    parser.add_argument("--limit-s", type=float, default=3.0, help="per-query deadline of a timed run (timeout_s)")
    parser.add_argument("--warm-s", type=float, default=None, help="deadline of the untimed first run (2x the limit)")
    parser.add_argument("--max-queries", type=int, default=None, help="first N queries of each workload")
    parser.add_argument("--queries", default=None, help="comma-separated query names to keep")
    parser.add_argument("--mode", choices=MODES, default="turns",
                        help="turns (default): no device_memory_limit, the revisions hold the card in turns per "
                             "engine and workload; interleave: no limit, revisions prepared at once and "
                             "alternating per query; share: interleave with an equal device_memory_limit each "
                             "(memory_share)")
    parser.add_argument("--device-memory-limit", type=int, default=None,
                        help="bytes per revision's engines in every mode (default: none; --mode share: an equal "
                             "share of the free memory)")
    parser.add_argument("--processes", type=int, default=1,
                        help="worker processes per revision (--mode turns): each measures every workload in "
                             "its turn and a query's median pools their runs, so that one process's state "
                             "(allocations, pool growth, clocks) does not decide a verdict")
    parser.add_argument("--pin", choices=("gpu", "none"), default="gpu",
                        help="gpu (default): the workers run on the host CPUs of the GPU's NUMA node "
                             "(common.gpu.backend.gpu_local_cpus), where found; none: anywhere")
    parser.add_argument("--out", type=Path, default=None, help="folder for the CSVs and worker logs")
    parser.add_argument("--gpus", default=None,
                        help="comma-separated GPUs of this host: each (engine, group) runs on one of them, "
                             "as many at once as GPUs (run_on_gpus)")
    parser.add_argument("--skip-done", type=Path, default=None, metavar="FOLDER",
                        help="leave out the (engine, workload) pairs an earlier run under FOLDER finished (its "
                             "regress_summary.csv files): a gate continued in another call; give a new --out")
    parser.add_argument("--stop-after-s", type=float, default=None,
                        help="with --gpus: interrupt the runs still going this long after the start, each "
                             "keeping its finished workloads, and start no more")
    args = parser.parse_args(argv)
    note_simulator(parser.prog, args, timeout_s=args.limit_s)

    if args.export:
        export(args.export[0], Path(args.export[1]))
        print(f"{describe(args.export[0])}={args.export[1]}")
        return 0
    engines = [e for e in args.engines.split(",") if e]
    groups = [g for g in args.groups.split(",") if g]
    for g in groups:
        if g not in GROUPS:
            parser.error(f"unknown group {g!r}; choose from {', '.join(GROUPS)}")
    if args.processes < 1 or (args.processes > 1 and args.mode != "turns"):
        parser.error("--processes must be at least 1, and above 1 only with --mode turns")
    baseline = args.baseline or baseline_default()
    out = args.out or Path(tempfile.mkdtemp(prefix="gpusm-regress-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.skip_done is not None and not args.skip_done.is_dir():
        parser.error(f"--skip-done: {args.skip_done} is not a folder")
    skip = done_pairs(args.skip_done) if args.skip_done is not None else set()
    if args.skip_done is not None and args.out is not None and args.out.resolve() == args.skip_done.resolve():
        parser.error("--skip-done: give a new --out (the earlier run's tables stay where they are)")
    gpus = [g for g in (args.gpus or "").split(",") if g]
    if len(gpus) > 1:
        return run_on_gpus(list(sys.argv[1:] if argv is None else argv), gpus, engines, groups, out,
                           args.stop_after_s)
    if gpus:                                   # one GPU: the workers see that one
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[0]
    with tempfile.TemporaryDirectory(prefix="gpusm-regress-") as tmp:
        tmp = Path(tmp)
        old_label, old_tree = resolve(baseline, tmp / "old")
        if args.new:
            new_label, new_tree = resolve(args.new, tmp / "new")
        else:
            new_label, new_tree = describe("HEAD+"), ROOT
        if new_label == old_label:
            new_label += "(new)"
        others = [resolve(rev, tmp / f"also{i}") for i, rev in enumerate(args.also)]
        (tmp / "graphs").mkdir()
        loads = workloads(groups, tmp / "graphs", args.max_queries)
        if args.workloads:
            keep = set(args.workloads.split(","))
            loads = [wl for wl in loads if wl.name in keep]
        if args.queries:
            keep = set(args.queries.split(","))
            for wl in loads:
                wl.queries = [q for q in wl.queries if q[0] in keep]
        print(f"regress: new {new_label} against old {old_label}; engines {', '.join(engines)}; "
              f"{sum(len(wl.queries) for wl in loads)} queries in {len(loads)} workloads; "
              f"limit {args.limit_s} s, {args.repeats} repeats", flush=True)
        trees = [(new_label, new_tree), (old_label, old_tree), *others]
        share = args.device_memory_limit or (memory_share(len(trees)) if args.mode == "share" else None)
        options = {} if share is None else {"device_memory_limit": share}
        spawned = [tree for _ in range(args.processes) for tree in trees]   # the revisions in turn, K times
        logs = [open(out / f"worker-{i}.log", "w") for i in range(len(spawned))]
        cpus, pinned = gpu_local_cpus() if args.pin == "gpu" else (None, "not pinned (--pin none)")
        print(f"regress: workers {pinned}", flush=True)
        workers = [Worker(label, tree, log, cpus) for (label, tree), log in zip(spawned, logs)]
        labels = [label for label, _ in trees]
        results: list[QueryRun] = []

        def save(tally) -> None:               # Ctrl-C: the finished (engine, workload)s
            tally.done = len({(r.engine, r.workload) for r in results})
            if results:
                write_tables(out, results, labels, args.limit_s)
                tally.note = f"queries in {out / 'regress_queries.csv'}"

        with interruptible(command_line("python -m experiments.bench.regress", argv), save=save,
                           total=len(engines) * sum(1 for wl in loads if wl.queries),
                           unit="engine-workloads", starts_over=True):
            try:
                print(f"mode {args.mode}; device_memory_limit per revision: "
                      f"{share if share is not None else 'none'}", flush=True)
                if skip:
                    print(f"skipping {len(skip)} (engine, workload) pairs finished under {args.skip_done}",
                          flush=True)
                measure(workers, engines, loads, repeats=args.repeats, limit_s=args.limit_s,
                        warm_s=args.warm_s, options=options, mode=args.mode,
                        progress=lambda s: print(s, flush=True), results=results, skip=skip)
            except KeyboardInterrupt:          # not the query in flight: stop the workers now
                for w in workers:
                    w.proc.kill()
                raise
            finally:
                for w in workers:
                    w.close()
                for log in logs:
                    log.close()
    if not results:
        print(f"nothing left to measure: every (engine, workload) asked for finished under {args.skip_done}")
        return 0
    table, frame, problems = write_tables(out, results, labels, args.limit_s)
    for label, _ in others:
        problems += [p for r in results for p in count_problems(r, (label, old_label))]
    if args.per_query:
        cols = ["engine", "query"] + [f"ms[{label}]" for label in labels]
        with __import__("pandas").option_context("display.width", 200, "display.max_rows", 500):
            print(frame[cols].round(1).to_string(index=False))
    print()
    print(render(table, new_label, old_label))
    for line in verdicts(table):
        print("over target:", line)
    for line in problems:
        print("COUNT:", line)
    print(f"(per-query CSV: {out / 'regress_queries.csv'})")
    return 1 if problems else 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
