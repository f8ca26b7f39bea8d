"""The experiments' figures (experiments/harness/report.draw_figure), checked on the matplotlib objects:
axis labels with units, log scales for times and bytes, the y = x line in the scatter legend,
and unsolved queries drawn (at the time limit, with their own marker and legend entry)."""

import json
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments import PAPERS, experiments_of  # noqa: E402
from experiments.harness.report import draw_figure, value_axis  # noqa: E402
from experiments.harness.runner import ROW_FIELDS  # noqa: E402
from experiments.harness.workloads import get_scale  # noqa: E402

SCALE = get_scale("tiny")
FIGURES = [e for p in PAPERS for e in experiments_of(p) if e.figure]


def rows(experiment, status=lambda config, point, q: "ok", value=lambda config, point, q: 1.0 + q):
    """Raw rows for every (point, config) of ``experiment`` at tiny scale, 3 queries each: seconds,
    phases and the experiment's statistic all ``value``; ``status`` per row."""
    out = []
    for point in experiment.points_for(SCALE):
        for config in experiment.configs:
            for q in range(3):
                v = float(value(config.label, point.label, q))
                stats = {experiment.metric.stat: v} if experiment.metric.stat else {}
                row = dict.fromkeys(ROW_FIELDS, 0.0)
                row.update(experiment=experiment.name, config=config.label, engine=config.engine,
                           dataset=point.label, query=f"q{q}", status=status(config.label, point.label, q),
                           count=5, seconds=v, wall_s=v, peak_device_bytes=int(v * 2**20), reason="",
                           stats=json.dumps(stats))
                for phase in ("filter_s", "index_s", "plan_s", "enumerate_s", "transfer_s"):
                    row[phase] = v / 5
                out.append(row)
    return pd.DataFrame(out, columns=list(ROW_FIELDS))


def draw(experiment, raw):
    fig = draw_figure(experiment, SCALE, raw, experiment.table(raw, SCALE))
    return fig, fig.axes[0]


def legend_texts(ax) -> list[str]:
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("experiment", FIGURES, ids=[e.name for e in FIGURES])
def test_every_figure_labels_both_axes_with_units_and_logs_times_and_bytes(experiment):
    fig, ax = draw(experiment, rows(experiment))
    xlabel, ylabel = ax.get_xlabel(), ax.get_ylabel()
    assert xlabel and ylabel
    assert "(" in ylabel and ")" in ylabel                     # a unit, or what is counted
    if experiment.figure == "lines":
        assert experiment.xlabel and xlabel == experiment.xlabel and "(" in xlabel
    if experiment.figure == "scatter":
        assert "(ms)" in xlabel and "(ms)" in ylabel
        assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    elif experiment.figure in ("box", "by_count"):             # per-query times (and result sizes)
        assert "(ms)" in ylabel and ax.get_yscale() == "log"
        assert "result size" in (fig.axes[1].get_ylabel() if experiment.figure == "box" else xlabel)
    else:
        label, log = value_axis(experiment)
        assert ylabel == label
        if experiment.metric.kind in ("avg_ms", "peak_mb") or "bytes" in (experiment.metric.stat or ""):
            assert log and ax.get_yscale() == "log", experiment.name


def test_memory_bar_chart_is_logarithmic_and_a_29_mb_bar_is_visible():
    memory = next(e for e in experiments_of("gmatch_pvldb26") if e.name.endswith(".memory"))
    small = memory.configs[-1].label                            # gMatch: 29 MB against the others' GBs
    raw = rows(memory, value=lambda config, point, q: 29e6 if config == small else 7e9)
    fig, ax = draw(memory, raw)
    assert ax.get_yscale() == "log" and "bytes" in ax.get_ylabel()
    low, high = ax.get_ylim()
    heights = [patch.get_height() for patch in ax.patches]
    assert min(heights) == pytest.approx(29e6)
    # the small bar reaches at least a tenth of the axis height (on a linear axis it would be 0.4%)
    assert (math.log10(29e6) - math.log10(low)) / (math.log10(high) - math.log10(low)) > 0.1


