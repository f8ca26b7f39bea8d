"""The on-disk kernel cache (common/gpu/kernel_cache.py): every engine kernel is cached, variants of a
factory's kernel get their own entries, corrupt or stale files are recompiled, and (on a GPU) a
second process loads its kernels instead of compiling them."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from common import create_engine
from common.engine.registry import gpu_engines
from common.gpu import kernel_cache, launch
from common.gpu.runtime import simulator_active
from common.graph.generate import power_law_labels, query_set, rmat

ROOT = Path(__file__).resolve().parent.parent


def _run_every_gpu_engine_once():
    data = rmat(64, 200, seed=3, labels=power_law_labels(64, 3, 1.0, seed=3))
    query = query_set(data, 1, 3, seed=4).queries[0]
    expected = create_engine("cpu").prepare(data).match(query).count
    for name in gpu_engines():
        assert create_engine(name).prepare(data).match(query).count == expected, name


@pytest.mark.slow
def test_every_engine_kernel_is_made_cached_and_has_a_variant_key():
    _run_every_gpu_engine_once()
    records = [r for r in launch.KERNELS if r.py_function.__module__.split(".")[0] in kernel_cache.kernel_packages()]
    packages = {r.py_function.__module__.split(".")[0] for r in records}
    assert {"common", "gsi", "egsm", "gmatch", "stwig"} <= packages
    for record in records:
        assert record.cached, record.py_function.__qualname__
        assert len(kernel_cache.variant_key(record.py_function, record.options)) == 64
        if not simulator_active():          # the dispatcher's cache is gpusm's, not numba's null cache
            dispatcher = getattr(record.kernel, "dispatcher", record.kernel)   # GPUSM_FAST_LAUNCH=0: itself
            assert type(dispatcher._cache).__name__ == "KernelCache", record.py_function.__qualname__


def test_no_engine_module_makes_a_kernel_outside_common_launch_jit():
    """A kernel made with ``cuda.jit`` directly would not be cached; device functions may be."""
    offenders = []
    for package in kernel_cache.kernel_packages():
        for path in (ROOT / package).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if "cuda.jit" in line and "device=True" not in line and not line.lstrip().startswith(("#", "``")) \
                        and "``" not in line and path.name != "launch.py":
                    offenders.append(f"{package}/{path.name}:{number}: {line.strip()}")
    assert offenders == []


def test_the_cache_depends_on_every_source_file_of_the_packages_subpackages_included(monkeypatch, tmp_path):
    """An edit to a device function in a subpackage (common/gpu/device_functions.py) invalidates
    every cached kernel: the packages' digest covers the files below the top level too."""
    for package in kernel_cache.kernel_packages():
        (tmp_path / package / "sub").mkdir(parents=True)
        (tmp_path / package / "top.py").write_text("A = 1\n")
        (tmp_path / package / "sub" / "deep.py").write_text("B = 1\n")
    monkeypatch.setattr(kernel_cache, "_ROOT", tmp_path)
    kernel_cache.packages_digest.cache_clear()
    try:
        before = kernel_cache.packages_digest()
        (tmp_path / "common" / "sub" / "deep.py").write_text("B = 2\n")
        kernel_cache.packages_digest.cache_clear()
        assert kernel_cache.packages_digest() != before
        assert kernel_cache._subfolder(str(tmp_path / "common" / "sub" / "deep.py")) == "common_sub"
        assert kernel_cache._subfolder(str(tmp_path / "gsi" / "top.py")) == "gsi"
    finally:
        kernel_cache.packages_digest.cache_clear()


def _factory(warps, helper):
    def kernel(out):
        out[0] = warps + helper(1)
    return kernel


def _helper_factory(step):
    def helper(x):
        return x + step
    return helper


def test_variant_key_tells_closure_values_called_functions_and_options_apart():
    same = kernel_cache.variant_key(_factory(4, _helper_factory(1)))
    assert kernel_cache.variant_key(_factory(4, _helper_factory(1))) == same
    assert kernel_cache.variant_key(_factory(8, _helper_factory(1))) != same
    assert kernel_cache.variant_key(_factory(4, _helper_factory(2))) != same      # a device function's closure
    assert kernel_cache.variant_key(_factory(4, _helper_factory(1)), {"max_registers": 64}) != same
    assert kernel_cache.variant_key(_factory(np.int32(4), _helper_factory(1))) != same


