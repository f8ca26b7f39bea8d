"""gpusm: GPU subgraph matching, four published engines over one graph layer.

The public API. Everything here is re-exported from the packages where the code lives
(``common``: the graph layer, file formats, the CPU reference and the engine contract; ``gsi``,
``egsm``, ``gmatch``, ``stwig``: the engines; ``experiments``: the harness), so ``import gpusm``
is all a script needs:

>>> import gpusm
>>> data = gpusm.load_graph("hprd/HPRD.graph")          # looked up in the data folder
>>> gpusm.match(data, "hprd/queries/query_dense_16_1.graph", engine="cpu").count
3

Submodules: :mod:`gpusm.generate` (R-MAT graphs, query sets, patterns), :mod:`gpusm.distributed`
(query sets and split queries on a Dask cluster), :mod:`gpusm.cli` (the ``gpusm`` command).
"""

from common import (
    BACKEND,
    DeviceOutOfMemory,
    Engine,
    Graph,
    GraphFormatError,
    InvalidGraphError,
    MatchResult,
    Status,
    UnknownEngineError,
    __version__,
    available_engines,
    check_engine,
    create_engine,
    detect_format,
    engine_class,
    from_networkx,
    from_scipy,
    load_graph,
    load_graphs,
    load_query_set,
    match,
    match_many,
    read_expected_counts,
    register,
    results_frame,
    save_graph,
    to_networkx,
)
from common.graph.paths import data_dir, find_input


def engines() -> list[str]:
    """Names of the registered engines, in registration order (``gpusm engines`` describes them)."""
    return available_engines()


__all__ = [
    "__version__", "BACKEND", "Engine", "Graph", "MatchResult", "Status",
    "GraphFormatError", "InvalidGraphError", "DeviceOutOfMemory", "UnknownEngineError",
    "engines", "available_engines", "create_engine", "engine_class", "register", "check_engine",
    "match", "match_many", "results_frame",
    "load_graph", "load_graphs", "load_query_set", "read_expected_counts", "save_graph", "detect_format",
    "from_networkx", "to_networkx", "from_scipy", "data_dir", "find_input",
]
