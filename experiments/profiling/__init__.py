"""Where a query's time goes, each a command (``python -m experiments.profiling.NAME``): per-kernel
device time (``kernel_times``), per-step host time (``host_timeline``), single host operations
(``host_costs``), kernel resources compiled without a GPU (``ptx_check``) and the device's own
report (``device_check``)."""
