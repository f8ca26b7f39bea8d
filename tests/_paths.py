"""Where the tests find the real data: ``../shared/data`` beside the checkout, or ``$GPUSM_DATA``.

Tests that need it fail (never skip) when it is missing.
"""

import os
from pathlib import Path

DATA = Path(os.environ.get("GPUSM_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
