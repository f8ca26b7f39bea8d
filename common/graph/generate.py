"""Seeded workload generators: R-MAT data graphs, vertex labels, query graphs and the P1-P9 patterns.

Every generator takes an integer ``seed`` and draws from ``numpy.random.default_rng(seed)`` only,
so the same arguments give the same graph. Every graph it returns records the generator's name,
all its parameters and the seed in ``graph.meta`` (JSON-serialisable), so a workload can be
regenerated from its description (docs/design.md, "The graph layer").

Sources (the papers are listed in docs/papers.md):

* R-MAT: STwig's data graphs (a=0.4, b=c=d=0.2, undirected, STwig §5); gMatch's
  ``rm`` graph (PaRMAT, parameters not given). Defaults here are the common 0.57/0.19/0.19/0.05.
* Labels: GSI §VIII-B and SGSI assign vertex labels "following a power-law distribution"; EGSM
  §6.2 does the same "as in [GSI]"; none gives the exponent. gMatch assigns its 16 labels
  uniformly at random (§4.2) and sweeps a Zipf skew in Fig. 14f; STwig draws labels uniformly.
* Queries: induced random-walk queries (EGSM §6.3, gMatch §4.3), walk-edge queries with an
  optional edge target (GSI §VIII-C, SGSI), and STwig's "N nodes, 2N random edges" (§5).
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from .io import load_graph, write_graph
from .model import Graph, gather_rows

__all__ = [
    "rmat", "uniform_labels", "power_law_labels", "relabel", "random_walk_query", "gsi_query",
    "stwig_query", "query_set", "QuerySet", "classify_density", "DENSE_AVERAGE_DEGREE", "pattern",
    "PATTERNS",
]

# R-MAT candidate edges drawn per round (bounds the temporary arrays to a few tens of MB).
_RMAT_CHUNK = 1 << 22


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    return int(seed)


def _first_distinct(keys: np.ndarray) -> np.ndarray:
    """The distinct values of ``keys`` in the order of their first occurrence."""
    _, first = np.unique(keys, return_index=True)
    return keys[np.sort(first)]


# ---------------------------------------------------------------------------------------- R-MAT
def rmat(num_vertices: int, num_edges: int, a: float = 0.57, b: float = 0.19, c: float = 0.19,
         d: float = 0.05, *, seed: int, labels=None, name: str | None = None,
         max_rounds: int = 100) -> Graph:
    """Undirected R-MAT graph (Chakrabarti et al., SDM 2004) with exactly ``num_edges`` edges.

    Each candidate edge picks one of the four quadrants (probabilities a, b, c, d) at each of
    ``scale = ceil(log2(num_vertices))`` levels, vectorised over all candidates of a round.
    Self-loops and repeated edges ((u, v) and (v, u) are one edge) are dropped and rounds are
    drawn until ``num_edges`` distinct edges exist; the first ``num_edges`` distinct edges in
    drawing order are kept. When ``num_vertices`` is not a power of two, candidates with an
    endpoint ``>= num_vertices`` are rejected (not folded), which keeps R-MAT's relative
    probabilities on the retained id range. If ``max_rounds`` rounds do not reach the target
    (a target close to the complete graph), the graph has fewer edges and
    ``meta["num_edges_generated"] < meta["num_edges"]``.

    ``labels``: None (every label 0), an int L (``uniform_labels(n, L, seed=seed)``, the same
    labels a later :func:`relabel` with that seed gives; STwig's setting) or an array of n labels.
    """
    seed = _check_seed(seed)
    n, m = int(num_vertices), int(num_edges)
    if n < 1:
        raise ValueError(f"num_vertices must be >= 1, got {n}")
    if m < 0 or m > n * (n - 1) // 2:
        raise ValueError(f"num_edges must lie in 0..{n * (n - 1) // 2} for {n} vertices, got {m}")
    probs = np.array([a, b, c, d], dtype=np.float64)
    if np.any(probs < 0) or not math.isclose(probs.sum(), 1.0, abs_tol=1e-6):
        raise ValueError(f"R-MAT probabilities must be >= 0 and sum to 1, got a={a}, b={b}, c={c}, d={d}")
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
    thresholds = np.cumsum(probs)[:3] / probs.sum()
    scale = (n - 1).bit_length()
    rng = np.random.default_rng(seed)
    keys = np.zeros(0, dtype=np.int64)
    drawn, rounds, yield_rate = 0, 0, 1.0
    while keys.size < m and rounds < max_rounds:
        batch = min(int((m - keys.size) / yield_rate * 1.1) + 64, 2 * m + _RMAT_CHUNK)
        new = [_rmat_chunk(rng, scale, min(_RMAT_CHUNK, batch - start), n, thresholds)
               for start in range(0, batch, _RMAT_CHUNK)]
        before = keys.size
        keys = _first_distinct(np.concatenate([keys, *new]))
        drawn += batch
        rounds += 1
        yield_rate = max((keys.size - before) / batch, 1e-4)
    keys = keys[:m]
    if labels is None:
        label_array, label_meta = None, {"generator": "none"}
    elif isinstance(labels, numbers.Integral) and not isinstance(labels, bool):
        label_array = uniform_labels(n, int(labels), seed=seed)
        label_meta = {"generator": "uniform", "num_labels": int(labels), "seed": seed}
    else:
        label_array = np.asarray(labels)
        label_meta = {"generator": "explicit"}
    meta = {"generator": "rmat", "num_vertices": n, "num_edges": m, "a": float(a), "b": float(b),
            "c": float(c), "d": float(d), "seed": seed, "scale": scale,
            "out_of_range_ids": "rejected", "num_edges_generated": int(keys.size),
            "candidates_drawn": int(drawn), "rounds": rounds, "labels": label_meta}
    return Graph.from_edges(n, keys // n, keys % n, label_array,
                            name=name if name is not None else f"rmat_n{n}_m{m}_s{seed}", meta=meta)


def _rmat_chunk(rng: np.random.Generator, scale: int, size: int, n: int, thresholds) -> np.ndarray:
    """``size`` R-MAT candidates as keys ``lo * n + hi`` (lo < hi < n); loops and out-of-range ids dropped.

    One uniform draw per level picks the quadrant: [0, a) top-left, [a, a+b) top-right,
    [a+b, a+b+c) bottom-left, the rest bottom-right; the row bit is "bottom", the column bit "right".
    """
    t_a, t_ab, t_abc = thresholds
    src = np.zeros(size, dtype=np.int64)
    dst = np.zeros(size, dtype=np.int64)
    for _ in range(scale):
        r = rng.random(size)
        down = r >= t_ab
        src = (src << 1) | down
        dst = (dst << 1) | (((r >= t_a) & ~down) | (r >= t_abc))
    keep = (src != dst) & (src < n) & (dst < n)
    src, dst = src[keep], dst[keep]
    return np.minimum(src, dst) * n + np.maximum(src, dst)


# ---------------------------------------------------------------------------------------- labels
def uniform_labels(n: int, num_labels: int, *, seed: int) -> np.ndarray:
    """``n`` labels drawn i.i.d. uniformly from ``0..num_labels-1`` (int32).

    gMatch §4.2 labels en/gh/gw/db/wt this way (16 labels; 64 for wt); STwig §5 too.
    """
    seed = _check_seed(seed)
    if n < 0 or num_labels < 1:
        raise ValueError(f"need n >= 0 and num_labels >= 1, got n={n}, num_labels={num_labels}")
    return np.random.default_rng(seed).integers(0, num_labels, size=n).astype(np.int32)


def power_law_labels(n: int, num_labels: int, exponent: float, *, seed: int) -> np.ndarray:
    """``n`` Zipf-like labels: P(label k) ∝ (k+1)^-exponent for k in ``0..num_labels-1`` (int32).

    GSI §VIII-B and SGSI §7 assign synthetic labels "following a power-law distribution", and
    EGSM §6.2 copies that "as in [GSI]"; none states the exponent (s ≈ 1 is our
    reading). gMatch Fig. 14f sweeps a Zipf exponent with an unstated list. ``exponent = 0`` is
    uniform; label 0 is the most frequent one.
    """
    seed = _check_seed(seed)
    if n < 0 or num_labels < 1:
        raise ValueError(f"need n >= 0 and num_labels >= 1, got n={n}, num_labels={num_labels}")
    if not exponent >= 0:
        raise ValueError(f"exponent must be >= 0, got {exponent}")
    weights = np.arange(1, num_labels + 1, dtype=np.float64) ** -float(exponent)
    return np.random.default_rng(seed).choice(num_labels, size=n, p=weights / weights.sum()).astype(np.int32)


def relabel(graph: Graph, labels, *, params: dict | None = None) -> Graph:
    """A copy of ``graph`` with vertex labels ``labels``; ``meta["labels"]`` records ``params``.

    Pass the label generator's arguments as ``params`` (for example
    ``{"generator": "power_law", "num_labels": 16, "exponent": 1.0, "seed": 7}``) so the
    workload stays reproducible; without them the meta only says the labels were given.
    """
    labels = np.asarray(labels)
    if labels.shape != (graph.num_vertices,):
        raise ValueError(f"labels has shape {labels.shape} for a graph of {graph.num_vertices} vertices")
    meta = dict(graph.meta)
    meta["labels"] = dict(params) if params is not None else {"generator": "explicit"}
    return graph.replace(labels=labels, meta=meta)


# ---------------------------------------------------------------------------------------- queries
class _Floats:
    """Uniform floats from ``rng`` in blocks (one numpy call per block instead of per step)."""

    def __init__(self, rng: np.random.Generator, block: int = 1024):
        self.rng, self.block = rng, block
        self.values, self.pos = rng.random(block), 0

    def next(self) -> float:
        if self.pos == self.block:
            self.values, self.pos = self.rng.random(self.block), 0
        self.pos += 1
        return float(self.values[self.pos - 1])


def _walk(data: Graph, k: int, rng: np.random.Generator, strategy: str, max_tries: int):
    """Visit ``k`` distinct vertices of ``data``: returns (visit order, walked edges, tree edges, tries).

    ``strategy="walk"``: a random walk (GSI §VIII-C); ``"expand"``: each step leaves from a
    uniformly chosen visited vertex (EGSM §6.3: "add a neighbour of some vertex already in Q").
    Walked edges are (i, j) query-id pairs in traversal order; the tree edges are the k-1 steps
    that reached a new vertex (its discovery edge), a spanning tree of the visited set. A try that
    finds no new vertex within its step budget (a component smaller than k) restarts elsewhere.
    """
    if data.directed:
        raise ValueError("query generators take undirected data graphs")
    if strategy not in ("walk", "expand"):
        raise ValueError(f"strategy must be 'walk' or 'expand', got {strategy!r}")
    if not 1 <= k <= data.num_vertices:
        raise ValueError(f"num_vertices must lie in 1..{data.num_vertices}, got {k}")
    offsets, nbrs, degrees = data.offsets, data.neighbors, data.degrees
    starts = np.flatnonzero(degrees > 0) if k > 1 else np.arange(data.num_vertices)
    if starts.size == 0:
        raise ValueError(f"data graph {data.name!r} has no edges: no connected {k}-vertex query exists")
    floats = _Floats(rng)
    budget = 1000 + 50 * k * k
    for tries in range(1, max_tries + 1):
        start = int(starts[rng.integers(starts.size)])
        index = {start: 0}
        order, walked, tree = [start], [], []
        current = start
        for _ in range(budget):
            if len(order) == k:
                return order, walked, tree, tries
            u = current if strategy == "walk" else order[int(floats.next() * len(order))]
            lo = int(offsets[u])
            v = int(nbrs[lo + int(floats.next() * (int(offsets[u + 1]) - lo))])
            if v not in index:
                index[v] = len(order)
                order.append(v)
                tree.append((index[u], index[v]))
            walked.append((index[u], index[v]))
            current = v
        if len(order) == k:
            return order, walked, tree, tries
    raise ValueError(f"no connected {k}-vertex query found in {data.name!r} after {max_tries} random "
                     f"starts: its connected components are (almost all) smaller than {k} vertices")


def _induced_edges(data: Graph, order: list[int]):
    """Edges of the subgraph of ``data`` induced on ``order`` in query ids (i < j), with labels."""
    vs = np.asarray(order, dtype=np.int64)
    rows = np.repeat(np.arange(vs.size, dtype=np.int64), data.degrees[vs])
    targets = gather_rows(data.offsets, data.neighbors, vs)
    elab = None if data.edge_labels is None else gather_rows(data.offsets, data.edge_labels, vs)
    sorter = np.argsort(vs)
    pos = np.minimum(np.searchsorted(vs, targets, sorter=sorter), vs.size - 1)
    inside = vs[sorter[pos]] == targets
    cols = sorter[pos]
    keep = inside & (rows < cols)
    return rows[keep], cols[keep], None if elab is None else elab[keep]


def _edge_keys(pairs, k: int) -> np.ndarray:
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return np.minimum(p[:, 0], p[:, 1]) * k + np.maximum(p[:, 0], p[:, 1])


def _query_graph(data: Graph, order, src, dst, elab, name, meta) -> Graph:
    labels = data.labels[np.asarray(order, dtype=np.int64)]
    meta = dict(meta, data=data.name, data_vertices=[int(v) for v in order])
    graph = Graph.from_edges(len(order), src, dst, labels, elab, name=name, meta=meta)
    graph.meta["num_edges"] = graph.num_edges
    return graph


def random_walk_query(data: Graph, num_vertices: int, *, seed: int, induced: bool = True,
                      strategy: str = "walk", max_tries: int = 100, name: str | None = None) -> Graph:
    """A connected query of ``num_vertices`` vertices cut out of ``data`` by a random walk.

    The walk starts at a random non-isolated vertex and runs until ``num_vertices`` distinct
    vertices are visited; query vertex i is the i-th visited vertex, labels (and edge labels)
    are copied from ``data``. ``induced=True`` keeps every data edge among the visited vertices
    (EGSM §6.3, gMatch §4.3); ``induced=False`` keeps only the traversed edges (GSI §VIII-C).
    ``strategy="expand"`` grows the set from a random visited vertex each step, as EGSM's text
    words it. ``meta["data_vertices"]`` is the embedding the query was cut from. A walk stuck in
    a small component restarts, at most ``max_tries`` times, then ValueError.
    """
    seed = _check_seed(seed)
    k = int(num_vertices)
    rng = np.random.default_rng(seed)
    order, walked, _, tries = _walk(data, k, rng, strategy, max_tries)
    src, dst, elab = _induced_edges(data, order)
    if not induced:
        keep = np.isin(src * k + dst, _edge_keys(walked, k))
        src, dst, elab = src[keep], dst[keep], None if elab is None else elab[keep]
    meta = {"generator": "random_walk", "num_vertices": k, "induced": bool(induced),
            "strategy": strategy, "seed": seed, "tries": tries}
    return _query_graph(data, order, src, dst, elab,
                        name if name is not None else f"walk_{'induced_' if induced else ''}{k}_s{seed}", meta)


def gsi_query(data: Graph, num_vertices: int, num_edges: int, *, seed: int, max_tries: int = 100,
              name: str | None = None) -> Graph:
    """GSI-style query: a random walk over ``num_vertices`` vertices, then exactly ``num_edges`` edges.

    GSI §VIII-F fixes |E(Q)| (and uses |E(Q)| = 2|V(Q)|) without saying how. Here the query
    starts from the walk's spanning tree (each vertex's discovery edge), adds the walk's other
    traversed edges in traversal order, then random further edges of the induced subgraph, until
    ``num_edges`` edges. If the induced subgraph has fewer edges than that, it is returned whole
    and ``meta["edge_target_met"]`` is False. ``num_edges < num_vertices - 1`` is a ValueError.
    """
    seed = _check_seed(seed)
    k, target = int(num_vertices), int(num_edges)
    if target < k - 1:
        raise ValueError(f"a connected query of {k} vertices needs >= {k - 1} edges, asked for {target}")
    rng = np.random.default_rng(seed)
    order, walked, tree, tries = _walk(data, k, rng, "walk", max_tries)
    src, dst, elab = _induced_edges(data, order)
    keys = src * k + dst
    tree_keys = _edge_keys(tree, k)
    walked_keys = _first_distinct(_edge_keys(walked, k))
    walked_keys = walked_keys[~np.isin(walked_keys, tree_keys)]
    rest = rng.permutation(keys[~np.isin(keys, np.concatenate([tree_keys, walked_keys]))])
    chosen = np.concatenate([tree_keys, walked_keys, rest])[:target]
    keep = np.isin(keys, chosen)
    meta = {"generator": "gsi_walk", "num_vertices": k, "num_edges_target": target, "seed": seed,
            "tries": tries, "edge_target_met": bool(chosen.size == target)}
    return _query_graph(data, order, src[keep], dst[keep], None if elab is None else elab[keep],
                        name if name is not None else f"gsi_{k}_{target}_s{seed}", meta)


def stwig_query(num_vertices: int, *, num_labels: int, seed: int, extra_edges_factor: float = 2,
                name: str | None = None) -> Graph:
    """STwig §5 query: "N nodes, generated by adding 2N edges randomly", made connected.

    The paper states only that sentence. Our choices where it is silent:
    labels uniform over ``0..num_labels-1``; a random spanning tree first (a random recursive
    tree: vertex i joins a uniformly chosen earlier vertex, so ids 0..i are always connected),
    then distinct random extra edges up to ``min(extra_edges_factor * N, N(N-1)/2)`` edges in all
    (N = 5 gives K5). Labels are drawn last, so one seed gives the same shape for every
    ``num_labels`` (a label sweep redraws labels per L with the same seed).
    """
    seed = _check_seed(seed)
    n = int(num_vertices)
    if n < 1 or num_labels < 1 or extra_edges_factor < 0:
        raise ValueError(f"need num_vertices >= 1, num_labels >= 1, extra_edges_factor >= 0; got "
                         f"{n}, {num_labels}, {extra_edges_factor}")
    rng = np.random.default_rng(seed)
    target = max(n - 1, min(int(round(extra_edges_factor * n)), n * (n - 1) // 2))
    child = np.arange(1, n, dtype=np.int64)
    parent = (rng.random(n - 1) * child).astype(np.int64)
    keys = parent * n + child
    while keys.size < target:
        u, v = rng.integers(0, n, size=(2, 4 * (target - keys.size) + 16))
        u, v = u[u != v], v[u != v]
        keys = _first_distinct(np.concatenate([keys, np.minimum(u, v) * n + np.maximum(u, v)]))
    keys = keys[:target]
    labels = rng.integers(0, num_labels, size=n).astype(np.int32)  # last: same seed, same shape for any L
    meta = {"generator": "stwig", "num_vertices": n, "num_labels": int(num_labels),
            "extra_edges_factor": extra_edges_factor, "seed": seed, "num_edges_target": target}
    graph = Graph.from_edges(n, keys // n, keys % n, labels,
                             name=name if name is not None else f"stwig_{n}_s{seed}", meta=meta)
    graph.meta["num_edges"] = graph.num_edges
    return graph


# ---------------------------------------------------------------------------------------- query sets
def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass
class QuerySet:
    """A list of query graphs and the parameters that generated them (see :func:`query_set`)."""

    queries: list[Graph]
    params: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self):
        return iter(self.queries)

    def save(self, folder) -> Path:
        """Write one ``<name>.graph`` file per query and ``params.json`` (params and each query's meta)."""
        folder = Path(folder)
        files = [f"{query.name or f'query_{i}'}.graph" for i, query in enumerate(self.queries)]
        if len(set(files)) != len(files):
            raise ValueError("two queries share a name, so their files would overwrite each other")
        folder.mkdir(parents=True, exist_ok=True)
        entries = []
        for file, query in zip(files, self.queries):
            write_graph(query, folder / file)
            entries.append({"file": file, "name": query.name, "meta": _jsonable(query.meta)})
        with open(folder / "params.json", "w") as out:
            json.dump({"params": _jsonable(self.params), "queries": entries}, out, indent=1)
        return folder

    @classmethod
    def load(cls, folder) -> "QuerySet":
        """Read a folder written by :meth:`save`, restoring each query's name and meta."""
        folder = Path(folder)
        with open(folder / "params.json") as src:
            saved = json.load(src)
        queries = []
        for entry in saved["queries"]:
            queries.append(load_graph(folder / entry["file"]).replace(name=entry["name"], meta=entry["meta"]))
        return cls(queries, saved["params"])


def query_set(data: Graph | None, count: int, num_vertices: int, *, seed: int, method: str = "induced",
              **kw) -> QuerySet:
    """``count`` queries of ``num_vertices`` vertices; query i uses seed ``seeds[i]`` drawn from ``seed``.

    ``method``: ``"induced"`` = :func:`random_walk_query` with ``induced=True`` and, unless given,
    ``strategy="expand"`` (the EGSM §6.3 / gMatch §4.3 procedure: add a neighbour of any chosen
    vertex with all its edges to the set); ``"walk"`` = a plain random walk keeping its edges,
    ``"gsi"`` = :func:`gsi_query` (needs ``num_edges=``), ``"stwig"`` = :func:`stwig_query`
    (``data`` may be None; ``num_labels`` defaults to the data graph's). Extra keywords go to the
    generator. The papers use 100 queries per size (GSI §VIII-C, EGSM §6.3, gMatch §4.3).
    """
    seed = _check_seed(seed)
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    seeds = [int(s) for s in np.random.default_rng(seed).integers(0, 2**32, size=count)]
    k = int(num_vertices)
    if data is None and method != "stwig":
        raise ValueError(f"method {method!r} cuts queries out of a data graph; data is None")
    if method == "induced":
        kw.setdefault("strategy", "expand")
        make = partial(random_walk_query, data, k, induced=True)
    elif method == "walk":
        make = partial(random_walk_query, data, k, induced=False)
    elif method == "gsi":
        make = partial(gsi_query, data, k)
    elif method == "stwig":
        if "num_labels" not in kw:
            if data is None:
                raise ValueError("stwig queries need num_labels= when no data graph is given")
            kw["num_labels"] = data.num_labels
        make = partial(stwig_query, k)
    else:
        raise ValueError(f"method must be 'induced', 'walk', 'gsi' or 'stwig', got {method!r}")
    params = {"method": method, "count": int(count), "num_vertices": k, "seed": seed, **kw,
              "query_seeds": seeds}
    if data is not None:
        params["data"] = {"name": data.name, "num_vertices": data.num_vertices,
                          "num_edges": data.num_edges, "meta": data.meta}
    queries = [make(seed=s, name=f"{method}_{k}_{i}", **kw) for i, s in enumerate(seeds)]
    return QuerySet(queries, _jsonable(params))


# ---------------------------------------------------------------------------------------- shapes
DENSE_AVERAGE_DEGREE = 3.0


def classify_density(query: Graph) -> str:
    """``"dense"`` if the average degree 2|E|/|V| is >= 3, else ``"sparse"``.

    The threshold of the SIGMOD'20 study's query sets, as EGSM §6.3 (Fig. 11e/f) restates it:
    sparse d_avg < 3, dense d_avg >= 3 (gMatch §4.3 uses the split with the number stripped).
    It agrees with every dense/sparse 8- and 16-vertex yeast query in data/yeast.
    """
    return "dense" if query.average_degree >= DENSE_AVERAGE_DEGREE else "sparse"


_PATTERN_EDGES = {
    "P1": [(0, 1), (0, 2), (1, 2)],
    "P2": [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)],
    "P3": [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)],
    "P4": [(0, 1), (1, 2), (2, 3), (3, 0)],
    "P5": [(0, 1), (0, 2), (1, 3), (2, 4), (3, 4), (2, 3), (1, 4)],
    "P6": [(0, 1), (0, 2), (1, 2), (1, 3), (2, 4), (3, 4), (1, 4), (2, 3)],
    "P7": [(0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (2, 4), (4, 3), (3, 1)],
    "P8": [(u, v) for u in range(5) for v in range(u + 1, 5) if (u, v) != (1, 2)],
    "P9": [(u, v) for u in range(5) for v in range(u + 1, 5)],
}
PATTERNS = list(_PATTERN_EDGES)


def pattern(name: str) -> Graph:
    """Unlabelled pattern P1-P9 of gMatch Fig. 8 (numbered as in gMatch's ``patterns/p1..p9``).

    P1 triangle, P2 K4, P3 diamond, P4 4-cycle, P5 and P6 two 5-vertex graphs (7 and 8 edges),
    P7 wheel, P8 K5 minus an edge, P9 K5. All labels 0.
    """
    key = str(name).upper()
    if key not in _PATTERN_EDGES:
        raise ValueError(f"unknown pattern {name!r}; choose one of {', '.join(PATTERNS)}")
    edges = np.array(_PATTERN_EDGES[key], dtype=np.int64)
    n = int(edges.max()) + 1
    return Graph.from_edges(n, edges[:, 0], edges[:, 1], name=key,
                            meta={"generator": "pattern", "name": key, "source": "gMatch Fig. 8"})
