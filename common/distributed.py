"""Query sets and split queries on a Dask cluster (needs the ``dask`` extra).

    rs = match_many(data, queries, "gmatch", client=client)      # in query order
    r = match_split(data, query, "gmatch", client)               # one query over root ranges

* :func:`match_many` runs the queries in groups, one task per group answered by the worker's
  ``match_batch`` (:func:`submit_many`: one task per query). The data graph goes to the workers
  once (scattered, or with ``data_on_workers=True`` a path each worker reads); each worker keeps
  an engine per (graph, engine, options) in a small cache (:data:`CACHE_SIZE`). Results carry
  ``stats["dask_worker"]``, ``"dask_gpu"``, ``"dask_pid"``, ``"dask_warm"`` and ``"dask_task_s"``.
* :func:`match_split` runs one query as parts (:class:`~common.engine.part.Part`, an engine that
  declares ``supports_parts``), each a task: ranges of data vertices for the engine's root
  (``root_range``), cut by estimated work (:func:`common.graph.roots.plan_split`) and submitted
  heaviest first; on an engine that ``supports_branch_parts``, a root candidate heavier than a
  share (a hub) is cut further by the image of the engine's branch vertex, and a branch class
  holding a hub of its own by that of its third vertex (``branch_part``). Counts add up
  exactly, embeddings concatenate in part order, the status is the worst part's, and ``limit``
  and ``timeout_s`` hold for the whole (the deadline is the client's wall clock, read on the
  workers: their clocks must agree).
* A worker that dies loses its tasks; the scheduler runs them again elsewhere, so a lost worker
  costs time, never a wrong or missing count. :func:`match_many` fetches each answer as its task
  ends, so answers survive a cluster that dies later; when every worker dies at once (the
  scattered data graph goes with them and the tasks are cancelled), it waits for workers to come
  back, scatters the graph to them again and runs the lost tasks again (:data:`RESUBMITS` times);
  with no worker back in :data:`WORKER_WAIT_S` it raises :class:`LostQueries`, which holds the
  answers and names the unanswered queries.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import threading
import time
from collections import OrderedDict

import numpy as np

from .engine.part import WHOLE, Part
from .engine.registry import available_engines, create_engine
from .engine.result import MatchResult, Status
from .graph.interop import as_graph
from .graph.model import Graph

#: prepared engines a worker process keeps (one per graph, engine and options)
CACHE_SIZE = 4
#: worst first: the status of a split run is the worst of its parts'
_SEVERITY = {Status.OK: 0, Status.LIMIT: 1, Status.TIMEOUT: 2, Status.OVERFLOW: 3, Status.OOM: 4,
             Status.UNSUPPORTED: 5, Status.ERROR: 6}
#: seconds the client waits past a split run's deadline for parts still running (they stop
#: themselves at the deadline; this covers the transfer of their results)
DEADLINE_GRACE_S = 5.0
#: times :func:`match_many` runs again the tasks the cluster lost (every worker gone)
RESUBMITS = 3
#: seconds :func:`match_many` waits for a worker to come back before it gives up on lost tasks
WORKER_WAIT_S = 60.0


class LostQueries(RuntimeError):
    """The cluster lost queries and could not run them again (no worker came back, or the workers
    died each time). ``results``: every query's result in query order, ``None`` for a lost one;
    ``unanswered``: the lost queries' names."""

    def __init__(self, results: list, unanswered: list[str], why: str):
        self.results = results
        self.unanswered = unanswered
        shown = ", ".join(unanswered[:20]) + (f" and {len(unanswered) - 20} more" if len(unanswered) > 20 else "")
        super().__init__(f"the Dask cluster lost {len(unanswered)} of {len(results)} queries ({why}); "
                         f"the other {len(results) - len(unanswered)} are answered; unanswered: {shown}")

_cache: OrderedDict = OrderedDict()        # worker side: key -> [lock, engine]
_graphs: dict = {}                        # worker side: path token -> Graph
_cache_lock = threading.Lock()
_scattered: dict = {}                     # client side: (client id, token) -> graph future


def _require_distributed():
    try:
        import distributed
    except ImportError as exc:
        raise ImportError("the Dask path needs dask and distributed: pip install 'gpusm[dask]'") from exc
    return distributed


