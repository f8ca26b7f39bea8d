"""SGSI in core: the graph's resident state fits the device, so every partition is one resident
segment that never streams and SGSI's join is GSI's (Zeng et al., TKDE 2022 §6 reduces to GSI);
the engine runs an in-core :class:`~gsi.engine.GSI` with the same options under the same limit."""

from __future__ import annotations

from common.engine.result import MatchResult
from common.errors import DeviceOutOfMemory
from common.graph.model import Graph

from ..engine import GSI
from .segments import resident_bytes


class InCore:
    """The in-core half of :class:`~gsi.sgsi.SGSI`."""

    def _prepare_in_core(self, data: Graph, lists) -> None:
        """The whole graph resident: one segment per partition, never streamed, so SGSI's join
        is GSI's; run in-core GSI with the same options under the same limit."""
        self.incore = GSI(load_balance=self.load_balance, duplicate_removal=self.duplicate_removal,
                          write_cache=self.write_cache, order_score=self.order_score, w1=self.w1, w3=self.w3,
                          block_threads=self.block_threads, max_blocks=self.max_blocks,
                          device_memory_limit=self.device_memory_limit).prepare(data)
        if self.incore.prepare_error:
            raise DeviceOutOfMemory(resident_bytes(data, lists), 0, self.device_memory_limit or 0,
                                    f"SGSI in core ({self.incore.prepare_error})")
        self.budget = self.incore.budget
        self.sig_segments = []
        self.segments = [[] for _ in lists]
        self._partition_count = sum(1 for rows, _ in lists if rows.size)

    def _match_in_core(self, query: Graph, *, limit, collect, timeout_s) -> MatchResult:
        # Not incore.match: that maps the embeddings to the data's own ids, and match() here maps them again.
        r = self.incore._search_batch([query], dict(limit=limit, collect=collect, timeout_s=timeout_s,
                                                    homomorphic=False))[0]
        stats = dict(r.stats)
        comp = sum(r.phases.get(k, 0.0) for k in ("filter", "plan", "enumerate"))
        stats.update(mode="in-core", partitions=self.partitions, signature_segments=0, comm_s=0.0, comp_s=comp,
                     bytes_h2d=0, bytes_d2h=0, bytes_streamed=0, segments_streamed=0, h2d_gbps=0.0,
                     inplace_chunks=0, bytes_inplace=0, inplace_gbps=0.0,
                     chunks=stats.get("slices", 0))
        return MatchResult(self.name, r.count, r.status, reason=r.reason, embeddings=r.embeddings,
                           phases=r.phases, peak_device_bytes=r.peak_device_bytes, stats=stats)
