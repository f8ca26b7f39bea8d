"""The authors' GSI's candidate filter (pkumod/GSI, ``graph/Graph.cpp`` ``buildSignature`` and
``match/Match.cu`` ``filter_kernel``), as its source computes it, so that its counts can be written
for and explained: a vertex label is one signature bit of 32, and nothing compares labels again.

- :func:`gsi_label_bit`: the bit of a label id; :class:`GSILabelIds`: the ids the ``gsi-authors``
  engine writes, which give the data graph's labels bits of their own while bits last.
- :func:`gsi_filter_count`: the count GSI yields on written ids: every injective embedding (edges
  and their labels exact, as its per-label PCSR joins them) whose vertices pass the filter; a CPU
  emulation for checks and tests, not a fast matcher.

``python -m experiments.bench.gsi_filter`` prints both counts beside cpu's on GSI Fig. 14's queries.
"""

from __future__ import annotations

import numpy as np

from common.graph.model import Graph

GSI_LABEL_BITS = 32      # util/Util.h VLEN: a vertex label is one bit of 32 in GSI's signature
GSI_HASH_SEED = 17       # util/Util.h HASHSEED


def murmur2(words, seed: int = GSI_HASH_SEED) -> np.ndarray:
    """MurmurHash2 (Appleby's, 32-bit) of each row of ``words`` read as little-endian 32-bit
    words (a 1-d array: one word per key), as util/Util.cpp hashes GSI's labels and signatures."""
    m, mask = np.uint64(0x5BD1E995), np.uint64(0xFFFFFFFF)
    words = np.asarray(words, dtype=np.int64)
    words = words[:, None] if words.ndim == 1 else words
    h = np.full(words.shape[0], (seed ^ (4 * words.shape[1])) & 0xFFFFFFFF, dtype=np.uint64)
    for column in range(words.shape[1]):
        k = words[:, column].astype(np.uint64) & mask
        k = (k * m) & mask
        k ^= k >> np.uint64(24)
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    h ^= h >> np.uint64(13)
    h = (h * m) & mask
    h ^= h >> np.uint64(15)
    return h


def gsi_label_bit(ids) -> np.ndarray:
    """The signature bit of each ``.g`` vertex-label id, as graph/Graph.cpp buildSignature sets it:
    :func:`murmur2` of the id mod :data:`GSI_LABEL_BITS`."""
    return (murmur2(np.asarray(ids, dtype=np.int64).reshape(-1)) % np.uint64(GSI_LABEL_BITS)).astype(np.int64)


class GSILabelIds:
    """The ``.g`` id of every vertex label, chosen so that the authors' GSI counts exactly.

    GSI keeps a data vertex as a query vertex's candidate when the one signature bit of its label
    id (:func:`gsi_label_bit`) equals the query vertex's, and its join never compares labels again
    (match/Match.cu ``filter_kernel``, whose comment leaves the exact check as a TODO): a label on
    a query label's bit lets its vertices match too, and the count grows past the exact one. Labels
    are ids, so the writer picks them: the ``kept`` labels (a query's) get bits of their own, then
    the labels of the data graph, most frequent first, while bits last; past 32 labels the rest
    share one bit that no kept label has. :meth:`shared` names labels whose bit another label of
    the data graph has: a query with none of them is counted exactly.
    """

    def __init__(self, frequencies, kept=()):
        frequencies = np.asarray(frequencies)
        kept = list(dict.fromkeys(int(label) for label in np.asarray(kept).tolist()))
        ranked = [int(label) for label in np.argsort(-frequencies, kind="stable")
                  if frequencies[label] > 0 and int(label) not in kept]
        present = kept + ranked
        private = present if len(present) <= GSI_LABEL_BITS else present[:GSI_LABEL_BITS - 1]
        self._streams: dict[int, list[int]] = {}
        self._scanned = 0
        bits = self._bits_in_order(len(private))
        self._rest_bit = next((b for b in range(GSI_LABEL_BITS) if b not in bits[:len(private)]), None)
        self._ids = {label: self._stream(bit)[0] for label, bit in zip(private, bits)}
        self._bit = dict(zip(private, bits))
        self._known = max([len(frequencies)] + [label + 1 for label in kept])
        rest = [label for label in range(self._known) if label not in self._ids]
        self._rest_index = {label: i for i, label in enumerate(rest)}
        self._holders = {}                      # bit -> labels of the data graph (or kept) on it
        for label in present:
            self._holders.setdefault(self.bit(label), set()).add(label)

    def _scan(self, upto: int) -> None:
        """Extend every bit's stream of ids (increasing) with the ids up to ``upto``."""
        if upto <= self._scanned:
            return
        ids = np.arange(self._scanned + 1, upto + 1)
        for label_id, bit in zip(ids.tolist(), gsi_label_bit(ids).tolist()):
            self._streams.setdefault(bit, []).append(label_id)
        self._scanned = upto

    def _stream(self, bit: int, length: int = 1) -> list[int]:
        while len(self._streams.get(bit, [])) < length:
            self._scan(max(4 * GSI_LABEL_BITS, 2 * self._scanned, 2 * GSI_LABEL_BITS * length))
        return self._streams[bit]

    def _bits_in_order(self, count: int) -> list[int]:
        """The first ``count`` distinct bits in the order the ids 1, 2, ... reach them."""
        order: list[int] = []
        while len(order) < min(count, GSI_LABEL_BITS):
            self._scan(max(4 * GSI_LABEL_BITS, 2 * self._scanned))
            firsts = sorted((stream[0], bit) for bit, stream in self._streams.items())
            order = [bit for _, bit in firsts]
        return order[:count]

    def bit(self, label: int) -> int:
        if label in self._bit:
            return self._bit[label]
        return self._rest_bit if self._rest_bit is not None else int(gsi_label_bit([self.id_of(label)])[0])

    def id_of(self, label: int) -> int:
        """The ``.g`` id of ``label`` (labels beyond the data graph's follow its absent ones)."""
        label = int(label)
        if label in self._ids:
            return self._ids[label]
        index = self._rest_index.get(label, len(self._rest_index) + label - self._known)
        if self._rest_bit is None:                  # every bit held: ids past the private ones
            return max(self._ids.values()) + 1 + index
        return self._stream(self._rest_bit, index + 1)[index]

    def __call__(self, labels) -> np.ndarray:
        """The ids of an array of labels (a table over the labels up to the largest)."""
        labels = np.asarray(labels, dtype=np.int64)
        table = np.array([self.id_of(label) for label in range(int(labels.max(initial=-1)) + 1)], dtype=np.int64)
        return table[labels]

    def shared(self, labels) -> list[int]:
        """The labels among ``labels`` whose bit another label of the data graph has."""
        return sorted(label for label in set(np.asarray(labels).tolist())
                      if self._holders.get(self.bit(label), set()) - {label})



