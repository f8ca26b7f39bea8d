"""What the engine benchmarks (experiments/bench/) take from the harness: the one per-query timing
(warm-up, then the median of repeats), the wall clock of one call, whole-table CSV writing, and
the paper modules' configurations (GSI's Tables IV-IX ablations are the paper module's)."""

from __future__ import annotations

import csv
import io
import time

import numba
import pandas as pd

from common.engine.result import MatchResult, Status
from common.gpu.compile_clock import compile_clock
from experiments.harness.store import write_rows
from experiments.harness.timing import Budget, clocked, timed, without_compiles


class Scripted:
    """An engine whose answers are given in advance: one MatchResult per call, in order."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.timeouts = []

    def match(self, query, timeout_s=None):
        self.timeouts.append(timeout_s)
        return self.answers.pop(0)


def answer(enumerate_s, status=Status.OK, filter_s=0.0):
    return MatchResult("scripted", count=1, status=status, phases={"filter": filter_s, "enumerate": enumerate_s})


def test_timed_takes_the_median_of_the_repeats_after_one_warm_up():
    engine = Scripted(answer(9.0), answer(3.0, filter_s=1.0), answer(1.0, filter_s=1.0), answer(2.0, filter_s=1.0))
    run = timed(engine, "q", 3, timeout_s=5.0)
    assert run.warm.phases["enumerate"] == 9.0 and run.last.phases["enumerate"] == 2.0
    assert run.seconds == 3.0                                   # median of 4, 2, 3 (filter + enumerate)
    assert run.median_of(lambda r: r.phases["enumerate"]) == 2.0
    assert run.repeated and run.ok and len(run.runs) == 3
    assert engine.timeouts == [5.0] * 4 and run.wall_s >= 0


def test_timed_keeps_a_failed_warm_up_as_its_own_result():
    engine = Scripted(answer(7.0, status=Status.TIMEOUT))
    run = timed(engine, "q", 3, timeout_s=1.0)
    assert not run.repeated and not run.ok and run.seconds == 7.0 and engine.answers == []


def test_timed_repeat_below_and_untimed_after_warm():
    slow = Scripted(answer(1.0))
    assert not timed(slow, "q", 3, repeat_below_s=-1.0).repeated     # the warm-up took longer than the bound
    engine = Scripted(answer(1.0), answer(2.0), answer(4.0))
    run = timed(engine, "q", 2, timeout_s=3.0, untimed_after_warm=True)
    assert engine.timeouts == [3.0, None, None] and run.seconds == 3.0


def test_timed_stops_the_repeats_at_the_first_failure():
    engine = Scripted(answer(1.0), answer(2.0), answer(5.0, status=Status.TIMEOUT), answer(1.0))
    run = timed(engine, "q", 3)
    assert len(run.runs) == 2 and run.last.status is Status.TIMEOUT and not run.ok and engine.answers


def test_clocked_returns_the_value_and_the_host_seconds():
    seconds, value = clocked(lambda: time.sleep(0.01) or "done")
    assert value == "done" and 0.01 <= seconds < 5


def _fresh_function():
    """A function numba has not compiled yet (each call of this makes a new one)."""
    return numba.njit(lambda x: x + 1)


def test_without_compiles_calls_again_after_a_call_that_compiled():
    compiled, calls = _fresh_function(), []

    def call():
        calls.append(compiled(len(calls)))          # compiles on the first call only
        return calls[-1]

    compiled_s = compile_clock.seconds
    seconds, value, reruns = without_compiles(call)
    assert compile_clock.seconds > compiled_s       # the numba:compile event was counted
    assert reruns == 1 and calls == [1, 2] and value == 2 and seconds >= 0
    seconds, value, reruns = without_compiles(call)
    assert reruns == 0 and calls == [1, 2, 3] and value == 3


def test_without_compiles_stops_after_its_attempts():
    calls = []

    def call():                                     # every call compiles a new function
        calls.append(_fresh_function()(1))

    assert without_compiles(call, attempts=2)[2] == 1 and len(calls) == 2


def test_timed_runs_again_a_timed_run_that_compiled():
    compile_once = [_fresh_function()]

    class Compiling(Scripted):
        def match(self, query, timeout_s=None):
            if len(self.timeouts) == 1 and compile_once:    # the first timed run compiles
                compile_once.pop()(0)
            return super().match(query, timeout_s)

    engine = Compiling(answer(9.0), answer(8.0), answer(1.0), answer(2.0))
    run = timed(engine, "q", 2)
    assert [r.phases["enumerate"] for r in run.runs] == [1.0, 2.0] and engine.answers == []


def test_budget_is_spent_once_its_seconds_have_passed():
    assert not Budget(None).spent() and not Budget(60.0).spent()
    budget = Budget(0.01)
    time.sleep(0.02)
    assert budget.spent() and budget.elapsed() >= 0.02


def test_write_rows_writes_what_csv_dictwriter_writes_at_once(tmp_path):
    rows = [{"workload": "w", "query": "q1", "ms": 1.5}, {"workload": "w", "query": "q2", "extra": None, "ms": 2}]
    path = write_rows(tmp_path / "bench.csv", rows)
    expected = io.StringIO()
    writer = csv.DictWriter(expected, fieldnames=["workload", "query", "ms", "extra"])
    writer.writeheader()
    writer.writerows(rows)
    assert path.read_bytes() == expected.getvalue().encode()
    frame = pd.read_csv(path)
    assert frame["query"].tolist() == ["q1", "q2"] and frame["extra"].isna().all()
    write_rows(path, rows[:1], fields=["query", "ms", "workload"])     # a second write replaces the file
    assert path.read_text().splitlines() == ["query,ms,workload", "q1,1.5,w"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.csv"]   # no temporary file left


def test_gsi_benchmark_variants_are_the_paper_modules_configurations():
    from experiments.bench.gsi import VARIANTS
    from experiments.papers import gsi_icde20 as paper

    ladder = [dict(c.options) for c in paper.JOIN] + [dict(c.options) for c in paper.OPTIMIZATIONS[1:]]
    assert [VARIANTS[v] for v in ("GSI-b", "+DS", "+PC", "GSI", "GSI+LB", "GSI-opt")] == ladder
    assert VARIANTS["no-write-cache"] == dict(paper.WRITE_CACHE[0].options)
    assert [VARIANTS["filter=label"], VARIANTS["filter=degree"]] == [dict(c.options) for c in paper.FILTERS[:2]]
