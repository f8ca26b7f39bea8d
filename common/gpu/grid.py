"""Launch grid sizes: one helper for the clamp every launch needs."""

from __future__ import annotations


def grid_blocks(work: int, per_block: int, max_blocks: int = 1024) -> int:
    """Blocks of a launch over ``work`` items, ``per_block`` items a block: enough to cover them
    (``ceil(work / per_block)``), at least one (a launch of zero blocks is an error) and at most
    ``max_blocks``."""
    return max(1, min(max_blocks, -(-int(work) // int(per_block))))
