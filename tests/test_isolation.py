"""Never lose a result: crash isolation, timeouts, the journal, SIGKILL and resume,
Ctrl-C, concurrent sweeps, damaged files.

The runs that need a whole ``python -m runner`` are declared in ``CLI_RUNS`` (started by
conftest at collection, so they overlap with the in-process tests). Trials are tiny and use
the smoke timer: numbers are never looked at, only which rows exist.
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from runner.storage import journal
from runner.storage.files import (
    FormatError,
    read_metadata,
    replace_with_superset,
    rows_to_table,
    write_new,
)
from runner.storage.journal import merge_sweep
from runner.storage.layout import JOB_FILE, SWEEP_FILE

FINE = "ops.examples:gelu_mul"
SMOKE = ["shape=[8,8]", "timer=smoke", "op=custom"]
#: 40 tiny trials in one job (one per shape)
FORTY = ["op=vector_add", "timer=smoke", "isolation=none",
         "shape=[" + ",".join(f"[{n}]" for n in range(1, 41)) + "]"]


def CLI_RUNS() -> dict[str, Any]:  # noqa: N802 (the name conftest looks for)
    return {
        # job 0: [fine, os._exit, hang, fine] → ok, crashed, timeout, ok; job 1 (fine) runs
        # after them in the same process, in a fresh worker
        "faults": SMOKE + ["trial_timeout_s=20",
                           f"op.target=[{FINE},ops.faults:exits,ops.faults:sleeps,torch:mul],"
                           f"{FINE}", "-m"],
        # two sweeps at once into one results_dir; the second in-process (isolation=none)
        "concurrent_1": (["op=vector_add", "shape=[[8],[16],[32]]", "timer=smoke",
                          "dtype=fp32,fp64", "-m"], "concurrent"),
        "concurrent_2": (["op=vector_add", "shape=[[8],[16],[32]]", "timer=smoke",
                          "dtype=fp32,fp64", "isolation=none", "-m"], "concurrent"),
    }


def finished(run: Any) -> Any:
    run.wait()
    assert run.returncode == 0, run.explain()
    return run


def merged(run: Any) -> pd.DataFrame:
    files = sorted((run.cwd / "results").glob(f"*/{SWEEP_FILE}"))
    assert len(files) == 1, (files, run.explain())
    return pd.read_parquet(files[0]).sort_values(["job_num", "trial_index"])


# ---------------------------------------------------------------------------------------
# Crash isolation
# ---------------------------------------------------------------------------------------

def test_crash_and_timeout_are_rows_and_the_next_trial_runs(cli_runs: dict[str, Any]) -> None:
    df = merged(finished(cli_runs["faults"]))
    job0 = df[df["job_num"] == 0]
    assert list(job0["status"]) == ["ok", "crashed", "timeout", "ok"], df[["status", "reason"]]
    crashed, hung = job0.iloc[1], job0.iloc[2]
    assert "exited with status 3" in crashed["reason"]
    assert "trial_timeout_s" in hung["reason"] and "20 s" in hung["reason"]
    assert job0.iloc[3]["param_target"] == "torch:mul" and job0.iloc[3]["accuracy_ok"]


def test_a_crash_in_job_0_does_not_stop_job_1(cli_runs: dict[str, Any]) -> None:
    df = merged(finished(cli_runs["faults"]))
    assert list(df[df["job_num"] == 1]["status"]) == ["ok"]


def test_isolation_none_runs_in_process(cli_runs: dict[str, Any]) -> None:
    run = finished(cli_runs["concurrent_2"])
    isolations = {read_metadata(job / JOB_FILE).get("isolation")
                  for job in sorted((run.cwd / "results").glob("*/jobs/*"))}
    assert isolations == {"process", "none"}  # one sweep each way, both complete


def test_every_finished_trial_is_journaled(cli_runs: dict[str, Any]) -> None:
    run = finished(cli_runs["faults"])
    (job_dir,) = (run.cwd / "results").glob("*/jobs/0")
    (entries,) = journal.read_entries(job_dir)
    assert entries.column("trial_index").to_pylist() == list(range(4))
    assert pq.read_table(job_dir / JOB_FILE).num_rows == 4
    # the job's config is in the journal once, not once per trial
    (log,) = journal.journal_dir(job_dir).iterdir()
    assert log.read_text().count('"config"') == 1


def test_two_concurrent_sweeps_in_one_results_dir_both_complete(
        cli_runs: dict[str, Any]) -> None:
    first, second = finished(cli_runs["concurrent_1"]), finished(cli_runs["concurrent_2"])
    sweeps = sorted(p for p in (first.cwd / "results").iterdir() if p.is_dir())
    assert len(sweeps) == 2, sweeps
    for sweep in sweeps:
        df = pd.read_parquet(sweep / SWEEP_FILE)
        assert len(df) == 6 and set(df["sweep_id"]) == {sweep.name}
        assert sorted(zip(df["job_num"], df["trial_index"])) == [
            (j, i) for j in (0, 1) for i in range(3)]
    assert second.cwd == first.cwd


# ---------------------------------------------------------------------------------------
# SIGKILL at random moments, resumed each time; Ctrl-C
# ---------------------------------------------------------------------------------------

def journaled(cwd: Path) -> int:
    return sum(journal.count_entries(job) for job in (cwd / "results").glob("*/jobs/*"))


def test_sigkill_at_ten_random_moments_then_resume_gives_every_trial_once(
        start_cli: Any, tmp_path: Path) -> None:
    """``kill -9`` of the single top process, as a user or a scheduler does it: the first
    time the run, later the resume command, which *is* the run (it replaces itself with it),
    so nothing is left running to race the next resume for the sweep."""
    rng = random.Random(11)
    seen: dict[tuple, Any] = {}  # (job, index) → timestamp of its ok row, once journaled
    run = start_cli(FORTY, tmp_path)
    sweep = None
    for kill in range(10):
        # a random moment: after 0-3 more trials are journaled, plus 0-0.3 s
        target = min(journaled(tmp_path) + rng.randint(0, 3), 39)
        deadline = time.monotonic() + 60
        while journaled(tmp_path) < target and time.monotonic() < deadline \
                and run._proc.poll() is None:
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.3))
        run._proc.send_signal(signal.SIGKILL)
        run.wait()
        sweep = sweep or next((tmp_path / "results").iterdir())
        for table in journal.read_entries(sweep / "jobs" / "0"):
            for row in table.select(["job_num", "trial_index", "status", "timestamp"]).to_pylist():
                key = (row["job_num"], row["trial_index"])
                assert seen.setdefault(key, row["timestamp"]) == row["timestamp"], \
                    f"trial {key} ran twice (kill {kill})"
        run = start_cli([str(sweep)], tmp_path, module="runner.resume")
    finished(run)
    df = pd.read_parquet(sweep / SWEEP_FILE)
    keys = list(zip(df["job_num"], df["trial_index"]))
    assert len(df) == 40 and len(set(keys)) == 40 and set(df["status"]) == {"ok"}
    assert set(df["trial_id"]) == set(df["trial_id"].unique()) and df["trial_id"].is_unique
    oks = [r["trial_index"] for t in journal.read_entries(sweep / "jobs" / "0")
           for r in t.select(["trial_index", "status"]).to_pylist() if r["status"] == "ok"]
    assert sorted(oks) == list(range(40)), "a trial has two ok attempts"
    for key, stamp in seen.items():  # every trial finished before a kill was kept, not re-run
        assert df.set_index(["job_num", "trial_index"]).loc[key, "timestamp"] == stamp


def test_ctrl_c_stops_after_the_trial_in_flight_and_merges(start_cli: Any,
                                                           tmp_path: Path) -> None:
    # 400 trials, not 40: a smoke trial of vector_add takes milliseconds, and on a busy
    # machine the last of 40 could end before the Ctrl-C this loop sends once it sees two.
    trials = 400
    run = start_cli(["op=vector_add", "timer=smoke", "shape=[" + ",".join(
        f"[{n}]" for n in range(1, trials + 1)) + "]"], tmp_path)
    deadline = time.monotonic() + 120
    while journaled(tmp_path) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    run._proc.send_signal(signal.SIGINT)
    run.wait()
    assert run.returncode == 130, run.explain()
    assert "python -m runner.resume" in run.err
    (sweep,) = (tmp_path / "results").iterdir()
    df = pd.read_parquet(sweep / SWEEP_FILE)
    assert 2 <= len(df) < trials and set(df["status"]) == {"ok"}
    assert len(df) == journaled(tmp_path)  # nothing journaled is missing from the merge


# ---------------------------------------------------------------------------------------
# The storage rules, in-process
# ---------------------------------------------------------------------------------------

def row(index: int, status: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"sweep_id": "s", "job_num": 0, "trial_index": index, "trial_id": f"t{index}",
            "status": status, "timestamp": pd.Timestamp("2026-01-01", tz="UTC").to_pydatetime()
            + pd.Timedelta(seconds=index), **extra}


def test_a_row_that_overflows_int64_keeps_every_other_row(tmp_path: Path) -> None:
    job = tmp_path / "s" / "jobs" / "0"
    journal.write_row(job, row(0, numel=12), {})
    journal.write_row(job, row(1, numel=3_000_000_000 ** 2 * 16), {})  # > int64
    table = journal.job_rows(job)
    assert table.num_rows == 2
    assert table.column("numel").to_pylist() == ["12", str(3_000_000_000 ** 2 * 16)]
    assert rows_to_table([row(0, numel=1 << 70)], {}).column("numel").to_pylist() == [
        str(1 << 70)]


def test_journal_view_prefers_a_finished_attempt(tmp_path: Path) -> None:
    job = tmp_path / "s" / "jobs" / "0"
    journal.write_row(job, row(0, "crashed"), {})
    journal.write_row(job, row(0, "ok"), {})
    journal.write_row(job, row(1, "ok"), {})
    table = journal.job_rows(job)
    assert table.column("status").to_pylist() == ["ok", "ok"]
    assert journal.done_trials(job) == {0: "t0", 1: "t1"}
    assert journal.count_entries(job) == 3  # every attempt kept


def test_merged_file_is_replaced_only_by_a_superset(tmp_path: Path) -> None:
    path = tmp_path / SWEEP_FILE
    write_new(rows_to_table([row(0), row(1, "error")], {}), path)
    with pytest.raises(FileExistsError, match="missing"):
        replace_with_superset(rows_to_table([row(0)], {}), path)
    changed = row(0)
    changed["timestamp"] = changed["timestamp"] + pd.Timedelta(seconds=99)
    with pytest.raises(FileExistsError, match="would change"):
        replace_with_superset(rows_to_table([changed, row(1)], {}), path)
    replace_with_superset(rows_to_table([row(0), row(1, "ok"), row(2)], {}), path)
    assert pq.read_table(path).column("status").to_pylist() == ["ok", "ok", "ok"]


def test_collect_of_a_running_sweep_is_completed_by_the_end_merge(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    job = sweep / "jobs" / "0"
    for i in range(3):
        journal.write_row(job, row(i), {})
    merge_sweep(sweep)  # what `collect` does while the sweep runs
    for i in range(3, 6):
        journal.write_row(job, row(i), {})
    merge_sweep(sweep)  # the sweep's own end merge
    assert pq.read_table(sweep / SWEEP_FILE).num_rows == 6


def test_damaged_files_are_named_and_the_rest_merges(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    sweep = tmp_path / "sweep"
    for j in (0, 1):
        journal.write_row(sweep / "jobs" / str(j), {**row(0), "job_num": j}, {})
    bad = next(journal.journal_dir(sweep / "jobs" / "1").iterdir())
    bad.write_bytes(bad.read_bytes()[:40])  # truncated
    (sweep / SWEEP_FILE).write_bytes(b"PAR1 not really")  # a damaged merged file
    merge_sweep(sweep)
    assert str(bad) in capsys.readouterr().err
    assert pq.read_table(sweep / SWEEP_FILE).num_rows == 1  # rebuilt from the job files
    assert (sweep / f"{SWEEP_FILE}.damaged-0").exists()  # the damaged one is kept aside


def test_a_newer_format_version_is_a_clear_error_for_every_reader(tmp_path: Path) -> None:
    from runner.storage.load import load

    sweep = tmp_path / "sweep"
    journal.write_row(sweep / "jobs" / "0", row(0), {"format_version": 99})
    table = rows_to_table([row(0)], {"format_version": 99})
    with pytest.raises(FormatError, match="format_version 99"):
        merge_sweep(sweep)
    write_new(table, sweep / "jobs" / "0" / JOB_FILE)
    with pytest.raises(FormatError, match="format_version 99"):
        load(sweep)


def test_a_failed_write_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture) -> None:
    from runner.execution.collect import main as collect_main
    from runner.storage import files

    sweep = tmp_path / "sweep"
    journal.write_row(sweep / "jobs" / "0", row(0), {})

    def disk_full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.pq, "write_table", disk_full)
    assert collect_main([str(sweep)]) == 1
    assert "No space left" in capsys.readouterr().err
    assert not (sweep / SWEEP_FILE).exists()
    assert not [p for p in sweep.iterdir() if p.name.endswith(".tmp")]


def test_a_poisoned_cuda_context_is_recognised() -> None:
    """After these errors the worker's CUDA context is unusable: the row is crashed and the
    worker replaced (the GPU check runs the real thing)."""
    from runner.execution.worker import is_poisoned

    assert is_poisoned({"reason": "RuntimeError: CUDA error: device-side assert triggered"})
    assert is_poisoned({"error_traceback": "... an illegal memory access was encountered"})
    assert not is_poisoned({"reason": "RuntimeError: shapes cannot be multiplied"})


@pytest.mark.gpu
def test_a_device_side_assert_is_crashed_and_the_next_trial_ok(start_cli: Any,
                                                               tmp_path: Path) -> None:
    """The issue's case on a GPU: [fine, device-side assert, fine] → ok, crashed, ok."""
    run = finished(start_cli(["op=custom", "device=cuda", "shape=[256,256]", "timer=smoke",
                              f"op.target=[{FINE},ops.faults:device_assert,torch:mul]"],
                             tmp_path))
    df = merged(run)
    assert list(df["status"]) == ["ok", "crashed", "ok"], df[["status", "reason"]]
    assert "poisoned" in df.iloc[1]["reason"]


