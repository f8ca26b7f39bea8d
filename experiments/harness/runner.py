"""Run engine configurations over query sets with a hard time limit per query, resumably.

A :class:`Job` is one engine configuration (registry name + constructor options) on one data
graph and its query set. :func:`run_jobs` answers every (job, query) pair and appends one row per
pair to a CSV file as it goes, so an interrupted run resumes where it stopped; a damaged row is
set aside with a warning and run again (:mod:`experiments.harness.store`).

Isolation: with ``isolation="process"`` (the default) the engines live in a ``spawn``-ed worker
process that prepares each job's data graph once; the parent waits for each answer at most
``hard_limit(job)`` seconds, so a query that hangs or crashes the worker becomes a ``timeout`` or
``error`` row and a fresh worker takes the next query; an engine whose runs take time past the
limit by design (an external binary's start-up) says how much once prepared, and the hard limit
grows by it. A worker whose parent dies (a killed run) exits at once, quietly. The engine's own
``timeout_s`` is the job's limit; the hard limit catches what it cannot. One worker
(:func:`make_worker`) can serve a whole paper's set, so kernels compile once.
``isolation="inline"`` runs in this process (tests).

Settings: every row records, in its ``stats`` JSON under ``settings``, what it was measured under
beyond its key (:func:`measurement_settings`: time limit, repeats, whether they share the limit,
device-memory cap, engine options). A resumed run reuses a row only if those equal the job's: a
row measured under others, or one that records none (a file written before rows recorded them),
stops the run with :class:`SettingsChanged` naming the file, the cell and the setting, unless
``rerun_changed`` sets such rows aside in ``<file>.discarded`` and runs their queries again
(:func:`check_settings`; docs/decisions.md, "A resumed run never mixes settings").

Shared runs: jobs carry a ``run_key`` (engine, non-default options, data graph, query set,
limits); with a ``shared`` dict a later experiment copies an identical earlier row instead of
running the query again. Budget: past ``deadline`` every remaining pair is a ``skipped`` row that
a later run fills in. Warm-up: before the timed queries the worker answers, untimed, the first
query of each query size a configuration (:func:`canonical_options`) has not met in this
process, so compiles are never charged to a query.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import multiprocessing as mp
import os
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from multiprocessing import connection
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from common.engine.result import Status

from .store import RowFile, repair, set_aside
from .timing import without_compiles

ROW_FIELDS = ("experiment", "config", "engine", "dataset", "query", "status", "count", "seconds",
              "filter_s", "index_s", "plan_s", "enumerate_s", "transfer_s", "wall_s",
              "peak_device_bytes", "reason", "stats")
"""Columns of the raw CSV; ``stats`` holds the engine's scalar statistics as JSON."""

KEY = ("experiment", "config", "dataset", "query")
"""A row is identified by these columns (what resuming skips)."""

SKIPPED = "skipped"
"""Status of a row that was not run because the budget ran out (redone on resume)."""

SETTINGS = "settings"
"""Key of a row's ``stats`` JSON that holds the settings it was measured under (module docstring)."""


class SettingsChanged(RuntimeError):
    """A results file holds rows measured under other settings than the run's (:func:`check_settings`)."""


class SettingsChangedWarning(UserWarning):
    """Rows measured under other settings were set aside; their queries run again."""


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
    share_limit: bool = False                                # the repeats share the limit (_answer)
    grace_s: float = 30.0
    run_key: tuple = field(default=(), compare=False)         # identical runs share rows; () = never

    @property
    def settings(self) -> dict:
        """What the job's rows are measured under beyond their key (:func:`measurement_settings`)."""
        return measurement_settings(self.engine, self.options, self.time_limit_s, self.device_memory_limit,
                                    self.repeats, self.share_limit)

    @property
    def engine_options(self) -> dict:
        options = dict(self.options)
        if self.device_memory_limit is not None:
            options["device_memory_limit"] = self.device_memory_limit
        return options


