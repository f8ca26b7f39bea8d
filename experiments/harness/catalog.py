"""The experiments the harness can run, by paper: a registry the papers fill.

The harness never imports the papers (they import the harness). :mod:`experiments.papers`
calls :func:`register_paper` for each paper module when it is imported, and the package above
both (:mod:`experiments`) names that package with :func:`add_source`, so the first look-up
imports it. :func:`experiments_of`, :func:`get_experiment` and :func:`papers` read the registry.
"""

from __future__ import annotations

from importlib import import_module

_PAPERS: dict[str, tuple] = {}
_SOURCES: list[str] = []


def register_paper(paper: str, experiments) -> None:
    """Register ``paper``'s experiments (a sequence of :class:`experiments.harness.core.Experiment`)."""
    experiments = tuple(experiments)
    if not paper or any(e.paper != paper for e in experiments):
        raise ValueError(f"paper {paper!r}: every experiment registered under it must name it as its paper")
    _PAPERS[paper] = experiments


def add_source(module: str) -> None:
    """Name a module that registers papers when imported; it is imported at the first look-up."""
    if module not in _SOURCES:
        _SOURCES.append(module)


def _loaded() -> dict[str, tuple]:
    for module in _SOURCES:
        import_module(module)
    return _PAPERS


def papers() -> tuple[str, ...]:
    """The registered papers, in registration order (``make experiments`` order)."""
    return tuple(_loaded())


def experiments_of(paper: str | None = None) -> list:
    """Every experiment of ``paper`` (all papers when None), in declaration order."""
    registered = _loaded()
    chosen = tuple(registered) if paper is None else (paper,)
    unknown = [p for p in chosen if p not in registered]
    if unknown:
        raise ValueError(f"unknown paper {unknown[0]!r}; choose one of {tuple(registered)}")
    return [e for p in chosen for e in registered[p]]


def get_experiment(name: str):
    """The experiment called ``name`` (e.g. ``"gsi_icde20.table4"``)."""
    for experiment in experiments_of():
        if experiment.name == name:
            return experiment
    raise ValueError(f"unknown experiment {name!r}; `gpusm experiment --list` names them all")
