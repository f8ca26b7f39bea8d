"""A query's deadline and the one exception that ends a search early (docs/design.md, "The
engine contract").

Every engine turns ``timeout_s`` into one :class:`Deadline` when its search starts, checks it
between launches or steps (:meth:`Deadline.check`) and hands :attr:`Deadline.at` to a
:class:`~common.gpu.watch.LaunchWatch` that stops a running kernel. A search that must end before
it is done raises :class:`Stop` with the status the result takes (``timeout`` past the deadline,
``limit`` once enough embeddings were found, ``oom`` when a table outgrows its memory) and a
reason; the engine catches it where it builds the result.
"""

from __future__ import annotations

import time

from .result import Status


class Stop(Exception):
    """Ends a search early; the result takes :attr:`status` and :attr:`reason`."""

    def __init__(self, status: Status, reason: str = ""):
        super().__init__(reason or str(status))
        self.status = status
        self.reason = reason


class Deadline:
    """``timeout_s`` seconds on ``time.perf_counter()`` from ``start`` (now when omitted), less
    ``spent`` seconds already charged to the query; no deadline when ``timeout_s`` is None.

    :attr:`at` is the deadline's clock time (None without one), what a launch watch takes.
    """

    __slots__ = ("at",)

    def __init__(self, timeout_s: float | None, start: float | None = None, spent: float = 0.0):
        if timeout_s is None:
            self.at = None
        else:
            self.at = (time.perf_counter() if start is None else start) + timeout_s - spent

    @classmethod
    def at_time(cls, at: float | None) -> "Deadline":
        """A deadline at clock time ``at`` (None: no deadline)."""
        deadline = cls(None)
        deadline.at = at
        return deadline

    @property
    def active(self) -> bool:
        """Whether there is a deadline at all."""
        return self.at is not None

    def passed(self) -> bool:
        """Whether the deadline has passed (never without one)."""
        return self.at is not None and time.perf_counter() > self.at

    def check(self, reason: str = "") -> None:
        """Raise :class:`Stop` with status ``timeout`` (and ``reason``) once the deadline has passed."""
        if self.at is not None and time.perf_counter() > self.at:
            raise Stop(Status.TIMEOUT, reason)

    def remaining(self) -> float | None:
        """Seconds left (negative once passed); None without a deadline."""
        return None if self.at is None else self.at - time.perf_counter()

    def earlier(self, at: float) -> float:
        """The earlier of the deadline and clock time ``at``."""
        return at if self.at is None else min(self.at, at)

    def __repr__(self) -> str:
        return f"Deadline(at={self.at!r})"
