"""Where a query's work lies below its root, and how to cut it into parts of similar estimated
work: the graph side of the split protocol (:mod:`common.engine.part`).

A part is a range of data vertices for the engine's root (``root_range``) times, below a hub
root, residue classes of its branch vertices (``branch_part``). :func:`split_tasks` plans them
as ``(root_range, branch_part or None)`` pairs from each root candidate's estimated work
(:func:`root_work`, :func:`branch_work`); :func:`plan_split` does it for one query.
"""

from __future__ import annotations

import numpy as np


def _work(weights) -> np.ndarray:
    """Estimated work per candidate: its weight + 1 (every candidate is some work)."""
    return np.asarray(weights, dtype=np.float64) + 1.0


def work_ranges(candidates: np.ndarray, weights: np.ndarray, n: int, parts: int) -> list[tuple[int, int]]:
    """Cut ``[0, n)`` into at most ``parts`` ranges of about equal summed weight of the root's
    candidates (sorted data vertex ids, with one weight each: the estimated work below them).

    The ranges cover ``[0, n)`` without gaps or overlaps, so the parts' counts add up exactly
    whatever the estimate; each holds at least one candidate (no empty parts), and one
    candidate heavier than a share is a range of its own.
    """
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    candidates = np.asarray(candidates, dtype=np.int64)
    if candidates.size <= 1 or parts == 1:
        return [(0, n)]
    work = _work(weights)
    cumulative = np.cumsum(work)
    # a candidate goes to share k when the middle of its work lies in the k-th of ``parts``
    # equal shares of the total; a new range starts wherever the share changes
    share = np.minimum(((cumulative - work / 2) * parts / cumulative[-1]).astype(np.int64), parts - 1)
    starts = np.flatnonzero(np.diff(share) > 0) + 1
    bounds = [0, *candidates[starts].tolist(), n]
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if a < b]