# ---------------------------------------------------------------------- worker side
def graph_token(graph: Graph) -> str:
    """A content hash of a data graph (the worker-side cache key; equal graphs share engines)."""
    h = hashlib.blake2b(digest_size=16)
    for array in (graph.offsets, graph.neighbors, graph.labels, graph.edge_labels):
        if array is not None:
            array = np.ascontiguousarray(array)
            h.update(str(array.dtype).encode() + str(array.shape).encode())
            h.update(array.tobytes())
    h.update(repr((graph.directed, graph.name)).encode())
    return h.hexdigest()


def _path_token(path: str) -> str:
    stat = os.stat(path)
    return f"path:{os.path.abspath(path)}:{stat.st_size}:{stat.st_mtime_ns}"


def _engine_entry(graph, token: str, engine: str, options: dict):
    """The worker's prepared engine for (graph, engine, options): (lock, engine, warm)."""
    key = (token, engine, repr(sorted(options.items())))
    with _cache_lock:
        entry = _cache.get(key)
        warm = entry is not None
        if warm:
            _cache.move_to_end(key)
        else:
            entry = _cache[key] = [threading.Lock(), None]
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
            entry[0].acquire()            # prepared below, outside the cache lock
    if warm:
        with entry[0]:                    # another task may still be preparing it
            prepared = entry[1]
        if prepared is None:
            raise RuntimeError(f"preparing {engine} failed in another task on this worker")
        return entry[0], prepared, True
    try:
        if isinstance(graph, str):        # a path every worker reads: loaded once per process
            data = _graphs.get(token)
            if data is None:
                from .graph.io import load_graph
                data = _graphs[token] = load_graph(graph)
        else:
            data = graph
        entry[1] = create_engine(engine, **options).prepare(data)
    except BaseException:
        with _cache_lock:
            _cache.pop(key, None)
        raise
    finally:
        entry[0].release()
    return entry[0], entry[1], False


def _worker_address() -> str:
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return "local"


def worker_addresses(client) -> set[str]:
    """The addresses of the cluster's workers, asked of the workers themselves: the scheduler
    information a client caches can list none of them (its periodic refresh fetches totals only)."""
    return set(client.run(lambda: None))


def _run_query(graph, token: str, engine: str, options: dict, query: Graph, kwargs: dict,
               part: Part | None = None, deadline: float | None = None) -> MatchResult:
    """One task: match ``query`` on this worker's prepared engine, its ``part`` where given
    (``deadline``: epoch seconds)."""
    lock, prepared, warm = _engine_entry(graph, token, engine, options)
    kwargs = dict(kwargs)
    if deadline is not None:
        left = deadline - time.time()
        if left <= 0:
            result = MatchResult(engine, 0, Status.TIMEOUT, query=query.name,
                                 reason="the deadline passed before this part started")
            result.stats.update({"root_range": None, "branch_part": None, **(part or WHOLE).stats()})
            return _stamp(result, warm)
        kwargs["timeout_s"] = left
    with lock:                            # one query at a time on one prepared engine
        began = time.perf_counter()
        result = prepared.match(query, part=part, **kwargs)
    result.stats["dask_task_s"] = time.perf_counter() - began
    return _stamp(result, warm)


def _run_batch(graph, token: str, engine: str, options: dict, queries: list, kwargs: dict) -> list:
    """One task: a group of queries through the worker's prepared engine's ``match_batch`` (each
    query keeps its own ``limit``, ``collect`` and ``timeout_s``)."""
    lock, prepared, warm = _engine_entry(graph, token, engine, options)
    with lock:
        began = time.perf_counter()
        results = prepared.match_batch(queries, **kwargs)
    took = time.perf_counter() - began
    for i, result in enumerate(results):
        result.stats["dask_task_s"] = took
        _stamp(result, warm or i > 0)     # the prepare is counted once, on the group's first query
    return results


def _stamp(result: MatchResult, warm: bool) -> MatchResult:
    from .engine.registry import engine_class

    backend = "cpu"
    if result.engine in available_engines() and engine_class(result.engine).uses_device:
        from .gpu.runtime import backend_label
        backend = backend_label()
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    result.stats.update(dask_worker=_worker_address(), dask_gpu=gpus.split(",")[0] if gpus else "",
                        dask_pid=os.getpid(), dask_warm=warm, dask_backend=backend)
    return result


