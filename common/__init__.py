"""gpusm's shared layer: the graph model, file formats, generators, the CPU reference matcher,
the engine contract and the GPU helpers every engine uses (docs/design.md)."""

__version__ = "0.1.0"        # the package's version (pyproject.toml reads it from here)

from .backend import BACKEND  # first: picks GPU or CUDA simulator before numba.cuda is imported
from .engine import Engine, available_engines, create_engine, engine_class, match, match_many, register
from .errors import DeviceOutOfMemory, GraphFormatError, InvalidGraphError, UnknownEngineError
from .graph import Graph
from .interop import from_networkx, from_scipy, results_frame, to_networkx
from .io import detect_format, load_graph, load_graphs, load_query_set, read_expected_counts, save_graph
from .result import MatchResult, Status

__all__ = [
    "__version__", "BACKEND", "Engine", "Graph", "MatchResult", "Status", "GraphFormatError", "InvalidGraphError",
    "DeviceOutOfMemory", "UnknownEngineError", "available_engines", "create_engine", "engine_class", "match",
    "match_many", "register", "detect_format", "load_graph", "load_graphs", "load_query_set",
    "read_expected_counts", "save_graph", "from_networkx", "to_networkx", "from_scipy", "results_frame",
]
