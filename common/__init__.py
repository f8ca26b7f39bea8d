"""gpusm's shared layer, in layers that import only downwards (docs/design.md):

- :mod:`common.errors`: the error types of the public API;
- :mod:`common.graph.model`: graph data (model, file formats, generators, conversions);
- :mod:`common.gpu`: the GPU runtime every engine uses (simulator, launches, timers, budget, pool);
- :mod:`common.engine.base`: the engine contract, the registry and results;
- :mod:`common.cpu`: the CPU reference matcher and the peer engines;
- :mod:`common.distributed`: query sets and split queries on a Dask cluster;
- :mod:`common.api`: :func:`match` and :func:`match_many` in one call;
- :mod:`common.cli`: the command line.

This module exports the public surface.
"""

__version__ = "0.1.0"        # the package's version (pyproject.toml reads it from here)

from .gpu.backend import BACKEND  # first: picks GPU or CUDA simulator before numba is imported

# isort: split
from .api import match, match_many
from .engine.base import Engine
from .engine.check import check_engine
from .engine.registry import available_engines, create_engine, engine_class, register
from .engine.result import MatchResult, Status, results_frame
from .errors import DeviceOutOfMemory, GraphFormatError, InvalidGraphError, UnknownEngineError
from .graph.interop import from_networkx, from_scipy, to_networkx
from .graph.io import detect_format, load_graph, load_graphs, load_query_set, read_expected_counts, save_graph
from .graph.model import Graph

__all__ = [
    "__version__", "BACKEND", "Engine", "Graph", "MatchResult", "Status", "GraphFormatError", "InvalidGraphError",
    "DeviceOutOfMemory", "UnknownEngineError", "available_engines", "check_engine", "create_engine", "engine_class",
    "match", "match_many", "register", "detect_format", "load_graph", "load_graphs", "load_query_set",
    "read_expected_counts", "save_graph", "from_networkx", "to_networkx", "from_scipy", "results_frame",
]