def test_variant_key_follows_the_globals_a_kernel_names():
    namespace = {"LIMIT": 3}
    exec("def kernel(out):\n    out[0] = LIMIT\n", namespace)
    before = kernel_cache.variant_key(namespace["kernel"])
    namespace["LIMIT"] = 4
    assert kernel_cache.variant_key(namespace["kernel"]) != before
    namespace["LIMIT"] = np.arange(3)           # a global array is frozen into the kernel
    with_array = kernel_cache.variant_key(namespace["kernel"])
    namespace["LIMIT"] = np.arange(1, 4)
    assert kernel_cache.variant_key(namespace["kernel"]) != with_array


def test_a_value_the_key_cannot_describe_makes_the_kernel_uncacheable():
    with pytest.raises(kernel_cache.Uncacheable, match="cannot describe"):
        kernel_cache.variant_key(_factory(object(), _helper_factory(1)))


def test_cache_dir_follows_numba_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert kernel_cache.cache_dir() == tmp_path.resolve() / "gpusm"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert kernel_cache.cache_dir().name == "gpusm" and kernel_cache.cache_dir().parent.name == "numba"


def test_source_stamp_follows_content_not_modification_time(tmp_path):
    source = tmp_path / "kernels.py"
    source.write_text("X = 1\n")
    stamp = kernel_cache.source_stamp(str(source))
    os.utime(source, ns=(1, 1))                   # a reinstall: same bytes, new time
    assert kernel_cache.source_stamp(str(source)) == stamp
    source.write_text("X = 2\n")
    assert kernel_cache.source_stamp(str(source)) != stamp


def test_corrupt_or_stale_cache_files_read_as_missing_and_are_rewritten(tmp_path):
    files = kernel_cache._index_file_class()
    index = files(str(tmp_path), "join.expand-10.py311", ("stamp", 1))
    index.save(("sig", 1), {"kernel": "one"})
    assert index.load(("sig", 1)) == {"kernel": "one"}
    data_file = next(tmp_path.glob("*.nbc"))
    data_file.write_bytes(b"\x80\x05garbage")
    assert index.load(("sig", 1)) is None          # corrupt data: a miss
    index.save(("sig", 1), {"kernel": "two"})
    assert index.load(("sig", 1)) == {"kernel": "two"}
    index_file = next(tmp_path.glob("*.nbi"))
    index_file.write_bytes(index_file.read_bytes()[:9])   # truncated index
    assert index.load(("sig", 1)) is None
    index.save(("sig", 1), {"kernel": "three"})
    assert index.load(("sig", 1)) == {"kernel": "three"}
    stale = files(str(tmp_path), "join.expand-10.py311", ("stamp", 2))   # the source changed
    assert stale.load(("sig", 1)) is None


def test_jit_can_opt_out_of_the_cache():
    def kernel(out):
        out[0] = 1
    launch.jit(cache=False)(kernel)
    assert launch.KERNELS[-1].py_function is kernel and launch.KERNELS[-1].cached is False


_CHILD = textwrap.dedent("""
    import json
    import common
    from common.gpu.compile_clock import compile_clock
    from common.graph.generate import power_law_labels, query_set, rmat
    data = rmat(64, 200, seed=5, labels=power_law_labels(64, 3, 1.0, seed=5))
    query = query_set(data, 1, 3, seed=6).queries[0]
    got = common.create_engine({engine!r}).prepare(data).match(query).count
    expected = common.create_engine("cpu").prepare(data).match(query).count
    print(json.dumps(dict(count=got, expected=expected, names=compile_clock.compiled_names,
                          **compile_clock.counts())))
""")


