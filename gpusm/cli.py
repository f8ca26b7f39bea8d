"""The ``gpusm`` command (:func:`main`): the library's subcommands (:mod:`common.cli.main`) plus the
harness's ``demo`` and ``experiment`` (:mod:`experiments.gpusm`). ``python -m gpusm ARGS`` is
the same as ``gpusm ARGS``."""

from experiments.gpusm import build_parser, main

__all__ = ["main", "build_parser"]
