"""The Dask path (common/distributed.py) on a LocalCluster of two worker processes:
query sets give the local run's results in query order and prepare once per worker; split runs
add up to the whole count (cpu on HPRD / yeast / GitHub, gmatch and egsm on tiny graphs in the
simulator) with ``limit`` and ``timeout_s`` holding for the whole; a worker killed mid-run still
gives every result exactly once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time

import numpy as np
import pytest

import common
from _extras import requires
from _paths import DATA
from common.distributed import match_many, match_split, submit_many, worker_addresses
from common.engine.result import Status
from common.graph.generate import random_walk_query, rmat, uniform_labels

requires("distributed")            # the Dask extra: every test here runs a LocalCluster
import distributed  # noqa: E402

pytestmark = pytest.mark.slow       # a Dask LocalCluster of worker processes

#: gMatch launch shapes that keep the simulator fast (as tests/test_gmatch.py)
GMATCH = dict(seed_pool=8, blocks=2, warps_per_block=2, probe_s=0)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, worker_dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def tiny(tiny12):
    data = tiny12
    queries = [random_walk_query(data, k, seed=s, name=f"walk{k}-{s}") for k, s in ((3, 1), (4, 2), (3, 5))]
    return data, queries


def hprd_queries(count: int) -> list:
    return [DATA / "hprd" / "queries" / f"query_dense_16_{i}.graph" for i in range(1, count + 1)]


def rows(embeddings) -> list[tuple]:
    return sorted(map(tuple, np.asarray(embeddings).tolist()))


def same_results(remote, local):
    assert [r.query for r in remote] == [r.query for r in local]
    assert [(r.count, r.status, r.reason) for r in remote] == [(r.count, r.status, r.reason) for r in local]
    for a, b in zip(remote, local):
        assert (a.embeddings is None) == (b.embeddings is None)
        if a.embeddings is not None:
            assert rows(a.embeddings) == rows(b.embeddings)


def test_query_set_equals_local_run_and_prepares_once_per_worker(client):
    data = DATA / "hprd" / "HPRD.graph"
    queries = hprd_queries(20)
    local = common.match_many(data, queries, "cpu", collect=True)
    remote = common.match_many(data, queries, "cpu", collect=True, client=client)
    same_results(remote, local)
    workers = worker_addresses(client)
    assert {r.stats["dask_worker"] for r in remote} <= workers
    ran = sorted({r.stats["dask_worker"] for r in remote})
    cold = sorted(r.stats["dask_worker"] for r in remote if not r.stats["dask_warm"])
    assert cold == ran                             # exactly one prepare per worker that ran a query
    again = match_many(data, queries[:6], "cpu", client=client)
    assert all(r.stats["dask_warm"] for r in again)  # the engines stayed warm across calls
    assert [r.count for r in again] == [r.count for r in local[:6]]
    assert all(set(r.to_row()) >= {"dask_worker", "dask_gpu", "count", "status"} for r in again)


def test_query_set_from_a_path_every_worker_reads(client):
    data = DATA / "yeast" / "yeast.graph"
    queries = sorted((DATA / "yeast" / "queries").glob("query_dense_4_*.graph"))[:6]
    local = common.match_many(data, queries, "cpu", limit=100)
    remote = match_many(str(data), queries, "cpu", client=client, limit=100, data_on_workers=True)
    same_results(remote, local)


@pytest.mark.parametrize("engine,options", [("gmatch", GMATCH), ("egsm", {})])
def test_query_set_gpu_engines_equal_local_run(client, tiny, engine, options):
    data, queries = tiny
    local = common.match_many(data, queries, engine, collect=True, **options)
    remote = common.match_many(data, queries, engine, collect=True, client=client, **options)
    same_results(remote, local)
    # a LocalCluster's workers inherit this process's CUDA_VISIBLE_DEVICES (its first entry is kept)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]
    assert all(r.stats["dask_gpu"] == visible for r in remote)


@pytest.mark.parametrize("folder,data_file,names", [
    ("hprd", "HPRD.graph", {"query_dense_16_2": 80, "query_dense_16_6": 132}),
    ("yeast", "yeast.graph", {"query_dense_4_1": 720, "query_dense_4_2": 296}),
    ("gmatch_test", "data.graph", {"Q_0": 6267, "Q_2": 285836}),
])
def test_split_counts_add_up_cpu(client, folder, data_file, names):
    data = common.load_graph(DATA / folder / data_file)
    for name, count in names.items():
        query = DATA / folder / "queries" / f"{name}.graph"
        result = match_split(data, query, "cpu", client, parts=6)
        assert result.status is Status.OK and result.count == count
        assert sum(result.stats["part_counts"]) == count
        assert result.stats["split_parts_finished"] == result.stats["split_parts"] >= 1
        ranges = sorted({tuple(r) for r in result.stats["split_ranges"]})
        assert ranges[0][0] == 0 and ranges[-1][1] == data.num_vertices
        assert all(a[1] == b[0] for a, b in zip(ranges[:-1], ranges[1:]))
    if folder == "hprd":                                  # embeddings concatenate to the whole set
        whole = common.match(data, query, "cpu", collect=True)
        split = match_split(data, query, "cpu", client, collect=True)
        assert split.stats["split_parts"] > 2                # default: 4 ranges per worker thread
        assert rows(split.embeddings) == rows(whole.embeddings)


@pytest.mark.parametrize("engine,options", [("cpu", {}), ("gmatch", GMATCH)])
def test_split_cuts_a_hub_root_by_its_branch_vertex(client, engine, options, hub200_unlabelled):
    """A hub holding most of the work is one root range cut into branch parts; the parts'
    counts and embeddings are the whole query's."""
    data = hub200_unlabelled
    query = common.Graph.from_edges(4, [0, 1, 2, 0], [1, 2, 0, 3], labels=np.zeros(4, np.int32), name="tailed")
    whole = common.match(data, query, "cpu", collect=True)
    split = match_split(data, query, engine, client, parts=6, collect=True, **options)
    assert split.status is Status.OK and split.count == whole.count > 0
    assert rows(split.embeddings) == rows(whole.embeddings)
    cut = [(r, b) for r, b in zip(split.stats["split_ranges"], split.stats["split_branch_parts"]) if b]
    assert len(cut) >= 2 and len({tuple(r) for r, _ in cut}) == 1 and cut[0][0][0] <= 0 < cut[0][0][1]
    m = cut[0][1][0][1]                   # branch classes j of m, a class maybe cut again (k of m2)
    for j in range(m):
        levels = sorted(b[1:] for _, b in cut if b[0] == [j, m])
        assert levels == [[]] or levels == [[[k, len(levels)]] for k in range(len(levels))]


