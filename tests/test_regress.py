"""experiments.bench.regress: the gate's ratios and count checks, and a whole run of two revisions."""

import math
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from experiments.bench import regress
from experiments.bench.regress import QueryRun, count_problems, per_query_frame, ratio, summarise, verdicts


def _run(known, new, old, query="q", workload="w", group="heavy"):
    """A QueryRun with answers given as lists of (status, count, wall seconds) per revision."""
    run = QueryRun("gsi", workload, group, query, known)
    for label, answers in (("new", new), ("old", old)):
        run.runs[label] = [{"status": s, "count": c, "wall": t, "seconds": t} for s, c, t in answers]
    return run


def test_ratio_uses_medians_and_limit_bounds():
    both = _run(10, [("ok", 10, 1.0), ("ok", 10, 3.0), ("ok", 10, 2.0)], [("ok", 10, 4.0)])
    assert ratio(both, "new", "old", 5.0) == (0.5, False)
    slower = _run(10, [("timeout", 3, 5.0)], [("ok", 10, 0.5)])
    assert ratio(slower, "new", "old", 5.0) == (10.0, True)          # at least limit / old
    neither = _run(10, [("timeout", 3, 5.0)], [("timeout", 2, 5.0)])
    assert math.isnan(ratio(neither, "new", "old", 5.0)[0])


def test_per_query_frame_holds_each_timed_run():
    run = _run(10, [("ok", 10, 0.003), ("ok", 10, 0.001), ("ok", 10, 0.002)], [("timeout", 4, 5.0)])
    row = per_query_frame([run], ["new", "old"]).iloc[0]
    assert row["ms[new]"] == pytest.approx(2.0) and row["runs_ms[new]"] == "3.00 1.00 2.00"
    assert row["status[old]"] == "timeout" and row["runs_ms[old]"] == ""


def test_peaks_are_each_querys_largest_and_summarised_as_the_worst_growth():
    grows = _run(1, [("ok", 1, 1.0)], [("ok", 1, 1.0)], query="a")
    grows.runs["new"] = [dict(grows.runs["new"][0], peak=p) for p in (3 << 20, 6 << 20)]
    grows.runs["old"] = [dict(grows.runs["old"][0], peak=2 << 20)]
    same = _run(1, [("ok", 1, 1.0)], [("ok", 1, 1.0)], query="b")       # answers without a peak
    assert grows.peak("new") == 6 << 20 and same.peak("new") == 0
    row = summarise([grows, same], "new", "old", 5.0)[0].iloc[0]
    assert row["new_peak_mb"] == pytest.approx(6.0) and row["peak_ratio_worst"] == pytest.approx(3.0)
    assert per_query_frame([grows], ["new", "old"]).iloc[0]["peak_mb[old]"] == pytest.approx(2.0)
    assert "6.0" in regress.render(summarise([grows], "new", "old", 5.0)[0], "new", "old")


def test_count_problems_name_wrong_and_disagreeing_counts():
    assert count_problems(_run(10, [("ok", 10, 1.0)], [("ok", 10, 1.0)]), ("new", "old")) == []
    wrong = count_problems(_run(10, [("ok", 11, 1.0)], [("ok", 10, 1.0)]), ("new", "old"))
    assert any("new counted [11], exact 10" in p for p in wrong)
    assert any("revisions disagree" in p for p in wrong)
    unknown = count_problems(_run(None, [("ok", 7, 1.0)], [("ok", 8, 1.0)]), ("new", "old"))
    assert len(unknown) == 1 and "disagree" in unknown[0]
    # a timed-out run's partial count is no disagreement
    assert count_problems(_run(10, [("timeout", 4, 5.0)], [("ok", 10, 1.0)]), ("new", "old")) == []


