"""SGSI, GSI's out-of-core pipeline (Zeng et al., TKDE 2022 §6-§7), registry name ``"sgsi"``: the
same filter and join order as :class:`gsi.engine.GSI`, and its Prealloc-Combine join over
streamed segments or a two-pass join over the graph read in place, for data graphs larger than
the device (or than ``device_memory_limit``).

    engine = SGSI(device_memory_limit=64 << 20).prepare(data)    # SGSI(load_balance="histogram"): SGSI+
    result = engine.match(query)

When the graph's resident state fits half the limit, every partition is one resident segment and
the engine runs in-core GSI under the limit (``stats["mode"]`` ``"in-core"``). Otherwise
:meth:`SGSI.prepare` cuts the signature table into vertex segments (§6.1) and each edge-label
PCSR partition into segments (§6.2). Per query the filter (§3) fills the candidate bitsets, GSI's
Algorithm 1 orders the query, and the join (§6.3) runs depth first over device-resident tables
in chunks that fit two arenas (a words arena for tables and buffers, a per-row arena); a new
table that outgrows its room is written in parts, each joined on before the next.

With ``zero_copy`` (the default) the graph is mapped from host memory and read in place: the
filter reads the signature table in one launch, and each chunk counts every row's survivors,
scans the counts and writes the survivors as the new rows in a second pass (no GBA, so parts
are sized by exact counts); a count-only query's last iteration only counts. With
``zero_copy=False`` (the paper's §6) the segments stream through two double-buffered slots:
per chunk one launch bounds each row's GBA and marks the segments its vertices reach, then
Algorithm 4 (partitioned first edge) and Algorithm 5 (partitioned intersection) stream only
those segments, one launch per segment, and each new table is grouped by the segment of the
next step's first linking vertex (so a chunk reaches few of them). SGSI+ chooses W1 and W3 per
chunk with §7's cost model.

``stats``: ``mode``, ``partitions``, ``signature_segments``, ``comm_s`` and ``comp_s`` (with
``instrument``: summed device time of copies and of kernels, which overlap), ``bytes_h2d``,
``bytes_d2h``, ``bytes_streamed`` (graph segments copied), ``h2d_gbps`` (those bytes over their
copies' device time), ``segments_streamed``, ``chunks``, ``inplace_chunks`` (chunks joined in
place), ``bytes_inplace`` (the list bytes the in-place kernels read from mapped memory, a skip
through a list counted at its cheapest) and ``inplace_gbps`` (those bytes over the kernels'
device time, with ``instrument``), ``gba_splits``, ``split_outputs``, ``rows_per_iteration``,
``counted_rows`` (rows of the last table whose extensions were counted, not written).
The choices where the paper is silent are in docs/decisions.md ("SGSI").

The package: ``engine.py`` (:class:`SGSI`: options, the in-core or out-of-core choice, the
segment plan), ``segments.py`` (the graph cut into segments, §6.1-§6.2, and mapped for the
in-place join), ``streams.py`` (the two slots and their copy stream), ``kernels.py`` (SGSI's
kernels beside GSI's), ``in_core.py`` (GSI under the limit) and ``out_of_core.py`` (the chunked
depth-first join; what one match changes is its ``_Query``).
"""

from .engine import IN_CORE_SHARE, SGSI, SLOT_SHARE
from .kernels import SGSIKernels, make_sgsi_kernels
from .segments import SIG_SEGMENT_WORDS, InPlace, Segment, degree_bounds, plan_segments, resident_bytes

__all__ = ["SGSI", "SGSIKernels", "make_sgsi_kernels", "Segment", "InPlace", "SIG_SEGMENT_WORDS", "SLOT_SHARE",
           "IN_CORE_SHARE", "degree_bounds", "plan_segments", "resident_bytes"]
