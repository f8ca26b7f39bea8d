"""Where gpusm finds its input files and its bundled real data (HPRD, yeast, GitHub, SNAP;
data/README.md).

``$GPUSM_DATA`` names another folder with the same layout and overrides the checkout's ``data/``.
Every reader (:func:`common.graph.io.load_graph` and the others) and so every ``gpusm`` command resolves
its input paths through :func:`find_input`: a relative path not found in the working directory
is looked up in the data folder.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_DATA = Path(__file__).resolve().parents[2] / "data"


def data_dir() -> Path:
    """``$GPUSM_DATA`` when set, else the checkout's ``data/`` folder."""
    configured = os.environ.get("GPUSM_DATA")
    return Path(configured).expanduser() if configured else REPO_DATA


def resolve_input(path) -> Path:
    """``path`` as given when it exists, else the same relative path inside :func:`data_dir`
    when that exists (``gpusm match hprd/HPRD.graph hprd/queries``), else ``path`` unchanged."""
    given = Path(path).expanduser()
    if given.exists() or given.is_absolute():
        return given
    bundled = data_dir() / given
    return bundled if bundled.exists() else given


def find_input(path) -> Path:
    """:func:`resolve_input`, or a FileNotFoundError that names every place it looked and, when
    the data folder holds files of that name elsewhere, where (``HPRD.graph`` -> ``hprd/HPRD.graph``)."""
    found = resolve_input(path)
    if found.exists():
        return found
    given = Path(path).expanduser()
    looked = [str(given.absolute())]
    if not given.is_absolute():
        looked.append(str(data_dir() / given) + " (the data folder: $GPUSM_DATA, else the checkout's data/)")
    message = f"{path}: no such file or folder; looked for {' and '.join(looked)}"
    root = data_dir()
    if not given.is_absolute() and root.is_dir():
        same_name = sorted(p.relative_to(root).as_posix() for p in root.rglob(given.name))[:5]
        if same_name:
            message += f"; the data folder has {', '.join(same_name)}"
    raise FileNotFoundError(message)