def hard_limit(job: Job, beyond_s: float = 0.0) -> float | None:
    """Seconds the parent waits for one answer before killing the worker (None = forever):
    ``beyond_s`` is the prepared engine's :meth:`~common.engine.base.Engine.wall_beyond_limit_s`,
    room each of the job's runs may take past its limit by design (an external binary's start-up)."""
    if job.time_limit_s is None:
        return None
    return job.repeats * (1.5 * job.time_limit_s + beyond_s) + job.grace_s


# ---------------------------------------------------------------------- one query, one engine
def _answer(engine, query, job: Job) -> dict:
    """Run ``query`` ``job.repeats`` times; the row carries the median phase times.

    A run that compiled or loaded a kernel (a path the warm-up did not take) is run again
    (:func:`~experiments.harness.timing.without_compiles`); the statistics count such runs as
    ``compile_reruns``. With repeats, they also hold the spread of the timed runs:
    ``repeat_min_s`` and ``repeat_max_s`` (seconds of the fastest and slowest run), ``repeat_s``
    (every run's seconds, for the verdicts' bootstrap) and ``repeats``. A run that is not ``ok``
    ends the repeats.

    With ``job.share_limit`` the runs share the limit: a repeat runs only when the seconds of the
    runs so far plus those of the last one fit in the limit, with what is left of the limit as its
    own; a repeat that does not finish in it is dropped. The statistics then say ``repeats_cut``
    when the limit left fewer runs than ``job.repeats`` (the verdicts ask 3 runs only of the
    queries that fit them).
    """
    results, walls, reruns, cut = [], [], 0, False
    limit = job.time_limit_s
    timed_run = _timed_runs(engine, query, job)
    for index in range(job.repeats):
        timeout = limit
        if job.share_limit and index and limit is not None:
            spent = sum(float(r.seconds) for r in results)
            if spent + float(results[-1].seconds) > limit:       # one more run would not fit
                cut = True
                break
            timeout = limit - spent
        wall, result, again = timed_run(timeout)
        if index and job.share_limit and result.status is not Status.OK:
            cut = True                                # a repeat cut short by what was left: dropped
            break
        walls.append(wall)
        results.append(result)
        reruns += again
        if result.status is not Status.OK:          # a timeout or error is not repeated
            break
    median = results[int(np.argsort([r.seconds for r in results])[len(results) // 2])]
    row = median.to_row()
    stats = {k: v for k, v in median.stats.items() if isinstance(v, (int, float, str, bool))}
    if reruns:
        stats.update(compile_reruns=stats.get("compile_reruns", 0) + reruns)
    if job.repeats > 1:
        seconds = [float(r.seconds) for r in results]
        stats.update(repeats=len(results), repeat_min_s=min(seconds), repeat_max_s=max(seconds), repeat_s=seconds)
        if cut:
            stats.update(repeats_cut=True)
    row.update(wall_s=float(np.median(walls)), stats=pd.Series(stats, dtype=object).to_json())
    return row


def _timed_runs(engine, query, job: Job):
    """The query's next timed run, ``(wall, result, compile reruns)``, each time the function returned
    is called with that run's limit: a :meth:`~common.engine.base.Engine.match` each, or, for an
    engine that ``repeats_in_one_call``, the runs of one ``match_repeats`` over the job's repeats
    (every run's wall is that call's), each judged again against its own limit."""
    if not engine.repeats_in_one_call:
        return lambda timeout: without_compiles(lambda: engine.match(query, timeout_s=timeout))
    runs = None

    def next_run(timeout):
        nonlocal runs
        if runs is None:
            started = time.perf_counter()
            answered = engine.match_repeats(query, job.repeats, timeout_s=job.time_limit_s)
            runs = iter([(time.perf_counter() - started, result) for result in answered])
        wall, result = next(runs)           # the caller stops at the first run that is not ok
        if timeout is not None and result.status is Status.OK and result.seconds > timeout:
            result = dataclasses.replace(result, status=Status.TIMEOUT,
                                         reason=f"the run took {result.seconds:.3f} s, past what was left of "
                                                f"the limit ({timeout:.3f} s)")
        return wall, result, 0

    return next_run


RUNTIME_OPTIONS = {"gsi": ("instrument", "write_cache", "duplicate_removal", "filter", "max_blocks"),
                   "gmatch": ("seed_pool",)}
"""Options that reach the kernels as run-time values, not as compiled variants (so they compile
nothing new): GSI passes ``write_cache``, ``duplicate_removal`` and ``instrument`` to its join
kernels as ints and the filter as a ``mode`` int, and ``max_blocks`` only caps launch grids
(gsi/engine.py, gsi/balance.py); gMatch's
``seed_pool`` only sizes a buffer (gmatch/engine.py)."""


def canonical_options(engine: str, options) -> tuple:
    """``options`` without those equal to the engine constructors' defaults, sorted.

    ``device_memory_limit`` is left out (the job carries it); an option the constructors do not
    declare is kept.
    """
    import inspect

    from common.engine.registry import engine_class

    defaults = {}
    for cls in reversed(engine_class(engine).__mro__):
        init = cls.__dict__.get("__init__")
        if init is not None:
            defaults.update({name: p.default for name, p in inspect.signature(init).parameters.items()
                             if p.default is not inspect.Parameter.empty})
    return tuple(sorted((k, v) for k, v in dict(options).items()
                        if k != "device_memory_limit" and (k not in defaults or defaults[k] != v)))


def config_key(engine: str, options) -> tuple:
    """An engine configuration as compiled: the engine and its non-default, non-run-time options."""
    runtime = RUNTIME_OPTIONS.get(engine, ())
    return engine, tuple((k, v) for k, v in canonical_options(engine, options) if k not in runtime)


def _plain(value):
    """A JSON value for an option that has none (a numpy scalar's Python value, else its repr)."""
    return value.item() if hasattr(value, "item") else repr(value)


def measurement_settings(engine: str, options, time_limit_s, device_memory_limit, repeats: int,
                         share_limit: bool) -> dict:
    """The settings a row is measured under beyond its key, as its ``stats`` JSON stores them: the
    time limit, ``repeats``, ``share_limit``, the device-memory cap and the engine options as
    :func:`canonical_options` spells them (so two spellings of one configuration are equal)."""
    try:
        options = canonical_options(engine, options)
    except ValueError:                           # an engine not registered here: its options as given
        options = tuple(sorted((k, v) for k, v in dict(options).items() if k != "device_memory_limit"))
    settings = {"time_limit_s": time_limit_s, "repeats": int(repeats), "share_limit": bool(share_limit),
                "device_memory_limit": device_memory_limit, "options": dict(options)}
    return json.loads(json.dumps(settings, default=_plain))


def with_settings(stats, settings: dict) -> str:
    """A row's ``stats`` JSON (a string, or None / NaN for none) with ``settings`` recorded in it."""
    values = {}
    if isinstance(stats, str) and stats:
        try:
            values = json.loads(stats)
        except ValueError:
            values = {"stats_text": stats}
    values[SETTINGS] = settings
    return json.dumps(values, separators=(",", ":"), default=_plain)


def recorded_settings(stats) -> dict | None:
    """The settings a row's ``stats`` JSON records (None: it records none)."""
    try:
        values = json.loads(stats) if isinstance(stats, str) and stats else {}
    except ValueError:
        return None
    found = values.get(SETTINGS) if isinstance(values, dict) else None
    return found if isinstance(found, dict) else None


def _text(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def settings_change(recorded: dict | None, current: dict) -> str | None:
    """How a row's ``recorded`` settings differ from ``current`` (None: they do not), in words."""
    if recorded is None:
        return ("no recorded settings (written before rows recorded them; this run: "
                f"time_limit_s={_text(current.get('time_limit_s'))}, repeats={_text(current.get('repeats'))})")
    changed = [f"{name}={_text(recorded.get(name))} (this run: {_text(current.get(name))})"
               for name in dict.fromkeys([*current, *recorded]) if recorded.get(name) != current.get(name)]
    return ", ".join(changed) or None


def check_settings(out_csv: Path, expected: dict, rerun_changed: bool = False) -> int:
    """Compare the settings recorded with the rows of ``out_csv`` with ``expected`` ((experiment,
    config, dataset) -> :func:`measurement_settings`); rows of other cells are left alone.

    A row whose settings differ, or that records none, raises :class:`SettingsChanged` (one line:
    the file, the first such cell, the setting old and new, what to do), or with ``rerun_changed``
    is set aside in ``<file>.discarded`` (a :class:`SettingsChangedWarning`), so its query runs
    again. The file must be whole (:func:`drop_skipped`). Returns the number of rows set aside.
    """
    path = Path(out_csv)
    if not expected or not path.exists() or path.stat().st_size == 0:
        return 0

    def change(row: dict) -> str | None:
        current = expected.get((row["experiment"], row["config"], row["dataset"]))
        return None if current is None else settings_change(recorded_settings(row["stats"]), current)

    if rerun_changed:
        def reason(row: dict) -> str | None:
            why = change(row)
            return None if why is None else f"measured with {why}"

        aside = set_aside(path, ROW_FIELDS, reason, suffix=".discarded")
        if aside:
            warnings.warn(f"{path}: {len(aside)} row(s) measured under other settings (or none recorded) set "
                          f"aside in {path.name}.discarded; their queries run again", SettingsChangedWarning,
                          stacklevel=2)
        return len(aside)
    stale: dict[tuple, list] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            why = change(row)
            if why is not None:
                stale.setdefault((row["experiment"], row["config"], row["dataset"]), []).append(why)
    if not stale:
        return 0
    (experiment, config, dataset), whys = next(iter(stale.items()))
    more = f" (and {len(stale) - 1} more cell(s))" if len(stale) > 1 else ""
    raise SettingsChanged(f"{path}: {len(whys)} row(s) of experiment {experiment}, config {config}, dataset "
                          f"{dataset} were measured with {whys[0]}{more}; refusing to mix them with this run's: "
                          "pass a fresh --out, or --rerun-changed to set them aside and run them again")


def _prepare(job: Job, warmed: set):
    """The job's engine, prepared on its data graph and warmed up on the first query of every
    query size it has not answered yet (some engines compile a kernel per query size), where a
    warm-up helps it (:attr:`~common.engine.base.Engine.warm_up_helps`)."""
    from common import create_engine

    engine = create_engine(job.engine, **job.engine_options).prepare(job.data)
    if not engine.warm_up_helps:
        return engine
    config = (job.engine, canonical_options(job.engine, job.options))
    for query in job.queries:
        key = (*config, query.num_vertices)
        if key not in warmed:
            engine.match(query, timeout_s=job.time_limit_s)
            warmed.add(key)
    return engine


def _serve(conn) -> None:
    """Worker process: ``("job", job, target)`` prepares an engine, ``("query", i)`` answers one query.

    ``target`` is the engine class the parent resolved (``module:Class``), registered here too,
    so an engine registered at run time in the parent is the one the worker runs. One worker
    serves many jobs, so kernels compiled for one job are reused by the next.
    """
    from common.engine.registry import register

    _exit_with_parent()
    engine = job = None
    warmed: set = set()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):   # the parent is gone or interrupted: leave quietly
            return
        if message is None:
            return
        try:
            if message[0] == "job":
                _, job, target = message
                engine = None
                register(job.engine, target)
                engine = _prepare(job, warmed)
                reply = ("ready", engine.wall_beyond_limit_s())
            else:
                reply = ("row", _answer(engine, job.queries[message[1]], job))
        except BaseException:                # report any failure to the parent and go on
            reply = ("error", traceback.format_exc(limit=3))
        try:
            conn.send(reply)
        except OSError:                      # the parent is gone (BrokenPipeError): leave quietly
            return


def _exit_with_parent() -> None:
    """End this worker process, quietly, as soon as its parent process ends (killed or not): an
    orphan would finish its query only to fail writing the answer to nobody."""
    parent = mp.parent_process()
    if parent is None:
        return

    def watch():
        connection.wait([parent.sentinel])
        os._exit(0)

    threading.Thread(target=watch, name="gpusm-parent-watch", daemon=True).start()


class _Worker:
    """A spawned worker process; it serves job after job and is restarted after a kill."""

    def __init__(self):
        self.process = None
        self.conn = None
        self.job = None           # the job the live process has prepared
        self.beyond_s = 0.0       # its engine's wall_beyond_limit_s

    def _spawn(self) -> None:
        context = mp.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child,), daemon=True)
        self.process.start()
        child.close()

    def _load(self, job: Job) -> str | None:
        from common.engine.registry import engine_class

        if self.process is None:
            self._spawn()
        cls = engine_class(job.engine)
        self.conn.send(("job", job, f"{cls.__module__}:{cls.__qualname__}"))
        # Preparing and compiling may take minutes on a large graph; bound it generously.
        limit = hard_limit(job)
        kind, payload = self._receive(None if limit is None else 4 * limit)
        if kind != "ready":
            self.job = None
            if kind != "error":
                self.stop()
            return payload
        self.job, self.beyond_s = job, float(payload or 0.0)
        return None

    def _receive(self, seconds: float | None):
        if seconds is not None and not self.conn.poll(seconds):
            self.stop()
            return "timeout", f"no answer within the hard limit of {seconds:.0f} s: worker killed"
        try:
            return self.conn.recv()
        except EOFError:
            self.process.join(5)
            code = self.process.exitcode
            self.stop()
            return "error", f"worker died (exit code {code})"

    def ask(self, job: Job, index: int) -> tuple[str, object]:
        if self.job is not job:
            failure = self._load(job)
            if failure is not None:
                return "error", f"prepare failed: {failure}"
        self.conn.send(("query", index))
        kind, payload = self._receive(hard_limit(job, self.beyond_s))
        if kind == "timeout":
            self.job = None
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
        self.job = None


class _Inline:
    """The same protocol in this process: no hard limit, no crash isolation."""

    def __init__(self):
        self.job = None
        self.engine = None
        self.warmed: set = set()

    def ask(self, job: Job, index: int):
        try:
            if self.job is not job:
                self.job, self.engine = None, _prepare(job, self.warmed)
                self.job = job
            return "row", _answer(self.engine, job.queries[index], job)
        except Exception:
            return "error", traceback.format_exc(limit=3)

    def stop(self) -> None:
        self.job = self.engine = None


# ---------------------------------------------------------------------- the loop
def _failure_row(job: Job, query, status: str, reason: str) -> dict:
    return {"engine": job.engine, "query": query.name, "status": status, "count": 0,
            "seconds": float("nan"), "wall_s": float("nan"), "reason": reason.strip()[-500:]}


def read_rows(path: Path) -> pd.DataFrame:
    """The raw rows written so far (an empty frame with :data:`ROW_FIELDS` if there are none)."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=list(ROW_FIELDS))
    try:
        return pd.read_csv(path, dtype={"query": str, "dataset": str, "config": str, "reason": str},
                           keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: damaged results file ({exc}); running the experiment again "
                         "sets the damaged rows aside and re-runs them") from None


def make_worker(isolation: str = "process"):
    """A worker for :func:`run_jobs` (``process`` or ``inline``); the caller stops it when done."""
    if isolation not in ("process", "inline"):
        raise ValueError(f"isolation must be 'process' or 'inline', got {isolation!r}")
    return _Worker() if isolation == "process" else _Inline()


STATUSES = (*(str(s) for s in Status), SKIPPED)
NUMERIC = ("count", "seconds", "filter_s", "index_s", "plan_s", "enumerate_s", "transfer_s", "wall_s",
           "peak_device_bytes")


def row_problem(row: dict) -> str | None:
    """Why a raw row read back from a file cannot be one the runner wrote (None if it can).

    Only ``reason`` (a traceback) may hold a line break."""
    if row["status"] not in STATUSES:
        return f"unknown status {row['status'][:40]!r}"
    for name in NUMERIC:
        try:
            float(row[name] or "nan")
        except ValueError:
            return f"{name} is not a number: {row[name][:40]!r}"
    broken = [name for name, value in row.items() if name != "reason" and ("\n" in value or "\r" in value)]
    return f"line break inside {broken[0]}" if broken else None


def drop_skipped(out_csv: Path) -> list[tuple[int, str]]:
    """Make ``out_csv`` whole and drop its ``skipped`` rows (their pairs run again), atomically.

    Damaged rows are set aside with a warning (:func:`experiments.harness.store.repair`); returns them.
    """
    return repair(out_csv, ROW_FIELDS, KEY, drop_status=SKIPPED, validate=row_problem)


def run_jobs(jobs: Iterable[Job], out_csv: Path, *, isolation: str = "process", progress: bool = True,
             deadline: float | None = None, worker=None, shared: dict | None = None,
             rerun_changed: bool = False) -> pd.DataFrame:
    """Answer every (job, query) pair not yet in ``out_csv``; append rows as they come; return all rows.

    A row already there is reused only if it was measured under the job's settings; otherwise the
    run stops with :class:`SettingsChanged`, or with ``rerun_changed`` sets it aside and runs its
    query again (:func:`check_settings`).

    With ``progress`` a tqdm bar shows queries done, solved, elapsed time and ETA. Past
    ``deadline`` (``time.monotonic()``), pairs become ``skipped`` rows (module docstring). A
    ``worker`` passed in is used and left running; otherwise one is made and stopped here.
    ``shared`` maps ``job.run_key + (query name,)`` to rows run before; it is read and extended.
    """
    from tqdm.auto import tqdm

    own_worker = worker is None
    worker = make_worker(isolation) if own_worker else worker
    jobs = list(jobs)
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    drop_skipped(out_csv)
    settings = {id(job): job.settings for job in jobs}
    check_settings(out_csv, {(job.experiment, job.config, job.dataset): settings[id(job)] for job in jobs},
                   rerun_changed)
    done = {tuple(str(v) for v in key) for key in read_rows(out_csv)[list(KEY)].itertuples(index=False)}
    todo = {id(job): [i for i, q in enumerate(job.queries)
                      if (job.experiment, job.config, job.dataset, q.name) not in done]
            for job in jobs}
    bar = tqdm(total=sum(map(len, todo.values())), unit="query", disable=not progress)
    solved = 0
    with RowFile(out_csv, ROW_FIELDS) as writer, bar:
        try:
            for job in jobs:
                if todo[id(job)]:
                    bar.set_description(f"{job.config} on {job.dataset}")
                for index in todo[id(job)]:
                    query = job.queries[index]
                    key = job.run_key + (query.name,) if shared is not None and job.run_key else None
                    if key is not None and key in shared:
                        kind, payload = "row", dict(shared[key])
                    elif deadline is not None and time.monotonic() >= deadline:
                        kind, payload = SKIPPED, "budget"
                    else:
                        kind, payload = worker.ask(job, index)
                    row = payload if kind == "row" else _failure_row(job, query, kind, payload)
                    if key is not None and row["status"] != SKIPPED:
                        if key in shared:
                            source = shared[key]
                            note = f"same run as {source['experiment']} ({source['config']})"
                            row["reason"] = f"{row['reason']}; {note}" if row.get("reason") else note
                        else:
                            shared[key] = dict(row, experiment=job.experiment, config=job.config)
                    row.update(experiment=job.experiment, config=job.config, dataset=job.dataset,
                               query=query.name, engine=job.engine,
                               stats=with_settings(row.get("stats"), settings[id(job)]))
                    writer.write(row)
                    solved += row["status"] == "ok"
                    bar.set_postfix(solved=solved)
                    bar.update(1)
        finally:
            if own_worker:
                worker.stop()
    return read_rows(out_csv)
