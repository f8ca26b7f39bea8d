"""numba-cuda's low-occupancy NumbaPerformanceWarning is hidden by the package; other warnings are not."""

import re
import subprocess
import sys
import warnings

import pytest

from common.gpu.backend import quiet_launch_warnings


def _warning_classes():
    from numba.core.errors import NumbaPerformanceWarning as core
    classes = [core]
    try:
        from numba.cuda.core.errors import NumbaPerformanceWarning as cuda_core
        classes.append(cuda_core)
    except ImportError:
        pass
    return classes


def test_low_occupancy_warning_is_hidden_but_others_show():
    # pytest restores the warning filters after collection, so install the package's filter here
    # again (the next test checks that importing gpusm installs it).
    for cls in _warning_classes():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            quiet_launch_warnings()
            warnings.warn(cls("Grid size 1 will likely result in GPU under-utilization due to low occupancy."))
            # as numba prints it on a terminal or GPU machine: wrapped in highlighting codes
            bold = "\x1b[1mGrid size 2 will likely result in GPU under-utilization due to low occupancy.\x1b[0m"
            warnings.warn(cls(bold))
            warnings.warn(cls("Host array used in CUDA kernel will incur copy overhead to/from device."))
        # numba may add the highlighting codes itself (it did on an H200): compare the bare text
        messages = [re.sub(r"\x1b\[[0-9;]*m", "", str(w.message)) for w in caught]
        assert messages == ["Host array used in CUDA kernel will incur copy overhead to/from device."], cls


@pytest.mark.slow
def test_the_filter_is_installed_on_import_in_a_fresh_process():
    # The text numba-cuda's dispatcher emits (numba_cuda/numba/cuda/dispatcher.py, _LaunchConfiguration).
    code = ("import warnings, common\n"
            "from numba.core.errors import NumbaPerformanceWarning as W\n"
            "for n in (1, 2, 64):\n"
            "    warnings.warn(W(f'Grid size {n} will likely result in GPU under-utilization due to low occupancy.'))\n"
            "warnings.warn(W('other performance warning'))\n")
    done = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "under-utilization" not in done.stderr
    assert "other performance warning" in done.stderr
