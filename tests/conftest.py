"""Test configuration: without an NVIDIA GPU every kernel runs under Numba's CUDA simulator.

``common.gpu.backend`` makes that choice (before numba.cuda is imported) when the package is first
imported; importing it here makes the choice before any test module imports numba itself.
Set ``NUMBA_ENABLE_CUDASIM`` yourself to override (``0`` forces the real driver).
"""

import os

import numpy as np
import pytest

# ``GPUSM_TEST_GPUS=0,1 pytest -n 2``: each xdist worker gets one of the listed GPUs (set before
# numba.cuda starts), so the suite runs on several GPUs at once (``make test-gpu GPUS=0,1``).
if os.environ.get("GPUSM_TEST_GPUS") and os.environ.get("PYTEST_XDIST_WORKER"):
    _gpus = os.environ["GPUSM_TEST_GPUS"].split(",")
    os.environ["CUDA_VISIBLE_DEVICES"] = _gpus[int(os.environ["PYTEST_XDIST_WORKER"][2:]) % len(_gpus)]

from common.gpu.backend import BACKEND  # noqa: E402  (after the GPU choice above)
from common.graph.generate import rmat, uniform_labels  # noqa: E402
from common.graph.model import Graph  # noqa: E402


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


def _hub_graph(extra_edges: int, labelled: bool):
    """200 vertices, vertex 0 adjacent to all and ``extra_edges`` random ones among the rest
    (seeded): a root whose work sits on one hub. ``labelled``: 2 random labels, else one."""
    rng = np.random.default_rng(5)
    n = 200
    src = np.concatenate([np.zeros(n - 1, np.int64), rng.integers(1, n, extra_edges)])
    dst = np.concatenate([np.arange(1, n), rng.integers(1, n, extra_edges)])
    labels = rng.integers(0, 2, n).astype(np.int32) if labelled else np.zeros(n, np.int32)
    return Graph.from_edges(n, src, dst, labels=labels, name="hub")


@pytest.fixture(scope="session")
def hub200():
    """The labelled hub graph of the branch-part and hub-part tests."""
    return _hub_graph(500, labelled=True)


@pytest.fixture(scope="session")
def hub200_unlabelled():
    """The unlabelled hub graph of the Dask split test."""
    return _hub_graph(400, labelled=False)


@pytest.fixture(scope="session")
def tiny12():
    """12 vertices, 30 R-MAT edges, 2 labels: the smallest labelled graph of the split and Dask tests."""
    return rmat(12, 30, seed=3, labels=uniform_labels(12, 2, seed=4), name="tiny")


