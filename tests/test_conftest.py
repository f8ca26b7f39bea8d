"""The suite's own configuration: the simulator-heavy list names tests that exist."""

from conftest import COLLECTED, SIMULATOR_HEAVY


def test_every_simulator_heavy_entry_names_a_collected_test(request):
    """A renamed or removed test would leave a stale entry (and its replacement in the fast lane);
    entries are checked for the files this session collected."""
    collected = request.config.stash[COLLECTED]
    files = {nodeid.split("::")[0] for nodeid in collected}
    stale = sorted(e for e in SIMULATOR_HEAVY if e.split("::")[0] in files and e not in collected)
    assert not stale, stale

