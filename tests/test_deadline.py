"""common.engine.deadline: a query's :class:`Deadline` (its clock time, what is left, whether it
passed) and :class:`Stop`, the exception that ends a search with a status and a reason."""

import time

import pytest

from common.engine.deadline import Deadline, Stop
from common.engine.result import Status


def test_no_deadline_never_passes_and_leaves_the_other_time():
    deadline = Deadline(None)
    assert not deadline.active and deadline.at is None and deadline.remaining() is None
    assert not deadline.passed()
    deadline.check("never")                              # no exception
    assert deadline.earlier(12.5) == 12.5
    assert Deadline.at_time(None).at is None


def test_a_deadline_counts_from_its_start_less_the_time_already_spent():
    start = time.perf_counter()
    deadline = Deadline(10.0, start, spent=4.0)
    assert deadline.active and deadline.at == pytest.approx(start + 6.0)
    assert 0 < deadline.remaining() <= 6.0
    assert deadline.earlier(start + 1.0) == start + 1.0 and deadline.earlier(start + 9.0) == deadline.at
    assert Deadline.at_time(deadline.at).at == deadline.at
    with pytest.raises(AttributeError):
        Deadline(1.0).spent = 2                          # a deadline holds its clock time only


def test_a_passed_deadline_raises_stop_with_status_timeout_and_the_reason():
    deadline = Deadline(0.0, time.perf_counter() - 1.0)
    assert deadline.passed() and deadline.remaining() < 0
    with pytest.raises(Stop) as stopped:
        deadline.check("between levels")
    assert stopped.value.status is Status.TIMEOUT and stopped.value.reason == "between levels"
    assert str(Stop(Status.LIMIT)) == str(Status.LIMIT)
