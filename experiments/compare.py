"""All registered engines side by side on one workload, checked against the CPU reference.

``gpusm demo`` (and ``make demo``) runs :func:`demo` on a built-in seeded workload: a labelled
R-MAT data graph and a random-walk query set. Every engine prepares the data graph once, answers
every query, and the summary table shows, per engine, the queries answered, the total number of
embeddings, the median time per query and how many counts agree with the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from common import BACKEND, Graph, available_engines, create_engine
from common.generate import power_law_labels, query_set, rmat


@dataclass(frozen=True)
class DemoWorkload:
    """The built-in default workload; smaller under the CUDA simulator, where kernels crawl."""

    num_vertices: int
    num_edges: int
    num_labels: int
    num_queries: int
    query_vertices: int
    seed: int = 7

    @classmethod
    def for_backend(cls, backend: str = BACKEND, seed: int = 7) -> "DemoWorkload":
        if backend == "simulator":
            return cls(num_vertices=256, num_edges=1024, num_labels=4, num_queries=4,
                       query_vertices=4, seed=seed)
        return cls(num_vertices=16384, num_edges=262144, num_labels=16, num_queries=20,
                   query_vertices=6, seed=seed)

    def build(self) -> tuple[Graph, list[Graph]]:
        labels = power_law_labels(self.num_vertices, self.num_labels, 1.0, seed=self.seed)
        data = rmat(self.num_vertices, self.num_edges, seed=self.seed, labels=labels, name="rmat-demo")
        queries = query_set(data, self.num_queries, self.query_vertices, seed=self.seed + 1,
                            method="induced")
        return data, list(queries.queries)


def compare_engines(data: Graph, queries: list[Graph], engines: list[str] | None = None, *,
                    reference: str = "cpu", timeout_s: float | None = None) -> pd.DataFrame:
    """One row per (engine, query): status, count, seconds, and whether the count equals the reference's.

    The reference runs first; its own rows, and the rows of a query whose reference run did not
    finish (timeout), have no agreement value.
    """
    engines = list(engines or available_engines())
    if reference in engines:
        engines.remove(reference)
    rows = []
    for name in [reference, *engines]:
        engine = create_engine(name).prepare(data)
        for query in queries:
            result = engine.match(query, timeout_s=timeout_s)
            rows.append({"engine": name, "query": query.name, "status": str(result.status),
                         "count": result.count, "seconds": result.seconds, "reason": result.reason})
    raw = pd.DataFrame(rows)
    ref = raw[(raw.engine == reference) & (raw.status == "ok")].set_index("query")["count"]
    known = raw["query"].isin(ref.index) & (raw.engine != reference)
    raw["agrees"] = pd.Series(pd.NA, index=raw.index, dtype="boolean")
    raw.loc[known, "agrees"] = (raw.loc[known, "status"] == "ok") & (
        raw.loc[known, "count"].to_numpy() == ref.reindex(raw.loc[known, "query"]).to_numpy())
    return raw


def summarize(raw: pd.DataFrame, reference: str = "cpu") -> pd.DataFrame:
    """Per engine: queries, answered (status ok), total embeddings, median ms/query, agreement."""
    def per_engine(group: pd.DataFrame) -> pd.Series:
        answered = group[group.status == "ok"]
        checked = group["agrees"].dropna()
        is_reference = group["engine"].iloc[0] == reference
        return pd.Series({
            "queries": len(group),
            "answered": len(answered),
            "total embeddings": int(answered["count"].sum()),
            "median ms/query": float(np.median(answered["seconds"]) * 1e3) if len(answered) else float("nan"),
            f"agrees with {reference}": "(reference)" if is_reference else f"{int(checked.sum())}/{len(checked)}",
        })
    return raw.groupby("engine", sort=False)[raw.columns.tolist()].apply(per_engine).reset_index()


def demo(seed: int = 7, backend: str = BACKEND) -> pd.DataFrame:
    """Run every registered engine on the built-in workload and print the side-by-side table."""
    workload = DemoWorkload.for_backend(backend, seed)
    data, queries = workload.build()
    mode = ("CUDA simulator (no GPU found: kernels run in Numba's simulator, tiny workload)"
            if backend == "simulator" else "GPU")
    print(f"gpusm demo on {mode}")
    print(f"data: {data!r} (R-MAT a=0.57 b=0.19 c=0.19 d=0.05, power-law labels, seed {seed})")
    print(f"queries: {len(queries)} induced random-walk queries of {workload.query_vertices} vertices "
          f"(seed {seed + 1})")
    print(f"engines: {', '.join(available_engines())}\n")
    table = summarize(compare_engines(data, queries))
    print(table.to_string(index=False))
    return table