def _fresh_process(engine: str, cache: Path) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    if simulator_active():               # no kernels to cache: the host code need not compile either
        env["NUMBA_DISABLE_JIT"] = "1"
    done = subprocess.run([sys.executable, "-c", _CHILD.format(engine=engine)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["count"] == report["expected"]
    return report


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["gsi", "egsm"])
def test_a_second_process_loads_kernels_instead_of_compiling(engine, tmp_path):
    first = _fresh_process(engine, tmp_path)
    entries = list((tmp_path / "gpusm").rglob("*.nbc"))
    if simulator_active():                   # the simulator compiles nothing, so caches nothing
        assert first["kernels_compiled"] == first["kernels_loaded"] == 0 and entries == []
        return
    second = _fresh_process(engine, tmp_path)
    assert first["kernels_compiled"] > 0 and len(entries) >= first["kernels_compiled"]
    assert second["kernels_compiled"] == 0, second["names"]
    assert second["kernels_loaded"] == first["kernels_compiled"] + first["kernels_loaded"]
    # corrupt every data file and one index: the next process recompiles, answers, and saves again
    for entry in entries:
        entry.write_bytes(b"not a kernel")
    next((tmp_path / "gpusm").rglob("*.nbi")).write_bytes(b"\x80\x05truncated")
    third = _fresh_process(engine, tmp_path)
    assert third["kernels_compiled"] == first["kernels_compiled"]
    fourth = _fresh_process(engine, tmp_path)
    assert fourth["kernels_compiled"] == 0, fourth["names"]


def test_gpusm_warmup_fills_the_cache_in_numba_cache_dir(monkeypatch, tmp_path, capsys):
    from common.cli import main as cli

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert cli.main(["warmup", "--engines", "gsi"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path.resolve() / "gpusm") in out
    if simulator_active():
        assert "nothing to warm up" in out and not any(tmp_path.rglob("*.nbc"))
    else:
        assert any((tmp_path / "gpusm" / "gsi").glob("*.nbc")) and "failed" not in out


@pytest.mark.slow
def test_warm_engine_runs_every_variant_and_batch_of_its_workload(monkeypatch):
    from common.cli import warmup

    data = rmat(48, 150, seed=8, labels=power_law_labels(48, 3, 1.0, seed=8))
    queries = list(query_set(data, 2, 3, seed=9).queries)
    monkeypatch.setattr(warmup, "workload", lambda: [(data, queries, {}), (data, queries[:1], {"limit": 2})])
    report = warmup.warm_engine("gmatch")
    assert report["engine"] == "gmatch" and report["queries"] == 2 * (2 * 2 + 1)   # two variants
    if simulator_active():
        assert report["kernels_compiled"] == 0 and report["not_launched"] == []
    else:
        assert report["kernels_compiled"] + report["kernels_loaded"] > 0


def test_warmup_starts_one_process_per_engine_variant(monkeypatch):
    from common.cli import warmup

    started = []
    monkeypatch.setattr(warmup, "_warm_in_process",
                        lambda engine, args, env, child: started.append((engine, args)) or {})
    warmup.warmup(["gsi", "gmatch"])
    groups = len(warmup.workload_groups())
    assert groups == len(warmup.QUERY_SIZES) + 1
    assert sorted(started) == sorted([("gmatch", (v, g)) for v in (0, 1) for g in range(groups)] + [("gsi", (0,))])
    with pytest.raises(ValueError, match="not a GPU engine: cpu"):
        warmup.warmup(["cpu"])


def test_the_cached_packages_are_known_without_importing_an_engine():
    """The kernel cache asks for the kernel packages while an engine module is being imported (a
    kernel defined at import time on a GPU): answering must not import an engine module (a
    circular import), and every engine's declared packages lie within the answer."""
    import subprocess
    import sys

    from common.engine.registry import BUILTIN_ENGINES, engine_class, kernel_packages

    code = ("import sys; from common.engine.registry import kernel_packages; print(kernel_packages()); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('gsi', 'egsm', 'gmatch', 'stwig')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    packages, imported = done.stdout.splitlines()
    assert packages == str(kernel_packages()) and imported == "[]"
    for name in BUILTIN_ENGINES:
        assert set(engine_class(name).kernel_packages) <= set(kernel_packages()), name


def test_every_engine_module_imports_with_the_cuda_target_and_its_kernel_cache():
    """Outside the simulator every kernel is defined through the on-disk kernel cache at import:
    importing the engines and the benchmarks that way (no GPU needed to define kernels) must work."""
    import os
    import subprocess
    import sys

    code = ("import gsi.engine, gsi.sgsi, egsm.engine, gmatch.engine, stwig.engine, common.cpu.reference\n"
            "import experiments, experiments.bench.regress, experiments.bench.gmatch_heavy\n"
            "from common.engine.registry import BUILTIN_ENGINES, create_engine\n"
            "[create_engine(name) for name in BUILTIN_ENGINES]\nprint('ok')")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
