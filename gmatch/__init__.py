"""gMatch (PVLDB 2026): fine-grained, hardware-efficient subgraph matching on GPUs.

Files follow the pipeline: ``order.py`` (RI order, automorphisms, symmetry breaking) ->
``filter.py`` (LDF/NLF candidate bits, the candidate graph with bitmaps) -> ``balance.py``
(BFS seed pool) -> ``enumerate.py`` (fine-grained warp DFS with shared-memory stacks, batch
exploration and work stealing in and across blocks; the coarse-grained Naive/Unroll-k baseline)
-> ``engine.py`` (:class:`GMatch`, registry name "gmatch"), whose options are grouped in the
validated records of ``options.py``.
"""

from .engine import GMatch

__all__ = ["GMatch"]