def test_summary_rows_and_verdicts():
    runs = [_run(1, [("ok", 1, 1.2)], [("ok", 1, 1.0)], query="a", group="small", workload="s"),
            _run(1, [("ok", 1, 1.0)], [("ok", 1, 1.0)], query="b", group="small", workload="s"),
            _run(1, [("ok", 1, 2.0)], [("ok", 1, 1.0)], query="c", group="heavy", workload="h"),
            _run(1, [("ok", 1, 0.5)], [("ok", 2, 1.0)], query="d", group="heavy", workload="h")]
    table, problems = summarise(runs, "new", "old", 5.0)
    small = table[table.workload == "s"].iloc[0]
    heavy = table[table.workload == "h"].iloc[0]
    assert small["median"] == pytest.approx(1.1) and small["worst"] == pytest.approx(1.2)
    assert heavy["worst"] == pytest.approx(2.0) and heavy["worst_query"] == "c"
    assert heavy["counts"] == "1 wrong" and len(problems) == 2        # old's 2 is wrong and disagrees
    misses = verdicts(table)
    assert any("s: median ratio 1.10" in m for m in misses)
    assert any("h: worst ratio 2.00" in m and "(c)" in m for m in misses)


def test_a_noise_copy_gives_each_row_its_spread_and_a_miss_within_it_says_so():
    """With a second copy of the baseline the summary has its median and worst ratio to the
    baseline, the rendered table shows them, and a miss no larger than the copy's is within the noise."""
    runs = [_run(1, [("ok", 1, 1.3)], [("ok", 1, 1.0)], query="a"),
            _run(1, [("ok", 1, 1.0)], [("ok", 1, 1.0)], query="b"),
            _run(1, [("ok", 1, 1.2)], [("ok", 1, 1.0)], query="c", workload="v")]
    for run, copy in zip(runs, (1.0, 1.4, 1.05)):
        run.runs["copy"] = [{"status": "ok", "count": 1, "wall": copy, "seconds": copy}]
    table, _ = summarise(runs, "new", "old", 5.0, noise="copy")
    row = table.set_index("workload").loc["w"]
    assert row["noise_median"] == pytest.approx(1.2) and row["noise_worst"] == pytest.approx(1.4)
    misses = verdicts(table)
    assert any(m.startswith("gsi w: worst ratio 1.30") and "within the noise" in m for m in misses)
    assert any(m.startswith("gsi v: worst ratio 1.20") and "beyond the noise" in m for m in misses)
    assert "1.20/1.40" in regress.render(table, "new", "old")
    plain, _ = summarise(runs, "new", "old", 5.0)
    assert plain["noise_worst"].isna().all() and "copy" not in regress.render(plain, "new", "old")
    plain_misses = verdicts(plain)
    assert plain_misses and all("no noise copy ran: " in m and "within the noise" not in m
                                and "beyond the noise" not in m for m in plain_misses)


def test_a_copy_faster_than_the_baseline_is_noise_as_wide_as_a_slower_one():
    runs = [_run(1, [("ok", 1, 1.2)], [("ok", 1, 1.0)], query=q, group="small") for q in "ab"]
    for run in runs:
        run.runs["copy"] = [{"status": "ok", "count": 1, "wall": 0.8, "seconds": 0.8}]
    table, _ = summarise(runs, "new", "old", 5.0, noise="copy")
    assert table.iloc[0]["noise_best"] == pytest.approx(0.8)
    (miss,) = verdicts(table)
    assert "within the noise" in miss and "spread of 1.25" in miss
    for run in runs:
        run.runs["copy"][0]["wall"] = 0.9
    (miss,) = verdicts(summarise(runs, "new", "old", 5.0, noise="copy")[0])
    assert "beyond the noise" in miss and "spread of 1.11" in miss


def _levelled(levels: dict, queries: int = 4) -> list:
    """Runs whose every revision's processes (label -> one level per process) answer each query at
    that level times a query's own base wall (old's processes pooled)."""
    runs = []
    for q in range(queries):
        run = QueryRun("sgsi", "s", "small", f"q{q}", 1)
        for label, per_process in levels.items():
            run.runs[label] = [{"status": "ok", "count": 1, "wall": (q + 1) * level, "seconds": 0.0,
                                "process": f"{label}-{p}"} for p, level in enumerate(per_process) for _ in range(3)]
        runs.append(run)
    return runs


