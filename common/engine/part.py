"""Parts of a query: the split protocol an engine declares with ``supports_parts``
(docs/design.md, "The engine contract").

``engine.match(query, part=Part(root_range=(lo, hi)))`` counts only the embeddings whose image of
the engine's *root*, the first query vertex it matches (:meth:`Engine.root_vertex`), is a data
vertex id in ``[lo, hi)`` (gMatch with symmetry breaking: the automorphic images of the canonical
matches whose root lies there). The root is chosen from the query (and, for ``cpu``, from the
unrestricted candidate sizes) and never from the part, so the counts of a partition of
``[0, |V(G)|)`` add up to the whole count and the parts' embeddings to the whole set; ``limit``,
``collect`` and the statuses keep their meaning for each part.

A root whose work no range can cut (one hub holding most of the matches) is cut below it
(engines that also declare ``supports_branch_parts``): ``Part(branch_part=(j, m))`` keeps, in the
same sense, the embeddings whose *branch vertex*, the second query vertex of the engine's order,
maps to a data vertex ``v`` with ``v % m == j``; ``branch_part=((j, m), (k, m2))`` also keeps
only those whose third vertex maps to a ``w`` with ``w % m2 == k`` (a hub below the hub). The
engine names these vertices with :meth:`Engine.branch_vertices`. Both restrictions combine;
:func:`common.graph.roots.split_tasks` cuts a query into such parts by estimated work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: levels below the root that ``branch_part`` can cut (the second and third vertex of an order)
BRANCH_LEVELS = 2


@dataclass(frozen=True)
class Part:
    """The part of a query one ``match`` call answers (module docstring); ``Part()`` is the
    whole query.

    Parameters
    ----------
    root_range : (int, int), 'lo:hi' or None
        Keep the embeddings whose root maps into ``[lo, hi)``.
    branch_part : (int, int), ((int, int), (int, int)), 'j/m', 'j/m,k/m2' or None
        Keep those whose branch vertices map to ``v % m == j`` (and ``w % m2 == k``).

    Both are checked and normalised (:func:`check_root_range`, :func:`check_branch_part`): a
    ValueError names the field and the form it takes.
    """

    root_range: tuple[int, int] | None = None
    branch_part: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self):
        object.__setattr__(self, "root_range", check_root_range(self.root_range))
        object.__setattr__(self, "branch_part", check_branch_part(self.branch_part))

    @property
    def whole(self) -> bool:
        """Whether this part is the whole query (no restriction)."""
        return self.root_range is None and self.branch_part is None

    def stats(self) -> dict:
        """The restrictions as a result's statistics hold them (lists; only those set)."""
        stats = {}
        if self.root_range is not None:
            stats["root_range"] = list(self.root_range)
        if self.branch_part is not None:
            stats["branch_part"] = [list(level) for level in self.branch_part]
        return stats


def order_branch_vertices(order) -> tuple[int, ...]:
    """The vertices of a matching order that ``branch_part``'s levels restrict: its second and
    third (the last for a shorter order)."""
    return tuple(int(order[min(i, len(order) - 1)]) for i in range(1, BRANCH_LEVELS + 1))


def _int_pair(value, name: str, sep: str, form: str) -> tuple[int, int]:
    """Two ints from a pair or a string of two numbers joined by ``sep``; else a ValueError
    naming the option and its ``form``."""
    pair = value.split(sep) if isinstance(value, str) else value
    try:
        a, b = (int(x) for x in pair)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {form} with whole numbers, got {value!r}") from None
    return a, b


def check_root_range(value) -> tuple[int, int] | None:
    """``None``, or ``(lo, hi)`` as two ints with 0 <= lo <= hi, from a pair or a 'lo:hi' string
    (the command line's ``-o root_range=lo:hi``); anything else is a ValueError."""
    if value is None:
        return None
    lo, hi = _int_pair(value, "root_range", ":", "(lo, hi) or 'lo:hi'")
    if not 0 <= lo <= hi:
        raise ValueError(f"root_range must satisfy 0 <= lo <= hi, got {value!r}")
    return lo, hi


def check_branch_part(value) -> tuple[tuple[int, int], ...] | None:
    """``None``, or the residue classes of the branch vertices as a tuple of ``(j, m)`` pairs
    with 0 <= j < m, one per level (at most :data:`BRANCH_LEVELS`), from ``(j, m)``, a sequence
    of such pairs, or a string 'j/m' or 'j/m,k/m2' (the command line's ``-o branch_part=j/m``);
    anything else is a ValueError."""
    if value is None:
        return None
    form = "(j, m), ((j, m), (k, m2)), 'j/m' or 'j/m,k/m2'"
    if isinstance(value, str):
        levels = value.split(",")
    else:
        try:
            levels = [value] if all(isinstance(x, (int, np.integer)) for x in value) else list(value)
        except TypeError:
            raise ValueError(f"branch_part must be {form} with whole numbers, got {value!r}") from None
    if not 1 <= len(levels) <= BRANCH_LEVELS:
        raise ValueError(f"branch_part takes 1 to {BRANCH_LEVELS} levels, got {value!r}")
    out = []
    for level in levels:
        j, m = _int_pair(level, "branch_part", "/", form)
        if not 0 <= j < m:
            raise ValueError(f"branch_part must satisfy 0 <= j < m at every level, got {value!r}")
        out.append((j, m))
    return tuple(out)


def outside_mask(n: int, root_range: tuple[int, int]) -> np.ndarray:
    """Boolean array over the data vertices ``0..n-1``: True outside ``[lo, hi)``."""
    lo, hi = root_range
    out = np.ones(n, dtype=bool)
    out[min(lo, n):min(hi, n)] = False
    return out


def branch_outside_mask(n: int, part: tuple[int, int]) -> np.ndarray:
    """Boolean array over the data vertices ``0..n-1``: True where ``v % m != j`` (one level of
    a ``branch_part``)."""
    j, m = part
    return np.arange(n) % m != j


#: the whole query
WHOLE = Part()
