"""Engine benchmarks and gates, each a command (``python -m experiments.bench.NAME --help``): one
per engine (``gsi``, ``sgsi``, ``egsm``, ``gmatch``, ``stwig``), ``small_queries``, ``gmatch_heavy``,
``check`` (every engine against the exact counts), ``regress`` (the gate against the baseline
commit), ``cold_start`` and ``dask_scaling``."""
