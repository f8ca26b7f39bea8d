"""Command line of the experiments: run sets (sequentially or one process per GPU), plan, list.

``python -m experiments --paper gsi_icde20 --scale small [--budget 400]`` runs one paper's set;
``--all`` runs every set; ``--gpus 0,1,2,3`` runs the sets as separate processes, each pinned to
one GPU with ``CUDA_VISIBLE_DEVICES`` by :func:`experiments.harness.core.assign_gpus` (a GPU's sets run
one after the other), each writing its log to ``OUT/<paper>/run.log``; ``--dask local-cuda``
(or ``local``, or a scheduler's address) runs the cells of the chosen sets as Dask tasks, one
GPU per worker, resumable through the store (:mod:`experiments.harness.cells`; with ``--gpus`` the
local cluster takes those GPUs); ``--plan`` prints the
worst-case seconds per experiment, per set and per GPU instead of running. A run into an ``--out``
that holds rows measured under other settings (time limit, repeats, memory cap, options), or rows
that record none, stops before any query with one line naming them; ``--rerun-changed`` sets them
aside and runs them again. The exit status is non-zero if any set failed (an engine not built, a
count disagreement, a crashed set, rows of other settings).

``add_arguments`` and ``run`` are what ``gpusm experiment`` needs to offer the same options
(``run(args, command="gpusm " + shlex.join(sys.argv[1:]))``).
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from common.interrupt import interruptible

from . import PAPERS, experiments_of, get_experiment

# experiments.harness.core (pandas) is imported by the commands that run or plan, not by add_arguments:
# `gpusm match` builds the whole parser and should not pay for the harness.


def _budget_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:        # 0: every pair is recorded as skipped
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("names", nargs="*", help="experiment names, e.g. compare.known")
    parser.add_argument("--paper", help="run every experiment of this paper module")
    parser.add_argument("--all", action="store_true", help="run every paper's set")
    parser.add_argument("--scale", choices=["tiny", "small", "medium", "large", "full"],
                        help="default: small on a GPU, tiny in the CUDA simulator (no GPU); a larger scale "
                             "in the simulator warns with its plan and asks first")
    parser.add_argument("--yes", "-y", action="store_true",
                        help="do not ask before a scale above tiny in the simulator")
    parser.add_argument("--out", default="results", help="output folder (one subfolder per paper)")
    parser.add_argument("--budget", type=_budget_seconds, help="seconds of wall time per set (with --gpus: for "
                        "the whole run); queries not started by then are recorded as skipped")
    parser.add_argument("--gpus", help="comma-separated GPU ids: one process per set, pinned to a GPU")
    parser.add_argument("--dask", metavar="CLUSTER", help="run the cells as Dask tasks: local-cuda (one worker per "
                        "GPU, --gpus picks them), local (CPU processes), or a scheduler address")
    parser.add_argument("--dask-workers", type=int, help="--dask local: number of worker processes (default 2)")
    parser.add_argument("--rerun-changed", action="store_true",
                        help="rows already in --out measured under other settings (time limit, repeats, memory "
                             "cap, options) or recording none: set them aside in <file>.discarded and run them "
                             "again (default: stop with an error naming them)")
    parser.add_argument("--plan", action="store_true", help="print the worst-case plan and exit")
    parser.add_argument("--isolation", default="process", choices=["process", "inline"],
                        help="process: each engine in a worker with a hard time limit per query")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _selection(args) -> dict[str, list[str] | None]:
    """Paper -> experiment names to run (None: all of them), in ``PAPERS`` order."""
    chosen: dict[str, list[str] | None] = {}
    if args.all:
        chosen = {paper: None for paper in PAPERS}
    if args.paper:
        experiments_of(args.paper)               # validates the name
        chosen[args.paper] = None
    for name in args.names:
        paper = get_experiment(name).paper
        if chosen.get(paper, []) is not None:
            chosen.setdefault(paper, []).append(name)
    return {p: chosen[p] for p in PAPERS if p in chosen}


def default_scale() -> str:
    """``tiny`` in the CUDA simulator (no GPU), else ``small``."""
    from common import BACKEND

    return "tiny" if BACKEND == "simulator" else "small"


def simulator_plan(selection: dict, scale: str) -> dict[str, float]:
    """Set -> about how many seconds it takes in the CUDA simulator (:func:`workloads.simulator_seconds`)."""
    from .harness.core import plan
    from .harness.workloads import simulator_seconds

    return {paper: simulator_seconds(plan([e for e in experiments_of(paper) if names is None or e.name in names],
                                          scale), scale)
            for paper, names in selection.items()}


def confirm_simulator(selection: dict, scale: str, assume_yes: bool, parallel: int = 1) -> bool:
    """In the simulator, above ``tiny``: warn with the simulator's plan; ask when stdin is a terminal.

    True to go on: on a GPU, at ``tiny``, with ``assume_yes``, without a terminal (after the
    warning), or when the user answers yes.
    """
    from common import BACKEND

    if BACKEND != "simulator" or scale == "tiny":
        return True
    seconds = simulator_plan(selection, scale)
    here = sum(seconds.values()) / max(1, min(parallel, len(seconds)))
    tiny = sum(simulator_plan(selection, "tiny").values())
    print(f"warning: no GPU, kernels run in the CUDA simulator: --scale {scale} takes about {here / 60:.0f} min "
          f"here (most queries time out), --scale tiny about {tiny:.0f} s", file=sys.stderr, flush=True)
    if assume_yes or not sys.stdin.isatty():
        return True
    try:
        answer = input(f"run --scale {scale} in the simulator? [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def print_plan(selection: dict, scale: str, gpus: list[str] | None) -> dict[str, float]:
    """Print the worst case per experiment and per set (and per GPU); return set -> worst seconds.

    In the CUDA simulator each set's line also gives its simulator estimate.
    """
    from common import BACKEND

    from .harness.core import assign_gpus, format_plan, plan

    worst, spread, compiles = {}, 0.0, 0.0
    simulated = simulator_plan(selection, scale) if BACKEND == "simulator" else {}
    for paper, names in selection.items():
        chosen = [e for e in experiments_of(paper) if names is None or e.name in names]
        lines = plan(chosen, scale)
        if not lines:                                  # no experiment of the set runs at this scale
            continue
        worst[paper] = sum(line.worst_s for line in lines)
        spread += sum(line.query_s + line.warmup_s for line in lines)
        compiles += sum(line.compile_s for line in lines)
        print(format_plan(paper, lines))
        if paper in simulated:
            print(f"in the CUDA simulator (no GPU here): about {simulated[paper]:.0f} s "
                  f"(experiments/harness/workloads.py, simulator_seconds)")
        print()
    if gpus:
        for gpu, papers in assign_gpus(worst, gpus).items():
            total = sum(worst[p] for p in papers)
            print(f"GPU {gpu}: {' + '.join(papers) or '(idle)'} = {total:.0f} s worst case ({total / 60:.1f} min)")
        # --dask spreads the cells over the GPUs; in the worst case every GPU compiles every configuration
        per_gpu = spread / len(gpus) + compiles
        print(f"--dask on {len(gpus)} GPUs: about {per_gpu:.0f} s worst case per GPU ({per_gpu / 60:.1f} min; "
              f"cells spread evenly, every configuration compiled on every GPU)")
    return worst


def _gpu_refusal(dask: str | None, gpus: list[str] | None) -> str | None:
    """Why ``--dask local-cuda`` or ``--gpus`` cannot run on this machine (None: they can)."""
    from common.gpu.backend import gpu_count, gpu_missing_reason

    wanted = "--dask local-cuda" if dask == "local-cuda" else f"--gpus {','.join(gpus)}" if gpus else None
    if wanted is None:
        return None
    reason = gpu_missing_reason()
    if reason:
        return f"{wanted} needs NVIDIA GPUs: {reason} (--plan prints the plan without them)"
    count = gpu_count()
    absent = [g for g in gpus or [] if count is not None and not (g.isdigit() and int(g) < count)]
    if absent:
        return f"{wanted}: no GPU {', '.join(absent)} here (nvidia-smi lists {count}: ids 0-{count - 1})"
    return None


def launch(papers: list[str], gpus: list[str], scale: str, out: str, budget_s: float | None,
           launcher: str, rerun_changed: bool = False) -> int:
    """Run each set as ``python -m experiments --paper P`` pinned to its GPU; non-zero if any failed."""
    from .harness.core import assign_gpus, plan_set
    from .harness.report import LAUNCHER_ENV

    worst = {paper: sum(line.worst_s for line in plan_set(paper, scale)) for paper in papers}
    assignment = assign_gpus(worst, gpus)
    start = time.monotonic()
    results: dict[str, tuple[str, int, float]] = {}
    stop = threading.Event()                  # Ctrl-C: launch nothing more
    running: dict[str, subprocess.Popen] = {}
    lock = threading.Lock()

    def chain(gpu: str) -> None:
        for paper in assignment[gpu]:
            if stop.is_set():
                return
            log = Path(out) / paper / "run.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, "-m", "experiments", "--paper", paper, "--scale", scale,
                       "--out", out, "--quiet", "--yes"]
            if budget_s is not None:
                command += ["--budget", f"{max(0.0, budget_s - (time.monotonic() - start)):.0f}"]
            if rerun_changed:
                command += ["--rerun-changed"]
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu, PYTHONUNBUFFERED="1")
            env[LAUNCHER_ENV] = launcher
            began = time.monotonic()
            with log.open("w") as handle:
                handle.write(f"$ CUDA_VISIBLE_DEVICES={gpu} {shlex.join(command)}\n")
                handle.flush()
                with lock:
                    if stop.is_set():
                        return
                    # its own session: Ctrl-C reaches the launcher, which stops it (and its workers)
                    child = running[gpu] = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT,
                                                            env=env, start_new_session=True)
                code = child.wait()
                running.pop(gpu, None)
            results[paper] = (gpu, code, time.monotonic() - began)
            print(f"[{time.monotonic() - start:7.1f} s] {paper} on GPU {gpu}: exit {code}, log {log}", flush=True)

    def halt(tally) -> None:
        """Stop launching; Ctrl-C to the running sets (they keep their rows), then kill what is left."""
        with lock:
            stop.set()
            children = list(running.values())
        for child in children:
            _signal_group(child, signal.SIGINT)
        ends = time.monotonic() + 1.5
        for child in children:
            try:
                child.wait(max(0.0, ends - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(child, signal.SIGKILL)
                child.wait()
        tally.done = sum(1 for code in results.values() if code[1] == 0)
        tally.note = f"finished rows in {out}/<paper>/"

    for gpu, papers in assignment.items():
        print(f"GPU {gpu}: {' + '.join(papers) or '(idle)'} "
              f"({sum(worst[p] for p in papers):.0f} s worst case)", flush=True)
    threads = [threading.Thread(target=chain, args=(gpu,), daemon=True) for gpu in gpus if assignment[gpu]]
    with interruptible(launcher, save=halt, total=len(papers), unit="sets"):
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():            # a join with a timeout lets Ctrl-C through
                thread.join(0.2)
    failed = [p for p in papers if results.get(p, ("", 1, 0))[1] != 0]
    print(f"all sets done in {time.monotonic() - start:.0f} s"
          + (f"; FAILED: {', '.join(failed)} (see their run.log)" if failed else ""))
    return 1 if failed else 0


def _signal_group(child: subprocess.Popen, number: int) -> None:
    """Send ``number`` to ``child``'s process group (its session: the set and its workers)."""
    try:
        os.killpg(child.pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def run(args, command: str | None = None) -> int:
    """Carry out parsed arguments (:func:`add_arguments`); the exit status.

    ``command`` is the command line the outputs record (default: this process's, as
    ``python -m experiments ...``).
    """
    command = command or f"python -m experiments {shlex.join(sys.argv[1:])}".strip()
    args.scale = args.scale or default_scale()
    selection = _selection(args)
    if args.list or not selection:
        for experiment in experiments_of():
            missing = experiment.missing_engines()
            state = f"  (needs {', '.join(missing)}: not built)" if missing else ""
            print(f"{experiment.name:36s} {experiment.title}{state}")
        return 0
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()] if args.gpus else None
    if not args.plan:
        from common.cli.main import check_writable

        for paper in selection:                 # before any work: an --out that cannot be written
            try:
                check_writable(Path(args.out) / paper, folder=True)
            except ValueError as exc:
                print(f"experiments: error: {exc}", file=sys.stderr)
                return 2
    if args.plan:
        print_plan(selection, args.scale, gpus)
        return 0
    refusal = _gpu_refusal(args.dask, gpus)
    if refusal:
        print(f"experiments: error: {refusal}", file=sys.stderr)
        return 2
    if not confirm_simulator(selection, args.scale, getattr(args, "yes", False), len(gpus or [1])):
        print(f"experiments: not run; --scale tiny runs in the simulator in seconds ({command} --scale tiny)",
              file=sys.stderr)
        return 1
    from .harness.core import standin_specs
    from .harness.workloads import StandinPrefetch

    with StandinPrefetch(standin_specs(selection, args.scale)) as prefetch:
        if len(prefetch.specs) > 1:
            print(f"experiments: {prefetch.describe()}", flush=True)
        return _dispatch(args, selection, gpus, command)


