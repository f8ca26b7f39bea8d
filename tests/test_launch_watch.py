"""common.gpu.watch.LaunchWatch in the simulator: a deadline stops a running launch that polls the
flag, an unreached deadline lets it finish, ``extend`` (which may peek at the launch's progress)
moves the deadline, again and again, or lets it stand, a flag that is not one int64 word is refused."""

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


@cuda.jit
def spin_reporting(flag, steps, progress):
    """:func:`spin` that publishes how far it got every 8 steps."""
    i = 0
    while i < steps:
        if i % 8 == 0:
            if cuda.atomic.add(flag, 0, 0) != 0:
                break
            cuda.atomic.max(progress, 0, i)
        i += 1
    cuda.atomic.max(progress, 0, i)


def test_extend_moves_the_deadline_and_may_peek():
    """``extend`` is asked when the deadline passes and again whenever the deadline it answered
    passes: run on to the end, stop at the first deadline, or look again once and then stop."""
    watch = LaunchWatch()
    steps = 10**6                     # about a second in the simulator
    for answers in (["end"], [None], ["again", None]):
        flag = cuda.to_device(np.zeros(1, np.int64))
        progress = cuda.to_device(np.zeros(1, np.int64))
        seen, asked = cuda.pinned_array(1, np.int64), []

        def extend(elapsed):
            watch.peek(progress, seen)
            asked.append((elapsed, int(seen[0])))
            answer = answers[len(asked) - 1]
            return {"end": time.perf_counter() + 600, "again": time.perf_counter() + 0.02}.get(answer)
        start = time.perf_counter()
        stopped = watch.run(spin_reporting, 1, 1, (flag, steps, progress), start + 0.02, flag, extend)
        assert len(asked) == len(answers) and asked[0][0] >= 0
        if len(asked) == 2:
            assert asked[1][0] >= asked[0][0] + 0.02 and asked[1][1] >= asked[0][1]
        reached = progress.copy_to_host()[0]
        assert 0 <= asked[-1][1] <= reached
        if answers == ["end"]:        # run on to the end: no flag
            assert not stopped and reached == steps and flag.copy_to_host()[0] == 0
        else:                         # stopped at the last deadline
            assert stopped and reached < steps and flag.copy_to_host()[0] == 1


def test_flag_must_be_one_int64_word():
    watch = LaunchWatch()
    done = cuda.to_device(np.zeros(1, np.int64))
    for bad in (np.zeros(2, np.int64), np.zeros(1, np.int32)):
        flag = cuda.to_device(bad)
        with pytest.raises(ValueError, match="one-element int64"):
            watch.run(spin, 1, 1, (flag, 10, done), time.perf_counter() + 600, flag)


@pytest.mark.parametrize("pause, now, deadline, expected", [
    (1e-3, 10.0, 10.0004, 4e-4),     # a pause would overrun the deadline: sleep up to it
    (1e-3, 10.0, 10.5, 1e-3),        # the deadline is far: the whole pause
    (1e-3, 10.0, 9.0, 0.0),          # the deadline has passed: no sleep before acting on it
    (1e-3, 10.0, None, 1e-3),        # the flag is raised: the whole pause
])
def test_the_watch_never_sleeps_past_a_deadline_it_has_yet_to_act_on(pause, now, deadline, expected):
    from common.gpu.watch import sleep_for

    assert sleep_for(pause, now, deadline) == pytest.approx(expected)
