"""The papers' claims in the reports: checks, verdicts, the paper's value as a second marker in figures."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from experiments import experiments_of  # noqa: E402
from experiments.harness import verdicts  # noqa: E402
from experiments.harness.core import (  # noqa: E402
    Claim,
    Config,
    Evidence,
    Experiment,
    Metric,
    Point,
    lower,
    measured,
    trend,
)
from experiments.harness.report import claims_section, draw_figure  # noqa: E402
from experiments.harness.workloads import Dataset, QuerySpec, get_scale  # noqa: E402

TABLE = pd.DataFrame({"A": [1.0, 2.0, 4.0], "B": [2.0, 3.0, math.nan]}, index=["x1", "x2", "x3"])


def _evidence(cells: dict, timed: bool = False, keys: dict | None = None) -> Evidence:
    """Evidence of (row, column) -> per-query run arrays; the table holds their means."""
    rows = sorted({r for r, _ in cells}, key=str)
    columns = sorted({c for _, c in cells})
    table = pd.DataFrame(math.nan, index=rows, columns=columns)
    ev = Evidence(table, timed=timed, keys=keys or {})
    for (r, c), runs in cells.items():
        ev.samples[(r, c)] = {f"q{i}": np.asarray(v, dtype=float) for i, v in enumerate(runs)}
        ev.ran[(r, c)] = len(runs)
        table.loc[r, c] = float(np.mean([np.median(v) for v in runs]))
    return ev


def _queries(centre: float, n: int = 20, runs: int = 3, spread: float = 0.01, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [centre * (1 + 0.05 * rng.standard_normal()) * (1 + spread * rng.standard_normal(runs)) for _ in range(n)]


def test_clear_differences_hold_and_noise_is_inconclusive():
    ev = _evidence({("x", "A"): _queries(1.0), ("x", "B"): _queries(2.0, seed=1)}, timed=True)
    assert lower("A", "B")(ev)[0] == "held" and lower("B", "A")(ev)[0] == "did not hold"
    noisy = _evidence({("x", "A"): _queries(1.0, spread=0.3), ("x", "B"): _queries(1.03, spread=0.3, seed=1)},
                      timed=True)
    assert lower("A", "B")(noisy)[0] == "inconclusive"        # 1.16 against 1.26 within the spread


def test_times_need_three_runs_and_claims_ten_solved():
    one_run = _evidence({("x", "A"): _queries(1.0, runs=1), ("x", "B"): _queries(9.0, runs=1)}, timed=True)
    assert lower("A", "B")(one_run)[0].startswith("inconclusive (1 timed run")
    few = _evidence({("x", "A"): _queries(1.0, n=2), ("x", "B"): _queries(9.0, n=1)}, timed=True)
    assert lower("A", "B")(few)[0] == "not testable (1 solved by both)"
    sweep = _evidence({("p1", "A"): _queries(9.0, n=1), ("p2", "A"): _queries(1.0)}, timed=True)
    assert trend("A", "down")(sweep)[0] == "not testable (20 + 1 solved)"   # last against first
    assert verdicts.too_few(20, 9) == "not testable (20 + 9 solved)" and verdicts.too_few(10, 10) is None


def test_nothing_solved_on_either_side_is_not_testable():
    ev = _evidence({("p1", "A"): [[0.0]] * 20, ("p2", "A"): [[0.0]] * 20})
    ev.counts_solved = True
    assert trend("A", "up")(ev)[0] == "not testable (0 solved)"   # not "did not hold" on 0 vs 0


def test_magnitude_bands():
    assert verdicts.judge_magnitude(9.7, 20.2) == "held"
    assert verdicts.judge_magnitude(1114.0, 26.0) == "direction only"
    assert verdicts.judge_magnitude(1.4, 702.3) == "direction only"
    assert verdicts.judge_magnitude(0.8, 702.3) == "did not hold"
    assert verdicts.judge_magnitude(50.0, (10.0, 100.0)) == "held"
    ev = _evidence({("x", "A"): _queries(1.0), ("x", "B"): _queries(40.0, seed=1)}, timed=True)
    assert lower("A", "B", factor=26.0)(ev)[0] == "held"
    assert lower("A", "B", factor=702.3)(ev)[0] == "direction only"
    measured = lower("A", "B", factor=26.0)(ev)[1]            # A / B as measured, and B / A as printed
    ratio = float(measured.split(": ", 1)[1].split("x")[0])
    printed_way = float(measured.split("(B / A: ")[1].split("x)")[0])
    assert ratio < 0.1 and printed_way == pytest.approx(1 / ratio, rel=0.01)
    assert "(B / A" not in lower("A", "B")(ev)[1]                # no printed factor: only A / B


def test_compare_is_seeded_and_paired():
    a, b = _queries(1.0), _queries(1.2, seed=1)
    assert verdicts.compare(a, b) == verdicts.compare(a, b)
    assert verdicts.compare(a, b, paired=True).outcome == "lower"
    assert verdicts.compare(b, value=1.0).outcome == "higher"
    assert verdicts.combine(["held", "inconclusive"]) == "inconclusive"
    assert verdicts.combine(["held", "did not hold", "inconclusive"]) == "did not hold"


def test_identical_points_and_unsupported_get_no_verdict():
    cells = {("N=5", "A"): _queries(1.0), ("N=6", "A"): _queries(1.0)}
    same = _evidence(cells, timed=True, keys={"N=5": ("g", "q"), "N=6": ("g", "q")})
    assert trend("A", "up")(same)[0] == "not testable (N=5 and N=6 ran the same graph and queries)"
    ev = _evidence({("x", "A"): _queries(1.0), ("x", "B"): _queries(2.0)}, timed=True)
    ev.samples[("x", "B")], ev.unsupported[("x", "B")], ev.ran[("x", "B")] = {}, 6, 6
    assert lower("A", "B")(ev)[0] == "not testable (B cannot take these queries: unsupported)"


def test_checks_that_cannot_fail_are_measurements():
    verdict, found = Claim("pool grows", measured("A")).judge(TABLE)[:2]
    assert verdict == "measured" and "x1: 1" in found
    names = {c.text: c for e in experiments_of() for c in e.claims}
    for text in ("Fig. 17: the seed pool's memory grows steeply with N", "Tables 2/6: gMatch's idle rate is below 5%",
                 "Memory figure: gMatch's stack is far smaller than the coarse global stacks"):
        assert names[text].judge(TABLE.rename(columns={"A": "gMatch", "B": "Naive"}))[0] == "measured", text


def test_verdicts_are_held_did_not_hold_or_not_testable_with_a_reason():
    assert Claim("a", None, "PBE is not built").verdict(TABLE) == ("not testable", "PBE is not built")
    verdict, reason = Claim("a", lower("A", "B", rows=("x3",))).verdict(TABLE)
    assert verdict.startswith("not testable")


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
            assert claim.verdict(filled)[0].split(" (")[0] in (
                "held", "did not hold", "direction only", "inconclusive", "not testable", "measured"), claim.text
            assert claim.verdict(empty)[0].split(" (")[0] in ("not testable", "measured"), claim.text
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
    assert "| A is faster than B | **not testable (" in section      # a bare table: no query to weigh
    raw = pd.DataFrame({"experiment": "test.toy", "config": ["A", "A", "B", "B"], "dataset": ["p1", "p2"] * 2,
                        "query": "q0", "status": "ok", "count": 1, "seconds": [0.001, 0.002, 0.003, 0.004],
                        "stats": ""})
    fig = draw_figure(experiment, get_scale("tiny"), raw, table)
    ax = fig.axes[0]
    assert "A: paper's value" in [t.get_text() for t in ax.get_legend().get_texts()]
    marker = [line for line in ax.get_lines() if line.get_label() == "A: paper's value"][0]
    assert marker.get_ydata()[0] == 5.0 and math.isnan(marker.get_ydata()[1])


def test_committed_results_readme_is_what_the_reports_generate():
    from pathlib import Path

    from experiments.harness.readme import render

    results = Path(__file__).resolve().parents[1] / "results"
    assert (results / "README.md").read_text() == render(results, "medium"), \
        "results/README.md differs from the reports: run make results-readme"


def test_committed_reports_state_the_verdicts_their_rows_give():
    """Every committed report (each set's <experiment>.<scale>.md and run.<scale>.json) states the
    verdicts today's rules give on its rows, as results/README.md does."""
    from pathlib import Path

    from experiments.harness.readme import refresh_reports, run_scales

    results = Path(__file__).resolve().parents[1] / "results"
    assert "medium" in run_scales(results)
    stale = [str(p) for scale in run_scales(results) for p in refresh_reports(results, scale, write=False)]
    assert not stale, f"reports whose verdicts differ from their rows (run make results-readme): {stale}"


def test_a_stale_report_is_refreshed_from_its_rows(tmp_path):
    """refresh_reports rewrites a report's claims section and its run.<scale>.json claims from the
    rows, keeps the rest of the report, and redraws the figure; a fresh report is left alone."""
    import json

    from experiments import get_experiment
    from experiments.harness.core import run_set
    from experiments.harness.readme import refresh_reports

    experiment = get_experiment("stwig_lin14.fig3a_hash")
    run_set("stwig_lin14", "tiny", tmp_path, experiments=[experiment], isolation="inline", progress=False,
            log=lambda line: None)
    folder = tmp_path / "stwig_lin14"
    report, meta_path = folder / f"{experiment.name}.tiny.md", folder / "run.tiny.json"
    figure = report.with_suffix(".png")
    assert refresh_reports(tmp_path, "tiny") == []
    fresh_report, fresh_meta = report.read_text(), json.loads(meta_path.read_text())
    report.write_text(fresh_report.replace("| claim | verdict | measured | why |", "| claim | verdict | why |"))
    stale_meta = json.loads(meta_path.read_text())
    stale_meta["experiments"][experiment.name]["claims"] = [{"claim": "old", "verdict": "held"}]
    meta_path.write_text(json.dumps(stale_meta))
    figure.unlink()
    figure.write_bytes(b"")
    assert refresh_reports(tmp_path, "tiny", write=False) == [report, meta_path]
    assert refresh_reports(tmp_path, "tiny") == [report, meta_path]
    assert report.read_text() == fresh_report
    assert json.loads(meta_path.read_text())["experiments"][experiment.name]["claims"] == \
        fresh_meta["experiments"][experiment.name]["claims"]
    assert figure.read_bytes()[:4] == b"\x89PNG"
    assert refresh_reports(tmp_path, "tiny") == []
    with pytest.raises(ValueError, match="has no .* section"):
        from experiments.harness.report import replace_claims_section
        replace_claims_section("# a report\n\n## Measured\n", ["x"])


@pytest.mark.slow
def test_the_results_readme_does_not_depend_on_the_optional_peers_installed():
    """A fresh process where networkx and igraph cannot be imported renders the committed README."""
    import subprocess
    import sys

    from _subprocess import ROOT, python_env

    hide = "import sys; sys.modules['networkx'] = sys.modules['igraph'] = None; "
    check = ("from common.engine.registry import available_engines; "
             "assert not {'networkx', 'igraph'} & set(available_engines()); "
             "from experiments.harness.readme import main; sys.exit(main(['--results', 'results', '--check']))")
    done = subprocess.run([sys.executable, "-c", hide + check], cwd=ROOT, env=python_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def test_points_that_ran_the_same_graph_and_queries_are_found():
    experiment, scale = _toy(), get_scale("tiny")
    raw = pd.DataFrame({"experiment": "test.toy", "config": "A", "dataset": ["p1", "p2"], "query": "q0",
                        "status": "ok", "count": 1, "seconds": [0.001, 0.002], "stats": ""})
    ev = experiment.evidence(raw, scale)
    assert ev.keys["p1"] == ev.keys["p2"]
    assert trend("A", "up")(ev)[0] == "not testable (p1 and p2 ran the same graph and queries)"


def test_every_pattern_names_cells_not_run_apart_from_unsolved_ones():
    """gMatch Table 4's "finishes every pattern": a cell the budget did not reach is not run, not
    unsolved; with every run cell solved it leaves the claim inconclusive."""
    from experiments.papers.gmatch_pvldb26 import _every_pattern

    ev = _evidence({("pk P1", "gMatch"): [[0.01, 0.01, 0.01]], ("pk P2", "gMatch"): [[0.02, 0.02, 0.02]]})
    ev.table.loc["rm P9", "gMatch"] = math.nan                 # a row the budget did not reach
    assert _every_pattern(ev) == ("inconclusive", "2 of 2 cells run solved; not run: rm P9")
    ev.ran[("rm P9", "gMatch")] = 1                            # it ran and did not finish
    assert _every_pattern(ev) == ("did not hold", "2 of 3 cells run solved; not: rm P9")
    del ev.table["gMatch"]
    ev.table["gMatch"] = [0.01, 0.02, 0.03]
    assert _every_pattern(ev) == ("held", "3 of 3 cells run solved")
