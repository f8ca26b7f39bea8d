"""common.gpu.watch.LaunchWatch in the simulator: a deadline stops a running launch that polls the
flag, an unreached deadline lets it finish, a flag that is not one int64 word is refused."""

from __future__ import annotations

import time

import numpy as np
import pytest

from common.gpu.runtime import cuda
from common.gpu.watch import LaunchWatch


@cuda.jit
def spin(flag, steps, done):
    """Count to ``steps``, looking at the stop flag every 8 steps; record how far it got."""
    i = 0
    while i < steps:
        if i % 8 == 0 and cuda.atomic.add(flag, 0, 0) != 0:
            break
        i += 1
    done[0] = i


def test_deadline_stops_a_running_launch():
    watch = LaunchWatch()
    flag = cuda.to_device(np.zeros(1, np.int64))
    done = cuda.to_device(np.zeros(1, np.int64))
    steps = 3 * 10**7                 # about 30 s in the simulator
    start = time.perf_counter()
    assert watch.run(spin, 1, 1, (flag, steps, done), start + 0.2, flag)
    assert time.perf_counter() - start < 10.0
    assert 0 < done.copy_to_host()[0] < steps
    assert flag.copy_to_host()[0] == 1


def test_unreached_deadline_lets_the_launch_finish():
    watch = LaunchWatch()
    flag = cuda.to_device(np.zeros(1, np.int64))
    done = cuda.to_device(np.zeros(1, np.int64))
    assert not watch.run(spin, 1, 1, (flag, 100, done), time.perf_counter() + 600, flag)
    assert done.copy_to_host()[0] == 100 and flag.copy_to_host()[0] == 0


def test_flag_must_be_one_int64_word():
    watch = LaunchWatch()
    done = cuda.to_device(np.zeros(1, np.int64))
    for bad in (np.zeros(2, np.int64), np.zeros(1, np.int32)):
        flag = cuda.to_device(bad)
        with pytest.raises(ValueError, match="one-element int64"):
            watch.run(spin, 1, 1, (flag, 10, done), time.perf_counter() + 600, flag)
