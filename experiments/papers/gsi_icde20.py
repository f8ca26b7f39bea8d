"""GSI (Zeng et al., ICDE 2020) §VIII: Tables IV-IX and Figs. 14-16, on our GSI engine's ablations.

The paper's six datasets (Table III): enron (SNAP email-Enron, real: 36,692 V / 183,831 E; the
paper prints 69K/274K) and five graphs not available offline, run as R-MAT stand-ins with the
paper's |V|, |E| and label counts (road's stand-in is a uniform R-MAT). Labels follow a power law
(§VIII-B; exponent 1, seed 1: the paper gives neither). Queries: 100 random walks of 12 vertices
per dataset (§VIII-C). Time limit 100 s, GPU memory 12 GB (Titan XP).

The competitors (VF3, CFL-Match, CBWJ, GpSM, GunrockSM, MAGiQ, Wukong+G) are not built. Global
loads (Tables V, VI, IX) are GSI's instrumented warp-level load requests (``instrument=True``),
not nvprof's hardware transactions; Table VII's store counts are not instrumented (only its time
half runs); Table IV's GpSM and GunrockSM filter columns are GSI's label-only and label+degree
filters; Fig. 14 puts this toolkit's other engines beside GSI, and the authors' GSI (pkumod/GSI,
built by ``make competitors``: :mod:`experiments.papers.competitors`) where it is built.

``SMALL`` keeps Enron and gowalla with 3 queries and a 0.5 s limit, each sweep's first 3 points.
``MEDIUM`` keeps Enron and WatDiv (a 4M-edge stand-in), 20 queries, 0.25 s and 3 timed runs per
query, every sweep point; Fig. 14 adds the CPU peers networkx and igraph beside the reference;
Fig. 15(b) caps the launch grid at 1..132 blocks (``max_blocks``) in place of 1..30 SMs; Fig. 17
draws GSI-opt's per-query times and result sizes as box plots.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from common.engine.registry import PEER_ENGINES

from ..harness.core import Claim, Config, Experiment, Metric, Point, all_of, lower, measured, trend
from ..harness.workloads import ENRON, GB, Dataset, QuerySpec, scaled_sweep
from .competitors import GSI_AUTHORS_NOTE, competitor_configs, competitor_reason

PAPER = "gsi_icde20"
TIME_LIMIT_S = 100.0
MEMORY_CAP = 12 * GB


def paper_number(text: str) -> float:
    """'2.1M' -> 2.1e6, '656K' -> 656e3, '28' -> 28."""
    scale = {"K": 1e3, "M": 1e6, "G": 1e9}.get(text[-1], 1.0)
    return float(text[:-1] if scale != 1.0 else text) * scale


def paper_table(rows: dict, columns: list[str]) -> pd.DataFrame:
    """A paper's printed table as numbers: one row per key of ``rows`` (a tuple of printed cells each)."""
    return pd.DataFrame({c: [paper_number(v[i]) for v in rows.values()] for i, c in enumerate(columns)},
                        index=list(rows))


GSI_ENRON = ENRON.with_(vertex_labels=10, edge_labels=100)
DATASETS = (
    GSI_ENRON,
    Dataset("gowalla", 196_591, 950_327, vertex_labels=100, edge_labels=100),
    Dataset("patent", 6_000_000, 16_000_000, vertex_labels=453, edge_labels=1000),
    Dataset("road", 14_000_000, 16_000_000, vertex_labels=1000, edge_labels=1000,
            rmat_abcd=(0.25, 0.25, 0.25, 0.25)),
    Dataset("WatDiv", 10_000_000, 109_000_000, vertex_labels=1000, edge_labels=86),
    Dataset("DBpedia", 22_000_000, 170_000_000, vertex_labels=1000, edge_labels=57_000),
)
QUERIES = QuerySpec("walk", size=12, count=100)
POINTS = tuple(Point(d.name, d, QUERIES) for d in DATASETS)

# The join-phase ablations, named as Table V builds them up (each adds one technique).
GSI_MINUS = dict(structure="csr", output="two-step", set_ops="naive", load_balance=False,
                 duplicate_removal=False)
