"""One sweep, one writer: the sweep lock, the one rule for which attempt a trial keeps, and
what Ctrl-C, full disks and kills leave behind.

Kill tests kill what a user kills: the single top process (``kill PID``, a scheduler's
SIGKILL) or the process group of a terminal (Ctrl-C, a closed terminal). Trials are tiny and
use the smoke timer: only which rows exist is looked at.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from runner.storage import journal, lock
from runner.storage.files import rows_to_table, write_new
from runner.storage.layout import JOB_FILE, SWEEP_FILE

#: 40 tiny trials in one job, in the driver process (no worker: one process to kill)
FORTY = ["op=vector_add", "timer=smoke", "isolation=none",
         "shape=[" + ",".join(f"[{n}]" for n in range(1, 41)) + "]"]
#: the same in the supervised worker (a process group of two)
FORTY_WORKER = [a for a in FORTY if a != "isolation=none"]


class Proc:
    """``python -m MODULE ARGS`` in ``cwd``, in its own session (a terminal's process group)."""

    def __init__(self, args: list[str], cwd: Path, module: str = "runner",
                 limit_file_bytes: int | None = None) -> None:
        from conftest import cli_env

        cwd.mkdir(parents=True, exist_ok=True)
        self.out = open(cwd / f".{module}.{time.monotonic_ns()}.log", "w+")  # noqa: SIM115

        def limits() -> None:  # in the child only: a full disk without touching the machine's
            if limit_file_bytes is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_bytes, limit_file_bytes))

        self.proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=cwd,
                                     env=cli_env(), stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=limits)

    def wait(self, timeout: float = 240) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # our own child's group, by its id
            self.proc.wait()
            raise AssertionError(f"did not finish in {timeout} s:\n{self.text}") from None

    @property
    def text(self) -> str:
        self.out.seek(0)
        return self.out.read()

    def group_signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)


def journaled(cwd: Path) -> int:
    return sum(journal.count_entries(job) for job in (cwd / "results").glob("*/jobs/*"))


