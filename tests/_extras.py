"""What a test needs beyond the base install: ``requires`` skips or, under ``make test``, fails."""

import pytest


def requires(*needs: str) -> None:
    """Skip the calling test, naming what is missing, unless every module (or, written
    ``"bin:NAME"``, program on PATH) in ``needs`` is there. With ``GPUSM_REQUIRE_EXTRAS=1`` (set
    by ``make test``, whose environment installs the extras) a missing one fails the test instead,
    so the extras' tests can never be skipped silently where they are meant to run. Called at
    a module's top level, it skips (or fails) the whole module."""
    import importlib.util
    import shutil

    missing = [need for need in needs
               if (shutil.which(need[4:]) is None if need.startswith("bin:")
                   else importlib.util.find_spec(need) is None)]
    if not missing:
        return
    unavailable(f"needs {', '.join(missing)} (an optional extra, or a program on PATH)")


def unavailable(message: str) -> None:
    """Skip with ``message`` what this environment lacks; fail under ``GPUSM_REQUIRE_EXTRAS=1``."""
    import os

    if os.environ.get("GPUSM_REQUIRE_EXTRAS") == "1":
        pytest.fail(f"{message}; GPUSM_REQUIRE_EXTRAS=1 says it must be installed here")
    pytest.skip(message, allow_module_level=True)
