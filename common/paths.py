"""Where gpusm finds its bundled real data (HPRD, yeast, GitHub, SNAP; data/README.md).

``$GPUSM_DATA`` names another folder with the same layout and overrides the checkout's ``data/``.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_DATA = Path(__file__).resolve().parents[1] / "data"


def data_dir() -> Path:
    """``$GPUSM_DATA`` when set, else the checkout's ``data/`` folder."""
    configured = os.environ.get("GPUSM_DATA")
    return Path(configured).expanduser() if configured else REPO_DATA


def resolve_input(path) -> Path:
    """``path`` as given when it exists, else the same relative path inside :func:`data_dir`
    when that exists (``gpusm match hprd/HPRD.graph hprd/queries``), else ``path`` unchanged."""
    given = Path(path)
    if given.exists() or given.is_absolute():
        return given
    bundled = data_dir() / given
    return bundled if bundled.exists() else given
