"""``gpusm demo``'s kernels compiled in parallel: one fresh process per GPU engine (and per compiled
CPU engine) runs the demo's own workload (:class:`experiments.papers.compare.DemoWorkload`) into the kernel cache
(:mod:`common.gpu.kernel_cache`) before the demo runs the engines one after another and loads them.
gMatch, whose plan and candidate-graph build are compiled host code, also gets kernels-first
processes (:func:`common.cli.warmup.warmup`) for its two search paths.

``python -m experiments.demo_warmup ENGINE SIZE SEED [KEY=VALUE ...]`` is one such process (engine
options as ``gpusm match --option`` reads them; it prints its report,
:func:`common.cli.warmup.warm_engine`, as JSON).
"""

from __future__ import annotations

import json
import sys

from common.cli.main import parse_option
from common.cli.warmup import warm_engine, warmup
from common.engine.registry import engine_class, gpu_engines

#: CPU engines whose compiled host code (``numba.njit``) the demo also compiles in parallel
COMPILED_CPU_ENGINES = ("cpu", "stwig-cpu")

#: kernels-first processes (engine, engine options as KEY=VALUE): gMatch's data-graph probe and its
#: candidate-graph search, each reached without compiling the host code before it
KERNELS_FIRST = (("gmatch", ()), ("gmatch", ("candidate_graph=True",)))


def compile_in_parallel(engines, size: str, seed: int) -> list[dict]:
    """Warm the GPU engines among ``engines`` on the demo's workload, one process each (and the
    compiled CPU engines and :data:`KERNELS_FIRST` beside them), unless every GPU engine's
    package already has kernels in the cache (then the demo just loads them)."""
    from common.gpu.kernel_cache import cache_dir

    gpu = [e for e in engines if e in gpu_engines()]
    if all(any((cache_dir() / engine_class(e).kernel_packages[0]).glob("*.nbc")) for e in gpu):
        return []
    cpu = [e for e in engines if e in COMPILED_CPU_ENGINES]
    first = tuple(job for job in KERNELS_FIRST if job[0] in gpu)
    return warmup(gpu + cpu, child="experiments.demo_warmup", child_args=(size, seed), kernels_first=first)


def main(argv: list[str]) -> dict:
    from .papers.compare import DemoWorkload

    engine, size, seed, *options = argv
    options = dict(map(parse_option, options))
    data, queries = DemoWorkload.of_size(size, int(seed)).build()
    return warm_engine(engine, runs=[(data, queries, {})], variants=(options,), batched=False)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
