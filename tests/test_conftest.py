"""The suite's own configuration: every id a test's ``slow_cases`` marker names is one of its cases."""

from conftest import SLOW_CASES


def test_every_slow_case_names_a_collected_case(request):
    """A renamed parameter would leave a stale id (and its case in the fast lane)."""
    stale = {test: sorted(named - collected) for test, (named, collected) in request.config.stash[SLOW_CASES].items()
             if named - collected}
    assert not stale, stale
