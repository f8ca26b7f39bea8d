"""``python -m experiments.bench.check``: engines against the external exact counts, one command."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.bench import check
from experiments.harness.workloads import CHECK_SETS, CheckSet, check_set


@pytest.mark.slow        # the whole command on the real yeast graph: seconds per engine in the simulator
def test_every_gpu_engine_matches_the_known_count_of_the_smallest_yeast_query(capsys):
    code = check.main(["--engines", "cpu,gsi,stwig,stwig-cpu", "--sets", "yeast", "--queries", "1",
                       "--smallest", "--timeout", "120"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "query_dense_8_" in out and "no wrong count" in out
    assert "WRONG" not in out


def test_a_wrong_known_count_is_reported_and_fails():
    item = check_set("yeast", 1, smallest=True)
    query, known = item.queries[0]
    wrong = CheckSet("yeast", item.data, [(query, known + 1)])
    raw = check.run_check(["stwig-cpu"], [wrong], progress=False)
    assert list(raw["verdict"]) == ["wrong"]
    assert "WRONG" in check.table(raw).to_string()
    assert check.summary(raw).loc["stwig-cpu", "wrong"] == 1


def test_without_a_known_count_the_engines_are_checked_against_each_other():
    raw = pd.DataFrame({"set": ["s"] * 3, "query": ["q"] * 3, "engine": ["a", "b", "c"],
                        "status": ["ok", "ok", "timeout"], "count": [5, 6, 2], "expected": [None] * 3,
                        "wall_s": [0.0] * 3, "error": [""] * 3})
    assert [check._verdict(raw, row) for row in raw.itertuples()] == ["wrong", "wrong", "timeout"]
    raw.loc[1, "count"] = 5
    assert [check._verdict(raw, row) for row in raw.itertuples()] == ["agrees", "agrees", "timeout"]


def test_the_external_count_sets_load_with_their_counts():
    rw12 = check_set("rw12")
    counts = dict((q.name, c) for q, c in rw12.queries)
    assert len(counts) == 30 and counts["q12_001"] == 1809482171 and counts["q12_000"] is None
    github = check_set("github")
    assert [q.name for q, _ in github.queries][:2] == ["Q_0", "Q_1"] and dict(
        (q.name, c) for q, c in github.queries)["Q_7"] == 658
    hprd = check_set("hprd", 3, smallest=True)
    assert [c for _, c in hprd.queries] == [1, 1, 1]
    yeast = check_set("yeast", 3)
    assert [q.name.rsplit("_", 1)[0] for q, _ in yeast.queries] == [
        "query_dense_8", "query_sparse_8", "query_dense_16"]
    assert set(CHECK_SETS) >= {"hprd", "yeast", "github", "rw12", "patterns", "enron"}


def test_unknown_engines_and_sets_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as bad:
        check.main(["--engines", "nope"])
    assert bad.value.code == 2 and "unknown engine 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        check.main(["--engines", "cpu", "--sets", "hprd,nope"])
    assert "unknown set 'nope'" in capsys.readouterr().err


def test_an_engine_with_options_is_a_column_of_its_own(capsys):
    """``NAME:KEY=VALUE+...`` builds the engine with those options under that name; a bad option
    is a usage error that names the engine."""
    from common.engine.registry import create_engine
    from common.graph.generate import random_walk_query, rmat, uniform_labels

    data = rmat(40, 120, seed=3, labels=uniform_labels(40, 3, seed=4), name="rmat40-labelled")
    queries = [random_walk_query(data, k, seed=k, name=f"walk{k}") for k in (3, 4)]
    cpu = create_engine("cpu").prepare(data)
    item = CheckSet("tiny", data, [(q, cpu.match(q).count) for q in queries])
    spec = "gmatch:candidate_graph=True+candidate_graph_build=gpu+probe_s=0+blocks=2+warps_per_block=2"
    raw = check.run_check(["cpu", spec], [item], progress=False)
    assert list(dict.fromkeys(raw["engine"])) == ["cpu", spec]
    assert set(raw["verdict"]) == {"right"}
    assert check.engine_spec("gmatch:probe_s=0.5+candidate_graph=auto") == ("gmatch", {"probe_s": 0.5,
                                                                                       "candidate_graph": "auto"})
    for spec, message in (("gmatch:probe_s", "engine 'gmatch:probe_s': engine option must be key=value"),
                          ("gmatch:candidate_graph_build=cpu", "candidate_graph_build must be 'host' or 'gpu'"),
                          ("nope:x=1", "unknown engine 'nope'")):
        with pytest.raises(SystemExit):
            check.main(["--engines", spec])
        assert message in capsys.readouterr().err
