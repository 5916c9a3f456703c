"""One frozen task from the job to the trial: what the job builds is what the trial gets, in
this process or across the worker's pipe, and the timer the file records is the one used."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from runner.config.schema import TimerSettings
from runner.execution import worker, worker_loop
from runner.execution.insight import InsightOptions
from runner.execution.task import TrialTask, TrialTimer
from runner.storage.files import read_metadata
from runner.timing.measurement import TimerPlan

SMOKE_YAML = Path(__file__).resolve().parent.parent / "conf" / "timer" / "smoke.yaml"

#: ``smoke=true`` without ``timer=...``: the job swaps in the smoke timer itself.
CLI_RUNS = {"smoke_swap": ["op=vector_add", "smoke=true", "device=cpu", "shape=[[8],[16]]"]}


def task_of(compose: Any, plan_trials: Any, *overrides: str, **options: Any) -> TrialTask:
    cfg = compose("op=vector_add", "shape=[8]", "device=cpu", "timer=smoke", *overrides)
    [(_, spec)] = plan_trials(cfg)
    return TrialTask(3, spec, TrialTimer.from_settings(cfg.timer), **options)


def test_every_timer_setting_reaches_the_frozen_timer() -> None:
    """A setting added to ``timer.*`` that the frozen timer does not carry would be dropped
    on the way to the trial: each one is in the plan or beside it, once."""
    beside = {f.name for f in dataclasses.fields(TrialTimer)} - {"plan"}
    planned = {f.name for f in dataclasses.fields(TimerPlan)}
    assert not beside & planned
    assert {f.name for f in dataclasses.fields(TimerSettings)} == beside | planned
    settings = TimerSettings(min_samples=5, max_samples=7, clock="host", burst=True)
    timer = TrialTimer.from_settings(settings)
    assert timer.settings() == dataclasses.asdict(settings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        timer.preset = "precise"  # type: ignore[misc]


def test_the_task_pickles_unchanged(compose: Any, plan_trials: Any, tmp_path: Path) -> None:
    insight = InsightOptions(profile=True, job_dir=tmp_path)
    task = task_of(compose, plan_trials, check_accuracy=False, insight=insight, timeout_s=9.0)
    back = pickle.loads(pickle.dumps(task))
    assert type(back) is TrialTask and back == task
    assert type(back.timer) is TrialTimer and type(back.timer.plan) is TimerPlan


class PipeWorker:
    """The supervisor's worker, its pipe replaced by pickling (what ``Pipe.send`` does) and
    the worker loop's own handler: what the worker would receive, and its answer."""

    def __init__(self) -> None:
        self.received: list[Any] = []

    def alive(self) -> bool:
        return True

    def request(self, message: tuple, timeout_s: float | None) -> Any:
        kind, payload = pickle.loads(pickle.dumps(message))
        self.received.append((payload, timeout_s))
        return worker_loop.handle(kind, payload)[1]


def test_the_worker_receives_exactly_the_job_s_task(compose: Any, plan_trials: Any,
                                                    frozen_gc: None) -> None:
    task = task_of(compose, plan_trials, timeout_s=30.0)
    supervisor = worker.Supervisor()
    pipe = supervisor.worker = PipeWorker()  # type: ignore[assignment]
    row = supervisor.run(task)
    [(received, timeout_s)] = pipe.received
    assert type(received) is TrialTask and received == task
    assert timeout_s == 30.0
    assert row["status"] == "ok", row["reason"]
    assert row["timer_preset"] == "smoke" and row["trial_id"] == task.spec.trial_id


def test_the_timer_recorded_is_the_timer_used(cli_runs: dict[str, Any]) -> None:
    """``smoke=true`` runs the trials with the smoke timer: the file's metadata says so (not
    the composed default preset), and every row was timed within that timer's limits."""
    run = cli_runs["smoke_swap"].wait()
    assert run.returncode == 0, run.explain()
    [path] = list(Path(run.cwd).rglob("jobs/0/trials.parquet"))
    recorded = yaml.safe_load(read_metadata(path)["config"])["timer"]
    smoke = yaml.safe_load(SMOKE_YAML.read_text())
    assert recorded == {**dataclasses.asdict(TimerSettings()), **smoke}
    rows = pq.read_table(path).to_pylist()
    assert len(rows) == 2
    for row in rows:
        assert row["status"] == "ok", row["reason"]
        assert row["timer_preset"] == recorded["preset"] == "smoke"
        assert row["n_samples"] <= recorded["max_samples"]
        assert row["calls_per_sample"] <= recorded["max_calls_per_sample"]