# ---------------------------------------------------------------------- simulator-heavy tests
#: Tests whose simulated kernels take about 2 s or more each on a 2-core machine running the
#: suite with two workers (measured with --durations; variant sweeps, deadlines that run the
#: engine to its timeout, batches, hub and stealing workloads). They keep their workloads and run in
#: ``make test``; collection marks them slow so ``make test-fast`` (-m "not slow") leaves them out.
#: Each engine keeps cheaper tests of the same paths in the fast lane (its default variant's
#: counts against the CPU reference, collect, limits, errors). Node ids relative to tests/;
#: test_conftest.py checks that every entry still names a collected test.
SIMULATOR_HEAVY = frozenset({
    "test_api_examples.py::test_docstring_examples[common.api]",
    "test_benchmark_commands.py::test_gmatch_split_rows_add_up_to_the_one_launch",
    "test_benchmark_commands.py::test_small_queries_interleaved_pass_answers_every_query_with_every_engine",
    "test_benchmark_commands.py::test_small_queries_table_counts_and_csv",
    "test_contract.py::test_a_batch_answers_as_single_queries_do[egsm]",
    "test_contract.py::test_a_batch_answers_as_single_queries_do[gmatch]",
    "test_contract.py::test_a_batch_answers_as_single_queries_do[gsi]",
    "test_contract.py::test_a_batch_answers_as_single_queries_do[sgsi]",
    "test_contract.py::test_a_deadline_is_status_timeout_with_a_lower_bound[egsm]",
    "test_contract.py::test_a_querys_peak_device_memory_is_its_own[egsm]",
    "test_contract.py::test_a_querys_peak_device_memory_is_its_own[gmatch]",
    "test_contract.py::test_a_querys_peak_device_memory_is_its_own[gsi]",
    "test_contract.py::test_a_querys_peak_device_memory_is_its_own[sgsi]",
    "test_count_overflow.py::test_gmatch_hub_parts_add_up_past_2_64",
    "test_count_overflow.py::test_past_128_bits_cpu_is_exact_and_gmatch_says_overflow",
    "test_device.py::test_exclusive_scan_int32_counts_to_int64_offsets[5000]",
    "test_device.py::test_exclusive_scan_int32_in_place_with_a_reused_workspace",
    "test_egsm.py::test_clique_query_repeated_labels",
    "test_egsm.py::test_collect_matches_reference",
    "test_egsm.py::test_collect_past_initial_buffer",
    "test_egsm.py::test_deadline_stops_a_running_launch",
    "test_egsm.py::test_dense_and_automorphic_patterns",
    "test_egsm.py::test_look_forward_split_keeps_counts",
    "test_egsm.py::test_query_with_more_than_20_vertices",
    "test_egsm.py::test_queue_comes_from_device_memory_limit",
    "test_egsm.py::test_tiny_queue_forces_bfs_to_dfs_fallback",
    "test_egsm.py::test_unreached_deadline_keeps_counts_exact",
    "test_egsm.py::test_variant_counts_equal_reference",
    "test_egsm_batch.py::test_batch_equals_one_at_a_time_and_reference",
    "test_egsm_batch.py::test_batch_larger_than_one_filter_launch",
    "test_egsm_batch.py::test_batch_mixes_timeout_limit_and_unsupported",
    "test_egsm_batch.py::test_fixed_cost_launches_and_copies",
    "test_egsm_batch.py::test_per_centre_wedge_filter_equals_one_block",
    "test_egsm_batch.py::test_scan_and_compaction_paths_agree[0-0-True]",
    "test_egsm_batch.py::test_scan_and_compaction_paths_agree[0-None-True]",
    "test_egsm_batch.py::test_scan_and_compaction_paths_agree[None-0-True]",
    "test_egsm_batch.py::test_scan_and_compaction_paths_agree[None-None-False]",
    "test_egsm_batch.py::test_stats_name_candidate_sizes_and_order",
    "test_egsm_batch.py::test_wedge_filter_skipped_below_min_edges[total-on-device]",
    "test_egsm_batch.py::test_wedge_filter_skipped_below_min_edges[total-on-host]",
    "test_gmatch.py::test_a_batch_mixing_unsupported_limited_timed_out_and_heavy_queries",
    "test_gmatch.py::test_batch_falls_back_to_single_queries_where_it_does_not_apply",
    "test_gmatch.py::test_batches_equal_one_query_at_a_time",
    "test_gmatch.py::test_candidate_graph_counts_with_multi_word_bitmaps",
    "test_gmatch.py::test_cliques_and_repeated_labels",
    "test_gmatch.py::test_collect_returns_every_ordered_embedding[unroll-2]",
    "test_gmatch.py::test_count_is_unique_embeddings_times_automorphisms",
    "test_gmatch.py::test_counting_the_last_position_on_random_walk_queries",
    "test_gmatch.py::test_every_variant_equals_the_reference[coarse-candidate-graph]",
    "test_gmatch.py::test_every_variant_equals_the_reference[coarse-data-graph]",
    "test_gmatch.py::test_every_variant_equals_the_reference[coarse-naive]",
    "test_gmatch.py::test_every_variant_equals_the_reference[coarse-unroll-2]",
    "test_gmatch.py::test_every_variant_equals_the_reference[coarse-unroll-4]",
    "test_gmatch.py::test_every_variant_equals_the_reference[coarse-unroll-8]",
    "test_gmatch.py::test_every_variant_equals_the_reference[fine-data-graph]",
    "test_gmatch.py::test_every_variant_equals_the_reference[fine-enumerate-every-position]",
    "test_gmatch.py::test_every_variant_equals_the_reference[fine-naive]",
    "test_gmatch.py::test_every_variant_equals_the_reference[fine-one-root]",
    "test_gmatch.py::test_every_variant_equals_the_reference[fine-probe-finishes]",
    "test_gmatch.py::test_every_variant_equals_the_reference[fine-probe-stops]",
    "test_gmatch.py::test_free_leaves_are_counted_and_equal_enumeration[labels0-4]",
    "test_gmatch.py::test_free_leaves_are_counted_and_equal_enumeration[labels1-3]",
    "test_gmatch.py::test_free_leaves_are_counted_and_equal_enumeration[labels2-1]",
    "test_gmatch.py::test_in_block_work_stealing_moves_work_from_the_one_busy_warp",
    "test_gmatch.py::test_large_queries_of_22_and_32_vertices",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[K4-0011]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[K4]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[K5-minus-edge]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[diamond]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[house]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[pentagon]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[square-0101]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[square]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[star3]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[tailed-triangle]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[triangle-01]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[triangle]",
    "test_gmatch.py::test_last_position_is_counted_and_equals_enumeration[wheel4]",
    "test_gmatch.py::test_leaf_counting_with_symmetry_limit_and_collect",
    "test_gmatch.py::test_one_hub_row_is_split_between_warps",
    "test_gmatch.py::test_patterns_p1_to_p9_on_an_unlabelled_graph[fine]",
    "test_gmatch.py::test_patterns_p1_to_p9_on_an_unlabelled_graph[unroll-4]",
    "test_gmatch.py::test_stealing_through_the_global_mailbox_across_blocks",
    "test_gmatch.py::test_timeout_stops_a_running_launch[block]",
    "test_gmatch.py::test_timeout_stops_a_running_launch[global]",
    "test_gmatch.py::test_timeout_stops_a_running_launch[mailbox]",
    "test_gmatch.py::test_timeout_stops_a_running_launch[no-stealing]",
    "test_gmatch.py::test_timeout_stops_a_running_launch[unroll-2]",
    "test_gsi.py::test_default_counts_and_embeddings[undirected]",
    "test_gsi.py::test_load_balance_layers_and_duplicate_removal_on_hubs[undirected]",
    "test_gsi.py::test_more_than_32_query_vertices",
    "test_gsi.py::test_other_linking_edges_in_their_own_launch_equal_fused[undirected]",
    "test_gsi.py::test_slices_under_a_memory_limit_and_oom",
    "test_gsi_launches.py::test_buffers_come_from_the_pool_and_results_carry_order_and_candidate_sizes",
    "test_gsi_launches.py::test_one_launch_join_stopped_before_its_first_level",
    "test_gsi_launches.py::test_one_launch_join_stops_where_tables_grow_and_matches_the_level_by_level_join[directed]",
    "test_gsi_launches.py::test_one_launch_join_stops_where_tables_grow_and_matches_the_level_by_level_join[undirected]",
    "test_kernel_cache.py::test_every_engine_kernel_is_made_cached_and_has_a_variant_key",
    "test_root_range.py::test_gmatch_branch_parts_equal_whole[options1]",
    "test_root_range.py::test_gmatch_branch_parts_equal_whole[options2]",
    "test_root_range.py::test_gmatch_branch_parts_equal_whole[options3]",
    "test_root_range.py::test_gmatch_branch_parts_equal_whole[options4]",
    "test_root_range.py::test_gmatch_hub_parts_count_a_hub_root_in_parts",
    "test_root_range.py::test_gpu_engines_split_equals_whole[egsm-options2]",
    "test_root_range.py::test_gpu_engines_split_equals_whole[gmatch-options0]",
    "test_root_range.py::test_gpu_engines_split_equals_whole[gmatch-options1]",
    "test_sgsi.py::test_counts_under_a_limit_that_forces_k_partitions[2]",
    "test_sgsi.py::test_counts_under_a_limit_that_forces_k_partitions[3]",
    "test_sgsi.py::test_counts_under_a_limit_that_forces_k_partitions[8]",
    "test_sgsi.py::test_directed_edge_labels_and_many_partitions",
    "test_sgsi.py::test_in_core_when_the_graph_fits_runs_gsis_join_without_streaming",
    "test_sgsi.py::test_limit_collect_timeout_and_host_memory",
    "test_sgsi.py::test_out_of_core_chunks_split_by_gba_and_new_tables_written_in_parts",
    "test_sgsi.py::test_variants_on_a_hub_spanning_segments[layers]",
    "test_sgsi.py::test_variants_on_a_hub_spanning_segments[no-cache]",
    "test_sgsi.py::test_variants_on_a_hub_spanning_segments[sgsi+]",
    "test_stwig.py::test_cliques_with_one_label_count_automorphic_copies[gpu]",
    "test_stwig.py::test_collected_embeddings_equal_reference[gpu-resume-paper]",
    "test_stwig.py::test_collected_embeddings_equal_reference[gpu-resume-split]",
    "test_stwig.py::test_collected_embeddings_equal_reference[gpu-split2]",
    "test_stwig.py::test_collected_embeddings_equal_reference[gpu]",
    "test_stwig.py::test_counts_equal_reference[gpu-False]",
    "test_stwig.py::test_counts_equal_reference[gpu-explore-False]",
    "test_stwig.py::test_counts_equal_reference[gpu-explore-True]",
    "test_stwig.py::test_limit_stops_at_limit[gpu-resume-split]",
    "test_stwig.py::test_star_single_vertex_and_deep_queries[gpu]",
    "test_stwig_fixed_cost.py::test_one_launch_split_equals_per_level_launches",
    "test_stwig_fixed_cost.py::test_stats_carry_order_and_candidate_sizes[stwig-gpu-explore]",
})


@pytest.hookimpl(tryfirst=True)           # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    collected = set()
    for item in items:
        nodeid = item.nodeid.removeprefix("tests/")
        collected.add(nodeid)
        if nodeid in SIMULATOR_HEAVY:
            item.add_marker(pytest.mark.slow)
    config.stash[COLLECTED] = collected


#: The node ids (relative to tests/) this session collected, before any deselection.
COLLECTED = pytest.StashKey[set]()


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


