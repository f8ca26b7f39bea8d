"""Test configuration: without an NVIDIA GPU every kernel runs under Numba's CUDA simulator.

``common.gpu.backend`` makes that choice (before numba.cuda is imported) when the package is first
imported; importing it here makes the choice before any test module imports numba itself.
Set ``NUMBA_ENABLE_CUDASIM`` yourself to override (``0`` forces the real driver).
"""

import os

import pytest

# ``GPUSM_TEST_GPUS=0,1 pytest -n 2``: each xdist worker gets one of the listed GPUs (set before
# numba.cuda starts), so the suite runs on several GPUs at once (``make test-gpu GPUS=0,1``; with
# ``PER_GPU=4``, ``-n 8``: workers 0, 2, 4, 6 on GPU 0 and the rest on GPU 1).
if os.environ.get("GPUSM_TEST_GPUS") and os.environ.get("PYTEST_XDIST_WORKER"):
    _gpus = os.environ["GPUSM_TEST_GPUS"].split(",")
    os.environ["CUDA_VISIBLE_DEVICES"] = _gpus[int(os.environ["PYTEST_XDIST_WORKER"][2:]) % len(_gpus)]

from _graphs import hub_and_extra_edges  # noqa: E402
from common.gpu.backend import BACKEND  # noqa: E402  (after the GPU choice above)
from common.graph.generate import rmat, uniform_labels  # noqa: E402


# ---------------------------------------------------------------------- shared graphs
# Data graphs that several test files use, built once per test process. Graphs are read-only to
# engines and tests, so sharing them changes nothing a test sees.
@pytest.fixture(scope="session")
def hubs():
    """One label, 300 vertices, 3,000 R-MAT edges: hubs whose stars have millions of embeddings,
    long on any engine (deadline tests)."""
    return rmat(300, 3000, seed=3, name="small-hubs")


@pytest.fixture(scope="session")
def rmat40():
    """40 vertices, 130 R-MAT edges, 3 uniform labels: EGSM's small labelled data graph."""
    return rmat(40, 130, seed=2, labels=uniform_labels(40, 3, seed=1), name="rmat40")


@pytest.fixture(scope="session")
def hub200():
    """The labelled hub graph of the branch-part and hub-part tests."""
    return hub_and_extra_edges(500, labelled=True)


@pytest.fixture(scope="session")
def hub200_unlabelled():
    """The unlabelled hub graph of the Dask split test."""
    return hub_and_extra_edges(400, labelled=False)


@pytest.fixture(scope="session")
def tiny12():
    """12 vertices, 30 R-MAT edges, 2 labels: the smallest labelled graph of the split and Dask tests."""
    return rmat(12, 30, seed=3, labels=uniform_labels(12, 2, seed=4), name="tiny")


# ---------------------------------------------------------------------- simulator-heavy tests
# Tests whose simulated kernels take about 2 s or more each on a 2-core machine running the suite
# with two workers (measured with --durations) carry ``@pytest.mark.slow`` themselves, or, where
# only some of a test's parameters are that slow, ``@pytest.mark.slow_cases(ID, ...)`` naming
# those parameter ids; collection marks those cases slow. ``make test`` runs them; ``make
# test-fast`` (-m "not slow") leaves them out. test_conftest.py checks that every id names a case.
@pytest.hookimpl(tryfirst=True)           # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    named: dict = {}
    for item in items:
        cases = item.get_closest_marker("slow_cases")
        if cases is None:
            continue
        callspec = getattr(item, "callspec", None)
        case = callspec.id if callspec is not None else None
        named.setdefault(item.nodeid.split("[")[0], (set(cases.args), set()))[1].add(case)
        if case in cases.args:
            item.add_marker(pytest.mark.slow)
    config.stash[SLOW_CASES] = named


#: Per test (node id without parameters) with ``slow_cases``: (the ids it names, the ids collected).
SLOW_CASES = pytest.StashKey[dict]()


def pytest_report_header(config):
    if BACKEND == "simulator":
        return "gpusm: no GPU found, CUDA kernels run in Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)"
    return "gpusm: CUDA kernels run on the GPU"


@pytest.fixture
def kernel_calls(monkeypatch):
    """Kernel launches (by kernel name), copies to the host (``copies``) and to the device
    (``uploads``) and ``cuda.synchronize`` calls, counted from now on whichever backend runs the
    suite: the simulator's kernel and array classes, or on a GPU numba-cuda's dispatcher, gpusm's
    quick launches (``common.gpu.launch.Kernel``), device arrays and ``common.gpu.copies.upload``/``download``.
    Clear the counts with ``kernel_calls.update(launches=[], copies=0, ...)``."""
    from common.gpu.runtime import cuda, simulator_active

    if simulator_active():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as Array
        from numba.cuda.simulator.kernel import FakeCUDAKernel as Kernel
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase as Array
        from numba.cuda.dispatcher import CUDADispatcher as Kernel
    calls = {"launches": [], "copies": 0, "uploads": 0, "syncs": 0}
    kernel_classes = [Kernel]
    if not simulator_active():
        from common.gpu.launch import Kernel as QuickKernel
        kernel_classes.append(QuickKernel)
    configures = [cls.__getitem__ for cls in kernel_classes]
    to_host, to_device, synchronize = Array.copy_to_host, Array.copy_to_device, cuda.synchronize

    def counted(configure):
        def launch(kernel, config):
            calls["launches"].append(getattr(kernel, "py_func", kernel).__name__)
            return configure(kernel, config)
        return launch

    def copy_to_host(array, *args, **kwargs):
        calls["copies"] += 1
        return to_host(array, *args, **kwargs)

    def copy_to_device(array, *args, **kwargs):
        calls["uploads"] += 1
        return to_device(array, *args, **kwargs)

    def sync(*args, **kwargs):
        calls["syncs"] += 1
        return synchronize(*args, **kwargs)

    for cls, configure in zip(kernel_classes, configures):
        monkeypatch.setattr(cls, "__getitem__", counted(configure))
    from common.gpu import launch

    direct = launch._NUMBA                   # common.gpu.copies.upload/download call the driver
    if direct is not None:
        def memcpy_htod(*args):
            calls["uploads"] += 1
            return direct.memcpy_htod(*args)

        def memcpy_dtoh(*args):
            calls["copies"] += 1
            return direct.memcpy_dtoh(*args)

        monkeypatch.setattr(launch, "_NUMBA", direct._replace(memcpy_htod=memcpy_htod, memcpy_dtoh=memcpy_dtoh))
    monkeypatch.setattr(Array, "copy_to_host", copy_to_host)
    monkeypatch.setattr(Array, "copy_to_device", copy_to_device)
    monkeypatch.setattr(cuda, "synchronize", sync)
    return calls


