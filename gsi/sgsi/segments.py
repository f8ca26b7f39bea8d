"""The data graph cut for SGSI (Zeng et al., TKDE 2022 §6.1-§6.2): signature and PCSR
segments that stream through the device's slots, the graph mapped for the in-place join
(``zero_copy``), the out-of-core per-row degree bounds and the graph's resident size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from common.errors import DeviceOutOfMemory
from common.gpu.copies import mapped
from common.gpu.runtime import cuda, simulator_active
from common.graph.model import Graph

from ..filter import SIG_WORDS, signature_table
from ..join import MAX_QUERY_VERTICES
from ..pcsr import GROUP_WORDS, _build_pcsr_partition, partition_lists

_SIM = simulator_active()
SIG_SEGMENT_WORDS = SIG_WORDS + 3          # signature words, label, out-degree, in-degree per vertex


@dataclass
class Segment:
    """One piece of the data graph that streams through a slot: a PCSR segment of partition
    ``partition`` over source vertices ``lo..hi`` (``partition`` -1: a signature segment of
    vertices ``lo..hi``). ``host`` holds its words (pinned); ``keys`` its PCSR groups."""

    sid: int
    partition: int
    lo: int
    hi: int
    keys: int
    host: np.ndarray
    max_list: int = 0
    flat: int = -1                 # index among all PCSR segments (partition order)

    @property
    def words(self) -> int:
        return int(self.host.size)


@njit(cache=True)
def _cut_partition(degrees, cap_words):
    """Greedy footprint-balanced cut of a partition's lists (by source vertex, in order) into
    segments of at most ``cap_words`` words (32 per source vertex + 1 per edge). Returns pieces
    (segment, key index, first entry of the list, length)."""
    words = GROUP_WORDS * degrees.size + degrees.sum()
    pieces = np.empty((degrees.size + words // (cap_words - GROUP_WORDS) + 2, 4), np.int64)
    count = 0
    seg = 0
    used = 0
    for k in range(degrees.size):
        done = 0
        while done < degrees[k]:
            room = cap_words - used - GROUP_WORDS
            if room <= 0:
                seg += 1
                used = 0
                continue
            take = min(degrees[k] - done, room)
            pieces[count, 0] = seg
            pieces[count, 1] = k
            pieces[count, 2] = done
            pieces[count, 3] = take
            count += 1
            used += GROUP_WORDS + take
            done += take
    return pieces[:count]


def _signature_columns(data: Graph):
    """Per vertex: the signature words (row-major), label, out-degree and in-degree."""
    n = data.num_vertices
    out_deg = np.asarray(data.degrees, np.int32)
    in_deg = np.diff(data.in_csr[0]).astype(np.int32) if data.directed else out_deg
    return signature_table(data, column_first=False).reshape(n, SIG_WORDS), data.labels, out_deg, in_deg


def _signature_words(columns, v0: int, cnt: int) -> np.ndarray:
    """A signature segment's words, vertices v0..v0+cnt-1: the signature words column-first, then
    the labels, out-degrees and in-degrees (what the filter kernel reads)."""
    sig, labels, out_deg, in_deg = columns
    host = np.empty(cnt * SIG_SEGMENT_WORDS, np.int32)
    host[:SIG_WORDS * cnt] = sig[v0:v0 + cnt].T.reshape(-1)
    host[SIG_WORDS * cnt:(SIG_WORDS + 1) * cnt] = labels[v0:v0 + cnt]
    host[(SIG_WORDS + 1) * cnt:(SIG_WORDS + 2) * cnt] = out_deg[v0:v0 + cnt]
    host[(SIG_WORDS + 2) * cnt:] = in_deg[v0:v0 + cnt]
    return host


class InPlace(NamedTuple):
    """The data graph in mapped host memory, read by kernels in place (``zero_copy``): every
    edge-label partition's lists concatenated in vertex order (``lists``), each partition's list
    offsets (partition p, vertex v: lists[bases[p] + offsets[p * stride + v] : ... + v + 1]],
    stride n + 1) resident on the device when they fit ``max_bytes``, else mapped too, the
    signature table as one segment, and the host buffers behind them."""

    lists: object                  # device view of the mapped column index
    offsets: object                # int32 [P * stride]: device-resident or mapped
    bases: object                  # device int64 [P]: where each partition's lists start
    stride: int                    # n + 1
    resident_offsets: bool
    signatures: object             # device view of the whole signature segment
    whole: Segment                 # that segment (vertices 0..n-1)
    host: tuple                    # the mapped host buffers (kept alive)

    @classmethod
    def build(cls, data: Graph, lists, budget, max_bytes: int) -> "InPlace":
        n = data.num_vertices
        offsets = np.zeros(max(1, len(lists) * (n + 1)), np.int32)
        bases = np.zeros(max(1, len(lists)), np.int64)
        for p, (rows, nbrs) in enumerate(lists):
            if nbrs.size >= 2 ** 31:
                raise ValueError(f"edge-label partition {p} has {nbrs.size} entries: in-place offsets are int32")
            offsets[p * (n + 1):(p + 1) * (n + 1)] = np.searchsorted(rows, np.arange(n + 1))
            bases[p + 1:] += nbrs.size
        h_lists, d_lists = mapped(np.concatenate([nbrs for _, nbrs in lists] or [np.zeros(1, np.int32)]))
        resident = offsets.nbytes <= max_bytes
        h_off, d_off = (None, budget.to_device(offsets, what="in-place list offsets")) if resident \
            else mapped(offsets)
        h_sig, signatures = mapped(_signature_words(_signature_columns(data), 0, n))
        return cls(d_lists, d_off, budget.to_device(bases, what="in-place list offsets"), n + 1, resident,
                   signatures, Segment(-1, -1, 0, n - 1, 0, h_sig), (h_lists, h_off, h_sig))


def _pin(segments: list[Segment]) -> None:
    """Move every segment's words into one page-locked host buffer (asynchronous copies need
    pinned memory; one allocation, however many segments), each segment a view of it."""
    total = sum(seg.words for seg in segments)
    buffer = np.empty(total, np.int32) if _SIM else cuda.pinned_array(max(total, 1), np.int32)
    pos = 0
    for seg in segments:
        buffer[pos:pos + seg.words] = seg.host
        seg.host = buffer[pos:pos + seg.words]
        pos += seg.words




def degree_bounds(data: Graph, lists, directions: int, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The per-row bound F of Algorithm 3 out of core (§6.3 leaves it open): (``deg``,
    ``part_max``), a row's bound in partition p being ``min(deg[(p % rows) * n + v], part_max[p])``
    with ``rows = deg.size // n``. Exact, ``deg`` holds |N(v, p)| per partition (P x n words) when
    that takes at most ``max_bytes``; otherwise it holds v's degree per direction (every label),
    which bounds each label's list, and ``part_max`` the longest list of each partition."""
    n = data.num_vertices
    part_max = np.zeros(max(1, len(lists)), np.int32)
    for p, (rows, _) in enumerate(lists):
        if rows.size:
            cuts = np.flatnonzero(np.diff(rows)) + 1
            part_max[p] = np.diff(np.concatenate(([0], cuts, [rows.size]))).max()
    if 4 * len(lists) * n <= max_bytes:
        deg = np.zeros(max(1, len(lists) * n), np.int32)
        for p, (rows, _) in enumerate(lists):
            if rows.size:
                keys, cnt = np.unique(rows, return_counts=True)
                deg[p * n + keys] = cnt
        return deg, part_max
    out_deg = np.asarray(data.degrees, np.int32)
    if directions == 1:
        return np.ascontiguousarray(out_deg), part_max
    return np.concatenate([out_deg, np.diff(data.in_csr[0]).astype(np.int32)]), part_max