def test_process_levels_judge_a_small_miss_when_each_revision_ran_several_processes():
    """Same code spread over bimodal process levels is within the noise; a new revision slower in
    every process than every baseline process is beyond it (p = 1/84 for three against six)."""
    bimodal = _levelled({"new": [0.9, 1.27, 1.23], "old": [0.89, 1.0, 1.24], "copy": [0.81, 0.82, 0.82]})
    assert [round(x, 2) for x in regress.process_levels(bimodal, "new", "old")] == pytest.approx(
        [0.9 / 1.0, 1.27 / 1.0, 1.23 / 1.0], abs=0.01)
    table, _ = summarise(bimodal, "new", "old", 5.0, noise="copy")
    row = table.iloc[0]
    assert row["levels_new"] == "0.90 1.27 1.23" and row["levels_noise"] == "0.81 0.82 0.82"
    assert 0.05 < row["level_p"] < 0.5
    (miss,) = verdicts(table)
    assert "within the noise by process levels" in miss and "p = " in miss
    slower = _levelled({"new": [1.2, 1.21, 1.22], "old": [1.0, 1.01, 0.99], "copy": [1.0, 1.02, 0.98]})
    row = summarise(slower, "new", "old", 5.0, noise="copy")[0].iloc[0]
    assert row["level_p"] == pytest.approx(1 / 84)
    (miss,) = verdicts(summarise(slower, "new", "old", 5.0, noise="copy")[0])
    assert "beyond the noise by process levels" in miss
    one = _levelled({"new": [1.2], "old": [1.0], "copy": [1.0]})
    assert math.isnan(summarise(one, "new", "old", 5.0, noise="copy")[0].iloc[0]["level_p"])
    frame = per_query_frame(bimodal, ["new", "old"])
    assert frame.iloc[0]["runs_process[new]"] == "0 0 0 1 1 1 2 2 2"


