"""The engine contract (docs/design.md, "The engine contract"), checked on every registered engine.

One suite over ``common.available_engines()`` (gpusm's own engines and the installed peers; the
GPU engines run under the CUDA simulator when there is no GPU), as scikit-learn's
``parametrize_with_checks`` runs one set of checks over every estimator: each test runs one check
of :func:`common.engine.check.check_engine` (where the checks live and say what they assert) on
one engine, all sharing one :class:`~common.engine.check.Workload`. A check an engine's class
declares a known failure (``contract_notes``) is reported as an xfail with the declared reason;
when it starts passing, ``check_engine`` fails it, so the note goes.
"""

from __future__ import annotations

import pytest

from common.engine.check import CHECKS, KIND_WORDS, Workload, check_engine
from common.engine.registry import BUILTIN_ENGINES, PEER_ENGINES, available_engines, engine_class

#: The engines checked: every registered engine that ships with gpusm or is an installed peer
#: (an engine a test module registers for itself is that module's business).
ENGINES = [name for name in available_engines() if name in BUILTIN_ENGINES or name in PEER_ENGINES]


@pytest.fixture(scope="module")
def contract():
    """The checks' graphs, reference counts and prepared engines, shared by this module's tests."""
    return Workload()


def run_check(name: str, check: str, contract: Workload) -> None:
    """``check`` on engine ``name``; a known failure its class declares is an xfail."""
    (outcome,) = [o for o in check_engine(engine_class(name), checks=[check], workload=contract)
                  if o.check == check]
    if outcome.outcome == "known failure":
        pytest.xfail(outcome.reason)


# ---------------------------------------------------------------------- checks
def test_every_check_is_run_here():
    run = {"declaration", *(f"counts_{kind}" for kind in ("labelled", *KIND_WORDS)), "limit", "collect",
           "deadline", "oom", "query_size", "bad_input", "statistics", "peak", "batch", "two_engines", "parts"}
    assert run == set(CHECKS)


@pytest.mark.parametrize("name", ENGINES)
def test_the_class_declares_itself(name, contract):
    run_check(name, "declaration", contract)


@pytest.mark.parametrize("kind", ["labelled", *KIND_WORDS])
@pytest.mark.parametrize("name", ENGINES)
def test_counts_equal_the_reference_or_the_query_kind_is_declared_unsupported(name, kind, contract):
    run_check(name, f"counts_{kind}", contract)


@pytest.mark.parametrize("name", ENGINES)
def test_limit_stops_at_the_limit_and_a_larger_one_changes_nothing(name, contract):
    run_check(name, "limit", contract)


@pytest.mark.parametrize("name", ENGINES)
def test_collect_returns_every_embedding_once(name, contract):
    run_check(name, "collect", contract)


@pytest.mark.slow_cases("egsm")
@pytest.mark.parametrize("name", ENGINES)
def test_a_deadline_is_status_timeout_with_a_lower_bound(name, contract):
    run_check(name, "deadline", contract)


@pytest.mark.parametrize("name", ENGINES)
def test_a_device_memory_limit_too_small_is_status_oom(name, contract):
    run_check(name, "oom", contract)


@pytest.mark.parametrize("name", ENGINES)
def test_a_query_larger_than_the_engine_takes_is_unsupported(name, contract):
    run_check(name, "query_size", contract)


@pytest.mark.parametrize("name", ENGINES)
def test_bad_input_raises_an_error_naming_the_problem(name, contract):
    run_check(name, "bad_input", contract)


@pytest.mark.parametrize("name", ENGINES)
def test_statistics_carry_the_required_names_and_only_documented_ones(name, contract):
    run_check(name, "statistics", contract)


@pytest.mark.slow_cases("egsm", "gmatch", "gsi", "sgsi")
@pytest.mark.parametrize("name", ENGINES)
def test_a_querys_peak_device_memory_is_its_own(name, contract):
    run_check(name, "peak", contract)


@pytest.mark.slow_cases("egsm", "gmatch", "gsi", "sgsi")
@pytest.mark.parametrize("name", ENGINES)
def test_a_batch_answers_as_single_queries_do(name, contract):
    run_check(name, "batch", contract)


@pytest.mark.parametrize("name", ENGINES)
def test_two_engines_of_one_kind_in_one_process_both_answer(name, contract):
    run_check(name, "two_engines", contract)


@pytest.mark.parametrize("name", ENGINES)
def test_parts_add_up_to_the_whole_query_or_are_refused(name, contract):
    run_check(name, "parts", contract)


# ---------------------------------------------------------------------- check_engine itself
class _Miscounting(engine_class("cpu")):
    """The reference, one embedding too many."""

    name = "miscounting"

    def _match(self, query, **options):
        result = super()._match(query, **options)
        result.count += 1
        return result


class _FixedButNoted(engine_class("cpu")):
    """The reference, declaring a check it passes a known failure."""

    name = "noted"
    contract_notes = {"limit": "stops late"}


class _Misnoted(engine_class("cpu")):
    name = "misnoted"
    contract_notes = {"limits": "a typo"}


def test_check_engine_names_the_check_an_engine_fails(contract):
    with pytest.raises(AssertionError, match="_Miscounting fails the contract check 'counts_labelled'"):
        check_engine(_Miscounting, checks=["counts_labelled"], workload=contract)
    with pytest.raises(AssertionError, match="passes the contract check 'limit'.*drop the note"):
        check_engine(_FixedButNoted, checks=["limit"], workload=contract)
    with pytest.raises(AssertionError, match=r"'declaration'.*\['limits'\]"):
        check_engine(_Misnoted, checks=["limit"], workload=contract)
    with pytest.raises(ValueError, match="unknown checks"):
        check_engine("cpu", checks=["speed"])
    outcomes = check_engine("cpu", checks=["limit", "collect"], workload=contract)
    assert [(o.check, o.outcome) for o in outcomes] == [("declaration", "passed"), ("limit", "passed"),
                                                        ("collect", "passed")]
