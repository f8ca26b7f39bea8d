"""The experiments on top of the engines, by role.

- :mod:`experiments.papers`: one module per paper (its tables and figures) and ``compare`` (all
  engines side by side); each exposes ``EXPERIMENTS``, a tuple of
  :class:`experiments.harness.core.Experiment`.
- :mod:`experiments.harness`: what runs them (workloads, runner, store, cells, report).
- :mod:`experiments.bench`: engine benchmarks and gates (``python -m experiments.bench.NAME``).
- :mod:`experiments.profiling`: where a query's time goes (kernel and host timings, PTX resources).
- :mod:`experiments.cli` (``python -m experiments``) and :mod:`experiments.gpusm` (the ``gpusm``
  command).

:func:`experiments_of` and :func:`get_experiment` look the experiments up by paper or name
(``gpusm experiment --list`` prints them); the papers register them with the harness
(:mod:`experiments.harness.catalog`), which never imports the papers.
"""

from __future__ import annotations

from .harness.catalog import add_source, experiments_of, get_experiment

PAPERS = ("gsi_icde20", "sgsi_tkde22", "egsm_sigmod23", "gmatch_pvldb26", "stwig_lin14", "compare")
"""Modules of :mod:`experiments.papers` with experiments, in ``make experiments`` order."""

add_source("experiments.papers")          # registers the papers' experiments at the first look-up

__all__ = ["PAPERS", "experiments_of", "get_experiment"]
