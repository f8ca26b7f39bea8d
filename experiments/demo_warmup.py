"""``gpusm demo``'s kernels compiled in parallel: one fresh process per GPU engine (and per compiled
CPU engine) runs the demo's own workload (:class:`experiments.papers.compare.DemoWorkload`) into the kernel cache
(:mod:`common.gpu.kernel_cache`) before the demo runs the engines one after another and loads them.

``python -m experiments.demo_warmup ENGINE SIZE SEED`` is one such process (it prints its report,
:func:`common.cli.warmup.warm_engine`, as JSON).
"""

from __future__ import annotations

import json
import sys

from common.cli.warmup import GPU_ENGINES, warm_engine, warmup

#: CPU engines whose compiled host code (``numba.njit``) the demo also compiles in parallel
COMPILED_CPU_ENGINES = ("cpu", "stwig-cpu")


def compile_in_parallel(engines, size: str, seed: int) -> list[dict]:
    """Warm the GPU engines among ``engines`` on the demo's workload, one process each (and the
    compiled CPU engines beside them), unless every GPU engine's package already has kernels in
    the cache (then the demo just loads them)."""
    from common.gpu.kernel_cache import cache_dir

    gpu = [e for e in engines if e in GPU_ENGINES]
    packages = {"sgsi": "gsi"}
    if all(any((cache_dir() / packages.get(e, e)).glob("*.nbc")) for e in gpu):
        return []
    cpu = [e for e in engines if e in COMPILED_CPU_ENGINES]
    return warmup(gpu + cpu, child="experiments.demo_warmup", child_args=(size, seed))


def main(argv: list[str]) -> dict:
    from .papers.compare import DemoWorkload

    engine, size, seed = argv
    data, queries = DemoWorkload.of_size(size, int(seed)).build()
    return warm_engine(engine, runs=[(data, queries, {})], variants=({},), batched=False)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