@pytest.mark.parametrize("engine,options", [("gmatch", GMATCH), ("egsm", {})])
def test_split_counts_add_up_gpu_engines(client, tiny, engine, options):
    data, queries = tiny
    query = queries[1]
    whole = common.match(data, query, "cpu", collect=True)
    split = match_split(data, query, engine, client, parts=3, collect=True, **options)
    assert split.status is Status.OK and split.count == whole.count > 0
    assert rows(split.embeddings) == rows(whole.embeddings)


def test_split_refuses_a_root_range_or_branch_part_of_its_own(client, tiny):
    data, queries = tiny
    for option in (dict(root_range=(0, 4)), dict(branch_part=(0, 2))):
        with pytest.raises(ValueError, match=next(iter(option))):
            match_split(data, queries[0], "cpu", client, **option)


def test_split_limit_and_timeout_hold_for_the_whole(client):
    data = common.load_graph(DATA / "gmatch_test" / "data.graph")
    query = common.load_graph(DATA / "gmatch_test" / "queries" / "Q_2.graph")
    limited = match_split(data, query, "cpu", client, parts=8, limit=1000, collect=True)
    assert limited.status is Status.LIMIT and limited.count == 1000
    assert limited.embeddings.shape == (1000, query.num_vertices)
    assert len(set(map(tuple, limited.embeddings.tolist()))) == 1000
    src, dst, _ = data.edges()
    edges = set(zip(src.tolist(), dst.tolist())) | set(zip(dst.tolist(), src.tolist()))
    qs, qd, _ = query.edges()
    assert all((row[a], row[b]) in edges for row in limited.embeddings.tolist() for a, b in zip(qs, qd))
    # chunk_steps=1: a deadline check after every search step, so the parts stop at the deadline
    timed = match_split(data, query, "cpu", client, parts=4, timeout_s=0.05, chunk_steps=1)
    assert timed.status is Status.TIMEOUT and 0 <= timed.count < 285836
    assert timed.reason


