"""The cells of experiment sets as Dask tasks: one configuration x point per task, one GPU per worker.

``python -m experiments --paper stwig_lin14 --scale medium --dask local-cuda`` runs a set on a
``dask_cuda.LocalCUDACluster`` (one worker per visible GPU; ``--gpus 0,1`` picks them),
``--dask local`` on CPU processes (the simulator, tests), ``--dask tcp://host:8786`` on a running
cluster. :func:`run_on_dask`:

1. lists the cells (experiment, configuration, point) of the chosen sets; no data graph is
   built on the client;
2. reads each experiment's CSV (the store), after checking that its rows were measured under
   this run's settings (:meth:`experiments.harness.core.Experiment.check_settings`): a cell whose
   queries are all there is done, and a cell's task skips the queries already there, so an
   interrupted run resumes where it stopped;
   a task appends each answered query to a partial file (``OUT/.partial/``, one per task) as it
   goes, and a later run first moves the rows of a task that did not finish into the CSVs, so a
   call killed in the middle of a long cell loses no finished query;
3. groups the cells that make identical runs (:meth:`experiments.harness.core.Experiment.run_key`: the
   same engine options, data graph, queries and limits) into one task; its rows go to every
   member's CSV, the copies' ``reason`` naming the run they repeat (as :func:`runner.run_jobs`);
4. submits the tasks, largest worst case first, and appends each task's rows to the CSVs as they
   come back;
5. writes every experiment's reports and ``run.<scale>.json`` through
   :func:`experiments.harness.core.run_set` with a budget of 0 s: every row is there, so nothing runs
   again, and a cell whose task failed reads ``not run`` (run again to fill it in).

On a worker, a task builds its cell's data graph (cached per worker process) and queries and
answers them through :func:`experiments.harness.runner.run_jobs` with one runner worker per Dask worker
process, kept between tasks, so a configuration's kernels are compiled once per GPU. With
``isolation="process"`` the Dask workers must not be daemons (the runner starts a child process);
the local clusters are started that way, and a task on a daemon worker falls back to ``inline``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from common.distributed import worker_addresses

from .catalog import experiments_of, get_experiment
from .runner import KEY, ROW_FIELDS, SKIPPED, make_worker, read_rows, row_problem
from .store import FolderLock, RowFile, repair
from .workloads import get_scale

GPU_ENV = "GPUSM_EXPERIMENT_GPUS"
"""Where the client puts the names of the workers' GPUs, for the reports' headers."""


@dataclass(frozen=True)
class Cell:
    """One (experiment, configuration, point) of a set: ``count`` queries, ``done`` already in its CSV."""

    experiment: str
    config: str
    point: str
    count: int
    done: frozenset
    worst_s: float
    run_key: tuple

    @property
    def complete(self) -> bool:
        return len(self.done) >= self.count


def cells_of(experiments, scale, out_dir: Path) -> list[Cell]:
    """Every cell of ``experiments`` at ``scale`` with the queries its CSV under ``out_dir`` holds."""
    cells = []
    for experiment in experiments:
        here = experiment.scale_for(scale)
        csv = Path(out_dir) / experiment.paper / f"{experiment.name}.{scale.name}.csv"
        rows = read_rows(csv) if csv.exists() else pd.DataFrame(columns=list(ROW_FIELDS))
        rows = rows[(rows.experiment == experiment.name) & (rows.status != SKIPPED)]
        done = {key: set(group["query"].astype(str)) for key, group in rows.groupby(["config", "dataset"])}
        for point, config in experiment.cells_run(scale):
            count = point.queries.count_at(here)
            limit = experiment.time_limit_for(scale) * experiment.repeats_for(scale, config.label)
            cells.append(Cell(experiment.name, config.label, point.label, count,
                              frozenset(done.get((config.label, point.label), ())), count * limit,
                              experiment.run_key(config, point, scale)))
    return cells


def group_cells(cells: list[Cell]) -> list[list[Cell]]:
    """Incomplete cells grouped by identical runs (first member runs, the others copy), largest first."""
    groups: dict[tuple, list[Cell]] = {}
    for cell in cells:
        if not cell.complete:
            groups.setdefault(cell.run_key or (cell.experiment, cell.config, cell.point), []).append(cell)
    return sorted(groups.values(), key=lambda g: -g[0].worst_s)


# ---------------------------------------------------------------------- on a worker
_RUNNER = {}


def _runner(isolation: str):
    """This process's runner worker for ``isolation`` (kept between tasks: compiled kernels stay)."""
    if isolation == "process" and mp.current_process().daemon:
        isolation = "inline"                  # a daemon process cannot start the runner's child
    if isolation not in _RUNNER:
        _RUNNER[isolation] = make_worker(isolation)
    return isolation, _RUNNER[isolation]


