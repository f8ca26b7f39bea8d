"""Results files under abuse: damaged tails, rewrites, and two runs into one folder."""

from __future__ import annotations

import csv
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from experiments.cli import main as experiments_main
from experiments.harness.core import run_set
from experiments.harness.runner import KEY, ROW_FIELDS, SKIPPED, SettingsChanged, SettingsChangedWarning, read_rows
from experiments.harness.store import LOCK_NAME, DamagedRowWarning, FolderLock, FolderLocked, repair

ROOT = Path(__file__).resolve().parents[1]
NAME = "gsi_icde20.table5_time"


def _row(query: str, status: str = "ok", count: int = 1, stats: str = '{"a":1,"b":"x"}') -> list:
    values = {f: "" for f in ROW_FIELDS}
    values.update(experiment="e", config="c", engine="cpu", dataset="d", query=query, status=status,
                  count=count, seconds=0.5, stats=stats)
    return [values[f] for f in ROW_FIELDS]


def _write(path: Path, rows: list, tail: str = "") -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(ROW_FIELDS)
        writer.writerows(rows)
        handle.write(tail)


def _summary(rows: pd.DataFrame) -> list:
    return sorted(zip(rows["config"], rows["dataset"], rows["query"], rows["status"], rows["count"]))


# ---------------------------------------------------------------------- repair, unit by unit
def test_a_row_without_final_newline_is_set_aside_naming_file_and_line(tmp_path):
    path = tmp_path / "r.csv"
    _write(path, [_row("q0"), _row("q1")], tail="e,c,cpu,d,q2,ok,3,0.1")
    with pytest.warns(DamagedRowWarning, match=rf"{path}:4: damaged row .*no final newline"):
        damaged = repair(path, ROW_FIELDS, KEY)
    assert damaged == [(4, "cut short: no final newline")]
    assert read_rows(path)["query"].tolist() == ["q0", "q1"]
    assert "e,c,cpu,d,q2,ok,3,0.1" in (tmp_path / "r.csv.damaged").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.csv.damaged"]   # no temp left


def test_a_row_cut_inside_its_quoted_field_then_appended_to_loses_nothing_else(tmp_path):
    # a row cut inside the quoted stats field, the next run's rows appended to it
    path = tmp_path / "r.csv"
    _write(path, [_row("q0")])
    line = ",".join(map(str, _row("q1")[:-1])) + ',"{""a"":1,""b'    # no closing quote, no newline
    with path.open("a", newline="") as handle:
        handle.write(line)
        csv.writer(handle).writerows([_row("q2"), _row("q3")])
    with pytest.raises(ValueError, match=str(path)):
        read_rows(path)                                    # a clear error, naming the file
    with pytest.warns(DamagedRowWarning, match=rf"{path}:3: "):
        repair(path, ROW_FIELDS, KEY)
    assert read_rows(path)["query"].tolist() == ["q0", "q3"]   # q1 and its merged q2 run again


def test_wrong_field_count_header_inside_data_and_duplicates_are_set_aside(tmp_path):
    path = tmp_path / "r.csv"
    _write(path, [_row("q0"), _row("q1")[:-3], list(ROW_FIELDS), _row("q2"), _row("q0", count=9)])
    with pytest.warns(DamagedRowWarning):
        damaged = repair(path, ROW_FIELDS, KEY)
    assert [line for line, _ in damaged] == [3, 4, 6]
    assert "14 fields, expected 17" in damaged[0][1] and "header" in damaged[1][1]
    assert damaged[2][1] == "duplicate of line 2"
    rows = read_rows(path)
    assert rows["query"].tolist() == ["q0", "q2"] and rows["count"].tolist() == [1, 1]


def test_skipped_rows_are_dropped_atomically_and_whole_files_are_left_alone(tmp_path):
    path = tmp_path / "r.csv"
    _write(path, [_row("q0"), _row("q1", status=SKIPPED)])
    assert repair(path, ROW_FIELDS, KEY, drop_status=SKIPPED) == []
    assert read_rows(path)["query"].tolist() == ["q0"]
    before = path.stat().st_mtime_ns, path.read_bytes()
    time.sleep(0.01)
    assert repair(path, ROW_FIELDS, KEY, drop_status=SKIPPED) == []
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before     # nothing to do: not rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