def wait_for_entries(cwd: Path, n: int, proc: Proc, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while journaled(cwd) < n and time.monotonic() < deadline and proc.proc.poll() is None:
        time.sleep(0.02)


def ok_attempts(sweep: Path) -> Counter:
    """How many ok journal entries each trial has."""
    counts: Counter = Counter()
    for job in (sweep / "jobs").iterdir():
        for table in journal.read_entries(job):
            for r in table.select(["job_num", "trial_index", "status"]).to_pylist():
                if r["status"] == "ok":
                    counts[(r["job_num"], r["trial_index"])] += 1
    return counts


def killed_sweep(tmp_path: Path, after: int = 4) -> Path:
    """A FORTY sweep SIGKILLed after ``after`` journaled trials."""
    run = Proc(FORTY, tmp_path)
    wait_for_entries(tmp_path, after, run)
    run.proc.kill()
    run.wait()
    (sweep,) = (tmp_path / "results").iterdir()
    assert 0 < journaled(tmp_path) < 40, run.text
    return sweep


# ---------------------------------------------------------------------------------------
# The lock
# ---------------------------------------------------------------------------------------

HOLD = ("import sys, time; from runner.storage import lock; lock.hold(sys.argv[1]); "
        "print('held', flush=True); time.sleep(120)")


@pytest.mark.slow
def test_a_second_writer_is_told_who_holds_the_sweep_and_a_dead_holder_is_taken_over(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from conftest import cli_env

    sweep = tmp_path / "sweep"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(sweep)], env=cli_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(lock.SweepBusy, match=f"pid {holder.pid} .*python"):
            lock.hold(sweep, 0.3)
        assert "waiting up to 0.3 s" in capsys.readouterr().err
    finally:
        holder.kill()  # SIGKILL: the kernel frees the lock, the file still names the pid
        holder.wait()
    assert lock.holder(sweep)["pid"] == holder.pid
    try:
        assert lock.hold(sweep, 0) is True  # stale: taken over, and said so
        assert "no longer running" in capsys.readouterr().err
        assert lock.holder(sweep)["pid"] == os.getpid()
    finally:
        lock.release(sweep)
    assert lock.holder(sweep) == {}  # a clean release names no holder


def test_a_lock_taken_for_a_failed_start_leaves_no_folder(tmp_path: Path) -> None:
    sweep = tmp_path / "results" / "s"
    lock.hold(sweep)
    lock.release(sweep)
    assert not (tmp_path / "results").exists()


@pytest.mark.cli
def test_two_resumes_of_one_sweep_at_once_run_no_trial_twice(tmp_path: Path) -> None:
    sweep = killed_sweep(tmp_path)
    refusing = Proc([str(sweep)], tmp_path, module="runner.resume")
    waiting = Proc([str(sweep), "--wait", "200"], tmp_path, module="runner.resume")
    codes = (refusing.wait(), waiting.wait())
    assert codes in ((0, 0), (2, 0)), (codes, refusing.text, waiting.text)
    if codes[0] == 2:  # it lost the race: it names the holder (where the holder has written
        # its name yet: "another process" in the instant after it took the lock) and runs nothing
        assert "is being written by " in refusing.text and "--wait" in refusing.text
    assert "Traceback" not in refusing.text + waiting.text
    counts = ok_attempts(sweep)
    assert len(counts) == 40 and set(counts.values()) == {1}, counts
    assert len(pd.read_parquet(sweep / SWEEP_FILE)) == 40


@pytest.mark.cli
def test_two_runs_with_one_fixed_sweep_id_started_together_run_each_trial_once(
        tmp_path: Path) -> None:
    args = ["op=vector_add", "timer=smoke", "isolation=none", "sweep_id=fixed",
            "shape=[" + ",".join(f"[{n}]" for n in range(1, 11)) + "]"]
    first, second = Proc(args, tmp_path), Proc(args, tmp_path)
    codes = sorted((first.wait(), second.wait()))
    assert codes == [0, 2], (codes, first.text, second.text)
    counts = ok_attempts(tmp_path / "results" / "fixed")
    assert len(counts) == 10 and set(counts.values()) == {1}, counts


# ---------------------------------------------------------------------------------------
# Kills: the top process, and a terminal's process group
# ---------------------------------------------------------------------------------------

@pytest.mark.cli
@pytest.mark.parametrize("kill", ["top process", "process group"])
def test_kills_then_resume_give_every_trial_once(tmp_path: Path, kill: str) -> None:
    args = FORTY if kill == "top process" else FORTY_WORKER
    run = Proc(args, tmp_path)
    sweep = None
    for _ in range(3):
        wait_for_entries(tmp_path, min(journaled(tmp_path) + 3, 39), run)
        if kill == "top process":
            run.proc.kill()
        else:
            run.group_signal(signal.SIGKILL)
        run.wait()
        sweep = sweep or next((tmp_path / "results").iterdir())
        run = Proc([str(sweep)], tmp_path, module="runner.resume")
    assert run.wait() == 0, run.text
    counts = ok_attempts(sweep)
    assert len(counts) == 40 and set(counts.values()) == {1}, counts


# ---------------------------------------------------------------------------------------
# Several attempts of one trial: one rule, and a damaged sweep is repaired
# ---------------------------------------------------------------------------------------

def row(index: int, status: str = "ok", second: float = 0.0) -> dict[str, Any]:
    return {"sweep_id": "s", "job_num": 0, "trial_index": index, "trial_id": f"t{index}",
            "status": status, "time_median_us": 1.0 + second,
            "timestamp": (pd.Timestamp("2026-01-01", tz="UTC")
                          + pd.Timedelta(seconds=index * 100 + second)).to_pydatetime()}


def test_the_kept_attempt_is_ok_over_failed_then_the_earliest_ok(tmp_path: Path) -> None:
    from runner.storage.attempts import keep_one

    rows = [row(0, "ok", 5), row(0, "crashed", 1), row(0, "ok", 2),  # earliest ok: second 2
            row(1, "error", 1), row(1, "timeout", 3),                 # no ok: the latest
            row(2, "skipped", 1), row(2, "ok", 9)]                    # ok over skipped
    for order in (rows, rows[::-1]):  # whatever order the files come in
        kept, repeated = keep_one(rows_to_table(order, {}))
        got = [(r["trial_index"], r["status"], r["time_median_us"]) for r in kept.to_pylist()]
        assert got == [(0, "ok", 3.0), (1, "timeout", 4.0), (2, "ok", 10.0)]
        assert repeated == {("s", 0, 0): 2, ("s", 0, 2): 2}


def damage(sweep: Path, index: int = 0) -> None:
    """What overlapping resumes did: a second ok attempt of one trial, started later, which
    the old view kept in trials.parquet and results.parquet."""
    job = sweep / "jobs" / "0"
    (entries,) = journal.read_entries(job)
    later = next(r for r in entries.to_pylist() if r["trial_index"] == index)
    later["timestamp"] = later["timestamp"] + pd.Timedelta(seconds=30)
    later["time_median_us"] = 12345.0
    journal.write_row(job, later, {})
    for path in (job / JOB_FILE, sweep / SWEEP_FILE):
        table = pq.read_table(path)
        rows = [later if r["trial_index"] == index else r for r in table.to_pylist()]
        table = rows_to_table(rows, {}).replace_schema_metadata(table.schema.metadata)
        path.unlink()
        write_new(table, path)


@pytest.mark.cli
def test_a_sweep_damaged_by_two_writers_is_repaired_by_resume_and_loaded_once(
        tmp_path: Path) -> None:
    import runner

    run = Proc(FORTY[:3] + ["shape=[[8],[16],[32]]"], tmp_path)
    assert run.wait() == 0, run.text
    (sweep,) = (tmp_path / "results").iterdir()
    before = pd.read_parquet(sweep / SWEEP_FILE).set_index("trial_index")
    damage(sweep)
    resumed = Proc([str(sweep)], tmp_path, module="runner.resume")
    assert resumed.wait() == 0, resumed.text
    assert "kept" in resumed.text and "Traceback" not in resumed.text
    for path in (sweep / SWEEP_FILE, sweep / "jobs" / "0" / JOB_FILE):
        after = pd.read_parquet(path).set_index("trial_index")
        assert len(after) == 3 and after.loc[0, "timestamp"] == before.loc[0, "timestamp"]
    again = Proc([str(sweep)], tmp_path, module="runner.collect")
    assert again.wait() == 0, again.text  # stable: never refuses again
    assert len(runner.load(sweep)) == 3


def test_load_counts_each_trial_once_when_a_job_has_only_its_journal(tmp_path: Path) -> None:
    import runner

    job = tmp_path / "s" / "jobs" / "0"
    for r in (row(0, "crashed"), row(0, "ok", 1), row(0, "ok", 2), row(1, "ok")):
        journal.write_row(job, r, {})
    df = runner.load(tmp_path / "s")
    assert sorted(df["trial_index"]) == [0, 1]
    assert df.set_index("trial_index").loc[0, "time_median_us"] == 2.0  # the earliest ok


# ---------------------------------------------------------------------------------------
# Ctrl-C, full disks, newer formats: a clear exit, never a traceback
# ---------------------------------------------------------------------------------------

@pytest.mark.cli
@pytest.mark.parametrize("gap_s", [0.0, 0.3])
def test_three_ctrl_c_in_a_row_exit_130_with_a_merged_file_or_a_resume_line(
        tmp_path: Path, gap_s: float) -> None:
    run = Proc(FORTY_WORKER, tmp_path)
    wait_for_entries(tmp_path, 2, run)
    for _ in range(3):
        run.group_signal(signal.SIGINT)  # the terminal's Ctrl-C: the whole group
        time.sleep(gap_s)
    assert run.wait() == 130, run.text
    assert "Traceback" not in run.text
    (sweep,) = (tmp_path / "results").iterdir()
    assert (sweep / SWEEP_FILE).exists() or f"python -m runner.resume {sweep}" in run.text
    assert "python -m runner.resume" in run.text


@pytest.mark.cli
def test_a_full_disk_at_the_job_file_write_names_the_path_and_the_resume(
        tmp_path: Path) -> None:
    """RLIMIT_FSIZE in the child: the journal's log segments (at most 32 kB each) fit, the
    job file (~46 kB, 40 rows) does not; the write fails with EFBIG, as on a full disk."""
    run = Proc([*FORTY, "sweep_id=s"], tmp_path, limit_file_bytes=41_000)
    code = run.wait()
    assert code == 1, run.text
    assert "Traceback" not in run.text
    assert f"could not write {tmp_path / 'results' / 's' / 'jobs' / '0' / JOB_FILE}" in run.text
    assert "python -m runner.resume" in run.text


@pytest.mark.cli
def test_a_folder_in_the_merged_file_s_place_is_exit_1_naming_it(tmp_path: Path) -> None:
    run = Proc(["op=vector_add", "timer=smoke", "isolation=none", "sweep_id=s",
                "shape=[8]"], tmp_path)
    assert run.wait() == 0, run.text
    sweep = tmp_path / "results" / "s"
    (sweep / SWEEP_FILE).unlink()
    (sweep / SWEEP_FILE).mkdir()
    collect = Proc([str(sweep)], tmp_path, module="runner.collect")
    assert collect.wait() == 1, collect.text
    assert "Traceback" not in collect.text and SWEEP_FILE in collect.text


@pytest.mark.cli
def test_a_newer_format_journal_entry_during_resume_is_a_clear_exit(tmp_path: Path) -> None:
    sweep = killed_sweep(tmp_path)
    job = sweep / "jobs" / "0"
    newest = journal.read_entries(job)[0].to_pylist()[0]
    journal.write_row(job, {**newest, "trial_index": 39}, {"format_version": 99})
    resumed = Proc([str(sweep)], tmp_path, module="runner.resume")
    assert resumed.wait() == 2, resumed.text
    assert "format_version 99" in resumed.text and "Traceback" not in resumed.text


@pytest.mark.parametrize("folder", ["/data/a,b", "/data/it's [x]", "/data/plain-1.0"])
def test_resume_passes_a_results_dir_hydra_reads_back_unchanged(folder: str) -> None:
    """A sweep run with ``results_dir='a,b'`` is resumable: the resume quotes the folder, so
    Hydra does not read the comma as a sweep over two folders."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from runner.execution.resume import hydra_quote

    override = OverridesParser.create().parse_override(f"results_dir={hydra_quote(folder)}")
    assert not override.is_sweep_override() and override.value() == folder
