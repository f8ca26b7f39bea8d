"""All registered engines side by side on one workload, checked against the CPU reference.

``gpusm demo`` (and ``make demo``) runs :func:`demo` on a built-in seeded workload: a labelled
R-MAT data graph and a random-walk query set. Each of gpusm's engines (with ``--peers`` also the
installed peers networkx and igraph: common/cpu/peers.py) prepares the data graph once, answers
every query, and the summary table shows, per engine, the queries answered (status ok), how many
of those agree and disagree with the reference, the total number of embeddings and the median
time per query. A query not answered (timeout, oom, unsupported) is neither agreed nor disagreed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from common import BACKEND, Graph, available_engines, create_engine
from common.cpu.peers import installed_peers
from common.engine.registry import BUILTIN_ENGINES, PEER_ENGINES, compared_engines
from common.graph.generate import power_law_labels, query_set, rmat


@dataclass(frozen=True)
class DemoWorkload:
    """The built-in workload: ``"default"`` on a GPU, ``"tiny"`` under the CUDA simulator (kernels crawl there).

    The default (4K vertices, average degree 16, 32 power-law labels, six 5-vertex induced
    queries, 1.5 thousand to 15 million embeddings each) is one that every engine answers well
    within the demo's 10 s per query: the CPU STwig baseline, the slowest, needs under 0.3 s per
    query on a CPU, so the seven engines' time is mostly their kernels' compiles.
    """

    num_vertices: int
    num_edges: int
    num_labels: int
    num_queries: int
    query_vertices: int
    seed: int = 7

    @classmethod
    def of_size(cls, size: str, seed: int = 7) -> "DemoWorkload":
        if size == "tiny":
            return cls(num_vertices=96, num_edges=320, num_labels=4, num_queries=3,
                       query_vertices=4, seed=seed)
        if size == "default":
            return cls(num_vertices=4096, num_edges=32768, num_labels=32, num_queries=6,
                       query_vertices=5, seed=seed)
        raise ValueError(f"demo size must be 'tiny' or 'default', got {size!r}")

    def build(self) -> tuple[Graph, list[Graph]]:
        labels = power_law_labels(self.num_vertices, self.num_labels, 1.0, seed=self.seed)
        data = rmat(self.num_vertices, self.num_edges, seed=self.seed, labels=labels, name="rmat-demo")
        queries = query_set(data, self.num_queries, self.query_vertices, seed=self.seed + 1,
                            method="induced")
        return data, list(queries.queries)


def compare_engines(data: Graph, queries: list[Graph], engines: list[str] | None = None, *,
                    reference: str = "cpu", timeout_s: float | None = None,
                    progress: bool = False) -> pd.DataFrame:
    """One row per (engine, query): status, count, seconds, and whether the count equals the reference's.

    The reference runs first; its own rows, and the rows of a query whose reference run did not
    finish (timeout), have no agreement value. ``progress`` prints a line per engine as it ends.
    """
    import time

    engines = list(engines or available_engines())
    if reference in engines:
        engines.remove(reference)
    rows = []
    for i, name in enumerate([reference, *engines], 1):
        if progress:
            print(f"[{i}/{len(engines) + 1}] {name}: preparing and answering {len(queries)} queries ...",
                  end="", flush=True)
        start = time.perf_counter()
        engine = create_engine(name).prepare(data)
        answered = 0
        for query in queries:
            result = engine.match(query, timeout_s=timeout_s)
            answered += result.status == "ok"
            rows.append({"engine": name, "query": query.name, "status": str(result.status),
                         "count": result.count, "seconds": result.seconds, "reason": result.reason})
        if progress:
            print(f" {answered}/{len(queries)} answered in {time.perf_counter() - start:.1f} s "
                  f"(compiles included)", flush=True)
    raw = pd.DataFrame(rows)
    ref = raw[(raw.engine == reference) & (raw.status == "ok")].set_index("query")["count"]
    known = raw["query"].isin(ref.index) & (raw.engine != reference)
    raw["agrees"] = pd.Series(pd.NA, index=raw.index, dtype="boolean")
    raw.loc[known, "agrees"] = (raw.loc[known, "status"] == "ok") & (
        raw.loc[known, "count"].to_numpy() == ref.reindex(raw.loc[known, "query"]).to_numpy())
    return raw


def summarize(raw: pd.DataFrame, reference: str = "cpu") -> pd.DataFrame:
    """Per engine: queries, answered (status ok), agreed and disagreed with the reference (among
    answered queries the reference answered too; '-' for the reference itself), total embeddings,
    median ms per answered query."""
    def per_engine(group: pd.DataFrame) -> pd.Series:
        answered = group[group.status == "ok"]
        checked = answered["agrees"].dropna()
        is_reference = group["engine"].iloc[0] == reference
        return {
            "engine": group["engine"].iloc[0],
            "queries": len(group),
            "answered": len(answered),
            "agreed": "-" if is_reference else int(checked.sum()),
            "disagreed": "-" if is_reference else int((~checked).sum()),
            "total embeddings": int(answered["count"].sum()),
            "median ms/query": round(float(np.median(answered["seconds"]) * 1e3), 3) if len(answered)
            else float("nan"),
        }
    return pd.DataFrame([per_engine(group) for _, group in raw.groupby("engine", sort=False)])


DEMO_TIMEOUT_S = {"simulator": 300.0, "gpu": 10.0}
"""The demo's default per-query limit. On a GPU every engine answers each default query within
0.3 s; in the simulator the slowest engine needs tens of seconds on a tiny query on a loaded
2-core host, so its limit leaves several times that (docs/decisions.md, "The demo's limit")."""


def demo(seed: int = 7, size: str | None = None, timeout_s: float | None = None, peers: bool = False) -> pd.DataFrame:
    """Run gpusm's engines (and the installed peers with ``peers=True``) on the built-in workload
    and print the side-by-side table.

    ``size`` defaults to ``"tiny"`` under the simulator and ``"default"`` on a GPU; ``timeout_s``
    to :data:`DEMO_TIMEOUT_S`. A query that an engine does not finish within ``timeout_s`` is
    reported as not answered, and every unanswered query is listed with its status and reason.
    """
    engines = demo_engines(peers)
    size = size or ("tiny" if BACKEND == "simulator" else "default")
    if timeout_s is None:
        timeout_s = DEMO_TIMEOUT_S["simulator" if BACKEND == "simulator" else "gpu"]
    workload = DemoWorkload.of_size(size, seed)
    data, queries = workload.build()
    mode = ("CUDA simulator (no GPU found: kernels run in Numba's simulator)"
            if BACKEND == "simulator" else "GPU")
    mode += f", {size} workload"
    print(f"gpusm demo on {mode}")
    print(f"data: {data!r} (R-MAT a=0.57 b=0.19 c=0.19 d=0.05, power-law labels, seed {seed})")
    print(f"queries: {len(queries)} induced random-walk queries of {workload.query_vertices} vertices "
          f"(seed {seed + 1})")
    left_out = [] if peers else installed_peers()
    print(f"engines: {', '.join(engines)}; {timeout_s:g} s allowed per query"
          + (f" (peers {', '.join(left_out)} left out: --peers adds them)" if left_out else "") + "\n")
    if BACKEND != "simulator":                # first use: compile the GPU engines in parallel processes
        from ..demo_warmup import compile_in_parallel

        reports = compile_in_parallel(engines, size, seed)
        for failed in (r for r in reports if "error" in r):
            print(f"compiling {failed['engine']} in a separate process failed ({failed['error']}); "
                  "it compiles as it runs")
        if reports:
            print("compiled the GPU engines' kernels in parallel (once: `gpusm warmup` tells where they are kept)")
    raw = compare_engines(data, queries, engines, timeout_s=timeout_s, progress=True)
    table = summarize(raw)
    print()
    print(table.to_string(index=False))
    print("\nanswered: status ok; agreed/disagreed: answered counts equal / not equal to cpu's; "
          "a query not answered (timeout, oom, unsupported) is in neither")
    unanswered = unanswered_queries(raw)
    if unanswered:
        print("\nnot answered:")
        for line in unanswered:
            print(f"  {line}")
    table.attrs["unanswered"] = unanswered
    return table


def unanswered_queries(raw: pd.DataFrame) -> list[str]:
    """One line per (engine, query) whose status is not ok: engine, query, status, reason, time."""
    late = raw[raw.status != "ok"]
    return [f"{r.engine} {r.query}: {r.status}" + (f" ({r.reason})" if r.reason else "")
            + f" after {r.seconds:.1f} s" for r in late.itertuples()]


def demo_engines(peers: bool = False) -> list[str]:
    """The demo's engines: gpusm's own (``BUILTIN_ENGINES``) and, with ``peers``, the installed
    peers; engines registered by other code (an authors' binary, a test's) are left out."""
    wanted = set(BUILTIN_ENGINES) | (set(installed_peers()) if peers else set())
    return [name for name in available_engines() if name in wanted]


# ---------------------------------------------------------------------- the side-by-side experiments
def _side_by_side_experiments():
    from ..harness.core import Config, Experiment, Metric, Point
    from ..harness.workloads import ENRON, GITHUB, GITHUB_Q, HPRD, HPRD_DENSE_16, YEAST, QuerySpec, yeast_queries

    configs = (*(Config.of(name, name) for name in ENGINES_COMPARED),
               *(Config(name, name, optional=True) for name in PEERS_COMPARED))
    known = (Point("HPRD dense_16", HPRD, HPRD_DENSE_16),
             *(Point(f"yeast {kind}", YEAST, yeast_queries(kind))
               for kind in ("dense_8", "sparse_8", "dense_16")),
             Point("GitHub Q_0-Q_10", GITHUB, GITHUB_Q))
    random_sets = tuple(Point(f"{data.name} random {size}", data, QuerySpec("induced", size=size, count=100,
                                                                              seed=size))
                        for data in (HPRD, YEAST, GITHUB, ENRON) for size in (8, 12, 16))
    note = ("every engine and the CPU reference on the same queries; counts are cross-checked "
            "between engines and against the known exact counts")
    # small (sized by the worst-case plan): the known sets run in ms on a GPU (the CPU reference
    # up to 3 s), so 2 queries each under 0.4 s; random 12/16-vertex queries on GitHub and Enron
    # mostly have 10^9+ embeddings and run to any limit, so one query of four sets under 1 s.
    small_random = tuple(p for p in random_sets
                         if p.label in ("HPRD random 12", "yeast random 12", "GitHub random 8", "Enron random 8"))
    # medium: the known sets with 10 queries under 0.15 s (the CPU reference and the peers need up to
    # seconds on some: they show as unsolved); the random sets of small, 10 queries under 0.15 s.
    return (
        Experiment("compare.known", "compare", "All engines on the query sets with known counts",
                   configs, known, Metric("avg_ms"), time_limit_s=300.0, figure="scatter",
                   scatter_base="cpu", notes=note,
                   scale_at={"small": dict(time_limit_s=0.4, queries_per_set=2, max_points=None),
                             "medium": dict(time_limit_s=0.15, queries_per_set=10, max_points=None)}),
        Experiment("compare.random", "compare", "All engines on random 8/12/16-vertex queries",
                   configs, random_sets, Metric("avg_ms"), time_limit_s=300.0, figure="scatter",
                   scatter_base="cpu", notes=note, points_at={"small": small_random, "medium": small_random},
                   scale_at={"small": dict(time_limit_s=1.0, queries_per_set=1, max_points=None),
                             "medium": dict(time_limit_s=0.15, queries_per_set=10, max_points=None)}),
    )


ENGINES_COMPARED = compared_engines()
"""The reference and the four GPU engines, each algorithm once (no ``variant_of``), in report order."""
PEERS_COMPARED = tuple(PEER_ENGINES)
"""networkx and igraph (common/cpu/peers.py), after gpusm's engines; each runs where installed (extra ``peers``)."""
EXPERIMENTS = _side_by_side_experiments()