# ---------------------------------------------------------------------- the undisturbed reference run
@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A complete tiny gsi_icde20.table5_time run (the undisturbed reference)."""
    out = tmp_path_factory.mktemp("undisturbed")
    outcome = run_set("gsi_icde20", "tiny", out, names=[NAME], isolation="inline", progress=False,
                      log=lambda line: None)
    assert not outcome.failed
    path = out / "gsi_icde20" / f"{NAME}.tiny.csv"
    return path, read_rows(path)


@pytest.mark.parametrize("cut", ["middle", "quoted"])
def test_resume_after_the_last_line_is_cut_reruns_it(tmp_path, finished, cut):
    source, reference = finished
    path = tmp_path / "gsi_icde20" / source.name
    path.parent.mkdir()
    text = source.read_bytes()
    last = text.rstrip(b"\r\n").rfind(b"\n") + 1
    at = last + (len(text) - last) // 2 if cut == "middle" else text.rfind(b'""', last) - 3
    path.write_bytes(text[:at])
    lines = text[:at].count(b"\n") + 1
    with pytest.warns(DamagedRowWarning, match=rf"{path.name}:{lines}: damaged row"):
        outcome = run_set("gsi_icde20", "tiny", tmp_path, names=[NAME], isolation="inline",
                          progress=False, log=lambda line: None)
    rows = read_rows(path)
    assert _summary(rows) == _summary(reference) and len(rows) == len(reference)
    assert not outcome.failed and path.read_bytes().endswith(b"\n")
    assert (path.parent / (path.name + ".damaged")).exists()


# ---------------------------------------------------------------------- settings of a resumed run
def _copy(finished, tmp_path, stats=None) -> Path:
    """The reference run's CSV under ``tmp_path``, each row's stats rewritten by ``stats(dict)``."""
    source, _ = finished
    path = tmp_path / "gsi_icde20" / source.name
    path.parent.mkdir()
    if stats is None:
        path.write_bytes(source.read_bytes())
    else:
        rows = read_rows(source)
        rows["stats"] = [json.dumps(stats(json.loads(js))) for js in rows["stats"]]
        rows.to_csv(path, index=False)
    return path


def _limit(stats: dict, limit: float) -> dict:
    return dict(stats, settings=dict(stats["settings"], time_limit_s=limit))


def test_a_resumed_set_under_the_same_settings_runs_nothing_again(tmp_path, finished):
    path = _copy(finished, tmp_path)
    before = path.read_bytes()
    assert {json.loads(js)["settings"]["time_limit_s"] for js in read_rows(path)["stats"]} == {100.0}
    outcome = run_set("gsi_icde20", "tiny", tmp_path, names=[NAME], isolation="inline", progress=False,
                      log=lambda line: None)
    assert not outcome.failed and path.read_bytes() == before        # every row reused, none appended


def test_rows_of_another_time_limit_stop_the_command_in_one_line_until_rerun_changed(tmp_path, finished, capsys):
    _, reference = finished
    path = _copy(finished, tmp_path, lambda stats: _limit(stats, 0.5))
    before = path.read_bytes()
    command = [NAME, "--scale", "tiny", "--out", str(tmp_path), "--quiet", "--isolation", "inline"]
    assert experiments_main(command) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"experiments: error: {path}: ") and "Traceback" not in err[0]
    assert (f"of experiment {NAME}, config GSI-, dataset Enron were measured with time_limit_s=0.5 "
            "(this run: 100.0)") in err[0]
    assert "(and 7 more cell(s))" in err[0] and "fresh --out, or --rerun-changed" in err[0]
    assert path.read_bytes() == before                               # nothing ran, nothing was written
    with pytest.warns(SettingsChangedWarning, match=f"{len(reference)} row"):
        assert experiments_main(command + ["--rerun-changed"]) == 0
    rows = read_rows(path)
    assert _summary(rows) == _summary(reference) and len(rows) == len(reference)
    assert {json.loads(js)["settings"]["time_limit_s"] for js in rows["stats"]} == {100.0}
    aside = (path.parent / (path.name + ".discarded")).read_text()
    assert aside.count("measured with time_limit_s=0.5 (this run: 100.0)") == len(reference)


def test_an_old_file_without_settings_is_refused_by_the_set_and_by_dask_before_any_task(tmp_path, finished):
    from _extras import requires

    path = _copy(finished, tmp_path, lambda stats: {k: v for k, v in stats.items() if k != "settings"})
    before = path.read_bytes()
    with pytest.raises(SettingsChanged, match=rf"{path}: 2 row\(s\) of experiment {NAME}, config GSI-, dataset "
                                              r"Enron were measured with no recorded settings"):
        run_set("gsi_icde20", "tiny", tmp_path, names=[NAME], isolation="inline", progress=False,
                log=lambda line: None)
    requires("distributed")
    from experiments.harness.cells import run_on_dask

    with pytest.raises(SettingsChanged, match="no recorded settings"):   # raised before the client is used
        run_on_dask({"gsi_icde20": [NAME]}, "tiny", tmp_path, client=None, progress=False, log=lambda line: None)
    assert path.read_bytes() == before and not (tmp_path / "gsi_icde20" / LOCK_NAME).exists()


# ---------------------------------------------------------------------- the folder lock
_HOLD = ("import sys, time; sys.path.insert(0, {root!r}); from experiments.harness.store import FolderLock; "
         "FolderLock({folder!r}, 'holder').acquire(); print('held', flush=True); time.sleep(60)")


@pytest.mark.slow
def test_a_second_run_names_the_holder_and_exits_non_zero(tmp_path, capsys):
    folder = tmp_path / "gsi_icde20"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD.format(root=str(ROOT), folder=str(folder))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderLocked, match=rf"pid {holder.pid} on host {socket.gethostname()}"):
            run_set("gsi_icde20", "tiny", tmp_path, names=[NAME], isolation="inline", progress=False)
        code = experiments_main([NAME, "--scale", "tiny", "--out", str(tmp_path), "--quiet",
                                 "--isolation", "inline"])
        err = capsys.readouterr().err
        assert code != 0 and f"pid {holder.pid}" in err and "Traceback" not in err
        assert not list(folder.glob("*.csv"))              # the second run wrote nothing
    finally:
        holder.kill()
        holder.wait()


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_NAME).write_text(f'{{"pid": {dead.pid}, "host": "{socket.gethostname()}"}}\n')
    with pytest.warns(UserWarning, match=f"pid {dead.pid}, which is no longer running"):
        with FolderLock(tmp_path, "mine"):
            assert f'"pid": {os.getpid()}' in (tmp_path / LOCK_NAME).read_text()
    assert not (tmp_path / LOCK_NAME).exists()


def test_racing_processes_never_hold_the_lock_together(tmp_path):
    """Processes racing for a folder whose lock a dead process left: one holder at a time, and
    nothing left behind."""
    from _lock_race import race

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    context = mp.get_context("spawn")
    racers, trials = 4, 100
    barrier = context.Barrier(racers)
    holders, overlaps, wins = (context.Value("i", 0) for _ in range(3))
    processes = [context.Process(target=race, args=(tmp_path, rank, trials, dead.pid, barrier,
                                                     holders, overlaps, wins))
                 for rank in range(racers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert all(process.exitcode == 0 for process in processes)
    assert overlaps.value == 0, f"{overlaps.value} acquisitions found another holder in"
    assert wins.value >= trials
    assert not list(tmp_path.glob(f"{LOCK_NAME}*")), sorted(p.name for p in tmp_path.iterdir())


@pytest.mark.slow
def test_two_concurrent_runs_into_one_folder_one_refused_no_duplicates(tmp_path, finished):
    _, reference = finished
    command = [sys.executable, "-m", "experiments", NAME, "--scale", "tiny", "--out", str(tmp_path),
               "--quiet", "--isolation", "inline"]
    first = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / "gsi_icde20" / LOCK_NAME
    deadline = time.monotonic() + 120
    while not lock.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    second = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    first_out, first_err = first.communicate(timeout=600)
    assert first.returncode == 0, first_err
    if second.returncode != 0:                # it met the first's lock (a GPU may end the first before)
        assert f"pid {first.pid}" in second.stderr, second.stderr
    rows = read_rows(tmp_path / "gsi_icde20" / f"{NAME}.tiny.csv")
    assert _summary(rows) == _summary(reference) and not rows.duplicated(list(KEY)).any()
    assert not lock.exists()


# ---------------------------------------------------------------------- the stress script
@pytest.mark.slow
def test_stress_script_kills_and_damages_then_matches_the_undisturbed_run(tmp_path):
    from experiments.harness import stress

    lines = []
    args = ["--kills", "5", "--seed", "3", "--queries", "3", "--delay", "0.05", "--out", str(tmp_path)]
    assert stress.stress(stress.build_parser().parse_args(args), log=lines.append)
    assert sum(line.startswith("kill ") for line in lines) == 5
    assert all(any(name in line for line in lines) for name in stress.DAMAGES)   # every damage done
    assert "EQUAL to the undisturbed run" in lines[-1]
    assert (tmp_path / "disturbed" / "stress" / "stress.toy.tiny.csv.damaged").exists()