PLUS_DS = dict(GSI_MINUS, structure="pcsr")
PLUS_PC = dict(PLUS_DS, output="prealloc-combine")
GSI_PLAIN = dict(PLUS_PC, set_ops="gpu-friendly")          # "+SO" = GSI
GSI_LB = dict(GSI_PLAIN, load_balance=True)
GSI_OPT = dict(GSI_LB, duplicate_removal=True)              # GSI-opt = GSI + LB + DR


def instrumented(configs) -> tuple:
    """The same configurations with GSI's load counters on (for the GLD tables only)."""
    return tuple(Config(c.label, c.engine, tuple(sorted(dict(c.options, instrument=True).items())))
                 for c in configs)


SMALL = dict(time_limit_s=0.5, queries_per_set=3, max_points=2)
"""The small scale's setting for this paper (sized by the worst-case plan); sweeps keep 3 points."""
SMALL_SWEEP = dict(SMALL, max_points=3)


MEDIUM = dict(time_limit_s=0.25, queries_per_set=20, max_points=None)
"""The medium scale's setting for this paper (sized by the worst-case plan): every sweep point."""
MEDIUM_POINTS = tuple(p for p in POINTS if p.label in ("Enron", "WatDiv"))
"""The tables' rows at the medium scale: the real graph and the 4M-edge WatDiv stand-in (where load
balance and duplicate removal matter); gowalla runs in Fig. 14 and the Fig. 16 sweeps."""
FIG14_POINTS = tuple(p for p in POINTS if p.label in ("Enron", "gowalla", "WatDiv"))
MEDIUM_TIMED = dict(MEDIUM, repeats=3)
"""... and for the timing tables IV-IX: 3 timed runs per query (their effects are small)."""


LARGE = dict(time_limit_s=10.0, queries_per_set=50, max_points=None)
"""The large scale's setting (headline experiments only): 50 queries, 10 s, the paper's graphs at full size."""
LARGE_TABLE5_POINTS = tuple(p for p in POINTS if p.label == "WatDiv")
"""Table V's row at the large scale: WatDiv at its full 109M edges (the paper's largest effects)."""
LARGE_FIG14_POINTS = tuple(p for p in POINTS if p.label == "gowalla")
"""Fig. 14's row at the large scale: gowalla at full size (the CPU peers cannot load WatDiv)."""


def _experiment(name, title, configs, metric, paper=None, *, small=SMALL, medium=MEDIUM, large=None,
                **kw) -> Experiment:
    points_at = kw.pop("points_at", {"medium": MEDIUM_POINTS} if "points" not in kw else {})
    scale_at = {"small": small, "medium": medium} | ({"large": large} if large is not None else {})
    return Experiment(f"{PAPER}.{name}", PAPER, title, tuple(configs), kw.pop("points", POINTS), metric,
                      TIME_LIMIT_S, MEMORY_CAP, paper_values=paper, scale_at=scale_at,
                      points_at=points_at, **kw)


FILTERS = (Config.of("label (GpSM)", "gsi", filter="label", **GSI_OPT),
           Config.of("label+degree (GSM)", "gsi", filter="degree", **GSI_OPT),
           Config.of("signature (GSI)", "gsi", filter="signature", **GSI_OPT))
_T4 = {"enron": ("2,246", "2,270", "111", "24", "20", "9"), "gowalla": ("153", "1,072", "90", "31", "24", "16"),
       "patent": ("2,298", "3,401", "25", "781", "569", "354"), "road": ("8", "2,544", "7", "259", "394", "187"),
       "WatDiv": ("871", "12,145", "604", "290", "252", "201"),
       "DBpedia": ("138", "11,405", "132", "410", "494", "407")}
_T4 = {k.replace("enron", "Enron"): tuple(x.replace(",", "") for x in v) for k, v in _T4.items()}
_FILTER_COLS = [c.label for c in FILTERS]

JOIN = (Config.of("GSI-", "gsi", **GSI_MINUS), Config.of("+DS", "gsi", **PLUS_DS),
        Config.of("+PC", "gsi", **PLUS_PC), Config.of("+SO (GSI)", "gsi", **GSI_PLAIN))
T5_GLD = {"Enron": ("3M", "2.1M", "1.6M", "656K"), "gowalla": ("3.2M", "2M", "1.3M", "848K"),
           "patent": ("3.5M", "2.4M", "1.8M", "1.6M"), "road": ("3.4M", "2.2M", "1.7M", "1.6M"),
           "WatDiv": ("40M", "30M", "21M", "13M"), "DBpedia": ("53M", "31M", "24M", "14M")}
