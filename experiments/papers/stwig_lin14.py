"""GPU STwig (Lin et al. 2014) §5: Fig. 3a-3d, the GPU pipeline against the CPU STwig baseline.

Data (§5): undirected R-MAT with a = 0.4, b = c = d = 0.2; default 16K vertices, 16 uniform
labels, average degree 32 (|E| = |V| * 32 / 2). Queries: 100 per set, N = 5..10 vertices and
2N edges cut out of the data graph with its labels (``workloads.stwig_data_query``: random
graphs with random labels have no match on these graphs), cycling through the sizes. Speedups are the
mean over queries of t_CPU / t_GPU (the paper does not say which mean it uses). The paper's
hardware is a Tesla C2075 against a 4-core Xeon; here the CPU baseline is the same pipeline
compiled with ``numba.njit`` on one thread (engine ``stwig-cpu``). The time limit (none in the
paper) is ours: 600 s per query.

At the ``small`` scale (``SMALL``): 3 queries per set (cycling through N = 5, 6, 7), a 1 s
limit, the first 3 points of each sweep. At the ``medium`` scale (``MEDIUM``): 20 queries per
set (per N in Fig. 3d), a 0.75 s limit (the single-threaded CPU baseline needs most of it), every point.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..harness.core import Claim, Config, Experiment, Metric, Point, at_least, lower, row_lower, trend
from ..harness.workloads import Dataset, QuerySpec

PAPER = "stwig_lin14"
TIME_LIMIT_S = 600.0

GPU = Config.of("GPU", "stwig")
CPU = Config.of("CPU", "stwig-cpu")


RMAT_ABCD = (0.4, 0.2, 0.2, 0.2)
"""The R-MAT quadrant probabilities of the paper's data graphs (§5)."""


def rmat_graph(vertices: int = 16384, labels: int = 16, degree: int = 32) -> Dataset:
    """The paper's R-MAT data graph (§5)."""
    return Dataset(f"R-MAT {vertices // 1024}K L{labels} d{degree}", vertices, vertices * degree // 2,
                   vertex_labels=labels, label_distribution="uniform", rmat_abcd=RMAT_ABCD, graph_seed=1)


QUERIES = QuerySpec("stwig", sizes=(5, 6, 7, 8, 9, 10), count=100)
DEFAULT = Point("default (16K, 16 labels, degree 32)", rmat_graph(), QUERIES)
SPEEDUP = Metric("speedup", base="GPU")


SMALL = dict(time_limit_s=1.0, queries_per_set=3, max_points=3)
"""The small scale's setting for this paper (sized by the worst-case plan)."""
MEDIUM = dict(time_limit_s=0.25, queries_per_set=20, max_points=None)
"""The medium scale's setting for this paper (sized by the worst-case plan)."""
LARGE = dict(time_limit_s=10.0, queries_per_set=50, max_points=None)
"""The large scale's setting (Fig. 3a and 3d only): 50 queries, 10 s per query."""
LARGE_FIG3D = ("N=5", "N=9")
"""Fig. 3d's rows at the large scale: the two its claim compares."""


def _experiment(name, title, configs, metric, points, paper=None, *, large=False, **kw) -> Experiment:
    scale_at = {"small": SMALL, "medium": MEDIUM} | ({"large": LARGE} if large else {})
    return Experiment(f"{PAPER}.{name}", PAPER, title, tuple(configs), tuple(points), metric,
                      TIME_LIMIT_S, paper_values=paper, scale_at=scale_at, **kw)


def _sweep(name: str, values, make, title: str, xlabel: str, paper=None) -> Experiment:
    points = tuple(Point(f"{name}={v}", make(v), QUERIES, x=v) for v in values)
    return _experiment(f"fig3_{name}", title, (GPU, CPU), SPEEDUP, points, paper, figure="lines", xlabel=xlabel)