def run_cell(experiment: str, config: str, point: str, scale: str, skip: frozenset = frozenset(),
             isolation: str = "process", partial: str | None = None) -> tuple[list[dict], str]:
    """Answer one cell's queries not in ``skip``; its rows (as the CSV holds them: strings) and the GPU's name.

    ``partial``: the file the rows are appended to as they come (a task's partial file: module
    docstring); the queries already there are not run again, and their rows are returned too.
    """
    from .report import gpu_name

    job, _ = get_experiment(experiment).job_for(config, point, get_scale(scale))
    job = replace(job, queries=tuple(q for q in job.queries if q.name not in skip))
    if not job.queries:
        return [], gpu_name()
    isolation, runner = _runner(isolation)
    from .runner import run_jobs

    with tempfile.TemporaryDirectory(prefix="gpusm-cell-") as folder:
        path = Path(partial) if partial else Path(folder) / "cell.csv"
        run_jobs([job], path, isolation=isolation, progress=False, worker=runner)
        rows = pd.read_csv(path, dtype=str, keep_default_na=False).to_dict("records")
    return rows, gpu_name()


def partial_path(out_dir: Path, scale: str, group: list[Cell]) -> Path:
    """The partial file of the task that runs ``group`` (named after its runs, not its members)."""
    import hashlib

    key = group[0].run_key or (group[0].experiment, group[0].config, group[0].point)
    return Path(out_dir) / ".partial" / f"{scale}-{hashlib.sha1(repr(key).encode()).hexdigest()[:16]}.csv"


def recover_partials(out_dir: Path, scale: str, papers: dict, groups: list[list[Cell]]) -> int:
    """Move the rows of tasks an earlier call did not finish (their partial files) into the CSVs of
    ``groups``' cells; the number of rows recovered."""
    recovered = 0
    for group in groups:
        path = partial_path(out_dir, scale, group)
        if not path.exists():
            continue
        repair(path, ROW_FIELDS, KEY, drop_status=SKIPPED, validate=row_problem)
        rows = pd.read_csv(path, dtype=str, keep_default_na=False).to_dict("records") if path.stat().st_size else []
        _write_rows(out_dir, scale, papers, group, rows)
        recovered += len(rows)
        path.unlink()
    return recovered