def _split_plan(graph, token: str, engine: str, options: dict, query: Graph, parts: int,
                homomorphic: bool):
    """On a worker: the root query vertex, the parts (:class:`~common.engine.part.Part`;
    :func:`~common.graph.roots.plan_split`) and each part's estimated work (``None`` when the
    engine cannot take the query: the caller runs it whole)."""
    from .graph.roots import plan_split

    lock, prepared, _ = _engine_entry(graph, token, engine, options)
    data = prepared.data
    if prepared.unsupported_reason(query, homomorphic=homomorphic) or query.directed != data.directed:
        return None
    with lock:
        root = prepared.root_vertex(query, homomorphic=homomorphic)
        branch = prepared.branch_vertices(query, homomorphic=homomorphic)[0] if prepared.supports_branch_parts else None
    tasks, work = plan_split(data, query, root, branch, parts, homomorphic)
    return int(root), [Part(*task) for task in tasks], work


# ---------------------------------------------------------------------- client side
def _ship(client, data, data_on_workers: bool, again: bool = False):
    """(what the tasks receive for the data graph, its token): a path, or a broadcast future
    (``again``: scattered anew, to the workers there are now)."""
    if data_on_workers:
        if not isinstance(data, (str, os.PathLike)):
            raise ValueError("data_on_workers=True needs the data graph as a path every worker can read")
        path = str(data)
        return path, _path_token(path)
    token = graph_token(data)
    key = (client.id, token)
    future = _scattered.get(key)
    if again or future is None or future.status != "finished":
        for old in [k for k in _scattered if k[0] == client.id]:
            del _scattered[old]           # keep one graph per client on the cluster
        future = client.scatter(data, broadcast=True, hash=False)
        _scattered[key] = future
    return future, token


def _graphs_for(data, queries, vertex_label, edge_label, data_on_workers):
    """The data graph (None when the workers read its path) and the query Graphs."""
    if data_on_workers:
        if not isinstance(data, (str, os.PathLike)):
            raise ValueError("data_on_workers=True needs the data graph as a path every worker can read")
        from .graph.interop import is_networkx_graph
        if any(is_networkx_graph(q) for q in queries):
            raise ValueError("networkx queries take the data graph's label codes: "
                             "pass the data graph itself, not data_on_workers=True")
        return None, [as_graph(q) for q in queries]
    graph = as_graph(data, vertex_label, edge_label)
    return graph, [as_graph(q, vertex_label, edge_label, like=graph) for q in queries]


def _submission(client, data, queries, engine, vertex_label, edge_label, data_on_workers,
                engine_options):
    """What every query-set submission checks and ships first: (shipped data, its token, the
    query Graphs, ``ship(again)`` that ships it again); an unknown engine or option fails here,
    before any task is sent."""
    _require_distributed()
    create_engine(engine, **engine_options)
    graph, queries = _graphs_for(data, list(queries), vertex_label, edge_label, data_on_workers)
    source = data if data_on_workers else graph
    shipped, token = _ship(client, source, data_on_workers)
    return shipped, token, queries, lambda again: _ship(client, source, data_on_workers, again)[0]


def _lost(exc: BaseException) -> bool:
    """Whether a task failed through the cluster (cancelled with the data it needed, its workers
    killed), not by an error of its own."""
    from distributed import KilledWorker

    return isinstance(exc, (concurrent.futures.CancelledError, asyncio.CancelledError, KilledWorker))


def _answer_all(client, count: int, submit, ship, on_done=None):
    """Every task's result, in task order: ``submit(i, shipped)`` is task ``i``'s future,
    ``ship(again)`` the data graph as tasks take it. Each result is fetched as its task ends (then
    ``on_done(i, result)``). Tasks the cluster loses run again once a worker is back, the graph
    shipped again, up to :data:`RESUBMITS` times; a task's own error is raised. Returns (results,
    the indexes of the tasks still lost, why they are)."""
    distributed = _require_distributed()
    results: list = [None] * count
    todo, why = list(range(count)), ""
    for attempt in range(RESUBMITS + 1):
        if attempt:
            try:
                client.wait_for_workers(1, timeout=WORKER_WAIT_S)
            except TimeoutError:
                why += f"; no worker came back within {WORKER_WAIT_S:g} s"
                break
        futures = {}
        shipped = ship(attempt > 0)
        for i in todo:
            futures[submit(i, shipped)] = i
        lost, pending = [], set(futures)
        try:
            for future in distributed.as_completed(list(futures)):
                pending.discard(future)
                i = futures[future]
                try:
                    results[i] = future.result()
                except Exception as exc:
                    if not _lost(exc):
                        raise
                    lost.append(i)
                    why = f"their workers died: {type(exc).__name__}"
                    continue
                finally:
                    future.release()      # the answer is here: the cluster may forget it
                if on_done is not None:
                    on_done(i, results[i])
        finally:
            for future in pending:        # after a task's own error
                future.cancel()
        todo = sorted(lost)
        if not todo:
            break
    else:
        why += f", in each of {RESUBMITS + 1} runs"
    return results, todo, why


