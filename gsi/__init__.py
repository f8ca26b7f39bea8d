"""GSI (Zeng, Zou, Özsu, Hu, Zhang; ICDE 2020): GPU-friendly subgraph isomorphism.

The package follows the paper's pipeline: ``filter.py`` (vertex signatures and candidate
bitsets, §III-A), ``pcsr.py`` (CSR / BR / CR / PCSR neighbour structures, §IV), ``order.py``
(join order, Algorithm 2), ``join.py`` (Prealloc-Combine vertex join and its ablations, §V),
``balance.py`` (4-layer load balance, SGSI's histogram cost model, duplicate removal, §VI) and
``engine.py`` (:class:`GSI`, registry name ``"gsi"``); ``sgsi/`` is SGSI's out-of-core pipeline
(registry name ``"sgsi"``). Filter, PCSR and join work on any slice of the data or of the
intermediate table.
"""

from .engine import GSI

__all__ = ["GSI"]
