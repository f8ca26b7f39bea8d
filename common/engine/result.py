"""What every engine returns: :class:`MatchResult` (docs/design.md, "Results and statuses")."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np


class Status(str, Enum):
    """How a run ended. Only ``ok`` and ``limit`` carry a count a caller can rely on."""

    OK = "ok"                    # the count is exact
    LIMIT = "limit"              # stopped after ``limit`` embeddings: count == limit
    TIMEOUT = "timeout"          # deadline passed: count is a lower bound
    OOM = "oom"                  # device-memory budget exceeded: count is a lower bound
    OVERFLOW = "overflow"        # the count passed the engine's counters: count is a lower bound
    UNSUPPORTED = "unsupported"  # the engine cannot take this query (``reason`` says why)
    ERROR = "error"              # the run failed without a count (a crash; ``reason`` says how)

    def __str__(self) -> str:
        return self.value


PHASES = ("filter", "index", "plan", "enumerate", "transfer")


@dataclass
class MatchResult:
    """Count, status and measurements of one query on one engine.

    Parameters
    ----------
    engine : str
        Name of the engine that answered (``"cpu"``, ``"gsi"``, ...).
    count : int
        Embeddings found: the exact number when ``status`` is ``ok``, else a lower bound. A
        Python int, exact past 2^64.
    status : Status or str
        ``ok``, ``limit`` (stopped at ``limit``), ``timeout``, ``oom``, ``overflow`` (the count
        passed the engine's counters; ``reason`` says which) or ``unsupported``.
    reason : str
        Why the status is not ``ok`` (empty when it is).
    embeddings : numpy.ndarray or None
        With ``collect=True``: one row per embedding, column ``u`` the data vertex of query
        vertex ``u``; else None.
    phases : dict of str to float
        Seconds per phase of :data:`PHASES` (device-event timed on a GPU, wall-clock on the CPU).
    peak_device_bytes : int
        Most device memory the query held at once.
    stats : dict
        Engine statistics; every search reports ``order`` and ``candidate_sizes``
        (docs/statistics.md lists every name).
    query : str
        The query graph's name.

    Examples
    --------
    >>> from common import Graph, match
    >>> data = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], labels=[0, 0, 1])
    >>> edge = Graph.from_edges(2, [0], [1], labels=[0, 1])
    >>> result = match(data, edge, collect=True)
    >>> result.status, result.count, result.embeddings.tolist()
    (<Status.OK: 'ok'>, 2, [[0, 2], [1, 2]])
    """

    engine: str
    count: int = 0
    status: Status = Status.OK
    reason: str = ""
    embeddings: np.ndarray | None = None
    phases: dict[str, float] = field(default_factory=dict)
    peak_device_bytes: int = 0
    stats: dict = field(default_factory=dict)
    query: str = ""

    def __post_init__(self):
        self.status = Status(self.status)
        self.count = int(self.count)

    @property
    def exact(self) -> bool:
        """True when ``count`` is the full number of embeddings."""
        return self.status is Status.OK

    @property
    def seconds(self) -> float:
        """Sum of the phase times."""
        return float(sum(self.phases.values()))

    @classmethod
    def unsupported(cls, engine: str, reason: str, query: str = "") -> "MatchResult":
        return cls(engine=engine, status=Status.UNSUPPORTED, reason=reason, query=query)

    def to_row(self) -> dict:
        """Flat dict for CSV/JSON output: scalars only (embeddings and nested stats left out)."""
        row = {"engine": self.engine, "query": self.query, "status": str(self.status),
               "count": self.count, "seconds": self.seconds,
               "peak_device_bytes": self.peak_device_bytes, "reason": self.reason}
        row.update({f"{name}_s": self.phases.get(name, 0.0) for name in PHASES})
        row.update({k: v for k, v in self.stats.items() if isinstance(v, (int, float, str, bool))})
        return row

    def __repr__(self) -> str:
        reason = f", reason={self.reason!r}" if self.reason else ""
        emb = "" if self.embeddings is None else f", embeddings={self.embeddings.shape}"
        return (f"MatchResult(engine={self.engine!r}, count={self.count}, status={self.status}"
                f"{reason}{emb}, seconds={self.seconds:.6f})")


def results_frame(results) -> "pandas.DataFrame":  # noqa: F821
    """A pandas DataFrame with one row per :class:`~common.engine.result.MatchResult` (its ``to_row()``):
    engine, query, status, count, seconds, per-phase seconds, peak device bytes and scalar stats."""
    import pandas as pd

    if isinstance(results, MatchResult):
        results = [results]
    rows = []
    for result in results:
        if not isinstance(result, MatchResult):
            raise TypeError(f"results_frame takes MatchResult objects, got {type(result).__name__}")
        rows.append(result.to_row())
    frame = pd.DataFrame(rows)
    if "status" in frame:
        frame["exact"] = frame["status"] == "ok"
    return frame
