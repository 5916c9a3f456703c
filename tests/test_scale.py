"""Big sweeps: a journal linear in trials, an end phase that reads each file once, a sweep that
says its size and refuses one past ``max_trials``, bounded work for huge counts and alias bombs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from runner.config import sweep_size, yaml_size
from runner.storage import journal, trial_log
from runner.storage.files import FormatError, rows_to_table, write_new
from runner.storage.layout import JOB_FILE, SWEEP_FILE


def row(index: int, status: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"sweep_id": "s", "job_num": 0, "trial_index": index, "trial_id": f"t{index}",
            "status": status, "timestamp": pd.Timestamp("2026-01-01", tz="UTC").to_pydatetime()
            + pd.Timedelta(seconds=index), **{"samples_us": [1.0, 2.0, float("nan")], **extra}}


# ---------------------------------------------------------------------------------------
# The journal
# ---------------------------------------------------------------------------------------

def test_the_job_config_is_journaled_once_and_the_journal_grows_linearly(
        tmp_path: Path) -> None:
    job = tmp_path / "s" / "jobs" / "0"
    metadata = {"config": "shape: " + json.dumps([[i] for i in range(2000)])}
    sizes = []
    for n in range(200):
        journal.write_row(job, row(n), metadata)
        if n in (99, 199):
            sizes.append(journal.journal_state(job)[1])
    journal.close(job)
    config_bytes = len(metadata["config"])
    # one copy of the config, then the same few hundred bytes per row
    assert sizes[0] < config_bytes + 100 * 2_000
    assert sizes[1] - sizes[0] == pytest.approx(sizes[0] - config_bytes, rel=0.1)
    text = "".join(p.read_text() for p in trial_log.segments(journal.journal_dir(job)))
    assert text.count('"config"') == 1
    assert journal.count_entries(job) == 200


def test_rows_round_trip_with_their_types(tmp_path: Path) -> None:
    job = tmp_path / "s" / "jobs" / "0"
    journal.write_row(job, row(0, shape=(4, 4)), {})
    (table,) = journal.read_entries(job)
    got = table.to_pylist()[0]
    assert got["timestamp"] == row(0)["timestamp"]
    assert str(table.schema.field("timestamp").type).startswith("timestamp")
    assert got["shape"] == [4, 4] and got["samples_us"][:2] == [1.0, 2.0]


def test_a_line_torn_by_a_kill_is_named_and_the_other_rows_count(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    job = tmp_path / "s" / "jobs" / "0"
    for n in range(3):
        journal.write_row(job, row(n), {"config": "x"})
    journal.close(job)
    (segment,) = trial_log.segments(journal.journal_dir(job))
    with open(segment, "ab") as handle:
        handle.write(b'{"r": {"trial_index": 3, "sta')  # the kill came mid-line
    assert journal.job_rows(job).column("trial_index").to_pylist() == [0, 1, 2]
    assert str(segment) in capsys.readouterr().err
    journal.write_row(job, row(3), {"config": "x"})  # a resume writes a segment of its own
    journal.close(job)
    assert len(trial_log.segments(journal.journal_dir(job))) == 2
    assert journal.job_rows(job).column("trial_index").to_pylist() == [0, 1, 2, 3]


def test_a_journal_of_the_previous_format_is_still_read(tmp_path: Path) -> None:
    """Before the trial log a journal held one Parquet file per trial, the job's metadata in
    each: a sweep killed then is still collected and resumed."""
    sweep = tmp_path / "s"
    job = sweep / "jobs" / "0"
    old = journal.journal_dir(job)
    for n in range(2):
        write_new(rows_to_table([row(n)], {"format_version": 1, "config": "c"}),
                  old / f"{n:05d}.0.parquet")
    journal.write_row(job, row(2), {"format_version": 1, "config": "c"})
    journal.write_row(job, row(0, "error"), {"format_version": 1, "config": "c"})
    journal.close(job)
    assert journal.count_entries(job) == 4
    assert journal.done_trials(job) == {0: "t0", 1: "t1", 2: "t2"}
    merged = journal.merge_sweep(sweep)
    table = pq.read_table(merged)
    assert sorted(table.column("trial_index").to_pylist()) == [0, 1, 2]
    assert set(table.column("status").to_pylist()) == {"ok"}


def test_a_newer_format_in_the_log_is_refused(tmp_path: Path) -> None:
    sweep = tmp_path / "s"
    journal.write_row(sweep / "jobs" / "0", row(0), {"format_version": 99})
    journal.close()
    with pytest.raises(FormatError, match="format_version 99"):
        journal.check_formats(sweep)
    with pytest.raises(FormatError, match="format_version 99"):
        journal.merge_sweep(sweep)


def test_the_job_file_is_built_from_held_rows_and_the_merge_reads_it_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = tmp_path / "s"
    job = sweep / "jobs" / "0"
    held = []
    for n in range(5):
        r = row(n, samples_us=[1.0, 2.0])
        journal.write_row(job, r, {"config": "c"})
        held.append(r)
    journal.close(job)
    from_disk = journal.job_rows(job, {"config": "c"})
    monkeypatch.setattr(trial_log, "read", _never)  # neither may read the journal back
    from_held = journal.job_rows(job, {"config": "c"}, held)
    assert from_held.to_pylist() == from_disk.to_pylist()
    write_new(from_held, job / JOB_FILE)
    assert pq.read_table(journal.merge_sweep(sweep)).num_rows == 5
    monkeypatch.undo()
    journal.write_row(job, row(5), {"config": "c"})  # the journal grew: it is read again
    journal.close(job)
    (sweep / SWEEP_FILE).unlink()
    assert pq.read_table(journal.merge_sweep(sweep)).num_rows == 6


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("read the journal back")


# ---------------------------------------------------------------------------------------
# Sweep size
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_ten_million_trial_job_is_refused_before_it_is_expanded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.config import planner
    from runner.config.schema import RunConfig

    monkeypatch.setattr(planner, "expand", _never)
    cfg = OmegaConf.merge(OmegaConf.structured(RunConfig), {
        "op": OmegaConf.load(Path("conf/op/add.yaml")), "device": "cpu", "sweep_id": "s",
        "shape": [[n] for n in range(1, 1001)], "seed": list(range(10_000))})
    with pytest.raises(sweep_size.TooManyTrials) as caught:
        planner.plan_job(cfg)
    message = str(caught.value)
    assert "10,000,000 trials" in message and "max_trials=10000000" in message
    assert "disk" in message and "time" in message


def test_the_size_line_names_trials_jobs_time_and_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep_size, "host_load", lambda: (0.5, 2))
    timer = {"warmup_s": 0.0, "max_time_s": 0.2, "max_samples": 3}
    line = sweep_size.size_line([3, 5], timer)
    assert line.startswith("sweep: 8 trials in 2 jobs (3, 5 trials)")
    # start and finish 4 s, 0.1 s a job; a trial up to twice max_time_s (a mixed block is
    # taken again)
    assert "time 4 s – 7 s, disk up to" in line
    assert sweep_size.duration(7200) == "2.0 h" and sweep_size.size(2.5e9) == "2.5 GB"


def test_on_a_busy_host_the_estimate_stretches_the_start_and_says_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Imports and merging are CPU work that other processes stretch (load 8-11 on 2 cores:
    6.5-14 s instead of 4); the trials' sampling is bounded by wall time."""
    monkeypatch.setattr(sweep_size, "host_load", lambda: (8.0, 2))
    timer = {"warmup_s": 0.0, "max_time_s": 0.2, "max_samples": 3}
    line = sweep_size.size_line([3, 5], timer)
    assert "time 8 s – 12 s (a busy host: load 8.0 on 2 cores), disk up to" in line
    monkeypatch.setattr(sweep_size, "host_load", lambda: (3.9, 2))  # below 2 per core: quiet
    assert "time 4 s – 7 s, disk up to" in sweep_size.size_line([3, 5], timer)
    load, cores = sweep_size.host_load()  # the real one: a number, and at least one core
    assert load >= 0 and cores >= 1


