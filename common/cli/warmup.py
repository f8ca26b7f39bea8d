"""``gpusm warmup``: compile the kernels of gpusm's GPU engines into the disk cache
(:mod:`common.gpu.kernel_cache`) before anyone waits on them.

Each GPU engine (each of its ``warmup_variants``, declared on the engine class) runs in its own fresh process, all in
parallel, over a small built-in workload chosen to take each engine's paths in seconds: a
labelled R-MAT graph with queries of 3 to 16 vertices (tens to millions of embeddings each;
counted one at a time and batched, collected, and with a limit), a small unlabelled graph with
the gMatch patterns, a hub of thousands of leaves, and gMatch with its candidate graph forced
on. Kernels that depend on a query's size are compiled per size class (gMatch's stack levels):
queries of more than 16 vertices, and engine options other than the defaults, compile on first
use. Every kernel the runs launch is compiled once for the GPU present and saved; later
processes (``gpusm match``, ``make demo``, the experiments harness, Dask workers) load them. Each
process reports how many kernels it compiled and loaded, and which kernels of the engine the
workload did not launch (those compile on first use). Under the simulator, which
compiles nothing, the command says so and stops.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def add_command(sub) -> None:
    """Add ``warmup`` to the ``gpusm`` subparsers."""
    w = sub.add_parser("warmup", help="compile the GPU engines' kernels into the disk cache "
                                      "(later processes load them instead of compiling)")
    w.add_argument("--engines", nargs="+", default=None, metavar="ENGINE",
                   help="engines to warm up (default: every GPU engine: gpusm engines lists them)")
    w.add_argument("--jobs", type=int, default=None,
                   help="processes at once (default: one per engine, at most the CPU count)")
    w.set_defaults(func=cmd_warmup)


def cmd_warmup(args) -> int:
    from ..gpu.cudasim import simulator_active
    from ..gpu.kernel_cache import cache_dir, cached_entries

    if simulator_active():
        print("gpusm warmup: kernels run in the CUDA simulator here (no GPU), which compiles nothing; "
              "nothing to warm up")
        print(f"kernel cache (used on a GPU): {cache_dir()}")
        return 0
    began = time.perf_counter()
    try:
        reports = warmup(args.engines, jobs=args.jobs)
    except ValueError as exc:
        print(f"gpusm warmup: {exc}", file=sys.stderr)
        return 2
    print(f"{'engine':<26} {'compiled':>8} {'loaded':>7} {'compile s':>10} {'wall s':>7}  not launched")
    failed = False
    for r in reports:
        if "error" in r:
            failed = True
            print(f"{r['engine']:<26} failed: {r['error']}")
            continue
        missing = ", ".join(r["not_launched"]) or "-"
        print(f"{r['engine']:<26} {r['kernels_compiled']:>8} {r['kernels_loaded']:>7} "
              f"{r['compile_seconds']:>10.1f} {r['wall_seconds']:>7.1f}  {missing}")
    print(f"kernel cache: {cache_dir()} ({cached_entries()} compiled kernels; NUMBA_CACHE_DIR moves it)")
    print(f"warmup took {time.perf_counter() - began:.1f} s")
    return 1 if failed else 0


def warmup(engines=None, jobs: int | None = None, child: str = "common.cli.warmup",
           child_args: tuple = (), kernels_first: tuple = ()) -> list[dict]:
    """Run :func:`warm_engine` for each engine in a fresh process (``jobs`` at once); one report
    per engine (see :func:`warm_engine`), or ``{"engine", "error"}`` for a process that failed.
    ``child`` is the module each process runs (``python -m CHILD ENGINE *child_args``, printing
    the report as its last line of JSON): another workload, such as the demo's, whose engines
    may include CPU engines (their ``numba.njit`` code compiles into Numba's cache too).
    ``kernels_first`` adds (engine, extra child arguments) processes whose host code runs
    interpreted (:data:`KERNELS_FIRST_ENV`): they reach an engine's kernels without first
    compiling its ``numba.njit`` host code, so the kernels compile while the engine's own
    process compiles that host code, and it loads them from the cache when it gets there."""
    from ..engine.registry import engine_class, gpu_engines

    own_workload = child == "common.cli.warmup"
    engines = list(gpu_engines() if engines is None else engines)
    unknown = [e for e in engines if e not in gpu_engines()] if own_workload else []
    if unknown:
        raise ValueError(f"not a GPU engine: {', '.join(unknown)} (choose from {', '.join(gpu_engines())})")
    if own_workload and not child_args:     # one process per engine variant (and run group)
        work = [(engine, (i, *group), None) for engine in engines
                for i in range(len(engine_class(engine).warmup_variants))
                for group in (((g,) for g in range(len(QUERY_SIZES) + 1))
                              if engine_class(engine).warmup_by_query_size else ((),))]
    else:
        work = [(engine, tuple(child_args), None) for engine in engines]
    work += [(engine, (*child_args, *extra), KERNELS_FIRST_ENV) for engine, extra in kernels_first]
    jobs = jobs or max(1, min(len(work), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda job: _warm_in_process(*job, child=child), work))


#: the environment of a kernels-first process (:func:`warmup`): Numba runs ``njit`` functions as
#: plain Python (CUDA kernels still compile), so the process spends no time compiling host code
KERNELS_FIRST_ENV = {"NUMBA_DISABLE_JIT": "1"}


def _warm_in_process(engine: str, child_args: tuple, env: dict | None, child: str) -> dict:
    command = [sys.executable, "-m", child, engine, *map(str, child_args)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=_repo_root(),
                          env=None if env is None else {**os.environ, **env})
    lines = done.stdout.strip().splitlines()
    kind = "" if env is None else " (kernels first)"
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"engine": engine + kind, "error": f"exit status {done.returncode}: {tail}"}
    report = json.loads(lines[-1])
    report["engine"] += kind
    return report


def _repo_root() -> str:
    """The folder holding the ``common`` package (common/cli/warmup.py is two levels below it)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


#: query sizes of the labelled runs (gMatch's stack levels 4, 8, 12 and 16)
QUERY_SIZES = (3, 5, 8, 10, 16)


def workload_groups():
    """The runs of :func:`workload` in groups that compile different kernel specialisations:
    one group per query size of :data:`QUERY_SIZES`, then one for the patterns and the hub."""
    from ..graph.generate import pattern, power_law_labels, query_set, rmat

    labelled = rmat(2048, 8192, seed=11, labels=power_law_labels(2048, 32, 1.0, seed=11), name="warmup-labelled")
    unlabelled = rmat(128, 512, seed=12, name="warmup-unlabelled")
    groups = []
    for size in QUERY_SIZES:
        queries = list(query_set(labelled, 2, size, seed=size, method="induced").queries)
        groups.append([(labelled, queries, {}), (labelled, queries[:1], {"collect": True}),
                       (labelled, queries[:1], {"limit": 10})])
    hub, triangle = hub_workload()
    groups.append([(unlabelled, [pattern(p) for p in ("P1", "P3", "P4", "P7")], {}),
                   (unlabelled, [pattern("P2")], {"collect": True}), (hub, [triangle], {})])
    return groups


#: leaves of :func:`hub_workload`'s hub: more than GSI's W1 (4096), so a join row has a whole block
HUB_LEAVES = 4200


def hub_workload():
    """A hub (label 0) joined to :data:`HUB_LEAVES` leaves (label 1) on a ring, and a triangle query
    through the hub (two embeddings per ring edge): the paths of data vertices with thousands of
    neighbours of one label (GSI's heavy-row kernel) that R-MAT graphs of this size do not reach."""
    import numpy as np

    from ..graph.model import Graph

    ring = np.arange(1, HUB_LEAVES + 1)
    data = Graph.from_edges(HUB_LEAVES + 1, np.r_[np.zeros(HUB_LEAVES, np.int64), ring], np.r_[ring, np.roll(ring, -1)],
                            labels=np.r_[0, np.ones(HUB_LEAVES, np.int64)], name="warmup-hub")
    query = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], labels=[0, 1, 1], name="warmup-hub-triangle")
    return data, query