FIG3D_POINTS = tuple(Point(f"N={n}", rmat_graph(), QuerySpec("stwig", sizes=(n,), count=100), x=n)
                     for n in range(5, 11))
"""Fig. 3d's rows: 100 queries of each size N (the first 20 at the medium scale)."""

EXPERIMENTS = (
    _experiment("fig3a_total", "Fig. 3a: total time (ms), CPU vs GPU", (GPU, CPU), Metric("avg_ms"),
                (DEFAULT,), figure="bars", large=True),
    _experiment("fig3a_join_speedup", "Fig. 3a: join-only speedup of the GPU (t_CPU / t_GPU, join phase)",
                (GPU, CPU), Metric("speedup", base="GPU", phases=("enumerate",)), (DEFAULT,),
                pd.DataFrame({"CPU": [26.0]}, index=[DEFAULT.label]), large=True),
    _experiment("fig3a_hash", "Fig. 3a: (copy &) hash time (ms)", (GPU, CPU),
                Metric("avg_ms", phases=("transfer", "index")), (DEFAULT,), figure="bars", large=True),
    _experiment("fig3a_explore", "Fig. 3a: exploration ('other') time (ms)", (GPU, CPU),
                Metric("avg_ms", phases=("filter",)), (DEFAULT,), figure="bars", large=True),
    _sweep("vertices", (16384, 32768, 65536, 131072), lambda n: rmat_graph(vertices=n),
           "§5.2 / Fig. 3c: speedup vs data size (t_CPU / t_GPU)", "data-graph vertices (count)"),
    _sweep("labels", (8, 16, 32, 64), lambda k: rmat_graph(labels=k), "Fig. 3b: speedup vs number of labels",
           "vertex labels (count)"),
    _sweep("degree", (8, 16, 32, 64), lambda d: rmat_graph(degree=d), "Fig. 3c: speedup vs average degree",
           "average degree (edges per vertex)"),
    _experiment("fig3d", "Fig. 3d: speedup vs query size N", (GPU, CPU), SPEEDUP,
                FIG3D_POINTS, pd.DataFrame({"CPU": [15.66]}, index=["N=9"]), figure="lines",
                xlabel="query size N (vertices)", large=True,
                points_at={"large": tuple(p for p in FIG3D_POINTS if p.label in LARGE_FIG3D)}),
)


CLAIMS = {
    "fig3a_total": (Claim("Fig. 3a: the GPU is about an order of magnitude faster in total",
                          lower("GPU", "CPU", factor=10.0),
                          "t_CPU / t_GPU over the queries both solve, judged against 10x"),),
    "fig3a_join_speedup": (Claim("Fig. 3a: the join alone is 26.0x faster on the GPU",
                                 at_least("CPU", 1.0, factor=26.0),
                                 "within 2x of 26.0 (an H100/H200 against one CPU core, not a C2075 against 4)"),),
    "fig3a_hash": (Claim("Fig. 3a: the GPU's (copy &) hash is slower than the CPU's", lower("CPU", "GPU")),),
    "fig3a_explore": (Claim("Fig. 3a: the exploration ('other') is shared, the same on both", None,
                            "the same CPU code runs for both: compare the bars"),),
    "fig3_vertices": (Claim("§5.2: the speedup grows with |V| (7.8-16.7x)", trend("CPU", "up"),
                            "first against last sweep point"),),
    "fig3_labels": (Claim("Fig. 3b: the speedup falls as labels increase", trend("CPU", "down"),
                          "first against last sweep point"),),
    "fig3_degree": (Claim("Fig. 3c: the speedup rises with degree", trend("CPU", "up"),
                          "first against last sweep point"),),
    "fig3d": (Claim("Fig. 3d: the speedup rises from N = 5 to N = 9 (15.66x there)", row_lower("CPU", "N=5", "N=9")),),
}
EXPERIMENTS = tuple(replace(e, claims=CLAIMS.get(e.name.split(".", 1)[1], ())) for e in EXPERIMENTS)
