"""The papers' claims in the reports: checks, verdicts, the paper's value as a second marker in figures."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")

from experiments import experiments_of  # noqa: E402
from experiments.harness.core import (  # noqa: E402
    Claim,
    Config,
    Experiment,
    Metric,
    Point,
    all_of,
    at_least,
    below,
    lower,
    ratio_between,
    row_lower,
    trend,
)
from experiments.harness.report import claims_section, draw_figure  # noqa: E402
from experiments.harness.workloads import Dataset, QuerySpec, get_scale  # noqa: E402

TABLE = pd.DataFrame({"A": [1.0, 2.0, 4.0], "B": [2.0, 3.0, math.nan]}, index=["x1", "x2", "x3"])


def test_checks_compare_measured_cells_only():
    assert lower("A", "B")(TABLE) is True                 # x3 has no B: left out
    assert lower("B", "A")(TABLE) is False
    assert lower("A", "B", rows=("x3",))(TABLE) is None   # nothing measured on both
    assert below("A", 5.0)(TABLE) is True and below("A", 3.0)(TABLE) is False
    assert at_least("A", 7 / 3)(TABLE) is True and at_least("A", 2.5)(TABLE) is False
    assert trend("A", "up")(TABLE) is True and trend("A", "down")(TABLE) is False
    assert trend("B", "up")(TABLE) is True                # its measured end points: x1 and x2
    assert ratio_between("B", "A", 1.5, 2.0)(TABLE) is True   # (2 + 1.5) / 2
    assert row_lower("A", "x1", "x3")(TABLE) is True and row_lower("B", "x1", "x3")(TABLE) is None
    assert all_of(lower("A", "B"), trend("A", "down"))(TABLE) is False
    assert all_of(lower("A", "B"), lower("A", "B", rows=("x3",)))(TABLE) is True
    assert all_of(lower("A", "B", rows=("x3",)))(TABLE) is None


def test_verdicts_are_held_did_not_hold_or_not_testable_with_a_reason():
    assert Claim("a", lower("A", "B"), "why").verdict(TABLE) == ("held", "why")
    assert Claim("a", lower("B", "A")).verdict(TABLE)[0] == "did not hold"
    verdict, reason = Claim("a", lower("A", "B", rows=("x3",))).verdict(TABLE)
    assert verdict == "not testable" and "not measured" in reason
    assert Claim("a", None, "PBE is not built").verdict(TABLE) == ("not testable", "PBE is not built")


def test_every_declared_claim_judges_its_experiments_table_without_error():
    scale = get_scale("tiny")
    judged = 0
    for experiment in experiments_of():
        rows = list(experiment.row_groups(scale))
        columns = [c.label for c in experiment.configs]
        filled = pd.DataFrame(np.arange(1, len(rows) * len(columns) + 1, dtype=float).reshape(len(rows), -1),
                              index=rows, columns=columns)
        empty = filled * math.nan
        for claim in experiment.claims:
            assert claim.verdict(filled)[0] in ("held", "did not hold", "not testable"), claim.text
            assert claim.verdict(empty)[0] == "not testable", claim.text
            judged += 1
    assert judged >= 50
    papers = {e.paper for e in experiments_of() if e.claims}
    assert papers == {"gsi_icde20", "sgsi_tkde22", "egsm_sigmod23", "gmatch_pvldb26", "stwig_lin14"}


def _toy():
    data = Dataset("toy", 40, 120, vertex_labels=3)
    return Experiment("test.toy", "testpaper", "toy", (Config.of("A", "cpu"), Config.of("B", "cpu")),
                      (Point("p1", data, QuerySpec("induced", size=3, count=2)),
                       Point("p2", data, QuerySpec("induced", size=3, count=2))),
                      Metric("avg_ms"), time_limit_s=10.0, figure="bars",
                      paper_values=pd.DataFrame({"A": [5.0, math.nan]}, index=["p1", "p2"]),
                      claims=(Claim("A is faster than B", lower("A", "B")),))


def test_reports_state_the_claims_and_figures_draw_the_papers_value():
    experiment = _toy()
    table = pd.DataFrame({"A": [1.0, 2.0], "B": [3.0, 4.0]}, index=["p1", "p2"])
    section = "\n".join(claims_section(experiment, table))
    assert "| A is faster than B | **held** |" in section
    raw = pd.DataFrame({"experiment": "test.toy", "config": ["A", "A", "B", "B"], "dataset": ["p1", "p2"] * 2,
                        "query": "q0", "status": "ok", "count": 1, "seconds": [0.001, 0.002, 0.003, 0.004],
                        "stats": ""})
    fig = draw_figure(experiment, get_scale("tiny"), raw, table)
    ax = fig.axes[0]
    assert "A: paper's value" in [t.get_text() for t in ax.get_legend().get_texts()]
    marker = [line for line in ax.get_lines() if line.get_label() == "A: paper's value"][0]
    assert marker.get_ydata()[0] == 5.0 and math.isnan(marker.get_ydata()[1])
