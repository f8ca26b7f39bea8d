"""Query sets and split queries on a Dask cluster (re-exported from :mod:`common.distributed`;
the ``dask`` extra)."""

from common.distributed import *  # noqa: F403
from common.distributed import __all__  # noqa: F401
