"""Run engine configurations over query sets with a hard time limit per query, resumably.

A :class:`Job` is one engine configuration (registry name + constructor options) on one data
graph and its query set. :func:`run_jobs` answers every (job, query) pair and appends one row per
pair to a CSV file as it goes, so that an interrupted run resumes where it stopped (pairs
already in the file are not redone).

Isolation. With ``isolation="process"`` (the default) each job's engine lives in a worker
process that prepares the data graph once and then answers the queries one by one; the parent
waits for each answer at most ``hard_limit(job)`` seconds. A query that hangs, or crashes the
worker (a kernel fault kills the CUDA context), becomes a row with status ``timeout`` or
``error`` and a fresh worker takes the next query. The engine's own cooperative ``timeout_s``
is the job's time limit; the hard limit only catches what the cooperative one cannot.
Workers are started with the ``spawn`` method: a CUDA context does not survive ``fork``.
``isolation="inline"`` runs everything in this process (for the simulator-scale tests).

Warm-up. Before the timed queries each worker answers the set's first query once, untimed,
so that kernel compilation (Numba compiles on first launch) is not charged to a query.
"""

from __future__ import annotations

import csv
import multiprocessing as mp
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

ROW_FIELDS = ("experiment", "config", "engine", "dataset", "query", "status", "count", "seconds",
              "filter_s", "index_s", "plan_s", "enumerate_s", "transfer_s", "wall_s",
              "peak_device_bytes", "reason", "stats")
"""Columns of the raw CSV; ``stats`` holds the engine's scalar statistics as JSON."""

KEY = ("experiment", "config", "dataset", "query")
"""A row is identified by these columns (what resuming skips)."""


@dataclass(frozen=True)
class Job:
    """One engine configuration (``engine`` + ``options``) answering ``queries`` on ``data``.

    ``config`` is the label the reports use (e.g. ``"GSI"``, ``"GSI-CR"``); ``dataset`` names the
    data graph in the rows. ``time_limit_s`` is passed to the engine as ``timeout_s``;
    ``device_memory_limit`` emulates the paper's GPU memory. ``grace_s`` is added to the hard
    limit (:func:`hard_limit`).
    """

    experiment: str
    config: str
    engine: str
    dataset: str
    data: object = field(repr=False, compare=False)          # common.Graph
    queries: tuple = field(repr=False, compare=False)        # tuple of common.Graph
    options: tuple = ()                                      # sorted (key, value) pairs
    time_limit_s: float | None = None
    device_memory_limit: int | None = None
    repeats: int = 1
    grace_s: float = 30.0

    @property
    def engine_options(self) -> dict:
        options = dict(self.options)
        if self.device_memory_limit is not None:
            options["device_memory_limit"] = self.device_memory_limit
        return options


def hard_limit(job: Job) -> float | None:
    """Seconds the parent waits for one answer before killing the worker (None = forever)."""
    if job.time_limit_s is None:
        return None
    return job.repeats * (1.5 * job.time_limit_s) + job.grace_s


