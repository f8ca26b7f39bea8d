"""The papers' tables and figures as named experiments (one module per paper), ``compare`` (every
engine side by side) and ``authors`` (the authors' own binaries as a column of them).

Importing this package registers each paper module's ``EXPERIMENTS`` with the harness
(:mod:`experiments.harness.catalog`), in :data:`experiments.PAPERS` order."""

from importlib import import_module

from .. import PAPERS
from ..harness.catalog import register_paper

for _paper in PAPERS:
    register_paper(_paper, import_module(f"{__name__}.{_paper}").EXPERIMENTS)
