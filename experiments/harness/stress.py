"""Stress the results files: kill a running experiment at random moments, damage its CSV's tail,
resume, and check that the finished CSV equals an undisturbed run's (counts and statuses).

``python -m experiments.harness.stress [--kills 20] [--seed 1] [--out DIR]`` runs a toy experiment
(``stress.toy``: the CPU reference behind a fixed per-query delay, so rows come at a steady
rate; about a minute in all) once undisturbed, then again killed (SIGKILL, now and then
SIGTERM) ``--kills`` times at random moments, with the five tail damages of :data:`DAMAGES`
applied between kills, and once more to completion. ``--experiment NAME`` stresses a declared
experiment at ``tiny`` scale instead (slower: each restart compiles its kernels). Exit status 0
when the two CSVs agree.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import create_engine
from common.engine.base import Engine
from common.engine.registry import register

from .core import Config, Experiment, Metric, Point, run_set
from .runner import KEY, read_rows
from .store import LOCK_NAME
from .workloads import Dataset, QuerySpec


class DelayedReference(Engine):
    """The CPU reference, after a fixed ``delay_s`` per query (rows at a steady rate)."""

    name = "stress-cpu"
    supports_disconnected = True

    def __init__(self, *, delay_s: float = 0.1, device_memory_limit=None):
        super().__init__(device_memory_limit=device_memory_limit)
        self.delay_s = float(delay_s)

    def _prepare(self, data):
        self.reference = create_engine("cpu").prepare(data)

    def _match(self, query, *, limit, collect, timeout_s, homomorphic):
        time.sleep(self.delay_s)
        result = self.reference.match(query)
        result.stats["note"] = "quoted, with commas"        # a quoted field to cut into
        return result


register("stress-cpu", DelayedReference)


def toy_experiment(queries: int = 6, delay_s: float = 0.1) -> Experiment:
    """Two configurations x two query sizes x ``queries`` queries."""
    dataset = Dataset("toy", 500, 2000, vertex_labels=3)
    points = (Point("toy-4", dataset, QuerySpec("induced", size=4, count=queries)),
              Point("toy-3", dataset, QuerySpec("induced", size=3, count=queries)))
    configs = (Config.of("a", "stress-cpu", delay_s=delay_s),
               Config.of("b", "stress-cpu", delay_s=delay_s * 1.01))
    return Experiment("stress.toy", "stress", "stress toy", configs, points, Metric("avg_ms"),
                      time_limit_s=60.0, scale_at={"tiny": {"queries_per_set": queries}})


# ---------------------------------------------------------------------- tail damages
def _last_row(data: bytes) -> int:
    """Offset where the last row starts (after the header), or -1 when there is none."""
    body = data.rstrip(b"\r\n")
    start = body.rfind(b"\n") + 1
    return start if start > 0 else -1


def cut_middle(data: bytes) -> bytes:
    start = _last_row(data)
    return data[:start + (len(data) - start) // 2]


def cut_quoted(data: bytes) -> bytes:
    start = _last_row(data)
    quote = data.find(b'"', start)
    return data[:quote + 5] if quote >= 0 else cut_middle(data)


def no_newline(data: bytes) -> bytes:
    return data.rstrip(b"\r\n")


def wrong_fields(data: bytes) -> bytes:
    start = _last_row(data)
    row = data[start:].rstrip(b"\r\n")
    return data[:start] + row.rsplit(b",", 3)[0] + b"\r\n"


def stray_header(data: bytes) -> bytes:
    start = _last_row(data)
    header = data[:data.find(b"\n") + 1]
    return data + header + data[start:]


DAMAGES = {"cut in the middle of the last row": cut_middle,
           "cut inside the last row's quoted field": cut_quoted,
           "final newline removed": no_newline,
           "last row's last fields removed": wrong_fields,
           "header and a duplicate row appended": stray_header}


# ---------------------------------------------------------------------- driver
def _command(out: Path, args) -> list[str]:
    if args.experiment:
        return [sys.executable, "-m", "experiments", args.experiment, "--scale", "tiny", "--out", str(out),
                "--quiet", "--isolation", args.isolation]
    return [sys.executable, "-m", "experiments.harness.stress", "--child", str(out), "--queries", str(args.queries),
            "--delay", str(args.delay), "--isolation", args.isolation]


def _csv(out: Path, args) -> Path:
    if args.experiment:
        paper = args.experiment.split(".")[0]
        return out / paper / f"{args.experiment}.tiny.csv"
    return out / "stress" / "stress.toy.tiny.csv"


def _summary(path: Path) -> list:
    rows = read_rows(path)
    return sorted(tuple(str(v) for v in r) for r in rows[[*KEY, "status", "count"]].itertuples(index=False))


def _rows_in(path: Path) -> int:
    try:
        return max(0, path.read_bytes().count(b"\n") - 1)
    except FileNotFoundError:
        return 0


def stress(args, log=print) -> bool:
    """Run the undisturbed and the disturbed runs (module docstring); True when they agree."""
    rng = random.Random(args.seed)
    root = Path(args.out or tempfile.mkdtemp(prefix="gpusm-stress-"))
    calm, rough = root / "undisturbed", root / "disturbed"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    began, first_row_s = time.monotonic(), None
    child = subprocess.Popen(_command(calm, args), env=env, stdout=subprocess.DEVNULL)
    while child.poll() is None:                 # when rows start coming, and how fast
        if first_row_s is None and _rows_in(_csv(calm, args)):
            first_row_s = time.monotonic() - began
        time.sleep(0.02)
    if child.returncode != 0:
        raise RuntimeError(f"the undisturbed run failed (exit {child.returncode}): {_command(calm, args)}")
    full_s = time.monotonic() - began
    first_row_s = first_row_s or full_s
    total = _rows_in(_csv(calm, args))
    per_row_s = (full_s - first_row_s) / max(total - 1, 1)
    log(f"undisturbed: {total} rows in {full_s:.1f} s, the first after {first_row_s:.1f} s ({calm})")
    path = _csv(rough, args)
    schedule: dict[int, list] = {}              # damages spread over the kills
    for i, name in enumerate(DAMAGES):
        at = min(args.kills - 1, (i + 1) * args.kills // (len(DAMAGES) + 1))
        schedule.setdefault(at, []).append(name)
    pending: list = []                           # damages not done yet (no row to damage)
    for kill in range(args.kills):
        before = _rows_in(path)
        child = subprocess.Popen(_command(rough, args), env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        started = time.monotonic()
        # most kills land while rows are being written, some before the first one
        startup, writing = rng.uniform(0.5, 1.0) * first_row_s, rng.uniform(0, 0.7) * (total - before) * per_row_s
        if before == 0 and (pending or schedule.get(kill)):
            # a damage is due and needs a row: the kill lands after this run's first row, however
            # slowly the run starts on a loaded host
            while child.poll() is None and not _rows_in(path):
                time.sleep(0.02)
            time.sleep(writing)
        else:
            time.sleep(startup + writing)
        moment = time.monotonic() - started
        how = signal.SIGTERM if kill % 4 == 3 else signal.SIGKILL
        if child.poll() is None:
            child.send_signal(how)
        child.wait()
        pending += schedule.get(kill, [])
        note = []
        while pending and path.exists() and _last_row(path.read_bytes()) > 0:
            name = pending.pop(0)
            path.write_bytes(DAMAGES[name](path.read_bytes()))
            note.append(name)
        log(f"kill {kill + 1:2d}/{args.kills}: {how.name} after {moment:5.2f} s (exit {child.returncode}), "
            f"rows {before} -> {_rows_in(path)}" + (f"; damaged: {', '.join(note)}" if note else ""))
    if pending:
        log(f"not done (no row to damage): {', '.join(pending)}")
    done = subprocess.run(_command(rough, args), env=env, capture_output=True, text=True)
    same = not pending and done.returncode == 0 and _summary(path) == _summary(_csv(calm, args))
    leftovers = [p.name for p in path.parent.iterdir() if p.name.startswith(".") or p.name == LOCK_NAME]
    aside = path.with_name(path.name + ".damaged")
    log(f"final run: exit {done.returncode}; {_rows_in(path)} rows; "
        f"{'EQUAL to' if same else 'DIFFERENT from'} the undisturbed run (counts and statuses); "
        f"set aside: {aside.read_text().count(chr(10) + '#') + 1 if aside.exists() else 0} damaged rows; "
        f"leftover temporary or lock files: {leftovers or 'none'}")
    if done.returncode != 0:
        log(done.stderr[-2000:])
    return same and not leftovers


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments.harness.stress", description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="folder for both runs (default: a new temporary folder)")
    parser.add_argument("--queries", type=int, default=6, help="queries per set of the toy experiment")
    parser.add_argument("--delay", type=float, default=0.1, help="seconds per query of the toy experiment")
    parser.add_argument("--experiment", help="stress this declared experiment at tiny scale instead")
    parser.add_argument("--isolation", default="inline", choices=["inline", "process"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.child:
        run_set("stress", "tiny", args.child, experiments=[toy_experiment(args.queries, args.delay)],
                isolation=args.isolation, progress=False, log=lambda line: None)
        return 0
    if args.kills < 1:
        parser.error("--kills must be at least 1")
    return 0 if stress(args) else 1


if __name__ == "__main__":
    sys.exit(main())
