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
(``gpusm experiment --list`` prints them).
"""

from __future__ import annotations

from importlib import import_module

PAPERS = ("gsi_icde20", "sgsi_tkde22", "egsm_sigmod23", "gmatch_pvldb26", "stwig_lin14", "compare")
"""Modules of :mod:`experiments.papers` with experiments, in ``make experiments`` order."""


def experiments_of(paper: str | None = None) -> list:
    """Every experiment of ``paper`` (all papers when None), in declaration order."""
    papers = PAPERS if paper is None else (paper,)
    unknown = set(papers) - set(PAPERS)
    if unknown:
        raise ValueError(f"unknown paper {sorted(unknown)[0]!r}; choose one of {PAPERS}")
    return [e for p in papers for e in import_module(f"experiments.papers.{p}").EXPERIMENTS]


def get_experiment(name: str):
    """The experiment called ``name`` (e.g. ``"gsi_icde20.table4"``)."""
    for experiment in experiments_of():
        if experiment.name == name:
            return experiment
    raise ValueError(f"unknown experiment {name!r}; `gpusm experiment --list` names them all")
