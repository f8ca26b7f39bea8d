"""The authors' binaries as an experiments column (experiments/papers/authors.py): found, skipped with a reason,
and their run.sh output read back as a result (a stand-in run.sh here: the real one needs a CUDA toolkit)."""

from __future__ import annotations

import pytest

from common import create_engine
from common import engine as registry
from common.generate import power_law_labels, query_set, rmat
from common.result import Status
from experiments.papers.authors import GMatchAuthors, authors_configs, authors_reason

FAKE_RUN_SH = """#!/usr/bin/env bash
# run.sh ENGINE DATA QUERY_DIR EXPECTED OUT.csv TIMEOUT: answers with the count in $FAKE_COUNT
echo "engine,dataset,query,count,expected,correct,rc,wall_ms,pre_ms,join_ms" > "$5"
if [ "$FAKE_COUNT" = timeout ]; then echo "$1,data,q,,,timeout,124,$6000,,," >> "$5"
else echo "$1,data,q,$FAKE_COUNT,,noexp,0,450.5,1.5,2.5" >> "$5"; fi
"""


@pytest.fixture
def anchors(tmp_path, monkeypatch):
    folder = tmp_path / "anchors"
    folder.mkdir()
    (folder / "run.sh").write_text(FAKE_RUN_SH)
    fake_binary = tmp_path / "SubgraphMatching"
    fake_binary.write_text("")
    monkeypatch.setenv("GPUSM_ANCHORS", str(folder))
    monkeypatch.setenv("GMATCH_BIN", str(fake_binary))
    return folder


def test_a_missing_binary_is_skipped_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("ANCHORS_WORK", str(tmp_path))
    monkeypatch.delenv("GMATCH_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))                   # no nvcc
    assert "no CUDA toolkit here (nvcc not found)" in authors_reason("gmatch-authors")
    assert authors_configs("gmatch-authors", "gMatch (authors)") == ()


def test_the_binarys_count_and_its_own_times_become_the_result(anchors, monkeypatch):
    assert authors_reason("gmatch-authors") is None
    assert [c.label for c in authors_configs("gmatch-authors", "gMatch (authors)")] == ["gMatch (authors)"]
    monkeypatch.setitem(registry._REGISTRY, "gmatch-authors",      # for this test only
                        f"{GMatchAuthors.__module__}:{GMatchAuthors.__qualname__}")
    data = rmat(60, 200, seed=2, labels=power_law_labels(60, 3, 1.0, seed=2), name="tiny")
    query = query_set(data, 1, 4, seed=5).queries[0]
    expected = create_engine("cpu").prepare(data).match(query).count
    monkeypatch.setenv("FAKE_COUNT", str(expected))
    engine = create_engine("gmatch-authors").prepare(data)
    result = engine.match(query, timeout_s=5.0)
    assert (result.status, result.count) == (Status.OK, expected)
    assert result.phases["enumerate"] == pytest.approx(0.0025) and result.phases["filter"] == pytest.approx(0.0015)
    assert result.stats["wall_ms"] == 450.5
    monkeypatch.setenv("FAKE_COUNT", "timeout")
    assert engine.match(query, timeout_s=5.0).status is Status.TIMEOUT
