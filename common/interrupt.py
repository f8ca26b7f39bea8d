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


def interrupted_line(tally: Tally, resume: str) -> str:
    total = "?" if tally.total is None else tally.total
    unit = f" {tally.unit}" if tally.unit else ""
    note = f" ({tally.note})" if tally.note else ""
    return f"interrupted: {tally.done} of {total}{unit} done{note}; resume with: {resume}"


@contextmanager
def interruptible(resume: str, *, save=None, total: int | None = None, unit: str = ""):
    """Run the block; on Ctrl-C save what finished, print one line, exit 130 (module docstring).

    ``resume`` is the command that carries on (or runs again) from where this one stopped; it may
    be a callable of the tally, called after ``save``.
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
        print(interrupted_line(tally, text), file=sys.stderr, flush=True)
        raise SystemExit(INTERRUPTED) from None