T5_MS = {"Enron": ("573", "274", "176", "28"), "gowalla": ("353", "172", "88", "69"),
          "patent": ("3K", "1.4K", "700", "524"), "road": ("2.4K", "675", "456", "456"),
          "WatDiv": ("43K", "31K", "25K", "4.4K"), "DBpedia": ("85K", "48K", "36K", "6K")}
JOIN_COLUMNS = [c.label for c in JOIN]

STRUCTURES = (Config.of("CR", "gsi", **dict(PLUS_DS, structure="cr")), Config.of("PCSR", "gsi", **PLUS_DS))
_T6_GLD = {"Enron": ("2.4M", "2.1M"), "gowalla": ("2.5M", "2M"), "patent": ("3.2M", "2.4M"),
           "road": ("3.0M", "2.2M"), "WatDiv": ("46M", "30M"), "DBpedia": ("37M", "31M")}
T6_MS = {"Enron": ("311", "274"), "gowalla": ("212", "172"), "patent": ("1.8K", "1.4K"),
          "road": ("873", "675"), "WatDiv": ("42K", "31K"), "DBpedia": ("56K", "48K")}

WRITE_CACHE = (Config.of("no cache", "gsi", **dict(GSI_PLAIN, write_cache=False)),
               Config.of("write cache", "gsi", **dict(GSI_PLAIN, write_cache=True)))
_T7_MS = {"Enron": ("117", "28"), "gowalla": ("78", "69"), "road": ("456", "456"),
          "WatDiv": ("8396", "4425"), "DBpedia": ("12194", "6148")}

OPTIMIZATIONS = (Config.of("GSI", "gsi", **GSI_PLAIN), Config.of("+LB", "gsi", **GSI_LB),
                 Config.of("+DR (GSI-opt)", "gsi", **GSI_OPT))
_T8_MS = {"Enron": ("28", "28", "28"), "gowalla": ("69", "69", "68"), "patent": ("524", "466", "465"),
          "road": ("456", "456", "456"), "WatDiv": ("4.4K", "1.3K", "1K"), "DBpedia": ("6K", "2.2K", "2K")}

DUPLICATES = (Config.of("with dup", "gsi", **GSI_LB), Config.of("DR", "gsi", **GSI_OPT))
_T9_GLD = {"Enron": ("656K", "630K"), "gowalla": ("848K", "824K"), "road": ("1.66M", "1.61M"),
           "WatDiv": ("13M", "10M"), "DBpedia": ("14M", "10M")}
_T9_MS = {"Enron": ("28", "28"), "gowalla": ("69", "68"), "road": ("456", "456"),
          "WatDiv": ("1.3K", "1K"), "DBpedia": ("2.2K", "2K")}

ALL_ENGINES = (Config.of("GSI", "gsi", **GSI_PLAIN), Config.of("GSI-opt", "gsi", **GSI_OPT),
               Config.of("EGSM", "egsm", wedge_filter_min_edges=0), Config.of("gMatch", "gmatch"),
               Config.of("STwig", "stwig"),
               Config.of("CPU reference", "cpu"))
CPU_PEERS = tuple(Config(f"{name} (CPU)", name, optional=True) for name in PEER_ENGINES)
"""The CPU matchers that can be had (networkx VF2, igraph LAD: common/cpu/peers.py), in place of the
paper's VF3, CFL-Match and CBWJ; each runs where its package is installed (extra ``peers``)."""
GSI_AUTHORS = competitor_configs("gsi-authors", "GSI (authors)")
"""The authors' GSI (pkumod/GSI), run where ``make competitors`` built it."""

# Fig. 15(a): WatDiv stand-ins of growing size (the paper: watdiv10M ... 210M edges).
_WATDIV = DATASETS[4]
SIZE_SWEEP = tuple(Point(f"{m}M edges", _WATDIV.with_(name=f"WatDiv-{m}M", num_vertices=_WATDIV.num_vertices * m // 109,
                                                     num_edges=m * 1_000_000), QUERIES, x=m)
                   for m in (10, 50, 90, 130, 170, 210))
