"""Engine benchmarks and gates, each a command (``python -m experiments.bench.NAME --help``): one
per engine (``gsi``, ``sgsi``, ``egsm``, ``gmatch``, ``stwig``), ``small_queries``, ``gmatch_heavy``,
``check`` (every engine against the exact counts), ``regress`` (the gate against the baseline
commit), ``cold_start`` and ``dask_scaling``."""


def engine_spec(spec: str) -> tuple[str, dict]:
    """``name`` or ``name:key=value+key=value`` (an engine with constructor options, e.g. an
    ablation ``egsm:blocks=33``) -> (engine name, options), values read as ``gpusm match
    --option`` reads them; argparse.ArgumentTypeError for an option that is not key=value."""
    from common.cli.main import parse_option

    name, _, options = spec.partition(":")
    return name, dict(parse_option(item) for item in options.split("+") if item)


def note_simulator(prog: str, args, *, queries: int | None = None, runs: int = 1,
                   timeout_s: float | None = None, budget_s: float | None = None) -> None:
    """Say on stderr, where there is no GPU, that ``prog`` runs in the simulator and how long its plan is."""
    from common.gpu.backend import simulator_note

    plan = []
    if queries is not None:
        plan.append(f"{queries} queries x {runs} runs")
        if timeout_s:
            plan.append(f"up to {timeout_s:g} s each: at most {queries * runs * timeout_s / 60:.0f} min")
    elif timeout_s:
        plan.append(f"up to {timeout_s:g} s per query")
    plan.append(f"a time budget of {budget_s:g} s" if budget_s else "no time budget: every query runs to its end")
    chosen = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                      if v not in (None, False, [], "") and k not in ("out", "plot", "profile"))
    simulator_note(prog, "; ".join(plan) + (f" ({chosen})" if chosen else ""))