def workload():
    """(data graph, queries, match keywords) runs that take each engine's paths."""
    return [run for group in workload_groups() for run in group]


#: a run's search time bound (compiling is not counted: common.engine.base runs a query again when
#: it timed out while its kernels compiled); the workload's queries take well under it
WARMUP_TIMEOUT_S = 10.0


def warm_engine(name: str, runs=None, variants=None, batched: bool = True) -> dict:
    """Run engine ``name`` over ``runs`` ((data, queries, match keywords) triples; default
    :func:`workload`) with each of ``variants`` (engine options; default
    the engine's ``warmup_variants``) in this process, each run of more than one query also batched
    (``match_batch``) when ``batched``; returns what was compiled: ``engine``,
    ``kernels_compiled``, ``kernels_loaded``, ``compile_seconds``, ``wall_seconds``, ``queries``
    run and ``not_launched`` (the engine's kernels no run launched, by name)."""
    from ..engine.registry import create_engine, engine_class
    from ..gpu.compile_clock import compile_clock
    from ..gpu.launch import KERNELS

    began = time.perf_counter()
    queries = 0
    runs = workload() if runs is None else runs
    for engine_options in variants or engine_class(name).warmup_variants:
        engine = create_engine(name, **engine_options)
        for data, batch, options in runs:
            engine.prepare(data)
            batch = [query for query in batch if not engine.unsupported_reason(query)]
            for query in batch:
                engine.match(query, timeout_s=WARMUP_TIMEOUT_S, **options)
            again = batched and not options and len(batch) > 1
            if again:                                   # the batched path (`gpusm match` on a folder)
                engine.match_batch(batch, timeout_s=WARMUP_TIMEOUT_S)
            queries += 2 * len(batch) if again else len(batch)
    counts = compile_clock.counts()
    label = " ".join(f"{k}={v}" for options in (variants or ()) for k, v in options.items())
    return {"engine": f"{name} {label}".strip(), "kernels_compiled": counts["kernels_compiled"],
            "kernels_loaded": counts["kernels_loaded"], "compile_seconds": round(compile_clock.seconds, 3),
            "wall_seconds": round(time.perf_counter() - began, 3), "queries": queries,
            "not_launched": not_launched(KERNELS, engine_class(name).kernel_packages)}