# Fig. 16(a): gowalla with 10..1000 vertex (edge) labels, the other kind at its default of 100.
_GOWALLA = DATASETS[1]
VERTEX_LABEL_SWEEP = tuple(Point(f"|L_V|={k}", _GOWALLA.with_(name=f"gowalla-LV{k}", vertex_labels=k), QUERIES, x=k)
                           for k in (10, 50, 100, 500, 1000))
EDGE_LABEL_SWEEP = tuple(Point(f"|L_E|={k}", _GOWALLA.with_(name=f"gowalla-LE{k}", edge_labels=k), QUERIES, x=k)
                         for k in (10, 50, 100, 500, 1000))
# Fig. 16(b): |E(Q)| at |V(Q)| = 12, then |V(Q)| at |E(Q)| = 2|V(Q)|.
# Fig. 15(b): GSI-opt on WatDiv with its launch grids capped at k blocks (the paper: 1..30 SMs of a
# Titan XP; an H100/H200 has 132 SMs, and one block of 1024 threads per SM is resident at most).
SM_SWEEP = tuple(Point(f"{k} blocks", DATASETS[4], QUERIES, x=k, options=(("max_blocks", k),))
                 for k in (1, 4, 16, 33, 66, 132))
EDGE_SWEEP = tuple(Point(f"|E(Q)|={m}", _GOWALLA, QuerySpec("walk", size=12, count=100, num_edges=m), x=m)
                   for m in (12, 16, 20, 24, 28, 32))
VERTEX_SWEEP = tuple(Point(f"|V(Q)|={k}", _GOWALLA, QuerySpec("walk", size=k, count=100, num_edges=2 * k), x=k)
                     for k in (8, 10, 12, 13, 14, 16))

