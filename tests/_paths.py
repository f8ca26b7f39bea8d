"""Where the tests find the real data: the checkout's ``data/`` folder, or ``$GPUSM_DATA``.

Tests that need it fail (never skip) when it is missing.
"""

from common.graph.paths import data_dir

DATA = data_dir()
