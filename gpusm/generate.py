"""Generators (re-exported from :mod:`common.graph.generate`): labelled R-MAT graphs, random-walk query
sets and the gMatch paper's patterns P1-P9."""

from common.graph.generate import *  # noqa: F403
from common.graph.generate import __all__  # noqa: F401