def range_work(candidates: np.ndarray, weights: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    """Estimated work of each range: the summed work (:func:`_work`) of the
    candidates inside it; a split submits its heaviest ranges first, so the longest parts do not
    start last."""
    candidates = np.asarray(candidates, dtype=np.int64)
    cumulative = np.concatenate([[0.0], np.cumsum(_work(weights))])
    bounds = np.searchsorted(candidates, np.asarray(ranges, dtype=np.int64).reshape(-1, 2))
    return cumulative[bounds[:, 1]] - cumulative[bounds[:, 0]]


def _ranges_and_share(candidates: np.ndarray, weights: np.ndarray, n: int, parts: int):
    """(:func:`work_ranges`, each one's :func:`range_work`, a share: the total work / ``parts``)."""
    ranges = work_ranges(candidates, weights, n, parts)
    work = range_work(candidates, weights, ranges)
    return ranges, work, (float(work.sum()) / parts if parts else 0.0)


def label_degree_candidates(data, label: int, degree: int) -> np.ndarray:
    """Data vertices with vertex label ``label`` and degree >= ``degree``, sorted (the estimate
    of a root's candidates that every engine's filter contains)."""
    offsets = np.asarray(data.label_offsets)
    if label >= offsets.size - 1:
        return np.zeros(0, dtype=np.int64)
    vertices = np.sort(np.asarray(data.vertices_by_label[offsets[label]:offsets[label + 1]], dtype=np.int64))
    return vertices[np.asarray(data.degrees)[vertices] >= degree]


def root_work(data, query, root: int, homomorphic: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(the root's candidates by label and degree, each one's estimated work): its degree
    squared, the partial matches two levels below it (a hub's share of the matches grows faster
    than its degree)."""
    degree = 0 if homomorphic else int(query.degrees[root])
    candidates = label_degree_candidates(data, int(query.labels[root]), degree)
    return candidates, np.asarray(data.degrees, dtype=np.float64)[candidates] ** 2


def branch_work(data, query, branch: int, homomorphic: bool = False):
    """A function of a root candidate ``v``: (the branch vertex's candidates by label and degree
    among ``v``'s neighbours, each one's estimated work as in :func:`root_work`): where under a
    hub root the work lies, for :func:`split_tasks`. An estimate only: it takes the branch
    vertex for the root's neighbour, as in a connected order (the cut is exact either way)."""
    degree = 0 if homomorphic else int(query.degrees[branch])
    candidates = label_degree_candidates(data, int(query.labels[branch]), degree)
    offsets, neighbors = np.asarray(data.offsets), np.asarray(data.neighbors)
    degrees = np.asarray(data.degrees, dtype=np.float64)

    def below(v: int) -> tuple[np.ndarray, np.ndarray]:
        found = np.intersect1d(neighbors[offsets[v]:offsets[v + 1]], candidates)
        return found, degrees[found] ** 2
    return below


def plan_split(data, query, root: int, branch: int | None, parts: int,
               homomorphic: bool = False) -> tuple[list, list[float]]:
    """:func:`split_tasks` of ``query`` into ``parts``: its root ``root``'s candidates weighed by
    :func:`root_work` and, with ``branch`` (the engine's first branch vertex; None: root ranges
    only), a hub's range cut below it as :func:`branch_work` weighs it."""
    candidates, weights = root_work(data, query, root, homomorphic)
    below = None if branch is None else branch_work(data, query, branch, homomorphic)
    return split_tasks(candidates, weights, data.num_vertices, parts, branch=below is not None, below=below)


def cuts_below_root(data, query, root: int, parts: int, homomorphic: bool = False) -> bool:
    """Whether :func:`plan_split` with a branch vertex would cut some root range below the root
    (a range heavier than a share of the work, :func:`split_tasks`): whether the query has
    branch parts, without planning them (the branch vertex's work is not read)."""
    candidates, weights = root_work(data, query, root, homomorphic)
    _, work, share = _ranges_and_share(candidates, weights, data.num_vertices, parts)
    return share > 0 and bool((work > share).any())


def split_tasks(candidates: np.ndarray, weights: np.ndarray, n: int, parts: int,
                branch: bool, below=None) -> tuple[list, list[float]]:
    """The parts of a split query: ``[(root_range, branch_part or None), ...]`` and each one's
    estimated work.

    The root ranges are :func:`work_ranges`; with ``branch`` (an engine that takes
    ``branch_part``), a range heavier than a share (one root candidate holding more than
    ``1/parts`` of the work, which no root range can cut) is cut again into
    ``ceil(work / share)`` (at most ``parts``) branch parts, each taking the embeddings whose
    branch vertex maps to a data vertex ``v`` with ``v % m == j``. With ``below``
    (:func:`branch_work`: where under a root candidate the work lies), a branch part's work is
    its candidates' share of it, and one still heavier than a share (a hub below the hub) is cut
    the same way at the third vertex. Every part is a range of the root times residue classes
    below it: disjoint, and together the whole query.
    """
    ranges, work, share = _ranges_and_share(candidates, weights, n, parts)
    candidates = np.asarray(candidates, dtype=np.int64)
    tasks, task_work = [], []
    for (lo, hi), w in zip(ranges, work.tolist()):
        m = min(parts, int(np.ceil(w / share))) if branch and share > 0 and w > share else 1
        if m == 1:
            tasks.append(((lo, hi), None))
            task_work.append(w)
            continue
        class_work = np.full(m, w / m)
        inside = candidates[(candidates >= lo) & (candidates < hi)]
        if below is not None and inside.size == 1:
            found, found_work = below(int(inside[0]))
            if found_work.sum() > 0:
                class_work = w * np.bincount(found % m, weights=found_work, minlength=m) / found_work.sum()
        for j, cw in enumerate(class_work.tolist()):
            m2 = min(parts, int(np.ceil(cw / share))) if cw > share else 1
            for k in range(m2):
                tasks.append(((lo, hi), ((j, m),) if m2 == 1 else ((j, m), (k, m2))))
                task_work.append(cw / m2)
    return tasks, task_work