# ---------------------------------------------------------------------- on the client
def make_client(target: str, gpus: list[str] | None = None, workers: int | None = None):
    """A Dask client and the cluster it started (None for an address): ``local`` (CPU processes,
    ``workers`` of them), ``local-cuda`` (one worker per GPU of ``gpus``, or per visible GPU), or an address."""
    import dask
    import distributed

    if target not in ("local", "local-cuda"):
        return distributed.Client(target), None
    dask.config.set({"distributed.worker.daemon": False})      # the runner starts a child process
    if target == "local":
        cluster = distributed.LocalCluster(n_workers=workers or 2, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
    else:
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            raise ValueError("--dask local-cuda needs dask-cuda: pip install -e '.[dask]'") from None
        options = {"CUDA_VISIBLE_DEVICES": ",".join(gpus)} if gpus else {}
        cluster = LocalCUDACluster(dashboard_address=None, threads_per_worker=1, **options)
    return distributed.Client(cluster), cluster


def _write_rows(out_dir: Path, scale_name: str, papers: dict, group: list[Cell], rows: list[dict]) -> None:
    first = group[0]
    for cell in group:
        paper = papers[cell.experiment]
        path = Path(out_dir) / paper / f"{cell.experiment}.{scale_name}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with RowFile(path, ROW_FIELDS) as writer:
            for row in rows:
                if row["query"] in cell.done:
                    continue
                row = dict(row, experiment=cell.experiment, config=cell.config, dataset=cell.point)
                if cell is not first:
                    note = f"same run as {first.experiment} ({first.config})"
                    row["reason"] = f"{row['reason']}; {note}" if row.get("reason") else note
                writer.write(row)


def run_on_dask(selection: dict, scale: str, out_dir: Path | str, *, client, isolation: str = "process",
                command: str = "", progress: bool = True, log=print, rerun_changed: bool = False) -> int:
    """Run ``selection`` (paper -> experiment names or None) as cell tasks on ``client``; write the
    reports (module docstring). The exit status: non-zero if a task failed, a count disagreed or an
    engine is missing. Rows already in the CSVs but measured under other settings raise
    :class:`~experiments.harness.runner.SettingsChanged` before any task, or with ``rerun_changed``
    are set aside and run again (:meth:`experiments.harness.core.Experiment.check_settings`)."""
    import distributed
    from tqdm.auto import tqdm

    from .core import run_set

    scale_obj = get_scale(scale)
    out_dir = Path(out_dir)
    chosen = {paper: [e for e in experiments_of(paper) if (names is None or e.name in names) and e.runs_at(scale_obj)]
              for paper, names in selection.items()}
    chosen = {paper: experiments for paper, experiments in chosen.items() if experiments}
    papers = {e.name: paper for paper, experiments in chosen.items() for e in experiments}
    resumed = {paper: any((out_dir / paper / f"{e.name}.{scale}.csv").exists() for e in experiments)
               for paper, experiments in chosen.items()}
    locks = [FolderLock(out_dir / paper, command).acquire() for paper in chosen]
    failed = []
    start = time.monotonic()
    try:
        for paper in chosen:                    # whole files, skipped rows dropped (their pairs run again)
            for experiment in chosen[paper]:
                path = out_dir / paper / f"{experiment.name}.{scale}.csv"
                if path.exists():
                    repair(path, ROW_FIELDS, KEY, drop_status=SKIPPED, validate=row_problem)
        runnable = [e for experiments in chosen.values() for e in experiments if not e.missing_engines()]
        for experiment in runnable:             # rows of other settings: refused, or run again
            experiment.check_settings(scale_obj, out_dir, rerun_changed)
        # (a partial file is named after its run key, which holds the settings: what it recovers matches)
        groups = group_cells(cells_of(runnable, scale_obj, out_dir))
        recovered = recover_partials(out_dir, scale, papers, groups)
        if recovered:
            log(f"{recovered} rows of unfinished tasks recovered from {out_dir / '.partial'}")
            groups = group_cells(cells_of(runnable, scale_obj, out_dir))
        log(f"{len(groups)} tasks ({sum(len(g) for g in groups)} cells) on "
            f"{len(worker_addresses(client))} Dask workers")
        for g in groups:
            partial_path(out_dir, scale, g).parent.mkdir(parents=True, exist_ok=True)
        futures = {client.submit(run_cell, g[0].experiment, g[0].config, g[0].point, scale,
                                 frozenset.intersection(*(c.done for c in g)), isolation,
                                 str(partial_path(out_dir, scale, g).resolve()),
                                 pure=False, priority=int(g[0].worst_s)): g for g in groups}
        gpus = set()
        bar = tqdm(total=len(futures), unit="cell", disable=not progress)
        for future in distributed.as_completed(futures):
            group = futures[future]
            try:
                rows, gpu = future.result()
            except Exception as exc:           # the cell stays not run; a later run retries it
                failed.append(f"{group[0].experiment} ({group[0].config}, {group[0].point}): {exc!r}")
                log(f"task FAILED: {failed[-1]}")
            else:
                gpus.add(gpu)
                _write_rows(out_dir, scale, papers, group, rows)
                partial_path(out_dir, scale, group).unlink(missing_ok=True)
            bar.update(1)
        bar.close()
    finally:
        for lock in locks:
            lock.release()
    log(f"[{time.monotonic() - start:7.1f} s] every task done; writing the reports")
    previous = os.environ.get(GPU_ENV)
    if gpus:
        os.environ[GPU_ENV] = ", ".join(sorted(gpus))
    bad = bool(failed)
    try:
        for paper, experiments in chosen.items():
            outcome = run_set(paper, scale, out_dir, experiments=experiments, budget_s=0.0, isolation="inline",
                              progress=False, command=command, log=log, started=start, resumed=resumed[paper])
            for reason in outcome.missing.values():
                log(f"experiments: {reason}")
            for done in outcome.outcomes:
                if len(done.disagreements):
                    log(f"COUNT DISAGREEMENTS in {done.experiment.name}:\n{done.disagreements.to_string()}")
            bad |= outcome.failed
    finally:
        if previous is None:
            os.environ.pop(GPU_ENV, None)
        else:
            os.environ[GPU_ENV] = previous
    return 1 if bad else 0
