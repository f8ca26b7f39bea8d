"""Fixed layout of GSI's per-query info array (``qinfo``, int32, one host copy and one device
copy per engine): the offsets every GSI and SGSI kernel reads, and :func:`query_info`, which fills
the filter's part.

Per query vertex (``MAX_QUERY_VERTICES`` slots each): its label (``QI_LAB``), out-degree
(``QI_OUT``), in-degree (``QI_IN``) and ``SIG_WORDS`` signature words (``QI_SIG``); then per join
column a step ``(vertex, first linking edge, one past its last)`` from ``QI_STEPS``; then the
linking edges, ``EDGE_FIELDS`` fields each, from ``QI_EDGES`` (GSI Algorithm 2's order and
linking edges, :mod:`gsi.order`). SGSI keeps the array without the linking edges.
"""

from __future__ import annotations

import numpy as np

from common.graph.model import Graph

from .filter import SIG_WORDS, signature_table
from .fused import STEP_FIELDS
from .join import EDGE_FIELDS, MAX_LINK_EDGES, MAX_QUERY_VERTICES

_Q = MAX_QUERY_VERTICES
QI_LAB, QI_OUT, QI_IN, QI_SIG = 0, _Q, 2 * _Q, 3 * _Q
QI_STEPS = 3 * _Q + SIG_WORDS * _Q          # per column: (vertex, first linking edge, one past its last)
QI_EDGES = -(-(QI_STEPS + STEP_FIELDS * _Q) // EDGE_FIELDS) * EDGE_FIELDS   # linking-edge triples
QI_SIZE = QI_EDGES + EDGE_FIELDS * MAX_LINK_EDGES * _Q


def query_info(qi: np.ndarray, query: Graph, nq: int, signatures: bool) -> np.ndarray:
    """Fill the host query-info array ``qi`` for the filter kernel: each query vertex's label,
    out- and in-degree and (when ``signatures``) its signature words; returns ``qi``."""
    qi[QI_LAB:QI_LAB + nq] = query.labels
    out_deg = query.degrees
    qi[QI_OUT:QI_OUT + nq] = out_deg
    qi[QI_IN:QI_IN + nq] = np.diff(query.in_csr[0]) if query.directed else out_deg
    if signatures:
        qi[QI_SIG:QI_SIG + nq * SIG_WORDS] = signature_table(query, column_first=False)
    return qi