def submit_many(data, queries, engine: str = "cpu", *, client, limit=None, collect=False,
                timeout_s=None, homomorphic=False, vertex_label="label", edge_label=None,
                data_on_workers: bool = False, **engine_options) -> list:
    """One future per query (in query order): results as each query finishes (the CLI's
    progress); gather them for the results."""
    shipped, token, queries, _ = _submission(client, data, queries, engine, vertex_label, edge_label,
                                             data_on_workers, engine_options)
    kwargs = dict(limit=limit, collect=collect, timeout_s=timeout_s, homomorphic=homomorphic)
    return [client.submit(_run_query, shipped, token, engine, engine_options, q, kwargs, pure=False,
                          key=f"gpusm-{engine}-{i}-{q.name}-{os.urandom(4).hex()}")
            for i, q in enumerate(queries)]


def match_many(data, queries, engine: str = "cpu", *, client, limit=None, collect=False,
               timeout_s=None, homomorphic=False, vertex_label="label", edge_label=None,
               data_on_workers: bool = False, groups: int | None = None, on_result=None,
               **engine_options) -> list[MatchResult]:
    """:func:`common.match_many` on a Dask cluster, results in query order.

    The queries go out in ``groups`` tasks (default :func:`default_parts`: four per worker
    thread), query ``i`` in group ``i % groups`` so that neighbouring heavy queries land in
    different tasks; each task answers its group through the worker's ``match_batch``, as a
    local :func:`common.match_many` does, so small queries share launches and one task's
    scheduling cost is paid per group, not per query. ``on_result(i, result)`` is called as
    query ``i`` is answered. Lost workers: module docstring (:class:`LostQueries`)."""
    groups = default_parts(client) if groups is None else int(groups)
    if groups < 1:
        raise ValueError(f"groups must be at least 1, got {groups}")
    _, token, queries, ship = _submission(client, data, queries, engine, vertex_label, edge_label,
                                          data_on_workers, engine_options)
    groups = min(groups, len(queries))
    kwargs = dict(limit=limit, collect=collect, timeout_s=timeout_s, homomorphic=homomorphic)
    members = [list(range(g, len(queries), groups)) for g in range(groups)]
    results: list = [None] * len(queries)

    def submit(g, shipped):
        return client.submit(_run_batch, shipped, token, engine, engine_options,
                             [queries[i] for i in members[g]], kwargs, pure=False,
                             key=f"gpusm-{engine}-group{g}-{os.urandom(4).hex()}")

    def answered(g, group_results):
        for i, result in zip(members[g], group_results):
            results[i] = result
            if on_result is not None:
                on_result(i, result)

    _, lost, why = _answer_all(client, len(members), submit, ship, answered)
    if lost:
        raise LostQueries(results, [queries[i].name for i in sorted(i for g in lost for i in members[g])], why)
    return results


def default_parts(client) -> int:
    """Four ranges per worker thread: enough for the scheduler to balance uneven ranges."""
    threads = sum(client.nthreads().values()) or 1
    return 4 * threads


