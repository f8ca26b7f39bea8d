"""gMatch's constructor options as named records, each validated where it is built.

:class:`gmatch.engine.GMatch` takes every option as a keyword (its docstring says what each
means, its signature gives the defaults) and groups them once into four frozen records:
:class:`SearchOptions` (the DFS launch: model, stealing, seed pool, shapes, kernel variants),
:class:`CountingOptions` (what a count-only query counts rather than enumerates),
:class:`IndexOptions` (the candidate graph and the data-graph probe before it) and
:class:`HubOptions` (hub-rooted queries counted as parts). Each record checks its values and
normalises their types in ``__post_init__``; a bad value raises :class:`ValueError` naming the
option.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .enumerate import STEAL_BLOCK, STEAL_GLOBAL, STEAL_MAILBOX, STEAL_NONE

STEALING_SCOPES = {"global": STEAL_GLOBAL, "mailbox": STEAL_MAILBOX, "block": STEAL_BLOCK,
                   False: STEAL_NONE}


def _set(record, name: str, value) -> None:
    """Store a normalised value on a frozen record (from its ``__post_init__`` only)."""
    object.__setattr__(record, name, value)


def _optional_int(value) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class SearchOptions:
    """How the DFS is launched (Sec. 3.3-3.4): the fine or coarse model, its stealing scope,
    the BFS seed pool, launch shapes, the fine kernel's compiled variants and batch size."""

    granularity: str
    unroll: int
    batch: bool
    work_stealing: str | bool
    seed_pool: int
    roots_per_fetch: int
    warps_per_block: int | None
    blocks: int | None
    split_groups: bool
    leaf_checks: bool
    idle_stats: bool
    max_registers: int | None
    batch_queries: int

    def __post_init__(self):
        if self.granularity not in ("fine", "coarse"):
            raise ValueError(f"granularity must be 'fine' or 'coarse', got {self.granularity!r}")
        if self.unroll not in (1, 2, 4, 8):
            raise ValueError(f"unroll must be 1, 2, 4 or 8, got {self.unroll}")
        if self.granularity == "fine" and self.unroll != 1:
            raise ValueError("unroll applies to the coarse model only (granularity='coarse')")
        if int(self.seed_pool) < 1:
            raise ValueError(f"seed_pool must be positive, got {self.seed_pool}")
        if not 1 <= int(self.roots_per_fetch) <= 32:
            raise ValueError(f"roots_per_fetch must be in 1..32, got {self.roots_per_fetch}")
        if self.warps_per_block is not None and not 1 <= int(self.warps_per_block) <= 32:
            raise ValueError(f"warps_per_block must be in 1..32, got {self.warps_per_block}")
        if self.blocks is not None and int(self.blocks) < 1:
            raise ValueError(f"blocks must be positive, got {self.blocks}")
        stealing = "global" if self.work_stealing is True else self.work_stealing
        if stealing not in STEALING_SCOPES:
            raise ValueError("work_stealing must be 'global', 'mailbox', 'block' or False, "
                             f"got {self.work_stealing!r}")
        if self.max_registers is not None and not 16 <= int(self.max_registers) <= 255:
            raise ValueError(f"max_registers must be in 16..255, got {self.max_registers}")
        if int(self.batch_queries) < 1:
            raise ValueError(f"batch_queries must be positive, got {self.batch_queries}")
        _set(self, "unroll", int(self.unroll))
        _set(self, "batch", bool(self.batch))
        _set(self, "work_stealing", stealing if self.granularity == "fine" else False)
        _set(self, "seed_pool", int(self.seed_pool))
        _set(self, "roots_per_fetch", int(self.roots_per_fetch))
        _set(self, "warps_per_block", _optional_int(self.warps_per_block))
        _set(self, "blocks", _optional_int(self.blocks))
        _set(self, "split_groups", bool(self.split_groups))
        _set(self, "leaf_checks", bool(self.leaf_checks))
        _set(self, "idle_stats", bool(self.idle_stats))
        _set(self, "max_registers", _optional_int(self.max_registers))
        _set(self, "batch_queries", int(self.batch_queries))


@dataclass(frozen=True)
class CountingOptions:
    """What a count-only query over the candidate graph counts instead of enumerating: its
    countable leaves, its last position (where it is one backward neighbour's row), and
    automorphic embeddings (symmetry breaking, Sec. 3.2)."""

    symmetry_breaking: bool
    leaf_counting: bool
    count_last: bool

    def __post_init__(self):
        _set(self, "symmetry_breaking", bool(self.symmetry_breaking))
        _set(self, "leaf_counting", bool(self.leaf_counting))
        _set(self, "count_last", bool(self.count_last))


@dataclass(frozen=True)
class IndexOptions:
    """Whether the search runs over the refined candidate graph (Sec. 3.5), where it is built,
    and for ``candidate_graph="auto"`` how long the data-graph probe before it runs."""

    candidate_graph: bool | str
    probe_s: float
    candidate_graph_build: str = "gpu"

    def __post_init__(self):
        if self.candidate_graph not in ("auto", True, False):
            raise ValueError(f"candidate_graph must be 'auto', True or False, got {self.candidate_graph!r}")
        if self.candidate_graph_build not in ("host", "gpu"):
            raise ValueError(f"candidate_graph_build must be 'host' or 'gpu', got {self.candidate_graph_build!r}")
        if not float(self.probe_s) >= 0:
            raise ValueError(f"probe_s must be non-negative, got {self.probe_s}")
        _set(self, "probe_s", float(self.probe_s))


@dataclass(frozen=True)
class HubOptions:
    """Hub-rooted count-only queries counted as parts: how many (0: off), after how much whole
    search, and which whole searches are kept to their end."""

    hub_parts: int
    hub_after_s: float
    hub_whole_s: float

    def __post_init__(self):
        if int(self.hub_parts) < 0 or int(self.hub_parts) == 1:
            raise ValueError(f"hub_parts must be 0 (off) or at least 2, got {self.hub_parts}")
        if not float(self.hub_after_s) >= 0:
            raise ValueError(f"hub_after_s must be non-negative, got {self.hub_after_s}")
        if not float(self.hub_whole_s) >= 0:
            raise ValueError(f"hub_whole_s must be non-negative, got {self.hub_whole_s}")
        _set(self, "hub_parts", int(self.hub_parts))
        _set(self, "hub_after_s", float(self.hub_after_s))
        _set(self, "hub_whole_s", float(self.hub_whole_s))


RECORDS = {"search": SearchOptions, "counting": CountingOptions, "index": IndexOptions, "hubs": HubOptions}


def _read_only(record: str, name: str) -> property:
    return property(lambda engine: getattr(getattr(engine, record), name),
                    doc=f"``{record}.{name}`` (read-only: options are set by the constructor).")


def option_attributes(cls: type) -> type:
    """Class decorator: ``cls`` reads each option of its records (``RECORDS``: the attribute
    holding the record -> its class) as a read-only attribute of its own name."""
    for record, options in RECORDS.items():
        for field in fields(options):
            setattr(cls, field.name, _read_only(record, field.name))
    return cls
