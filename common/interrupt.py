"""Ctrl-C in a long command: keep what finished, say how to resume, exit 130.

``with interruptible("python -m ... --out x.csv", save=write) as tally:`` runs the block; the block
counts its work in ``tally.done`` of ``tally.total`` (and may keep rows in ``tally.rows``). On
KeyboardInterrupt, ``save(tally)`` writes what finished (a second Ctrl-C cannot cut it short), one
line ``interrupted: N of M done; resume with: <command>`` goes to stderr, and the command exits with
status 130 (``SystemExit``), without a traceback.
"""

from __future__ import annotations

import shlex
import signal
import sys
from contextlib import contextmanager

INTERRUPTED = 130
"""The exit status of a command stopped by Ctrl-C (128 + SIGINT), as a shell reports it."""


class Tally:
    """What a command finished so far: ``done`` units of ``total`` (None: not known), ``rows``."""

    def __init__(self, total: int | None = None, unit: str = ""):
        self.done = 0
        self.total = total
        self.unit = unit
        self.rows: list = []
        self.note = ""                 # appended to the interrupted line (where the rows went)


def command_line(prog: str, argv: list[str] | None = None) -> str:
    """``prog`` followed by this process's arguments (or ``argv``), quoted for a shell."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join([prog, shlex.join(args)]).strip()


def interrupted_line(tally: Tally, resume: str, starts_over: bool = False) -> str:
    total = "?" if tally.total is None else tally.total
    unit = f" {tally.unit}" if tally.unit else ""
    note = f" ({tally.note})" if tally.note else ""
    how = "no resume here, run again with" if starts_over else "resume with"
    return f"interrupted: {tally.done} of {total}{unit} done{note}; {how}: {resume}"


def csv_rows(path, show=None):
    """A ``save`` for :func:`interruptible`: ``tally.rows`` (dicts) to the CSV ``path``, counted as
    done; ``show(rows)``, if given, prints them too."""
    from pathlib import Path

    def save(tally: Tally) -> None:
        tally.done = len(tally.rows)
        if not tally.rows:
            return
        import pandas as pd

        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(tally.rows).to_csv(target, index=False)
        tally.note = f"rows in {target}"
        if show is not None:
            show(tally.rows)

    return save


@contextmanager
def interruptible(resume: str, *, save=None, total: int | None = None, unit: str = "",
                  starts_over: bool = False):
    """Run the block; on Ctrl-C save what finished, print one line, exit 130 (module docstring).

    ``resume`` is the command that carries on from where this one stopped (a callable of the
    tally: called after ``save``); ``starts_over``: the command has no resume, the line says so and
    gives the command to run again.
    """
    tally = Tally(total, unit)
    try:
        yield tally
    except KeyboardInterrupt:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if save is not None:
                save(tally)
        finally:
            signal.signal(signal.SIGINT, previous)
        text = resume(tally) if callable(resume) else resume
        sys.stdout.flush()
        print(interrupted_line(tally, text, starts_over), file=sys.stderr, flush=True)
        raise SystemExit(INTERRUPTED) from None