def match_split(data, query, engine: str = "cpu", client=None, parts: int | None = None, *,
                limit=None, collect=False, timeout_s=None, homomorphic=False,
                vertex_label="label", edge_label=None, data_on_workers: bool = False,
                **engine_options) -> MatchResult:
    """One query split over the cluster by ranges of its root's data vertices and, below a hub
    root, by its branch vertex's (module docstring)."""
    distributed = _require_distributed()
    if client is None:
        raise ValueError("match_split needs a dask.distributed Client (client=...)")
    fixed = sorted({"root_range", "branch_part"} & set(engine_options))
    if fixed:
        raise ValueError(f"match_split chooses each part's root_range and branch_part itself; "
                         f"drop {', '.join(fixed)} from the engine options")
    start = time.time()
    deadline = None if timeout_s is None else start + timeout_s
    if not create_engine(engine, **engine_options).supports_parts:
        raise ValueError(f"engine {engine!r} does not answer parts of a query (it does not declare "
                         f"supports_parts): split runs need one that does")
    graph, (q,) = _graphs_for(data, [query], vertex_label, edge_label, data_on_workers)
    shipped, token = _ship(client, data if data_on_workers else graph, data_on_workers)
    parts = default_parts(client) if parts is None else int(parts)
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    plan = client.submit(_split_plan, shipped, token, engine, engine_options, q, parts,
                         bool(homomorphic), pure=False).result()
    kwargs = dict(limit=limit, collect=collect, homomorphic=homomorphic)
    if plan is None:                       # the engine cannot take the query: its own answer
        whole = client.submit(_run_query, shipped, token, engine, engine_options, q,
                              dict(kwargs, timeout_s=timeout_s), pure=False).result()
        whole.stats.update(split_parts=1)
        return whole
    root, tasks, work = plan
    futures = [None] * len(tasks)
    for rank, i in enumerate(np.argsort(-np.asarray(work), kind="stable")):    # heaviest first
        futures[i] = client.submit(_run_query, shipped, token, engine, engine_options, q, kwargs,
                                   part=tasks[i], deadline=deadline, priority=len(tasks) - rank, pure=False)
    index = {f.key: i for i, f in enumerate(futures)}
    done: dict[int, MatchResult] = {}
    pending = set(futures)
    total, timed_out_waiting = 0, False
    try:
        while pending:
            wait_s = None if deadline is None else max(0.0, deadline + DEADLINE_GRACE_S - time.time())
            try:
                finished, pending = distributed.wait(list(pending), timeout=wait_s,
                                                     return_when="FIRST_COMPLETED")
            except TimeoutError:
                timed_out_waiting = True
                break
            for future in finished:
                result = future.result()
                done[index[future.key]] = result
                total += result.count
            if limit is not None and total >= limit:
                break
    finally:
        for future in pending:            # past the limit or the deadline (or an error)
            future.cancel()
    return _combine(engine, q, tasks, root, done, limit, collect, timed_out_waiting,
                    time.time() - start)


def _combine(engine, query, tasks, root, done, limit, collect, timed_out_waiting, wall_s):
    """The whole query's result from the parts that finished."""
    parts = [done[i] for i in sorted(done)]
    count = sum(r.count for r in parts)
    statuses = [r.status for r in parts] or [Status.TIMEOUT]
    if timed_out_waiting or len(parts) < len(tasks):
        statuses.append(Status.TIMEOUT)
    if limit is not None and count >= limit:
        status, count = Status.LIMIT, int(limit)
    else:
        status = max(statuses, key=_SEVERITY.__getitem__)
    embeddings = None
    if collect:
        chunks = [r.embeddings for r in parts if r.embeddings is not None]
        embeddings = np.concatenate(chunks) if chunks else np.zeros((0, query.num_vertices), np.int32)
        if limit is not None:
            embeddings = embeddings[:limit]
    phases: dict[str, float] = {}
    for r in parts:
        for name, seconds in r.phases.items():
            phases[name] = phases.get(name, 0.0) + seconds
    reasons = sorted({r.reason for r in parts if r.reason and r.status is status})
    if status is Status.TIMEOUT and not reasons and len(parts) < len(tasks):
        reasons = [f"{len(tasks) - len(parts)} of {len(tasks)} parts did not finish by the deadline"]
    workers = sorted({str(r.stats.get("dask_worker")) for r in parts})
    stats = {"split_parts": len(tasks), "split_parts_finished": len(parts), "split_root": root,
             "split_ranges": [list(part.root_range) for part in tasks],
             "split_branch_parts": [part.stats().get("branch_part") for part in tasks], "split_wall_s": wall_s,
             "dask_worker": ",".join(workers),
             "part_counts": [r.count for r in parts], "part_workers": [r.stats.get("dask_worker") for r in parts],
             "part_seconds": [r.stats.get("dask_task_s", 0.0) for r in parts]}
    return MatchResult(engine, count, status, reason="; ".join(reasons), embeddings=embeddings,
                       phases=phases, peak_device_bytes=max((r.peak_device_bytes for r in parts), default=0),
                       stats=stats, query=query.name)


__all__ = ["match_many", "submit_many", "match_split", "graph_token", "default_parts", "CACHE_SIZE",
           "LostQueries", "RESUBMITS", "WORKER_WAIT_S"]