# ---------------------------------------------------------------------- one query, one engine
def _answer(engine, query, job: Job) -> dict:
    """Run ``query`` ``job.repeats`` times; the row carries the median phase times."""
    results, walls = [], []
    for _ in range(job.repeats):
        start = time.perf_counter()
        result = engine.match(query, timeout_s=job.time_limit_s)
        walls.append(time.perf_counter() - start)
        results.append(result)
    median = results[int(np.argsort([r.seconds for r in results])[len(results) // 2])]
    row = median.to_row()
    stats = {k: v for k, v in median.stats.items() if isinstance(v, (int, float, str, bool))}
    row.update(wall_s=float(np.median(walls)), stats=pd.Series(stats, dtype=object).to_json())
    return row


def _prepare(job: Job):
    from common import create_engine

    return create_engine(job.engine, **job.engine_options).prepare(job.data)


def _serve(conn, job: Job, target: str) -> None:
    """Worker process: prepare once, warm up, then answer query indices until told to stop.

    ``target`` is the engine class the parent resolved (``module:Class``), registered here too,
    so an engine registered at run time in the parent is the one the worker runs.
    """
    try:
        from common.engine import register

        register(job.engine, target)
        engine = _prepare(job)
        if job.queries:
            engine.match(job.queries[0], timeout_s=job.time_limit_s)
        conn.send(("ready", None))
    except BaseException:                    # report any failure to the parent, then exit
        conn.send(("error", traceback.format_exc(limit=3)))
        return
    while True:
        index = conn.recv()
        if index is None:
            return
        try:
            conn.send(("row", _answer(engine, job.queries[index], job)))
        except BaseException:
            conn.send(("error", traceback.format_exc(limit=3)))


class _Worker:
    """A spawned worker process serving one job; restarted after a kill."""

    def __init__(self, job: Job):
        self.job = job
        self.process = None
        self.conn = None

    def _start(self) -> str | None:
        context = mp.get_context("spawn")
        self.conn, child = context.Pipe()
        from common.engine import engine_class

        cls = engine_class(self.job.engine)
        target = f"{cls.__module__}:{cls.__qualname__}"
        self.process = context.Process(target=_serve, args=(child, self.job, target), daemon=True)
        self.process.start()
        child.close()
        # Preparing and compiling may take minutes on a large graph; bound it generously.
        limit = hard_limit(self.job)
        kind, payload = self._receive(None if limit is None else 4 * limit)
        if kind != "ready":
            self.stop()
            return payload
        return None

    def _receive(self, seconds: float | None):
        if seconds is not None and not self.conn.poll(seconds):
            return "timeout", f"no answer within the hard limit of {seconds:.0f} s: worker killed"
        try:
            return self.conn.recv()
        except EOFError:
            self.process.join(5)
            return "error", f"worker died (exit code {self.process.exitcode})"

    def ask(self, index: int) -> tuple[str, object]:
        if self.process is None:
            failure = self._start()
            if failure is not None:
                return "error", f"prepare failed: {failure}"
        self.conn.send(index)
        kind, payload = self._receive(hard_limit(self.job))
        if kind != "row":
            self.stop()
        return kind, payload

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.is_alive():
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self.process.join(2)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self.process = None


class _Inline:
    """The same protocol in this process: no hard limit, no crash isolation."""

    def __init__(self, job: Job):
        self.job = job
        self.engine = None

    def ask(self, index: int):
        try:
            if self.engine is None:
                self.engine = _prepare(self.job)
                if self.job.queries:
                    self.engine.match(self.job.queries[0], timeout_s=self.job.time_limit_s)
            return "row", _answer(self.engine, self.job.queries[index], self.job)
        except Exception:
            return "error", traceback.format_exc(limit=3)

    def stop(self) -> None:
        self.engine = None


# ---------------------------------------------------------------------- the loop
def _failure_row(job: Job, query, status: str, reason: str) -> dict:
    return {"engine": job.engine, "query": query.name, "status": status, "count": 0,
            "seconds": float("nan"), "wall_s": float("nan"), "reason": reason.strip()[-500:]}


def read_rows(path: Path) -> pd.DataFrame:
    """The raw rows written so far (an empty frame with :data:`ROW_FIELDS` if there are none)."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=list(ROW_FIELDS))
    return pd.read_csv(path, dtype={"query": str, "dataset": str, "config": str, "reason": str},
                       keep_default_na=False, na_values=[""])


def run_jobs(jobs: Iterable[Job], out_csv: Path, *, isolation: str = "process",
             progress: bool = True) -> pd.DataFrame:
    """Answer every (job, query) pair not yet in ``out_csv``; append rows as they come; return all rows.

    With ``progress`` a tqdm bar shows queries done, solved, elapsed time and ETA.
    """
    from tqdm.auto import tqdm

    if isolation not in ("process", "inline"):
        raise ValueError(f"isolation must be 'process' or 'inline', got {isolation!r}")
    jobs = list(jobs)
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    done = {tuple(str(v) for v in key) for key in read_rows(out_csv)[list(KEY)].itertuples(index=False)}
    todo = {id(job): [i for i, q in enumerate(job.queries)
                      if (job.experiment, job.config, job.dataset, q.name) not in done]
            for job in jobs}
    bar = tqdm(total=sum(map(len, todo.values())), unit="query", disable=not progress)
    solved = 0
    new_file = not out_csv.exists() or out_csv.stat().st_size == 0
    with out_csv.open("a", newline="") as handle, bar:
        writer = csv.DictWriter(handle, fieldnames=ROW_FIELDS, extrasaction="ignore")
        if new_file:
            writer.writeheader()
        for job in jobs:
            if not todo[id(job)]:
                continue
            bar.set_description(f"{job.config} on {job.dataset}")
            worker = _Worker(job) if isolation == "process" else _Inline(job)
            try:
                for index in todo[id(job)]:
                    query = job.queries[index]
                    kind, payload = worker.ask(index)
                    row = payload if kind == "row" else _failure_row(job, query, kind, payload)
                    row.update(experiment=job.experiment, config=job.config, dataset=job.dataset,
                               query=query.name, engine=job.engine)
                    writer.writerow(row)
                    handle.flush()
                    solved += row["status"] == "ok"
                    bar.set_postfix(solved=solved)
                    bar.update(1)
            finally:
                worker.stop()
    return read_rows(out_csv)
