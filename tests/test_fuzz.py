"""experiments/bench/fuzz.py: its verdicts catch a wrong engine and a silently accepted file, its
mutations' claims hold for the readers, and a small run of the whole thing passes (slow)."""

from __future__ import annotations

import csv
import random

import pytest

from common.cpu.reference import ReferenceMatcher
from common.engine import registry
from common.graph.io import load_graph, load_query_set
from experiments.bench import fuzz


class OffByOne(ReferenceMatcher):
    """The reference with one embedding too many: what a wrong engine looks like."""

    name = "off-by-one"

    def _match(self, query, **options):
        result = super()._match(query, **options)
        result.count += 1
        return result


def test_a_wrong_count_is_a_disagreement_and_a_self_loop_query_must_be_refused(monkeypatch):
    monkeypatch.setitem(registry._REGISTRY, "off-by-one", f"{__name__}:OffByOne")
    verdicts = {}
    for index in range(60):
        pair = fuzz.make_pair(3, index)
        expected = None if pair.refuse else fuzz.networkx_embeddings(pair, None)
        right = fuzz.check_pair(pair, "cpu", 30, expected)
        wrong = fuzz.check_pair(pair, "off-by-one", 30, expected)
        verdicts.setdefault(right["verdict"], 0)
        verdicts[right["verdict"]] += 1
        if pair.refuse:
            assert right["verdict"] == wrong["verdict"] == "refused", right
        else:
            assert right["verdict"] == "ok", right
            # (a query label the data lacks is answered 0 before the search: right even here)
            assert wrong["verdict"] == ("disagreement" if wrong["count"] != expected[0] else "ok"), wrong
            verdicts["wrong"] = verdicts.get("wrong", 0) + (wrong["verdict"] == "disagreement")
    assert verdicts.get("refused") and verdicts.get("ok") and verdicts["wrong"] > 20


def test_collected_embeddings_are_compared_as_sets():
    pair = next(p for p in (fuzz.make_pair(4, i) for i in range(100))
                if p.collect and not p.refuse and fuzz.networkx_embeddings(p, None)[0] > 1)
    expected = fuzz.networkx_embeddings(pair, fuzz._query_order(pair))
    assert fuzz.check_pair(pair, "cpu", 30, expected)["verdict"] == "ok"
    fewer = (expected[0], set(list(expected[1])[1:]))
    assert fuzz.check_pair(pair, "cpu", 30, fewer)["verdict"] == "disagreement"


def test_cli_verdicts():
    error = "gpusm match: error: x.graph:3: edge line needs the form 'e u v [label]', found 2 fields\n"
    rows = '[{"status": "ok", "count": 4}]'
    assert fuzz.judge_cli(2, "", error, fuzz.INVALID, None)[0] == "ok"
    assert fuzz.judge_cli(0, rows, "", fuzz.INVALID, None)[0] == "silent"
    assert fuzz.judge_cli(0, rows, "", fuzz.UNKNOWN, None)[0] == "ok"
    assert fuzz.judge_cli(0, rows, "", fuzz.KEEPS, [("ok", 4)])[0] == "ok"
    assert fuzz.judge_cli(0, rows, "", fuzz.KEEPS, [("ok", 5)])[0] == "disagreement"
    assert fuzz.judge_cli(2, "", error, fuzz.KEEPS, [("ok", 4)])[0] == "false-refusal"
    assert fuzz.judge_cli(1, "", "Traceback (most recent call last):\n ...", fuzz.UNKNOWN, None)[0] == "traceback"
    assert fuzz.judge_cli(2, "", "a\nb\n", fuzz.UNKNOWN, None)[0] == "bad-error"
    assert fuzz.judge_cli(None, "", "", fuzz.UNKNOWN, None)[0] == "hang"
    assert fuzz.judge_cli(3, rows, "", fuzz.UNKNOWN, None)[0] == "bad-exit"


def _read(seed, path):
    """The graphs ``gpusm match`` reads from ``path`` in the seed's role, as comparable tuples."""
    graphs = [load_graph(path)] if seed.role == "data" else load_query_set(path, directed=False)
    return [(g.directed, g.labels.tolist(), [a.tolist() if a is not None else None for a in g.edges()])
            for g in graphs]


def test_mutations_claims_hold_for_the_readers(tmp_path):
    """Every mutation called certainly invalid is refused by the readers; every one said to
    keep the graph reads as the same graph (in-process: what the CLI runs check end to end)."""
    rng = random.Random(11)
    seeds = fuzz.make_seeds(rng, tmp_path / "seeds")
    tried = {fuzz.INVALID: 0, fuzz.KEEPS: 0}
    for k, seed in enumerate(seeds):
        original = tmp_path / f"{k}-seed"
        original.write_bytes(seed.content)
        want = _read(seed, original)
        for name in fuzz.MUTATIONS:
            out = fuzz.mutate(seed, rng, name)
            if out is None or out[1] == fuzz.UNKNOWN:
                continue
            path = tmp_path / f"{k}-{name}"
            path.write_bytes(out[0])
            tried[out[1]] += 1
            if out[1] == fuzz.INVALID:
                with pytest.raises(ValueError):
                    _read(seed, path)
            else:
                assert _read(seed, path) == want, (seed.name, name)
    assert tried[fuzz.INVALID] > 100 and tried[fuzz.KEEPS] > 30


@pytest.mark.slow
def test_a_small_run_passes(tmp_path, capsys):
    code = fuzz.main(["--pairs", "25", "--files", "24", "--seed", "2", "--engines", "cpu", "networkx",
                      "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PASSED: no failures" in out.splitlines()[-1]
    assert (tmp_path / "pairs.csv").is_file() and (tmp_path / "files.csv").is_file()
    with open(tmp_path / "pairs.csv") as f:
        assert len(list(csv.DictReader(f))) == 25 * 2