SIGNATURE_WORDS = 16        # util/Util.h SIGLEN / VLEN: the label's word and 15 of neighbour counters
NEIGHBOUR_POSITIONS = 240   # buildSignature's gnum: two-bit counters over 15 words


def gsi_signatures(graph: Graph, ids: np.ndarray) -> np.ndarray:
    """Each vertex's signature (``SIGNATURE_WORDS`` words) as buildSignature builds it from the
    written vertex ids ``ids``: word 0 the label's bit; then a two-bit counter (01: one, 11: more)
    at position ``murmur2(neighbour id, edge label + 1) mod 240`` for each in-edge and at
    ``murmur2(neighbour id, -(edge label + 1))`` for each out-edge (an undirected edge is both)."""
    ids = np.asarray(ids, dtype=np.int64)
    signature = np.zeros((graph.num_vertices, SIGNATURE_WORDS), dtype=np.uint64)
    signature[:, 0] = np.left_shift(np.uint64(1), gsi_label_bit(ids).astype(np.uint64))
    owners = np.repeat(np.arange(graph.num_vertices, dtype=np.int64), np.diff(graph.offsets))
    edge_ids = (np.zeros(len(graph.neighbors), dtype=np.int64) if graph.edge_labels is None
                else graph.edge_labels.astype(np.int64)) + 1
    positions = np.concatenate([murmur2(np.stack([ids[graph.neighbors], sign * edge_ids], axis=1))
                                % np.uint64(NEIGHBOUR_POSITIONS) for sign in (1, -1)]).astype(np.int64)
    cells, seen = np.unique(np.tile(owners, 2) * NEIGHBOUR_POSITIONS + positions, return_counts=True)
    owner, position = cells // NEIGHBOUR_POSITIONS, cells % NEIGHBOUR_POSITIONS
    counter = np.where(seen == 1, 1, 3).astype(np.uint64) << (2 * (position % 16)).astype(np.uint64)
    np.bitwise_or.at(signature, (owner, 1 + position // 16), counter)
    return signature


def gsi_candidates(data_signatures: np.ndarray, query_signatures: np.ndarray) -> list[np.ndarray]:
    """Per query vertex, the data vertices whose signature holds every bit of its (filter_kernel)."""
    return [np.flatnonzero(np.all((data_signatures & q) == q, axis=1)) for q in query_signatures]


def gsi_filter_count(data: Graph, query: Graph, query_ids, data_signatures: np.ndarray) -> int:
    """The embeddings GSI counts, the query written with ``query_ids`` and the data graph's
    signatures :func:`gsi_signatures` of its written ids: injective, every query edge on a data edge
    of the same edge label, each vertex among its filter's candidates (labels never compared)."""
    candidates = gsi_candidates(data_signatures, gsi_signatures(query, query_ids))
    allowed = [set(c.tolist()) for c in candidates]
    n = query.num_vertices
    order = [min(range(n), key=lambda u: len(candidates[u]))]
    while len(order) < n:
        order.append(min((u for u in range(n) if u not in order and any(query.has_edge(u, w) for w in order)),
                         key=lambda u: len(candidates[u])))
    labels = {(u, int(query.neighbors[i])): 0 if query.edge_labels is None else int(query.edge_labels[i])
              for u in range(n) for i in range(query.offsets[u], query.offsets[u + 1])}

    def data_label(v: int, w: int):
        row = data.neighbors[data.offsets[v]:data.offsets[v + 1]]
        i = int(np.searchsorted(row, w))
        if i < len(row) and row[i] == w:
            return 0 if data.edge_labels is None else int(data.edge_labels[data.offsets[v] + i])
        return None

    mapped: dict[int, int] = {}

    def extend(depth: int) -> int:
        if depth == n:
            return 1
        u = order[depth]
        back = [w for w in order[:depth] if (u, w) in labels]
        options = (candidates[u].tolist() if not back else
                   data.neighbors[data.offsets[mapped[back[0]]]:data.offsets[mapped[back[0]] + 1]].tolist())
        total = 0
        for v in options:
            if v in allowed[u] and v not in mapped.values() and all(
                    data_label(mapped[w], v) == labels[(w, u)] for w in back):
                mapped[u] = v
                total += extend(depth + 1)
                del mapped[u]
        return total

    return extend(0)
