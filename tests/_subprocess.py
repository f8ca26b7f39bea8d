"""The environment of a Python child process a test starts: the parent's, with this checkout first
on the import path and the parent's ``PYTHONPATH`` after it, so the child (run with
``sys.executable``) imports the same packages as the tests (numpy included) wherever they come from."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_env(**variables: str) -> dict[str, str]:
    """``os.environ`` with ``PYTHONPATH`` = the checkout, then the parent's; ``variables`` added."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, **variables)