def test_killed_worker_costs_a_retry_not_a_result(client):
    # nine tasks of ~0.3-1 s on the cpu reference (the same on a GPU machine as in the simulator)
    data = common.load_graph(DATA / "yeast" / "yeast.graph")
    queries = [common.load_graph(DATA / "yeast" / "queries" / f"query_dense_8_{i}.graph")
               for i in (30, 67, 81)] * 3
    expected = [common.match(data, q, "cpu").count for q in queries]
    pids = client.run(os.getpid)
    victim = sorted(pids)[-1]
    futures = submit_many(data, queries, "cpu", client=client)
    running = None
    stop = time.time() + 120
    while running is None and time.time() < stop:
        running = next(iter(client.call_stack().get(victim, {})), None)
        time.sleep(0.02)
    assert running is not None, "no task ran on the chosen worker"
    os.kill(pids[victim], signal.SIGKILL)
    results = client.gather(futures)
    assert [r.query for r in results] == [q.name for q in queries]
    assert [r.count for r in results] == expected
    assert all(r.status is Status.OK for r in results)
    rerun = results[[f.key for f in futures].index(running)]
    assert rerun.stats["dask_pid"] != pids[victim]          # it ran again on a living worker
    client.wait_for_workers(2, timeout=120)                  # the nanny brings the worker back


