"""EGSM (Sun & Luo, "Efficient GPU-Accelerated Subgraph Matching", SIGMOD 2023) in Numba CUDA.

Files follow the paper's pipeline: ``filter.py`` (label + NLC filter, wedge filter, §4),
``cuckoo_trie.py`` (the candidate index, §3), ``order.py`` (vertex grouping, §5.3),
``enumerate.py`` (hybrid BFS-DFS with adaptive order, memory fallback and look-forward load
balancing, §5), ``engine.py`` (:class:`EGSM`, the public entry, registry name ``egsm``);
``layout.py`` fixes the packed per-query arrays the kernels share.
"""

from .engine import EGSM, VARIANTS

__all__ = ["EGSM", "VARIANTS"]
