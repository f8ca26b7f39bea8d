"""The SGSI engine (Zeng et al., TKDE 2022 §6-§7), registry name ``"sgsi"``: its options, the
choice between the in-core and out-of-core paths at prepare, and the segment plan."""

from __future__ import annotations

import os

import numpy as np

from common.engine.base import Engine
from common.engine.result import MatchResult
from common.errors import DeviceOutOfMemory
from common.gpu.runtime import cuda, simulator_active
from common.graph.model import Graph

from .. import balance
from ..engine import DEFAULT_BLOCK_THREADS, DEFAULT_MAX_BLOCKS, GSI
from ..join import MAX_QUERY_VERTICES
from ..order import SCORES
from ..pcsr import GROUP_WORDS, partition_lists
from .in_core import InCore
from .out_of_core import _MIN_WORK_BYTES, OutOfCore
from .segments import SIG_SEGMENT_WORDS, InPlace, Segment, plan_segments, resident_bytes

_SIM = simulator_active()
SLOT_SHARE = 6                             # each of the two slots gets 1/6 of the budget
#: In core when the graph's resident state takes at most this share of device_memory_limit.
IN_CORE_SHARE = 0.5


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 16 << 30



class SGSI(InCore, OutOfCore, Engine):
    """SGSI (Zeng et al., TKDE 2022 §6-§7): GSI for graphs larger than the device memory.

    The signature filter, PCSR and Prealloc-Combine are fixed: they are what SGSI partitions.

    Parameters
    ----------
    load_balance : {True, "histogram", False}
        True: SGSI with GSI's thresholds ``w1``/``w3``; "histogram": SGSI+ (§7's cost model).
        In core and in the streamed join (``zero_copy=False``); the in-place join gives each
        row a warp.
    duplicate_removal : bool
        Share N(v, l) reads among a block's rows, as in :class:`gsi.engine.GSI` (in core and
        streamed).
    write_cache : bool
        The per-warp write cache, as in :class:`gsi.engine.GSI` (in core and streamed).
    order_score : {"paper", "code"}
        Join-order score, as in :class:`gsi.engine.GSI`.
    w1, w3 : int
        Load-balance thresholds of SGSI's four layers (GSI §VI-A).
    block_threads, max_blocks : int
        Launch shape of the join kernels.
    host_memory_limit : int or None
        Cap of the embeddings collected on the host in bytes (None: half the machine's memory);
        past it the query ends with status ``oom``.
    out_of_core : bool or None
        None: in core when the graph's resident state fits half of ``device_memory_limit``,
        else out of core; True/False force the mode.
    work_bytes : int or None
        Cap of the out-of-core join's working memory (its two arenas; None: what the limit leaves).
    slot_share : int
        Each of the two segment slots gets 1/slot_share of the budget (bigger slots: fewer
        segments and launches, less room for the join).
    zero_copy : bool
        Out of core, map the graph into the device's address space (host memory, no device
        memory) and read it in place: the filter reads the signature table, every join iteration
        counts each row's survivors and then writes them (no GBA), and a count-only query's last
        iteration only counts (docs/decisions.md). False: segments streamed, the paper's §6.
    instrument : bool
        Out of core, time copies and kernels apart (``stats`` ``comm_s``, ``comp_s``,
        ``h2d_gbps``: the paper's Table 7) with two CUDA events around each; without it they are 0.
    device_memory_limit : int or None
        The device bytes the engine may use (None: the device's free memory; out of core, 90% of
        it is planned for).
    """

    name = "sgsi"
    limitations = {"homomorphic": "SGSI joins as GSI does (SGSI §4)",
                   "disconnected": "SGSI joins along query edges from one start vertex (SGSI §4)"}
    contract_notes = {"simulator_peak": "as GSI's in the simulator: a query's first run peaks higher than its "
                                        "later runs"}
    variant_of = "gsi"
    kernel_packages = ("gsi", "common")
    max_query_vertices = MAX_QUERY_VERTICES

    def __init__(self, *, load_balance: bool | str = True, duplicate_removal: bool = True,
                 write_cache: bool = True, order_score: str = "paper", w1: int = balance.W1,
                 w3: int = balance.W3, block_threads: int = DEFAULT_BLOCK_THREADS,
                 max_blocks: int = DEFAULT_MAX_BLOCKS, host_memory_limit: int | None = None,
                 out_of_core: bool | None = None, work_bytes: int | None = None, slot_share: int = SLOT_SHARE,
                 zero_copy: bool = True, instrument: bool = False, device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        if load_balance not in (False, True, "histogram") or not isinstance(load_balance, (bool, str)):
            raise ValueError(f"unknown load_balance {load_balance!r}; choose False, True or 'histogram'")
        if order_score not in SCORES:
            raise ValueError(f"unknown order_score {order_score!r}; choose one of {SCORES}")
        if block_threads % 32 or not 32 <= block_threads <= 1024:
            raise ValueError(f"block_threads must be a multiple of 32 in 32..1024, got {block_threads}")
        if not 32 < w3 < w1:
            raise ValueError(f"load-balance thresholds need 32 < w3 < w1, got w3={w3}, w1={w1}")
        if out_of_core not in (None, True, False):
            raise ValueError(f"out_of_core must be None, True or False, got {out_of_core!r}")
        self.load_balance = load_balance
        self.duplicate_removal = bool(duplicate_removal)
        self.write_cache = bool(write_cache)
        self.order_score = order_score
        self.w1, self.w3 = int(w1), int(w3)
        self.block_threads, self.max_blocks = int(block_threads), int(max_blocks)
        self.warps = self.block_threads // 32
        self.host_memory_limit = host_memory_limit if host_memory_limit is not None else _host_memory() // 2
        self.out_of_core = out_of_core
        if work_bytes is not None and int(work_bytes) < _MIN_WORK_BYTES:
            raise ValueError(f"work_bytes must be at least {_MIN_WORK_BYTES}, got {work_bytes}")
        self.work_bytes = None if work_bytes is None else int(work_bytes)
        if int(slot_share) < 3:
            raise ValueError(f"slot_share must be at least 3 (two slots and the join), got {slot_share}")
        self.slot_share = int(slot_share)
        self.zero_copy = bool(zero_copy)
        self.instrument = bool(instrument)
        self.inplace: InPlace | None = None
        self.incore: GSI | None = None

    # ------------------------------------------------------------------ partitioning
    @staticmethod
    def budget_for(device_memory_limit: int | None) -> int:
        """The device bytes SGSI plans with out of core: the limit, or 90% of the free device memory."""
        if device_memory_limit is not None:
            return int(device_memory_limit)
        if _SIM:
            return 1 << 28
        free, _total = cuda.current_context().get_memory_info()
        return int(free * 0.9)

    @staticmethod
    def plan_segments(data: Graph, slot_words: int, lists=None) -> tuple[list[Segment], list[list[Segment]]]:
        """Cut the signature table and every PCSR partition into segments of at most
        ``slot_words`` int32 words: (signature segments, PCSR segments per partition)."""
        return plan_segments(data, slot_words, lists)

    @classmethod
    def slot_words_for(cls, data: Graph, device_memory_limit: int | None, lists=None,
                       slot_share: int = SLOT_SHARE) -> int:
        """int32 words per segment slot: the largest piece (signature table or partition) if it
        fits in 1/8 of the budget, else 1/8 of the budget."""
        # a slot holds whole warps of signature rows: 32 at least, even for a tiny graph
        need = max((data.num_vertices + 31) // 32 * 32 * SIG_SEGMENT_WORDS, GROUP_WORDS + 1)
        for rows, _ in partition_lists(data) if lists is None else lists:
            need = max(need, rows.size + GROUP_WORDS * np.unique(rows).size)
        return int(min(need, cls.budget_for(device_memory_limit) // slot_share // 4))

    def _prepare(self, data: Graph) -> None:
        n = data.num_vertices
        self.n, self.nwords = n, (n + 31) // 32
        self.directions = 2 if data.directed else 1
        lists = partition_lists(data)
        self.incore = self.inplace = None
        if self.out_of_core is not True:
            need = resident_bytes(data, lists)
            limit = self.device_memory_limit
            if self.out_of_core is False or (limit is None and need <= self.budget_for(None) * IN_CORE_SHARE) \
                    or (limit is not None and need <= limit * IN_CORE_SHARE):
                try:
                    self._prepare_in_core(data, lists)
                    return
                except DeviceOutOfMemory:
                    if self.out_of_core is False:
                        raise
                    self.incore = None              # the device refused: stream instead
        self._prepare_out_of_core(data, lists)

    @property
    def partitions(self) -> int:
        """PCSR segments over all partitions (SGSI's partition count; in core, one per partition)."""
        return self._partition_count

    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        if self.incore is not None:
            return self._match_in_core(query, limit=limit, collect=collect, timeout_s=timeout_s)
        return self._match_out_of_core(query, limit=limit, collect=collect, timeout_s=timeout_s)