def test_line_plot_names_x_and_shows_a_point_where_nothing_was_solved():
    sweep = next(e for e in experiments_of("egsm_sigmod23") if e.name.endswith("fig11_sizes"))
    first = sweep.points_for(SCALE)[0].label
    raw = rows(sweep, status=lambda config, point, q: "timeout" if point == first else "ok")
    fig, ax = draw(sweep, raw)
    assert ax.get_xlabel() == "query vertices |V(Q)| (count)"
    assert ax.get_yscale() == "log"
    texts = legend_texts(ax)
    assert any("3 of" in t and "unsolved" in t for t in texts)
    marker = [line for line in ax.get_lines() if line.get_label().startswith("no query solved")]
    assert len(marker) == 1 and marker[0].get_marker() == "x"
    limit_ms = sweep.time_limit_for(SCALE) * 1e3
    assert list(marker[0].get_ydata()) == [limit_ms]
    assert list(marker[0].get_xdata()) == [sweep.points_for(SCALE)[0].x]


def test_scatter_has_the_reference_line_in_its_legend_and_draws_unsolved_queries_at_the_limit():
    known = next(e for e in experiments_of("compare") if e.name == "compare.known")
    other = "gsi"
    # gsi times out on q1 of every point; everything else is solved
    raw = rows(known, status=lambda config, point, q: "timeout" if (config, q) == (other, 1) else "ok",
               value=lambda config, point, q: 0.002 * (q + 1))
    points = len(known.points_for(SCALE))
    fig, ax = draw(known, raw)
    texts = legend_texts(ax)
    assert "y = x (equal time)" in texts
    reference = [line for line in ax.get_lines() if line.get_label() == "y = x (equal time)"]
    assert len(reference) == 1
    unsolved_label = next(t for t in texts if t.startswith(f"{other}: unsolved"))
    assert f"({points})" in unsolved_label and "limit" in unsolved_label
    by_label = {c.get_label(): c for c in ax.collections}
    unsolved = by_label[unsolved_label].get_offsets()
    limit_ms = known.time_limit_for(SCALE) * 1e3
    assert len(unsolved) == points and np.allclose(np.asarray(unsolved)[:, 1], limit_ms)
    assert len(by_label[f"{other}: both solved"].get_offsets()) == 2 * points
    assert len(by_label["egsm: both solved"].get_offsets()) == 3 * points
    assert not any(t.startswith("egsm: unsolved") for t in texts)


def test_skipped_rows_are_not_drawn_as_unsolved():
    known = next(e for e in experiments_of("compare") if e.name == "compare.known")
    raw = rows(known, status=lambda config, point, q: "skipped" if (config, q) == ("gsi", 1) else "ok")
    fig, ax = draw(known, raw)
    assert not any("unsolved" in t for t in legend_texts(ax))
    by_label = {c.get_label(): c for c in ax.collections}
    assert len(by_label["gsi: both solved"].get_offsets()) == 2 * len(known.points_for(SCALE))


def test_figures_name_the_graph_each_point_ran_not_its_nominal_size():
    """A sweep over stand-in sizes labels each x with the graph that ran at that scale: at tiny
    both of Fig. 3c's points ran the same 40-vertex stand-in, which the axis then shows."""
    from experiments import get_experiment
    from experiments.harness.report import graphs_run
    from experiments.harness.workloads import SCALES

    experiment = get_experiment("stwig_lin14.fig3_vertices")
    tiny, medium = SCALES["tiny"], SCALES["medium"]
    rows = [p.label for p in experiment.points_for(tiny)]
    assert set(graphs_run(experiment, tiny, rows).values()) == {"40V/120E"}
    assert graphs_run(experiment, medium, ["vertices=16384"]) == {"vertices=16384": "16,384V/262,144E"}
    table = pd.DataFrame({"GPU": [1.0, 2.0]}, index=rows)
    raw = pd.DataFrame({"config": ["GPU", "GPU"], "dataset": rows, "query": ["q", "q"],
                        "status": ["ok", "ok"], "seconds": [0.001, 0.002]})
    figure = draw_figure(experiment, tiny, raw, table)
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels and all("40V/120E" in label for label in labels), labels
