"""What runs the experiments: catalog (the experiments the papers register), workloads (datasets,
query sets, scales), runner and store (per-query rows under a time limit, resumable), cells (the
same as Dask tasks), core (experiments, metrics, plans), report (tables and figures), notebook,
the benchmarks' timing, and stress (a run killed and its CSV damaged, then checked equal to an
undisturbed one)."""
