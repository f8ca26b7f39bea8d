"""The verdict rules: pure functions on per-query samples (docs/decisions.md, "Verdicts").

A side of a comparison is a list with one array per query: the values of that query's timed
runs (one value for a statistic that does not vary between runs). :func:`compare` decides
``lower`` / ``higher`` / ``inconclusive`` from a bootstrap over queries and runs;
:func:`too_few` and :func:`too_few_runs` say when a side cannot be judged at all;
:func:`judge_magnitude` judges a printed factor (702x) against the measured one.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

MIN_SOLVED = 10
"""Queries a side needs (solved, or ran for a solved count) before a claim on it is judged."""
MIN_RUNS = 3
"""Timed runs per query a time comparison needs."""
N_BOOT = 2000
LEVEL = 0.95
SEED = 0

HELD, NOT_HELD, DIRECTION, INCONCLUSIVE, MEASURED = (
    "held", "did not hold", "direction only", "inconclusive", "measured")


def not_testable(why: str) -> str:
    """The verdict of a claim that cannot be judged, with its reason in parentheses."""
    return f"not testable ({why})"


class Comparison(NamedTuple):
    """What :func:`compare` found: ``outcome`` and the ratio of the means with its interval."""

    outcome: str          # lower | higher | inconclusive
    ratio: float          # mean(a) / mean(b) (or mean(a) / value)
    low: float            # bootstrap interval of the ratio
    high: float
    n: int                # queries compared (paired: both sides'; else the smaller side)


def _matrix(side) -> tuple[np.ndarray, np.ndarray]:
    """Runs padded to a (queries x max runs) matrix, and each query's run count."""
    side = [np.atleast_1d(np.asarray(v, dtype=float)) for v in side]
    counts = np.array([len(v) for v in side], dtype=int)
    out = np.full((len(side), max(counts, default=1)), np.nan)
    for i, v in enumerate(side):
        out[i, :len(v)] = v
    return out, counts


def _draw(matrix, counts, picks, rng) -> np.ndarray:
    """Per replicate, the mean over the picked queries of one random run of each."""
    runs = np.floor(rng.random(picks.shape) * counts[picks]).astype(int)
    return matrix[picks, runs].mean(axis=1)


def medians(side) -> np.ndarray:
    """Each query's median run."""
    return np.array([float(np.median(np.atleast_1d(v))) for v in side])


def compare(a, b=None, *, value: float | None = None, paired: bool = False, n_boot: int = N_BOOT,
            level: float = LEVEL, seed: int = SEED) -> Comparison:
    """Is ``a`` lower or higher than ``b`` (or than the constant ``value``) beyond the spread?

    A bootstrap resamples queries (``paired``: the same queries on both sides, ``a[i]`` and
    ``b[i]`` being one query) and, per picked query, one of its runs; the difference of the
    means must keep its sign over the central ``level`` of the replicates, else
    ``inconclusive``. The ratio of the means (of the per-query medians) and its interval come along.
    """
    rng = np.random.default_rng(seed)
    ma, ca = _matrix(a)
    if not len(ca):
        raise ValueError("no query on side a")
    ia = rng.integers(0, len(ca), size=(n_boot, len(ca)))
    mean_a = _draw(ma, ca, ia, rng)
    point_a = float(medians(a).mean())
    if b is None:
        if value is None:
            raise ValueError("compare needs b or value")
        mean_b, point_b, n = np.full(n_boot, float(value)), float(value), len(ca)
    else:
        mb, cb = _matrix(b)
        if paired and len(cb) != len(ca):
            raise ValueError("paired sides need the same queries")
        ib = ia if paired else rng.integers(0, len(cb), size=(n_boot, len(cb)))
        mean_b, point_b = _draw(mb, cb, ib, rng), float(medians(b).mean())
        n = len(ca) if paired else min(len(ca), len(cb))
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(mean_a - mean_b, [tail, 100 - tail])
    outcome = "lower" if high < 0 else "higher" if low > 0 else "inconclusive"
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = mean_a / mean_b
        ratio = point_a / point_b if point_b else (math.nan if point_a == 0 else math.inf)
    ratios = ratios[np.isfinite(ratios)]
    r_low, r_high = np.percentile(ratios, [tail, 100 - tail]) if len(ratios) else (math.nan, math.nan)
    return Comparison(outcome, float(ratio), float(r_low), float(r_high), int(n))


def judge_magnitude(measured: float, paper) -> str:
    """A claimed factor (``paper``: a number or a (low, high) range, both > 1 in the claim's
    direction) against the ``measured`` one in the same direction: ``held`` within a factor of 10
    of it (the same order of magnitude), ``direction only`` when only the side of 1 agrees,
    ``did not hold`` when the measured factor is not above 1."""
    low, high = (paper, paper) if np.isscalar(paper) else paper
    if not measured > 1.0:
        return NOT_HELD
    return HELD if low / 10.0 <= measured <= high * 10.0 else DIRECTION


def too_few(*solved: int, minimum: int = MIN_SOLVED) -> str | None:
    """``not testable (N solved)`` when a side has fewer than ``minimum`` queries, else None."""
    if min(solved) >= minimum:
        return None
    return not_testable(" + ".join(str(int(n)) for n in solved) + " solved")


def too_few_runs(runs: int, minimum: int = MIN_RUNS) -> str | None:
    """``inconclusive`` when a timed query has fewer than ``minimum`` runs, else None."""
    return None if runs >= minimum else INCONCLUSIVE


def combine(outcomes: list[str]) -> str:
    """The verdict of a claim made of parts that must all hold (every row, every competitor):
    ``did not hold`` if one part did not, ``held`` if all held, else the weakest part's."""
    if not outcomes:
        return not_testable("nothing to compare")
    if NOT_HELD in outcomes:
        return NOT_HELD
    for weaker in (INCONCLUSIVE, DIRECTION):
        if weaker in outcomes:
            return weaker
    if all(o == HELD for o in outcomes):
        return HELD
    return next(o for o in outcomes if o.startswith("not testable"))