def _dispatch(args, selection: dict, gpus: list[str] | None, command: str) -> int:
    """Run the selection: on Dask, as one process per GPU, or set after set in this process."""
    from .harness.core import run_set
    from .harness.runner import SettingsChanged
    from .harness.store import FolderLocked

    if args.dask:
        if args.budget is not None:
            raise SystemExit("--budget is not supported with --dask (a resumed run fills in what is missing)")
        from .harness.cells import make_client, run_on_dask

        try:
            client, cluster = make_client(args.dask, gpus, args.dask_workers)
        except ValueError as exc:
            print(f"experiments: error: {exc}", file=sys.stderr)
            return 2
        try:
            return run_on_dask(selection, args.scale, args.out, client=client, isolation=args.isolation,
                               command=command, progress=not args.quiet, log=lambda line: print(line, flush=True),
                               rerun_changed=getattr(args, "rerun_changed", False))
        except SettingsChanged as exc:         # rows of other settings: nothing ran, nothing changed
            print(f"experiments: error: {exc}", file=sys.stderr)
            return 2
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    if gpus:
        if any(names is not None for names in selection.values()):
            raise SystemExit("--gpus runs whole sets: give --all or --paper, not experiment names")
        return launch(list(selection), gpus, args.scale, args.out, args.budget, command,
                      rerun_changed=getattr(args, "rerun_changed", False))
    failed = False
    for paper, names in selection.items():
        try:
            outcome = run_set(paper, args.scale, args.out, names=names, budget_s=args.budget,
                              isolation=args.isolation, progress=not args.quiet, command=command,
                              log=lambda line: print(line, flush=True),
                              rerun_changed=getattr(args, "rerun_changed", False))
        except FolderLocked as exc:           # another run writes there: say who, touch nothing
            print(f"experiments: {exc}", file=sys.stderr)
            failed = True
            continue
        except SettingsChanged as exc:        # rows of other settings there: refused before any query
            print(f"experiments: error: {exc}", file=sys.stderr)
            failed = True
            continue
        except Exception:                     # one broken set must not stop the others
            traceback.print_exc()
            print(f"experiments: set {paper} FAILED", file=sys.stderr)
            failed = True
            continue
        for done in outcome.outcomes:
            print(f"\n{done.experiment.name} [{args.scale}]: " + ", ".join(str(f) for f in done.files))
            print(done.table.to_string())
            if len(done.disagreements):
                print(f"COUNT DISAGREEMENTS in {done.experiment.name}:\n{done.disagreements.to_string()}",
                      file=sys.stderr)
        for reason in outcome.missing.values():
            print(f"experiments: {reason}", file=sys.stderr)
        failed |= outcome.failed
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(prog="python -m experiments", description=__doc__.split("\n")[0]))
    args = parser.parse_args(argv)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("experiments: interrupted (run again to resume)", file=sys.stderr)
        return 130
