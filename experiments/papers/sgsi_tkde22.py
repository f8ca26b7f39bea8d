"""SGSI (Zeng et al., TKDE 2022) §8: Tables 3-7 as far as they concern GSI/SGSI/SGSI+, and Fig. 17.

Tables 3 and 4 repeat GSI's Tables V and VI with SGSI's printed values (identical except the
WatDiv and DBpedia "+SO" cells, which silently include load balance and duplicate removal,
as we read them). Tables 5 and 7 and Fig. 17 run the out-of-core pipeline on graphs larger than the
device memory: the paper's DBpedia1B, Friendster, Yahoo and WatDiv1B graphs (1-2.8B edges, an
80 GB A100) are R-MAT stand-ins with their |V|, |E| and label counts, capped by the scale, and
the device-memory cap shrinks with them (64 MiB at the tiny and small scales) so that every
graph still needs several partitions. PBE is not built: its columns are absent. Table 6's
other systems (GpSM, GunrockSM, Wukong+G, MAGiQ) are not built either; only GSI's GPU column is
measured (peak device memory; host memory is not measured).

At the ``small`` scale (``SMALL``, ``SMALL_LARGE``) the in-core tables keep enron and gowalla with
2 queries and a 0.5 s limit; the out-of-core ones 2 points (the sweeps 3), 2 queries and 1 s;
the WD size sweep shrinks its stand-ins in proportion (1/3/5 of 9 parts of the scale's cap).

At the ``medium`` scale (``MEDIUM``, ``MEDIUM_LARGE``) the in-core tables keep Enron (GSI's
set runs them on WatDiv too) with 20 queries, a 0.5 s limit and 3 timed runs per query (Tables 3 and 4: the effects are
small); the out-of-core ones keep every point, 20 queries and a 1 s limit (0.5 s on the
sweeps), with stand-ins of at most 4M edges under a 128 MiB device cap (several partitions).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..harness.core import Claim, Config, Experiment, Metric, Point, lower, trend
from ..harness.workloads import GB, Dataset, QuerySpec, scaled_sweep
from . import gsi_icde20 as gsi

PAPER = "sgsi_tkde22"
TIME_LIMIT_S = 100.0
LARGE_LIMIT_S = 24 * 3600.0
SMALL_CAPS = {"tiny": 1 << 20, "small": 64 << 20, "medium": 128 << 20, "large": 1 * GB}

# the paper's SGSI streams segments only (zero_copy=False); both configs time copies and kernels
# (instrument: Table 7 reads them) in every run, so Tables 5 and 7 share runs at equal overhead
SGSI = Config.of("SGSI", "sgsi", zero_copy=False, instrument=True)
SGSI_PLUS = Config.of("SGSI+", "sgsi", load_balance="histogram", zero_copy=False, instrument=True)
GSI_INCORE = Config.of("GSI (in-core)", "gsi")

LARGE = (
    Dataset("DB", 233_000_000, 1_100_000_000, vertex_labels=1000, edge_labels=124_000),
    Dataset("FR", 65_000_000, 1_800_000_000, vertex_labels=1000, edge_labels=1000),
    Dataset("YH", 417_000_000, 2_800_000_000, vertex_labels=1000, edge_labels=1000),
    Dataset("WD", 97_000_000, 1_000_000_000, vertex_labels=1000, edge_labels=86),
)
LARGE_POINTS = tuple(Point(d.name, d, gsi.QUERIES) for d in LARGE)
LARGE_TABLE5_POINTS = tuple(p for p in LARGE_POINTS if p.label == "WD")
"""Table 5's row at the large scale: WD, 1B edges shrunk to 64M at its average degree."""
_T5 = pd.DataFrame({"SGSI": [56, 210, 596, 282], "SGSI+": [21, 148, 403, 117]},
                   index=[d.name for d in LARGE]) * 1000.0          # seconds -> ms
_T7_COMP = pd.DataFrame({"SGSI+": [12.9, 111, 323, 76.1]}, index=[d.name for d in LARGE]) * 1000.0
_T7_COMM = pd.DataFrame({"SGSI+": [8.1, 37, 80, 40.9]}, index=[d.name for d in LARGE]) * 1000.0

_T3_MS = dict(gsi.T5_MS, WatDiv=("43K", "31K", "25K", "1K"), DBpedia=("85K", "48K", "36K", "2K"))
_T6_GPU = pd.DataFrame({"GSI": [661, 685, 915, 1.2 * 1024, 4.9 * 1024, 8.1 * 1024]},
                       index=[d.name for d in gsi.DATASETS])       # MB (paper's M/G units)