def not_launched(records, packages) -> list[str]:
    """Names of the kernels in ``records`` (:data:`common.gpu.launch.KERNELS`) from ``packages`` that
    have no compiled overload (empty under the simulator, which compiles nothing)."""
    from ..gpu.cudasim import simulator_active

    if simulator_active():
        return []
    names = set()
    for record in records:
        if record.py_function.__module__.split(".")[0] not in packages:
            continue
        overloads = getattr(record.kernel, "overloads", None)
        if overloads is not None and not overloads:
            names.add(f"{record.py_function.__module__}.{record.py_function.__qualname__.replace('.<locals>', '')}")
    return sorted(names)


def _main(argv: list[str]) -> dict:
    """``python -m common.cli.warmup ENGINE [VARIANT [GROUP]]``: one engine, one of its
    ``warmup_variants`` (by position) or all of them, over one run group of
    :func:`workload_groups` or the whole workload."""
    from ..engine.registry import engine_class

    name = argv[0]
    variants = engine_class(name).warmup_variants
    if len(argv) > 1:
        variants = (variants[int(argv[1])],)
    runs = workload_groups()[int(argv[2])] if len(argv) > 2 else None
    report = warm_engine(name, runs=runs, variants=variants)
    if len(argv) > 2:
        report["engine"] += f" (run group {argv[2]})"
    return report


if __name__ == "__main__":
    print(json.dumps(_main(sys.argv[1:])))