def _three(points) -> tuple:
    """A sweep's first, middle and last points: the medium scale's (the claims compare the ends)."""
    return (points[0], points[len(points) // 2], points[-1])


EXPERIMENTS = (
    _experiment("table4_candidates", "Table IV: minimum candidate-set size per filter", FILTERS,
                Metric("stat", stat="min_candidates"),
                paper_table(_T4, _FILTER_COLS + ["t1", "t2", "t3"])[_FILTER_COLS], medium=MEDIUM_TIMED),
    _experiment("table4_time", "Table IV: filtering time (ms) per filter", FILTERS,
                Metric("avg_ms", phases=("filter",)),
                paper_table(_T4, ["c1", "c2", "c3"] + _FILTER_COLS)[_FILTER_COLS], medium=MEDIUM_TIMED),
    _experiment("table5_time", "Table V: join techniques, time (ms)", JOIN, Metric("avg_ms"),
                paper_table(T5_MS, JOIN_COLUMNS), medium=MEDIUM_TIMED, large=LARGE,
                points_at={"medium": MEDIUM_POINTS, "large": LARGE_TABLE5_POINTS}),
    _experiment("table5_gld", "Table V: join techniques, global-memory loads", instrumented(JOIN),
                Metric("stat", stat="loads_total", partial_runs=False), paper_table(T5_GLD, JOIN_COLUMNS)),
    _experiment("table6_time", "Table VI: CR vs PCSR, time (ms)", STRUCTURES, Metric("avg_ms"),
                paper_table(T6_MS, ["CR", "PCSR"]), medium=MEDIUM_TIMED),
    _experiment("table6_gld", "Table VI: CR vs PCSR, global-memory loads", instrumented(STRUCTURES),
                Metric("stat", stat="loads_total", partial_runs=False), paper_table(_T6_GLD, ["CR", "PCSR"])),
    _experiment("table7_time", "Table VII: write cache, time (ms)", WRITE_CACHE, Metric("avg_ms"),
                paper_table(_T7_MS, ["no cache", "write cache"]), medium=MEDIUM_TIMED),
    _experiment("table8", "Table VIII: load balance and duplicate removal, time (ms)", OPTIMIZATIONS,
                Metric("avg_ms"), paper_table(_T8_MS, [c.label for c in OPTIMIZATIONS]), medium=MEDIUM_TIMED),
    _experiment("table9_time", "Table IX: duplicate removal, time (ms)", DUPLICATES, Metric("avg_ms"),
                paper_table(_T9_MS, ["with dup", "DR"]), medium=MEDIUM_TIMED),
    _experiment("table9_gld", "Table IX: duplicate removal, global-memory loads", instrumented(DUPLICATES),
                Metric("stat", stat="loads_total", partial_runs=False), paper_table(_T9_GLD, ["with dup", "DR"])),
    _experiment("fig14", "Fig. 14: all engines per dataset, average time (ms)", ALL_ENGINES + GSI_AUTHORS + CPU_PEERS,
                Metric("avg_ms"), figure="bars", points_at={"medium": FIG14_POINTS, "large": LARGE_FIG14_POINTS},
                large=LARGE,
                notes="the paper's CPU matchers (VF3, CFL-Match, CBWJ) are not built: this toolkit's engines stand "
                      "beside GSI, and the CPU peers networkx (VF2) and igraph (LAD) stand in for them; "
                      + (competitor_reason("gsi-authors") or GSI_AUTHORS_NOTE)),
    _experiment("fig15a", "Fig. 15(a): data size (WatDiv stand-ins), GSI and GSI-opt", ALL_ENGINES[:2],
                Metric("avg_ms"), points=SIZE_SWEEP, figure="lines", small=SMALL_SWEEP,
                xlabel="data-graph edges at full scale (millions; smaller scales shrink every point alike)",
                points_at={"small": scaled_sweep(SIZE_SWEEP, "small"),
                           "medium": _three(scaled_sweep(SIZE_SWEEP, "medium"))}),
    _experiment("fig15b", "Fig. 15(b): launch grid capped at k blocks (WatDiv), GSI-opt", ALL_ENGINES[1:2],
                Metric("avg_ms"), points=SM_SWEEP, figure="lines", points_at={"medium": _three(SM_SWEEP)},
                xlabel="blocks of the launch grid (count; the paper: SMs 1..30)",
                notes="the number of SMs cannot be set; grids capped at k blocks of grid-stride loops stand in "
                      "for k SMs (one resident block per SM), as docs/papers.md proposes"),
    _experiment("fig17", "Fig. 17: per-query time and result size of GSI-opt (box plots)", ALL_ENGINES[1:2],
                Metric("avg_ms"), figure="box", points_at={"medium": FIG14_POINTS},
                notes="the runs of Fig. 14's GSI-opt column (shared)"),
    _experiment("fig16a_vertex_labels", "Fig. 16(a): number of vertex labels (gowalla), GSI-opt",
                ALL_ENGINES[1:2], Metric("avg_ms"), points=VERTEX_LABEL_SWEEP, figure="lines", small=SMALL_SWEEP,
                points_at={"medium": _three(VERTEX_LABEL_SWEEP)},
                xlabel="vertex labels |L_V| (count)"),
    _experiment("fig16a_edge_labels", "Fig. 16(a): number of edge labels (gowalla), GSI-opt",
                ALL_ENGINES[1:2], Metric("avg_ms"), points=EDGE_LABEL_SWEEP, figure="lines", small=SMALL_SWEEP,
                points_at={"medium": _three(EDGE_LABEL_SWEEP)},
                xlabel="edge labels |L_E| (count)"),
    _experiment("fig16b_edges", "Fig. 16(b): |E(Q)| at |V(Q)| = 12 (gowalla), GSI-opt", ALL_ENGINES[1:2],
                Metric("avg_ms"), points=EDGE_SWEEP, figure="lines", small=SMALL_SWEEP,
                points_at={"medium": _three(EDGE_SWEEP)},
                xlabel="query edges |E(Q)| (count)"),
    _experiment("fig16b_vertices", "Fig. 16(b): |V(Q)| at |E(Q)| = 2|V(Q)| (gowalla), GSI-opt",
                ALL_ENGINES[1:2], Metric("avg_ms"), points=VERTEX_SWEEP, figure="lines", small=SMALL_SWEEP,
                points_at={"medium": _three(VERTEX_SWEEP)},
                xlabel="query vertices |V(Q)| (count)"),
)

_SIG, _LAB, _DEG = _FILTER_COLS[2], _FILTER_COLS[0], _FILTER_COLS[1]
_FILTERS = ((_LAB, "GpSM's label filter"), (_DEG, "GSM's label+degree filter"))
_STEP_PARTS = ((("+DS", "GSI-"), "+DS (PCSR) improves on GSI-", (1.5, 2.5), (1.2, 1.5)),
               (("+PC", "+DS"), "+PC (Prealloc-Combine) improves on +DS", (1.2, 2.0), (1.15, 1.35)),
               (("+SO (GSI)", "+PC"), "+SO (set operations) improves on +PC", (1.3, 6.3), (1.4, 1.8)))
"""Table V's compound claim in parts: the columns, the part, its factor in time and in loads (§VIII-D)."""


def _steps(what: str, index: int) -> tuple:
    return tuple(Claim(f"Table V: {text} ({what})", lower(*columns, factor=factors[index]),
                       f"{what}, in every measured row") for columns, text, *factors in _STEP_PARTS)
CLAIMS = {
    "table4_candidates": tuple(Claim(f"Table IV: the signature filter leaves 10-100x smaller minimum candidate sets "
                                     f"than {name}", lower(_SIG, column, factor=(10.0, 100.0)),
                                     "the factor over rows, judged against 10-100x") for column, name in _FILTERS),
    "table4_time": tuple(Claim(f"Table IV: the signature filter also takes less time than {name}", lower(_SIG, column))
                         for column, name in _FILTERS),
    "table5_time": _steps("time", 0),
    "table5_gld": _steps("loads, GSI's software counter", 1),
    "table6_time": (Claim("Table VI: PCSR is faster than CR (1.1-1.4x)", lower("PCSR", "CR", factor=(1.1, 1.4))),),
    "table6_gld": (Claim("Table VI: PCSR makes fewer global-memory loads than CR", lower("PCSR", "CR")),),
    "table7_time": (Claim("Table VII: the write cache cuts the join time (76% on enron)",
                          lower("write cache", "no cache")),),
    "table8": (Claim("Table VIII: load balance speeds GSI up on WatDiv (3.4x)",
                     lower("+LB", "GSI", rows=("WatDiv",), factor=3.4)),
               Claim("Table VIII: duplicate removal adds a little more on WatDiv",
                     lower("+DR (GSI-opt)", "+LB", rows=("WatDiv",)))),
    "table9_time": (Claim("Table IX: duplicate removal cuts time on WatDiv and DBpedia",
                          lower("DR", "with dup", rows=("WatDiv",))),),
    "table9_gld": (Claim("Table IX: duplicate removal trims global-memory loads (3-25%)", lower("DR", "with dup")),),
    "fig14": (Claim("Fig. 14: GSI answers every dataset's queries in under 1 s on average", measured("GSI"),
                    "shown, not judged: a solved query ends within the limit, which is under 1 s here"),
              Claim("Fig. 14: GSI is faster than the CPU matchers",
                    all_of(*(lower("GSI", c.label) for c in CPU_PEERS)),
                    "against networkx/igraph (the paper's VF3, CFL-Match and CBWJ are not built)"),
              Claim("Fig. 14: the authors' GSI is faster than the CPU matchers",
                    all_of(*(lower("GSI (authors)", c.label) for c in CPU_PEERS)), "against networkx/igraph")),
    "fig15a": (Claim("Fig. 15(a): GSI-opt's time grows more slowly than the data (21x from first to last point)",
                     measured("GSI-opt"), "shown, not judged: sub-millisecond times cannot grow 21x here"),),
    "fig15b": (Claim("Fig. 15(b): GSI-opt gets faster with more SMs (here: blocks)", trend("GSI-opt", "down"),
                     "first against last sweep point"),),
    "fig16a_vertex_labels": (Claim("Fig. 16(a): time falls as vertex labels increase", trend("GSI-opt", "down"),
                                   "first against last sweep point"),),
    "fig16a_edge_labels": (Claim("Fig. 16(a): time falls as edge labels increase", trend("GSI-opt", "down"),
                                 "first against last sweep point"),),
    "fig16b_edges": (Claim("Fig. 16(b): time rises (slowly) with |E(Q)|", trend("GSI-opt", "up"),
                           "first against last sweep point"),),
    "fig16b_vertices": (Claim("Fig. 16(b): time rises (slowly) with |V(Q)|", trend("GSI-opt", "up"),
                              "first against last sweep point"),),
    "fig17": (Claim("Fig. 17: response times and result sizes spread over orders of magnitude", None,
                    "read from the box plots; the paper prints no number"),),
}
EXPERIMENTS = tuple(replace(e, claims=CLAIMS.get(e.name.split(".", 1)[1], ())) for e in EXPERIMENTS)