_WD = LARGE[3]
_EDGE_SWEEP = tuple(Point(f"{b}B edges", _WD.with_(name=f"WD-{b}B", num_vertices=_WD.num_vertices * b,
                                                   num_edges=b * 1_000_000_000), gsi.QUERIES, x=b)
                    for b in (1, 3, 5, 7, 9))
_QUERY_SWEEP = tuple(Point(f"|V(Q)|={k}", _WD, QuerySpec("walk", size=k, count=100), x=k)
                     for k in (4, 7, 10, 12, 15))
_LABEL_SWEEP = tuple(Point(f"|L_V|={k}", _WD.with_(name=f"WD-LV{k}", vertex_labels=k), gsi.QUERIES, x=k)
                     for k in (100, 500, 1000, 5000))


SMALL = dict(time_limit_s=0.5, queries_per_set=2, max_points=2)
"""The small scale's setting for the in-core tables (sized by the worst-case plan)."""
SMALL_LARGE = dict(time_limit_s=1.0, queries_per_set=2, max_points=2)
"""... and for the out-of-core ones (several partitions per query: a longer limit)."""
MEDIUM = dict(time_limit_s=0.25, queries_per_set=20, max_points=1)
"""The medium scale's setting for the in-core tables: Enron (GSI's tables run Enron and WatDiv)."""
MEDIUM_TIMED = dict(MEDIUM, repeats=3)
"""... and for the timing tables 3 and 4: 3 timed runs per query (their effects are small)."""
MEDIUM_LARGE = dict(time_limit_s=0.25, queries_per_set=20, max_points=None)
"""... and for the out-of-core tables: every graph; ``MEDIUM_SWEEP`` for the sweeps, every point."""
MEDIUM_SWEEP = dict(MEDIUM_LARGE, time_limit_s=0.25)


LARGE_SCALE = dict(time_limit_s=10.0, queries_per_set=50, max_points=None)
"""The large scale's setting (Table 5 and Fig. 17): 50 queries, 10 s, stand-ins of up to 256M edges
with the paper's average degree under a 1 GiB device cap (several partitions each)."""