def test_cli_match_on_a_scheduler_address(client, capsys):
    from common.cli.main import main

    folder = DATA / "hprd" / "queries"
    code = main(["match", str(DATA / "hprd" / "HPRD.graph"), str(folder), "--dask",
                 client.scheduler.address, "--format", "json", "--quiet"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0
    local = {r.query: r.count for r in common.match_many(DATA / "hprd" / "HPRD.graph",
                                                         sorted(folder.glob("*.graph")), "cpu")}
    assert {row["query"]: row["count"] for row in rows} == local
    assert {row["dask_worker"] for row in rows} <= worker_addresses(client)
    assert all(row["backend"] == "cpu" for row in rows)


def test_cli_local_cuda_without_dask_cuda_says_so(monkeypatch, capsys):
    from common.cli.main import main

    monkeypatch.setitem(sys.modules, "dask_cuda", None)      # import dask_cuda fails
    code = main(["match", str(DATA / "hprd" / "HPRD.graph"),
                 str(DATA / "hprd" / "queries" / "query_dense_16_1.graph"), "--dask", "local-cuda"])
    assert code == 2 and "dask-cuda" in capsys.readouterr().err


@pytest.mark.parametrize("groups", [1, 3, 50])
def test_query_groups_keep_per_query_meaning(client, groups):
    """Queries go out in groups (one ``match_batch`` task each, query i in group i % groups):
    whatever the grouping, each query keeps its own limit, status and embeddings, in query order."""
    data = rmat(24, 60, seed=5, labels=uniform_labels(24, 2, seed=6), name="groups")
    disconnected = common.Graph.from_edges(4, [0, 2], [1, 3], labels=[0, 0, 1, 1], name="disconnected")
    walks = [random_walk_query(data, 3 + s % 2, seed=s, name=f"walk-{s}") for s in range(8)]
    queries = [*walks[:4], disconnected, *walks[4:]]
    local = common.match_many(data, queries, "gmatch", collect=True, **GMATCH)
    remote = match_many(data, queries, "gmatch", client=client, collect=True, groups=groups, **GMATCH)
    same_results(remote, local)
    limited = match_many(data, queries, "gmatch", client=client, limit=3, groups=groups, **GMATCH)
    assert [(r.count, r.status) for r in limited] == [
        (min(3, r.count), r.status if r.count < 3 else Status.LIMIT) for r in local]
    assert {r.status for r in limited} >= {Status.LIMIT, Status.UNSUPPORTED}
    tasks = {(r.stats["dask_worker"], r.stats["dask_task_s"]) for r in remote}
    assert len(tasks) == min(groups, len(queries))


def test_query_groups_must_be_positive(client):
    with pytest.raises(ValueError, match="groups must be at least 1"):
        match_many(DATA / "hprd" / "HPRD.graph", hprd_queries(2), "cpu", client=client, groups=0)


def _yeast(count: int):
    data = common.load_graph(DATA / "yeast" / "yeast.graph")
    queries = [common.load_graph(DATA / "yeast" / "queries" / f"query_dense_8_{i}.graph")
               for i in range(1, count + 1)]
    return data, queries


def _kill_all_workers(client) -> set:
    """SIGKILL every worker process at once; their pids."""
    pids = client.run(os.getpid)
    for pid in pids.values():
        os.kill(pid, signal.SIGKILL)
    return set(pids.values())


def test_every_worker_killed_at_once_keeps_the_answers_and_reruns_the_rest():
    """The scattered data graph dies with the workers: answers already in are kept, the graph is
    scattered to the restarted workers and the lost queries run there. The test has a cluster of
    its own: a nanny may give up on a worker killed while it restarts, and the module's cluster
    must not depend on it."""
    data, queries = _yeast(12)
    expected = [common.match(data, q, "cpu").count for q in queries]
    killed, before = set(), {}
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, worker_dashboard_address=None)

    def answered(i, result):
        if not killed:
            before[i] = result.stats["dask_pid"]
            if len(before) == 3:
                killed.update(_kill_all_workers(client))

    try:
        with distributed.Client(cluster) as client:
            results = match_many(data, queries, "cpu", client=client, groups=len(queries),
                                 on_result=answered)
    finally:
        with contextlib.suppress(KeyError):       # distributed's status watcher, on workers already gone
            cluster.close(timeout=10)
    assert killed and [r.count for r in results] == expected
    assert all(results[i].stats["dask_pid"] == pid for i, pid in before.items())     # kept, not rerun
    assert {r.stats["dask_pid"] for r in results} - killed                          # the rest reran


def test_a_cluster_that_does_not_come_back_names_the_unanswered_queries(monkeypatch):
    from common import distributed as on_dask

    monkeypatch.setattr(on_dask, "WORKER_WAIT_S", 3.0)
    data, queries = _yeast(8)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, worker_dashboard_address=None)
    answered = {}

    def kill_after_two(i, result):
        answered[i] = result
        if len(answered) == 2:
            for nanny in cluster.workers.values():
                nanny.close_gracefully()           # the killed workers are not restarted
            _kill_all_workers(client)

    try:
        with distributed.Client(cluster) as client:
            with pytest.raises(on_dask.LostQueries, match="lost 6 of 8 queries") as lost:
                match_many(data, queries, "cpu", client=client, groups=len(queries),
                           on_result=kill_after_two)
    finally:
        with contextlib.suppress(KeyError):       # distributed's status watcher, on workers already gone
            cluster.close(timeout=10)
    results = lost.value.results
    assert [i for i, r in enumerate(results) if r is not None] == sorted(answered)
    assert lost.value.unanswered == [q.name for i, q in enumerate(queries) if i not in answered]
    assert all(name in str(lost.value) for name in lost.value.unanswered)
    assert all(results[i].count == common.match(data, queries[i], "cpu").count for i in answered)


def test_cli_prints_the_answered_rows_and_names_the_lost_queries(monkeypatch, capsys, tmp_path):
    import shutil

    from common.cli import main as cli
    from common.distributed import LostQueries

    data, queries = _yeast(3)
    for i in (1, 2, 3):
        shutil.copy(DATA / "yeast" / "queries" / f"query_dense_8_{i}.graph", tmp_path)
    first = common.match(data, queries[0], "cpu")

    def lose(args, data, queries, options, kwargs, progress):
        assert [q.name for q in queries] == [q.name for q in _yeast(3)[1]]
        raise LostQueries([first, None, None], [q.name for q in queries[1:]], "their workers died")

    monkeypatch.setattr(cli, "_match_on_dask", lose)
    code = cli.main(["match", str(DATA / "yeast" / "yeast.graph"), str(tmp_path), "--dask", "local",
                     "--format", "json", "--quiet"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_LOST
    assert [(row["query"], row["count"]) for row in json.loads(out)] == [(first.query, first.count)]
    assert "lost 2 of 3 queries" in err and queries[1].name in err and queries[2].name in err
    assert "Traceback" not in err