def resident_bytes(data: Graph, lists=None) -> int:
    """Device bytes of the data graph held whole (GSI's layout): signature table, labels and
    degrees (SIG_SEGMENT_WORDS per vertex), every PCSR partition (a 128-byte group per source
    vertex, 4 bytes per entry) and 64 candidate bitsets."""
    words = data.num_vertices * SIG_SEGMENT_WORDS + MAX_QUERY_VERTICES * ((data.num_vertices + 31) // 32)
    for rows, _ in partition_lists(data) if lists is None else lists:
        words += rows.size + GROUP_WORDS * np.unique(rows).size
    return 4 * words


def plan_segments(data: Graph, slot_words: int, lists=None) -> tuple[list[Segment], list[list[Segment]]]:
    """Cut the signature table and every PCSR partition into segments of at most
    ``slot_words`` int32 words: (signature segments, PCSR segments per partition)."""
    n = data.num_vertices
    per_seg = (slot_words // SIG_SEGMENT_WORDS) // 32 * 32
    if per_seg < 32 or slot_words <= GROUP_WORDS:
        raise DeviceOutOfMemory(32 * SIG_SEGMENT_WORDS * 4, 0, slot_words * 4,
                                "an SGSI segment slot of 32 signature rows (raise device_memory_limit)")
    columns = _signature_columns(data)
    sid = 0
    sig_segments = []
    for v0 in range(0, max(n, 1), per_seg):
        cnt = min(per_seg, n - v0)
        sig_segments.append(Segment(sid, -1, v0, v0 + cnt - 1, 0, _signature_words(columns, v0, cnt)))
        sid += 1
    pcsr_segments = []
    for p, (rows, nbrs) in enumerate(partition_lists(data) if lists is None else lists):
        keys, starts, degrees = np.unique(rows, return_index=True, return_counts=True)
        segs = []
        pieces = _cut_partition(degrees.astype(np.int64), slot_words) if keys.size else np.zeros((0, 4), np.int64)
        bounds = np.flatnonzero(np.diff(pieces[:, 0])) + 1
        for group in np.split(pieces, bounds) if pieces.size else []:
            k = group[:, 1]
            gl, ci = _build_pcsr_partition(keys[k].astype(np.int32), (starts[k] + group[:, 2]).astype(np.int64),
                                           group[:, 3].astype(np.int64), nbrs)
            ci = ci[:int(group[:, 3].sum())]          # (sized for the whole partition)
            host = np.concatenate([gl, ci])
            segs.append(Segment(sid, p, int(keys[k[0]]), int(keys[k[-1]]), int(k.size), host,
                                int(group[:, 3].max())))
            sid += 1
        pcsr_segments.append(segs)
    _pin(sig_segments + [seg for segs in pcsr_segments for seg in segs])
    return sig_segments, pcsr_segments