def test_an_alias_bomb_is_counted_without_expanding_it(tmp_path: Path) -> None:
    lines = ["a0: &a0 [1,1,1,1,1,1,1,1,1,1]"]
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 12)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    assert yaml_size.expanded_nodes(bomb) > 10 ** 12
    with pytest.raises(Exception, match="expands to"):
        yaml_size.check_file(bomb, "'experiment': 'bomb'")
    plain = tmp_path / "plain.yaml"
    plain.write_text("a: [1, 2]\nb: {c: 3}\n")
    assert yaml_size.expanded_nodes(plain) == 9  # root, 2 keys, 2 containers, 4 values


def test_hydra_lists_parse_the_same_in_one_pass() -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from runner.config import hydra_lists

    texts = ["shape=[[1,2],[3,4],[5]]", "x=[1,[2,{a:[3,4]}],[]]", "y=[]", "z=a,b"]
    before = [o.value() for o in OverridesParser.create().parse_overrides(texts)]
    hydra_lists.install()
    after = [o.value() for o in OverridesParser.create().parse_overrides(texts)]
    assert repr(after) == repr(before)


def test_the_cli_says_the_size_and_refuses_past_max_trials(start_cli: Any,
                                                           tmp_path: Path) -> None:
    ok = start_cli(["op=add", "device=cpu", "timer=smoke", "shape=[[1],[2]]", "seed=[1,2]"],
                   tmp_path).wait()
    assert ok.returncode == 0, ok.explain()
    assert "sweep: 4 trials in 1 job;" in ok.err
    before = sorted((tmp_path / "results").iterdir())
    refused = start_cli(["op=add", "device=cpu", "timer=smoke", "shape=[[1],[2]]",
                         "seed=[1,2]", "max_trials=3"], tmp_path).wait()
    assert refused.returncode == 2, refused.explain()
    assert "4 trials" in refused.err and "max_trials=4" in refused.err
    jobs = start_cli(["op=add", "device=cpu", "timer=smoke", "seed=range(0,1000000)", "-m"],
                     tmp_path).wait()
    assert jobs.returncode == 2, jobs.explain()
    assert "1,000,000 trials in 1000000 jobs" in jobs.err and "Traceback" not in jobs.err
    assert sorted((tmp_path / "results").iterdir()) == before  # nothing written