def _three(points) -> tuple:
    """A sweep's first, middle and last points: the medium scale's (the claims compare the ends)."""
    return (points[0], points[len(points) // 2], points[-1])


def _ends(points) -> tuple:
    """A sweep's first and last points: what its claim compares (the large scale runs only those)."""
    return (points[0], points[-1])


def _experiment(name, title, configs, metric, points, paper=None, *, limit=TIME_LIMIT_S, cap=12 * GB,
                small=SMALL, medium=MEDIUM, large=None, **kw) -> Experiment:
    scale_at = {"small": small, "medium": medium} | ({"large": large} if large is not None else {})
    return Experiment(f"{PAPER}.{name}", PAPER, title, tuple(configs), tuple(points), metric, limit, cap,
                      paper_values=paper, scale_at=scale_at, **kw)


def _large(name, title, configs, metric, points=LARGE_POINTS, paper=None, *, small=SMALL_LARGE,
           medium=MEDIUM_LARGE, **kw) -> Experiment:
    return _experiment(name, title, configs, metric, points, paper, limit=LARGE_LIMIT_S, cap=80 * GB,
                       memory_cap_at=SMALL_CAPS, small=small, medium=medium, **kw)


EXPERIMENTS = (
    _experiment("table3_time", "Table 3: join techniques, time (ms)", gsi.JOIN, Metric("avg_ms"), gsi.POINTS,
                gsi.paper_table(_T3_MS, gsi.JOIN_COLUMNS), medium=MEDIUM_TIMED),
    _experiment("table3_gld", "Table 3: join techniques, global-memory loads", gsi.instrumented(gsi.JOIN),
                Metric("stat", stat="loads_total", partial_runs=False), gsi.POINTS,
                gsi.paper_table(gsi.T5_GLD, gsi.JOIN_COLUMNS)),
    _experiment("table4_time", "Table 4: CR vs PCSR, time (ms)", gsi.STRUCTURES, Metric("avg_ms"), gsi.POINTS,
                gsi.paper_table(gsi.T6_MS, ["CR", "PCSR"]), medium=MEDIUM_TIMED),
    _experiment("table6_gpu_memory", "Table 6: peak GPU memory of GSI (MiB)", (GSI_INCORE,), Metric("peak_mb"),
                gsi.POINTS, _T6_GPU.rename(columns={"GSI": "GSI (in-core)"})),
    _large("table5", "Table 5: elapsed time on graphs larger than the GPU (ms)", (SGSI, SGSI_PLUS),
           Metric("avg_ms"), paper=_T5, large=LARGE_SCALE, points_at={"large": LARGE_TABLE5_POINTS}),
    _large("table7_comp", "Table 7: computation time (ms), SGSI+: summed device time of its kernels",
           (SGSI_PLUS,), Metric("stat", stat="comp_s", partial_runs=False, factor=1000.0), paper=_T7_COMP,
           large=LARGE_SCALE, points_at={"large": LARGE_TABLE5_POINTS}),
    _large("table7_comm", "Table 7: communication time (ms), SGSI+: summed device time of its copies",
           (SGSI_PLUS,), Metric("stat", stat="comm_s", partial_runs=False, factor=1000.0), paper=_T7_COMM,
           large=LARGE_SCALE, points_at={"large": LARGE_TABLE5_POINTS}),
    _large("fig17_edges", "Fig. 17: data size (WatDiv stand-ins), SGSI vs SGSI+", (SGSI, SGSI_PLUS),
           Metric("avg_ms"), _EDGE_SWEEP, figure="lines", small=dict(SMALL_LARGE, max_points=3),
           medium=MEDIUM_SWEEP, large=LARGE_SCALE,
           points_at={"small": scaled_sweep(_EDGE_SWEEP, "small"),
                      "medium": _three(scaled_sweep(_EDGE_SWEEP, "medium")),
                      "large": _ends(scaled_sweep(_EDGE_SWEEP, "large"))},
           xlabel="data-graph edges at full scale (billions; smaller scales shrink every point alike)"),
    _large("fig17_query_size", "Fig. 17: query size (WD), SGSI vs SGSI+", (SGSI, SGSI_PLUS),
           Metric("avg_ms"), _QUERY_SWEEP, figure="lines", small=dict(SMALL_LARGE, max_points=3), medium=MEDIUM_SWEEP,
           large=LARGE_SCALE, points_at={"medium": _three(_QUERY_SWEEP), "large": _ends(_QUERY_SWEEP)},
           xlabel="query vertices |V(Q)| (count)"),
    _large("fig17_labels", "Fig. 17: number of vertex labels (WD), SGSI vs SGSI+", (SGSI, SGSI_PLUS),
           Metric("avg_ms"), _LABEL_SWEEP, figure="lines", small=dict(SMALL_LARGE, max_points=3), medium=MEDIUM_SWEEP,
           large=LARGE_SCALE, points_at={"medium": _three(_LABEL_SWEEP), "large": _ends(_LABEL_SWEEP)},
           xlabel="vertex labels |L_V| (count)"),
)

def _steps(what: str) -> tuple:
    """Table 3's compound claim in its parts, one technique each."""
    return tuple(Claim(f"Table 3: {new} {what} (against {old})", lower(new, old))
                 for new, old in (("+DS", "GSI-"), ("+PC", "+DS"), ("+SO (GSI)", "+PC")))


CLAIMS = {
    "table3_time": _steps("speeds up the join"),
    "table3_gld": _steps("cuts global-memory loads"),
    "table4_time": (Claim("Table 4: PCSR is faster than CR", lower("PCSR", "CR")),),
    "table6_gpu_memory": (Claim("Table 6: GSI needs less GPU memory than GpSM, GunrockSM, Wukong+G and MAGiQ", None,
                                "the competitors are not built; GSI's own peak is measured"),),
    "table5": (Claim("Table 5: SGSI+ (histogram load balance) is faster than SGSI (1.4-2.7x)",
                     lower("SGSI+", "SGSI", factor=(1.4, 2.7))),
               Claim("Table 5: SGSI and SGSI+ beat PBE", None, "PBE is not built")),
    "table7_comp": (Claim("Table 7: PBE spends a larger share of its time on communication than SGSI+", None,
                          "PBE is not built"),),
    "table7_comm": (Claim("Table 7: PBE spends a larger share of its time on communication than SGSI+", None,
                          "PBE is not built"),),
    "fig17_edges": (Claim("Fig. 17: SGSI+ beats SGSI as the data grows", lower("SGSI+", "SGSI")),),
    "fig17_query_size": (Claim("Fig. 17: time grows (slowly) with |V(Q)|", trend("SGSI", "up"),
                               "first against last sweep point"),),
    "fig17_labels": (Claim("Fig. 17: SGSI gets faster with more vertex labels", trend("SGSI", "down"),
                           "first against last sweep point"),),
}
EXPERIMENTS = tuple(replace(e, claims=CLAIMS.get(e.name.split(".", 1)[1], ())) for e in EXPERIMENTS)
