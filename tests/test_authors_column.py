"""The authors' binaries as an experiments column (experiments/papers/authors.py): found, skipped with a reason,
their run.sh output read back as a result, and the limit on the search they print, start-up apart (stand-in
binaries and run.sh here: the real ones need a CUDA toolkit)."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from common import create_engine
from common.engine import registry
from common.engine.result import Status
from common.graph.generate import power_law_labels, query_set, rmat
from experiments.papers.authors import GMatchAuthors, authors_configs, authors_reason, probe_query

ROOT = Path(__file__).resolve().parents[1]

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
    (config,) = authors_configs("gmatch-authors", "gMatch (authors)")   # a column everywhere, run where built
    assert config.optional and config.engine == "gmatch-authors"


def test_the_binarys_count_and_its_own_times_become_the_result(anchors, monkeypatch):
    assert authors_reason("gmatch-authors") is None
    assert [(c.label, c.optional) for c in authors_configs("gmatch-authors", "gMatch (authors)")] == \
        [("gMatch (authors)", True)]
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


# ------------------------------------------------------------------ the limit is the search's
STAND_IN_BINARY = """#!/usr/bin/env bash
# gMatch's output (main.cu, join_bfs_dfs.cu) after $FAKE_STARTUP_S of start-up; the search of a query
# of more than two vertices takes $FAKE_SEARCH_S ('forever': never ends); the one-edge probe's none.
while [ $# -gt 0 ]; do [ "$1" = -q ] && q=$2; shift; done
sleep "$FAKE_STARTUP_S"
read -r _ nv _ < "$q"
search=0; [ "$nv" -gt 2 ] && search=$FAKE_SEARCH_S
[ "$search" = forever ] && exec sleep 600
[ "$search" = crash ] && { echo "an illegal memory access was encountered" >&2; exit 1; }
echo "# Preparation, time (ms): 20(host), 0(kernel)"
sleep "$search"
ms=$(awk -v s="$search" 'BEGIN { printf "%d", s * 1000 }')
echo "# Processing, time (ms): $ms(host), $ms(kernel)"
printf '\\033[41;37m\\nResult: %s\\n\\033[0m\\n' "${FAKE_COUNT:-1}"
echo "# Subgraph Matching Finished, time (ms): $((ms + 20))(host), 0(kernel)"
"""

STAND_IN_RUN_SH = r"""#!/usr/bin/env bash
# the anchors' run.sh in brief: ENGINE DATA QUERY_DIR EXPECTED OUT.csv TIMEOUT_S, gMatch's output only
q=$(ls "$3"/* | head -n 1); mkdir -p "$LOGDIR"; log=$LOGDIR/q.log
t0=$(date +%s%N)
timeout -k 1 "$6" "$GMATCH_BIN" -d "$2" -q "$q" > "$log" 2>&1 < /dev/null; rc=$?
wall=$(( ($(date +%s%N) - t0) / 1000000 ))
num() { sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' "$log" | sed -nE "s/$1/\1/p" | tail -n 1; }
count=$(num '^Result: ([0-9]+)$')
pre=$(num '^# Preparation, time \(ms\): ([0-9]+)\(host\).*$')
join=$(num '^# Processing, time \(ms\): ([0-9]+)\(host\).*$')
case $rc in 124|137) correct=timeout;; 0) correct=noexp;; *) correct=error;; esac
echo "engine,dataset,query,count,expected,correct,rc,wall_ms,pre_ms,join_ms" > "$5"
echo "$1,data,q,$count,,$correct,$rc,$wall,$pre,$join" >> "$5"
"""

ANCHORS_RUN_SH = ROOT / "experiments" / "anchors" / "run.sh"
"""The anchors' own run.sh (make authors copies it to .anchors)."""


@pytest.fixture(params=["stand-in run.sh", "anchors' run.sh"])
def slow_starter(request, tmp_path, monkeypatch):
    """The gMatch column over a stand-in binary that takes 1 s to start, through a stand-in
    run.sh and, where the checkout has it, the anchors' own."""
    folder = tmp_path / "anchors"
    folder.mkdir()
    if request.param == "stand-in run.sh":
        (folder / "run.sh").write_text(STAND_IN_RUN_SH)
    elif ANCHORS_RUN_SH is not None:
        shutil.copy(ANCHORS_RUN_SH, folder / "run.sh")
    else:
        pytest.skip("the anchors' run.sh is not in this checkout")
    stand_in = tmp_path / "SubgraphMatching"
    stand_in.write_text(STAND_IN_BINARY)
    stand_in.chmod(0o755)
    monkeypatch.setenv("GPUSM_ANCHORS", str(folder))
    monkeypatch.setenv("GMATCH_BIN", str(stand_in))
    monkeypatch.setenv("FAKE_STARTUP_S", "1.0")
    monkeypatch.setitem(registry._REGISTRY, "gmatch-authors",
                        f"{GMatchAuthors.__module__}:{GMatchAuthors.__qualname__}")
    data = rmat(60, 200, seed=2, labels=power_law_labels(60, 3, 1.0, seed=2), name="tiny")
    query = query_set(data, 1, 4, seed=5).queries[0]
    return create_engine("gmatch-authors").prepare(data), query


def test_start_up_is_not_counted_against_the_limit(slow_starter, monkeypatch):
    engine, query = slow_starter
    monkeypatch.setenv("FAKE_SEARCH_S", "0.1")
    monkeypatch.setenv("FAKE_COUNT", "7")
    result = engine.match(query, timeout_s=0.5)
    assert (result.status, result.count) == (Status.OK, 7), result.reason
    assert result.phases["enumerate"] == pytest.approx(0.1)
    assert result.stats["wall_ms"] > 1000 + 100
    assert 900 < result.stats["startup_ms"] < result.stats["wall_ms"] - 100
    assert result.stats["process_limit_s"] >= 0.5 + engine.allowance_s()
    assert engine.allowance_s() >= 0.9                                     # measured on the probe


def test_a_search_past_the_limit_is_a_timeout_with_its_printed_time(slow_starter, monkeypatch):
    engine, query = slow_starter
    monkeypatch.setenv("FAKE_SEARCH_S", "0.8")
    result = engine.match(query, timeout_s=0.5)
    assert result.status is Status.TIMEOUT and "search took 0.800 s" in result.reason
    assert result.phases["enumerate"] == pytest.approx(0.8)
    assert result.stats["deadline_overrun_s"] == pytest.approx(0.3)


def test_a_search_that_does_not_end_is_killed_at_the_limit_plus_the_allowance(slow_starter, monkeypatch):
    engine, query = slow_starter
    monkeypatch.setenv("FAKE_SEARCH_S", "forever")
    started = time.perf_counter()
    result = engine.match(query, timeout_s=0.5)
    assert result.status is Status.TIMEOUT and "killed" in result.reason
    limit = result.stats["process_limit_s"]
    assert 0.5 + engine.allowance_s() <= limit < 0.5 + 4 * engine.allowance_s() + 2
    assert time.perf_counter() - started < limit + 5
    assert "deadline_overrun_s" not in result.stats and "startup_ms" not in result.stats


def test_the_start_up_probe_is_one_edge_of_the_rarest_label_pair():
    data = rmat(60, 200, seed=2, labels=power_law_labels(60, 3, 1.0, seed=2), name="tiny")
    probe = probe_query(data)
    src, dst, _ = data.edges()
    pairs = Counter(tuple(sorted(p)) for p in zip(data.labels[src].tolist(), data.labels[dst].tolist()))
    assert (probe.num_vertices, probe.num_edges) == (2, 1)
    assert pairs[tuple(sorted(probe.labels.tolist()))] == min(pairs.values())


def test_without_a_probe_the_first_printed_search_measures_the_allowance(slow_starter, monkeypatch):
    engine, query = slow_starter
    monkeypatch.setattr("experiments.papers.authors.probe_query", lambda data: None)
    monkeypatch.setenv("FAKE_STARTUP_S", "0.2")
    monkeypatch.setenv("FAKE_SEARCH_S", "0.1")
    assert engine.allowance_s() == 5.0                                     # nothing measured yet
    assert engine.match(query, timeout_s=0.5).status is Status.OK
    assert 0.2 <= engine.allowance_s() < 5.0


def test_a_binary_that_crashes_is_an_error_not_unsupported(slow_starter, monkeypatch):
    engine, query = slow_starter
    engine.allowance_s()                                     # the probe (one edge) does not crash
    monkeypatch.setenv("FAKE_SEARCH_S", "crash")
    result = engine.match(query, timeout_s=0.5)
    assert result.status is Status.ERROR and "no count" in result.reason, result
    assert result.reason.endswith(": an illegal memory access was encountered")       # the log's line