def test_resume_runs_the_jobs_a_sweeper_params_experiment_never_started(
        start_cli: Any, tmp_path: Path) -> None:
    """A user experiment whose jobs come from ``hydra.sweeper.params``: job 1 never ran (the
    sweep was killed after job 0); resume re-plans the sweep from its Hydra record, runs job 1
    only, and keeps job 0's rows."""
    import shutil

    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "two_dtypes.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /op: vector_add\n  - override /timer: "
        "smoke\nshape: [8]\nhydra:\n  sweeper:\n    params:\n      dtype: fp32,fp64\n")
    work = tmp_path / "work"
    finished(start_cli(["-m", "experiment=two_dtypes", "isolation=none",
                        f"hydra.searchpath=[file://{tmp_path / 'conf'}]"], work))
    (sweep,) = (work / "results").iterdir()
    before = pd.read_parquet(sweep / SWEEP_FILE)
    assert sorted(before["dtype"]) == ["fp32", "fp64"]
    shutil.rmtree(sweep / "jobs" / "1")  # as if killed before job 1 started
    (sweep / SWEEP_FILE).unlink()
    run = finished(start_cli([str(sweep)], work, module="runner.resume"))
    assert "resuming 0 of 1 trials" in run.err and "resuming 1 of 1 trials" in run.err
    after = pd.read_parquet(sweep / SWEEP_FILE).sort_values("job_num")
    assert list(after["dtype"]) == ["fp32", "fp64"] and set(after["status"]) == {"ok"}
    assert after.iloc[0]["timestamp"] == before.sort_values("job_num").iloc[0]["timestamp"]
    assert (sweep / "jobs" / "0" / ".hydra" / "overrides.yaml").exists()  # provenance kept


def test_merged_file_keeps_the_job_files_roofline_columns(start_cli, tmp_path) -> None:
    """The job file adds the roofline columns to the journal's rows; the sweep's merge must
    take the job file's row, not the bare journal entry of the same attempt."""
    run = start_cli(["op=add", "shape=[1]", "device=cpu", "timer=smoke", "sweep_id=r"],
                    tmp_path).wait()
    assert run.returncode == 0, run.explain()
    merged = pq.read_table(tmp_path / "results" / "r" / "results.parquet").to_pylist()
    assert len(merged) == 1
    assert merged[0]["roofline_reason"], "roofline columns lost in the merge"