def test_level_shift_p_is_the_share_of_draws_ranked_as_high():
    assert regress.level_shift_p([2.0], [1.0]) == pytest.approx(0.5)
    assert regress.level_shift_p([3.0, 2.0], [1.0, 0.0]) == pytest.approx(1 / 6)
    assert regress.level_shift_p([0.0, 1.0], [2.0, 3.0]) == pytest.approx(1.0)
    # ten processes against twenty: 30 choose 10 ways, estimated from LEVEL_DRAWS seeded draws
    assert regress.level_shift_p([2.0 + i for i in range(10)], [1.0] * 20) < 1e-3
    assert regress.level_shift_p([1.0] * 10, [1.0] * 20) == pytest.approx(1.0)
    spread = [0.9, 1.3, 1.2, 0.8, 1.1, 1.0, 1.25, 0.85, 0.95, 1.05]
    mixed = regress.level_shift_p(spread, [1.0 + 0.01 * i for i in range(-10, 10)])
    assert 0.05 < mixed < 0.95


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_whole_run_of_two_revisions(tmp_path, processes):
    """HEAD against itself with the cpu engine: both workers answer, counts equal the known ones;
    with two processes per revision each query has both processes' runs."""
    if subprocess.run(["git", "-C", str(regress.ROOT), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.fail("tests need the repository's git history (a clone, not an export)")
    code = regress.main(["--baseline", "HEAD", "--engines", "cpu", "--groups", "small",
                         "--workloads", "hprd-dense16", "--max-queries", "2", "--repeats", "1",
                         "--processes", str(processes), "--out", str(tmp_path)])
    assert code == 0
    assert len(list(tmp_path.glob("worker-*.log"))) == 2 * processes
    frame = pd.read_csv(tmp_path / "regress_queries.csv")
    assert list(frame["query"]) == ["query_dense_16_1", "query_dense_16_2"]
    runs = [c for c in frame.columns if c.startswith("runs_ms[")]
    assert all(len(str(v).split()) == processes for c in runs for v in frame[c])
    count_columns = [c for c in frame.columns if c.startswith("count[")]
    assert len(count_columns) == 2
    for column in count_columns:
        assert list(frame[column]) == [3, 80]
    summary = pd.read_csv(tmp_path / "regress_summary.csv")
    assert summary.loc[0, "counts"] == "ok" and summary.loc[0, "compared"] == 2
    assert len(str(summary.loc[0, "levels_new"]).split()) == processes      # each process's own level
    for column in (c for c in frame.columns if c.startswith("runs_process[")):
        assert sorted(set(str(frame.loc[0, column]).split())) == [str(p) for p in range(processes)]


def test_gpu_tasks_put_heavy_groups_first_and_pass_the_other_options_on():
    assert regress.gpu_tasks(["gsi", "egsm"], ["small", "heavy"]) == [
        ("gsi", "heavy"), ("egsm", "heavy"), ("gsi", "small"), ("egsm", "small")]
    argv = ["--gpus", "0,1", "--engines=gsi", "--repeats", "2", "--out", "x", "--groups", "small", "--per-query"]
    assert regress._without_options(argv, ("--gpus", "--engines", "--groups", "--out")) == [
        "--repeats", "2", "--per-query"]


def test_runs_on_gpus_each_see_one_gpu_and_join_into_one_table(tmp_path, monkeypatch, capsys):
    seen = []

    class Child:                                  # a run of one (engine, group) that ends at once
        def __init__(self, command, cwd, env, stdout, stderr):
            engine = command[command.index("--engines") + 1]
            folder = Path(command[command.index("--out") + 1])
            seen.append((engine, env["CUDA_VISIBLE_DEVICES"], command.count("--gpus")))
            self.wrong = engine == "egsm"
            summarise([_run(1, [("ok", 2 if self.wrong else 1, 1.0)], [("ok", 1, 1.0)], query=f"{engine}-q")],
                      "new", "old", 5.0)[0].assign(engine=engine).to_csv(folder / "regress_summary.csv",
                                                                          index=False)
            (folder / "labels.json").write_text('["abc(new)", "def"]')

        def wait(self, timeout=None):
            return 1 if self.wrong else 0

    monkeypatch.setattr(regress.subprocess, "Popen", Child)
    code = regress.main(["--gpus", "0,1", "--engines", "gsi,egsm", "--groups", "small", "--baseline", "HEAD",
                         "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert code == 1 and sorted(e for e, _, _ in seen) == ["egsm", "gsi"]
    assert all(gpu in ("0", "1") and gpus == 0 for _, gpu, gpus in seen)     # children run on one GPU
    assert "new = abc(new), old = def" in text and "FAILED OR COUNT PROBLEMS: egsm small (exit 1" in text
    assert list(pd.read_csv(tmp_path / "regress_summary.csv")["engine"]) == ["gsi", "egsm"]


def test_runs_on_gpus_past_the_stop_are_interrupted_or_not_started(tmp_path, monkeypatch, capsys):
    signals = []

    class Child:                                  # a run that is still going at the stop
        def __init__(self, command, cwd, env, stdout, stderr):
            self.folder = Path(command[command.index("--out") + 1])
            self.engine = command[command.index("--engines") + 1]

        def wait(self, timeout=None):
            if not signals:
                raise subprocess.TimeoutExpired("regress", timeout)
            summarise([_run(1, [("ok", 1, 1.0)], [("ok", 1, 2.0)], query="q")], "new", "old",
                      5.0)[0].assign(engine=self.engine).to_csv(self.folder / "regress_summary.csv", index=False)
            return regress.INTERRUPTED

        def send_signal(self, sig):
            signals.append(sig)

    monkeypatch.setattr(regress.subprocess, "Popen", Child)
    code = regress.main(["--gpus", "0,1", "--engines", "gsi", "--groups", "small", "--baseline", "HEAD",
                         "--stop-after-s", "0.01", "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert code == 1 and signals == [regress.signal.SIGINT]
    assert "FAILED OR COUNT PROBLEMS: gsi small (stopped 130" in text and " 0.50 " in text   # its finished part
    code = regress.main(["--gpus", "0,1", "--engines", "gsi,egsm", "--groups", "small", "--baseline", "HEAD",
                         "--stop-after-s", "0", "--out", str(tmp_path / "none")])
    text = capsys.readouterr().out
    assert code == 1 and "no run finished" in text and "egsm small (not started" in text


def test_an_interrupted_gate_saves_the_summary_of_its_finished_workloads(tmp_path, monkeypatch):
    def measure(workers, engines, loads, *, results, **options):
        results.append(_run(1, [("ok", 1, 1.0)], [("ok", 1, 1.0)], query="q", workload="w"))
        raise KeyboardInterrupt

    monkeypatch.setattr(regress, "measure", measure)
    class Worker:                                 # no process: measure is replaced
        def __init__(self, label, tree, log, cpus=None):
            self.proc = self

        def kill(self):
            pass

        close = kill

    monkeypatch.setattr(regress, "Worker", Worker)
    monkeypatch.setattr(regress, "workloads", lambda groups, workdir, max_queries: [])
    with pytest.raises(SystemExit) as stopped:
        regress.main(["--baseline", "HEAD", "--engines", "gsi", "--groups", "small", "--out", str(tmp_path)])
    assert stopped.value.code == regress.INTERRUPTED
    assert list(pd.read_csv(tmp_path / "regress_summary.csv")["workload"]) == ["w"]
    assert (tmp_path / "labels.json").exists()


@pytest.mark.slow
def test_a_gate_on_two_gpus_runs_and_joins(tmp_path):
    """The cpu engine through --gpus: one child run, its summary joined."""
    code = regress.main(["--gpus", "0,1", "--baseline", "HEAD", "--engines", "cpu", "--groups", "small",
                         "--workloads", "hprd-dense16", "--max-queries", "2", "--repeats", "1",
                         "--out", str(tmp_path)])
    assert code == 0
    summary = pd.read_csv(tmp_path / "regress_summary.csv")
    assert list(summary["engine"]) == ["cpu"] and summary.loc[0, "counts"] == "ok"
    assert (tmp_path / "cpu-small" / "regress_queries.csv").exists()


def test_unknown_group_is_refused(capsys):
    with pytest.raises(SystemExit):
        regress.main(["--groups", "medium", "--baseline", "HEAD"])
    assert "unknown group 'medium'" in capsys.readouterr().err


class _Recorder:
    """A stand-in worker: answers every request at once and logs which revision ran when."""

    def __init__(self, label, log):
        self.label, self.log, self._last = label, log, None

    def send(self, **request):
        self._last = request

    def receive(self):
        if self._last.get("op") == "match":
            self.log.append((self.label, self._last["timeout"]))
        return {"ok": True, "status": "ok", "count": 1, "wall": 1e-3, "seconds": 1e-3}

    def ask(self, **request):
        self.send(**request)
        return self.receive()


def test_every_run_follows_the_other_revision_and_each_goes_first_as_often():
    log = []
    workers = [_Recorder("new", log), _Recorder("old", log)]
    load = regress.Workload("w", "small", "data", [(f"q{i}", f"q{i}.graph", 1) for i in range(4)])
    runs = regress.measure(workers, ["cpu"], [load], repeats=5, limit_s=1.0, warm_s=2.0, mode="interleave",
                           progress=lambda _: None)
    assert len(runs) == 4 and all(len(r.runs["new"]) == len(r.runs["old"]) == 5 for r in runs)
    after_compile = log[2:]                       # the first query answered by both at once comes first
    assert len(after_compile) == 4 * (2 + 10)
    timed = [i for i, (_, timeout) in enumerate(after_compile) if timeout == 1.0]
    assert len(timed) == 40 and all(after_compile[i - 1][0] != after_compile[i][0] for i in timed)
    firsts = [after_compile[12 * q][0] for q in range(4)]                        # each query's first run
    assert firsts == ["new", "old", "new", "old"]


def test_each_turn_says_how_long_its_prepare_and_first_query_took():
    """The gate's log names, per worker turn, the seconds of prepare and of the first query (its
    compiles), where a gate's time goes besides the timed runs."""
    lines = []
    workers = [_Recorder("new", []), _Recorder("old", [])]
    load = regress.Workload("w", "small", "data", [("q0", "q0.graph", 1)])
    regress.measure(workers, ["cpu"], [load], repeats=1, limit_s=1.0, progress=lines.append)
    turns = [line.strip() for line in lines if "prepared in" in line]
    assert [t.split(":")[0] for t in turns] == ["new", "old"]
    assert all(re.fullmatch(r"\w+: prepared in \d+\.\d s, first query \(compiles\) \d+\.\d s", t) for t in turns)


class _Holder(_Recorder):
    """A stand-in worker that logs prepare and drop too, and the query run before a match."""

    def receive(self):
        op = self._last.get("op")
        if op in ("prepare", "drop"):
            self.log.append((self.label, op))
        elif op == "match":
            self.log.append((self.label, self._last.get("before") or "match"))
        return {"ok": True, "status": "ok", "count": 1, "wall": 1e-3, "seconds": 1e-3}


def test_by_default_the_revisions_hold_the_card_in_turns():
    """Default mode: each (engine, workload) is prepared, answered and dropped by one revision
    before the next prepares it (none holds memory while another runs), with no memory limit,
    and the first revision alternates between workloads."""
    log = []
    workers = [_Holder("new", log), _Holder("old", log)]
    loads = [regress.Workload(f"w{k}", "small", "data", [(f"q{i}", f"q{i}.graph", 1) for i in range(3)])
             for k in range(2)]
    runs = regress.measure(workers, ["cpu"], loads, repeats=2, limit_s=1.0, progress=lambda _: None)
    assert len(runs) == 6 and all(len(r.runs["new"]) == len(r.runs["old"]) == 2 for r in runs)
    holder = None
    for label, op in log:                          # one revision between a prepare and its drop
        if op == "prepare":
            assert holder is None
            holder = label
        else:
            assert label == holder
            if op == "drop":
                holder = None
    prepares = [label for label, op in log if op == "prepare"]
    assert prepares == ["new", "old", "old", "new"]


def test_several_processes_per_revision_take_turns_and_pool_their_runs():
    """--processes 2: four workers, two per revision, each holding the card alone in its turn; a
    query's runs of both processes of a revision are pooled (2 x repeats) and the summary still
    compares the two revisions."""
    log = []
    workers = [_Holder("new", log), _Holder("old", log), _Holder("new", log), _Holder("old", log)]
    load = regress.Workload("w", "small", "data", [(f"q{i}", f"q{i}.graph", 1) for i in range(3)])
    runs = regress.measure(workers, ["cpu"], [load], repeats=2, limit_s=1.0, progress=lambda _: None)
    assert len(runs) == 3 and all(len(r.runs["new"]) == len(r.runs["old"]) == 4 for r in runs)
    assert [label for label, op in log if op == "prepare"] == ["new", "old", "new", "old"]
    table, _ = regress.summarise(runs, "new", "old", 1.0)
    assert table.iloc[0]["median"] == pytest.approx(1.0)


def test_processes_above_one_need_the_turns_mode(capsys):
    with pytest.raises(SystemExit):
        regress.main(["--processes", "2", "--mode", "interleave", "--baseline", "HEAD"])
    assert "--processes" in capsys.readouterr().err


def test_a_workloads_before_query_runs_before_every_run():
    log = []
    workers = [_Holder("new", log), _Holder("old", log)]
    load = regress.Workload("w", "heavy", "data", [("q0", "q0.graph", 1)], before="t.graph")
    regress.measure(workers, ["cpu"], [load], repeats=2, limit_s=1.0, progress=lambda _: None)
    matches = [op for _, op in log if op not in ("prepare", "drop")]
    assert matches == ["match", "t.graph", "t.graph", "t.graph"] * 2   # compile, warm, 2 timed; per revision


def test_a_gate_continued_with_skip_done_measures_only_the_pairs_left(tmp_path, capsys):
    """An earlier run's finished (engine, workload)s are left out; the rest is measured into the new
    folder; with nothing left the command says so; the earlier folder cannot be the new --out."""
    first, second, third = tmp_path / "first", tmp_path / "second", tmp_path / "third"
    common = ["--baseline", "HEAD", "--engines", "cpu", "--groups", "small", "--max-queries", "1",
              "--repeats", "1"]
    assert regress.main([*common, "--workloads", "hprd-dense16", "--out", str(first)]) == 0
    assert regress.done_pairs(tmp_path) == {("cpu", "hprd-dense16")}
    assert regress.main([*common, "--workloads", "hprd-dense16,yeast-dense8", "--skip-done", str(first),
                         "--out", str(second)]) == 0
    assert list(pd.read_csv(second / "regress_summary.csv")["workload"]) == ["yeast-dense8"]
    assert regress.done_pairs(tmp_path) == {("cpu", "hprd-dense16"), ("cpu", "yeast-dense8")}
    capsys.readouterr()
    assert regress.main([*common, "--workloads", "hprd-dense16,yeast-dense8", "--skip-done", str(tmp_path),
                         "--out", str(third)]) == 0
    assert "nothing left to measure" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        regress.main([*common, "--skip-done", str(first), "--out", str(first)])
    assert "give a new --out" in capsys.readouterr().err


def test_the_gpus_local_cpus_come_from_its_pci_address_and_sysfs(tmp_path, monkeypatch):
    """``gpu_local_cpus``: nvidia-smi's PCI address of the visible GPU, sysfs's ``local_cpulist`` of
    it, cut to the CPUs this process may use; a missing nvidia-smi or file is a reason, not an error."""
    from common.gpu import backend

    assert backend.parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert backend.sysfs_pci_path("00000000:19:00.0") == "/sys/bus/pci/devices/0000:19:00.0"
    allowed = sorted(os.sched_getaffinity(0))
    asked = []

    def smi(cmd, **kwargs):
        asked.append(cmd[-1])
        return subprocess.CompletedProcess(cmd, 0, stdout="00000000:19:00.0\n", stderr="")

    (tmp_path / "local_cpulist").write_text(f"{allowed[0]},{10**6}\n")     # one CPU allowed, one not
    monkeypatch.setattr(backend.subprocess, "run", smi)
    monkeypatch.setattr(backend, "sysfs_pci_path", lambda bus: str(tmp_path) if bus.endswith("19:00.0") else "")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    cpus, line = backend.gpu_local_cpus()
    assert asked == ["2"] and cpus == {allowed[0]} and "pinned to GPU 2's NUMA node: 1 CPUs" in line
    (tmp_path / "local_cpulist").unlink()
    cpus, line = backend.gpu_local_cpus("0")
    assert cpus is None and line.startswith("not pinned:") and "local_cpulist (FileNotFoundError)" in line

    def missing(cmd, **kwargs):
        raise FileNotFoundError(cmd[0])

    monkeypatch.setattr(backend.subprocess, "run", missing)
    assert backend.gpu_local_cpus("0") == (None, "not pinned: nvidia-smi (FileNotFoundError)")


def test_each_revision_tree_has_a_kernel_cache_of_its_own(tmp_path, monkeypatch):
    """Workers of one tree share a kernel cache folder (the second process loads what the first
    compiled); two trees never do (their kernels would evict each other's)."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    new, old = tmp_path / "new", tmp_path / "old"
    caches = [regress.worker_env(tree)["NUMBA_CACHE_DIR"] for tree in (new, old, new)]
    assert caches[0] == caches[2] != caches[1]
    assert all(Path(c).parent == tmp_path / "cache" / "gpusm-regress" for c in caches)
    env = regress.worker_env(new, {3, 1})
    assert env["GPUSM_PIN_CPUS"] == "1,3" and env["PYTHONPATH"].split(os.pathsep)[0] == str(new)


def test_a_worker_runs_on_the_cpus_it_is_given(tmp_path):
    """A regress worker pins itself to its CPUs before it imports the revision's code."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    with open(tmp_path / "worker.log", "w") as log:
        worker = regress.Worker("t", regress.ROOT, log, {cpu})
        try:
            assert worker.ask(op="nothing") == {"ok": False, "error": "unknown op", "process": worker.proc.pid}
            assert os.sched_getaffinity(worker.proc.pid) == {cpu}
        finally:
            worker.close()
