"""What runs the experiments: workloads (datasets, query sets, scales), runner and store (per-query
rows under a time limit, resumable), cells (the same as Dask tasks), core (experiments, metrics,
plans), report (tables and figures), notebook, and the benchmarks' timing."""
