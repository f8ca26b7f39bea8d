"""GPU STwig (Lin, Zhang, Wen, Wang, Qi 2014): STwig decomposition and exploration, a right-deep
fully pipelined GPU hash join, and the CPU STwig baseline.

Files follow the pipeline: :mod:`stwig.order` -> :mod:`stwig.explore` ->
:mod:`stwig.join` -> :mod:`stwig.engine` (:class:`STwig`, registry ``stwig``);
:mod:`stwig.cpu` holds the CPU baseline (:class:`STwigCPU`, registry ``stwig-cpu``).
"""

from .cpu import STwigCPU
from .engine import STwig

__all__ = ["STwig", "STwigCPU"]
