"""Workers started before Hydra is imported (``runner.config.early_workers``,
``runner.__main__``): which command lines start how many, that the job adopts the pool it
started, and that workers no job uses are stopped (docs/scale-out.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from runner.config.commandline import parse_command_line
from runner.config.early_workers import WorkerRequest, early_request
from runner.execution import placement, pool

ROOT = Path(__file__).resolve().parent.parent
GPUS4 = "device=[cuda:0,cuda:1,cuda:2,cuda:3]"

#: argv -> the request read before Hydra (None: wait for Hydra's parse)
RULES: list[tuple[list[str], WorkerRequest | None]] = [
    ([], WorkerRequest(1, None)),
    (["op=matmul", "workers=4"], WorkerRequest(4, None)),
    (["workers=1", "device=cuda:1"], WorkerRequest(1, ("cuda:1",))),
    (["workers=per_gpu", GPUS4], WorkerRequest("per_gpu",
                                               (("cuda:0", "cuda:1", "cuda:2", "cuda:3"),))),
    (["workers=per_gpu"], WorkerRequest("per_gpu", None)),
    (["workers=per_gpu", "device=cuda", "gpu_warmup_s=10"],
     WorkerRequest("per_gpu", ("cuda",), 10.0)),
    (["workers=2", "device=cpu", "isolation=process"], WorkerRequest(2, ("cpu",))),
    (["workers=3", "workers=2"], WorkerRequest(2, None)),  # the last wins, as in Hydra
    (["-m", "seed=0,1", "workers=per_gpu", "device=[cuda:0, cuda:1]"],
     WorkerRequest("per_gpu", (("cuda:0", "cuda:1"),))),
    (["workers=2", "gpu_warmup_s=1,2", "-m"], WorkerRequest(2, None)),
    (["workers=2", "+experiment=quickstart"], WorkerRequest(2, None)),
    # the jobs of a multirun would differ in their workers: unsure
    (["-m", "workers=1,2"], None),
    (["-m", "workers=per_gpu", "device=cuda:0,cuda:1"], None),
    (["-m", "workers=range(1,3)"], None),
    (["-m", "isolation=process,none", "workers=2"], None),
    # not read the way Hydra's grammar reads it: the parse decides
    (["workers='2'"], None), (["workers=${oc.env:N}"], None), (["workers=two"], None),
    (["device=[cuda:0,tpu]", "workers=2"], None), (["device=cuda:x"], None),
    # placed elsewhere, or by what only the parse sees
    (["workers=2", "isolation=none"], None), (["workers=2", "+workers=3"], None),
    (["workers=2", "hydra/launcher=submitit_local"], None),
    (["workers=2", "hydra.launcher.ray.init.address=auto"], None),
    (["workers=2", "--config-dir", "x"], None), (["workers=2", "-cd", "x"], None),
    (["workers=2", "seed=range(0,9)"], None),  # a sweep without -m: refused at once
]


@pytest.mark.parametrize("args,expected", RULES, ids=[" ".join(a) or "(none)" for a, _ in RULES])
def test_what_a_command_line_plainly_asks_for(args: list[str],
                                              expected: WorkerRequest | None) -> None:
    assert early_request(args) == expected


@pytest.mark.parametrize("args", [a for a, expected in RULES if expected is not None])
def test_the_early_reading_is_what_hydra_s_parse_gives(args: list[str]) -> None:
    """Equal requests start nothing twice (``runner.__main__``): the early reading must give
    exactly what Hydra's grammar gives, value by value."""
    assert early_request(args) == WorkerRequest.parsed(parse_command_line(args))


def test_the_parse_starts_nothing_for_no_isolation_or_another_launcher() -> None:
    assert WorkerRequest.parsed(parse_command_line(["isolation=none"])) is None
    for launcher in ("submitit_local", "ray"):
        cmd = parse_command_line(["workers=2", f"hydra/launcher={launcher}"])
        assert WorkerRequest.parsed(cmd) is None, launcher
    assert WorkerRequest.parsed(parse_command_line(["hydra/launcher=basic"])) == \
        WorkerRequest(1, None)


class RecordingPool:
    """Stands for :class:`runner.execution.pool.Pool`: records its slots and warm-up."""

    made: list[RecordingPool] = []

    def __init__(self, slots: tuple[placement.Slot, ...]) -> None:
        self.slots, self.warm = slots, None
        RecordingPool.made.append(self)

    def prestart(self, warm: tuple[str, ...] | None = None, keep_warm: bool = False) -> None:
        self.warm = (warm, keep_warm)


@pytest.mark.parametrize("visible", [["0", "1", "2", "3"], ["4", "5", "6", "7"]])
def test_per_gpu_starts_one_worker_per_gpu_pinned_as_the_job_will_place_it(
        monkeypatch: pytest.MonkeyPatch, planned: list, visible: list[str]) -> None:
    """Each early worker owns the GPU (``CUDA_VISIBLE_DEVICES`` entry) that the job's
    placement gives the worker of its number: the job's pool is the one started early."""
    RecordingPool.made = []
    monkeypatch.setattr(pool, "gpus_without_torch", lambda: list(visible))
    monkeypatch.setattr(pool, "pool", RecordingPool)
    request = early_request(["workers=per_gpu", GPUS4, "gpu_warmup_s=5"])
    assert request is not None
    pool.prestart(*request.arguments)
    [early] = RecordingPool.made
    cuda = [replace_device(trial, f"cuda:{i % 4}") for i, trial in enumerate(planned)]
    job = placement.plan_workers("per_gpu", "process", cuda, {f"cuda:{i}" for i in range(4)},
                                 gpus=list(visible), cpu_count=os.cpu_count())
    assert early.slots == job.slots
    assert [dict(slot.env)["CUDA_VISIBLE_DEVICES"] for slot in early.slots] == visible
    # each warms its own GPU (cuda:0 inside it) and keeps it warm for gpu_warmup_s
    assert early.warm == (("cuda:0", "cuda:1", "cuda:2", "cuda:3"), True)


def test_per_gpu_starts_nothing_where_the_gpus_cannot_be_counted_without_torch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    RecordingPool.made = []
    monkeypatch.setattr(pool, "gpus_without_torch", lambda: None)  # e.g. UUIDs listed
    monkeypatch.setattr(pool, "pool", RecordingPool)
    pool.prestart(*early_request(["workers=per_gpu"]).arguments)
    assert RecordingPool.made == []


def replace_device(trial: Any, device: str) -> Any:
    from dataclasses import replace

    return replace(trial, spec=replace(trial.spec, device=device))


@pytest.fixture
def planned(compose: Any) -> list:
    from runner.config.planner import plan_job

    return plan_job(compose("op=vector_add", "device=cpu", "shape=[[8],[16],[32],[64]]"))


# ---------------------------------------------------------------------------------------
# Real worker processes (spawned, each imports torch): python -m runner in a fresh
# interpreter, its pool's start recorded and then checked
# ---------------------------------------------------------------------------------------

#: Runs ``python -m runner ARGS`` in this interpreter: records each early start (whether
#: Hydra was imported by then, and the workers' process ids), then prints, as the last
#: line, what it saw (after the command, once the exit handlers killed the pool's workers:
#: :func:`run_runner` then checks that none of them runs on).
SCRIPT = """
import atexit, json, runpy, sys
import runner.execution.pool as pool
starts, real = [], pool.prestart

def spy(*args):
    hydra = "hydra" in sys.modules
    real(*args)
    workers = pool._POOL.supervisors if pool._POOL is not None else []
    starts.append({"hydra": hydra, "pool": id(pool._POOL),
                   "pids": [s.worker.process.pid for s in workers if s.worker]})

def report():  # registered first: runs after the pool's own exit handler stopped it
    after = pool._POOL.supervisors if pool._POOL is not None else []
    print(json.dumps({"starts": starts, "pool": id(pool._POOL),
                      "worker_starts": [s.starts for s in after]}))

atexit.register(report)
pool.prestart = spy
sys.argv = ["runner", *sys.argv[1:]]
runpy.run_module("runner", run_name="__main__", alter_sys=False)
"""


#: A CPU sweep's settings; each test adds its shapes and workers.
SMALL = ["op=vector_add", "timer=smoke", "check_accuracy=false", "device=cpu"]


def run_runner(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``python -m runner ARGS`` into ``tmp_path/results``, and what :data:`SCRIPT` saw."""
    args = (*args, f"results_dir={tmp_path / 'results'}")
    out = subprocess.run([sys.executable, "-c", SCRIPT, *args], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = out.stdout.strip().splitlines()
    assert lines, out.stderr[-3000:]
    seen = json.loads(lines[-1])
    seen["alive"] = running([pid for start in seen["starts"] for pid in start["pids"]])
    return out, seen


def running(pids: list[int], patience_s: float = 30.0) -> list[int]:
    """Those of ``pids`` still running once the command has exited. The driver kills its
    workers at exit without waiting for them to be gone (a GPU context takes a while to tear
    down), so a killed worker may still be dying: it gets ``patience_s`` (far more than a
    killed process needs, so a loaded machine does not fail the test). A zombie is not
    running: it waits only for whoever adopted it to reap it."""
    def state(pid: int) -> str | None:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return None

    deadline = time.monotonic() + patience_s
    left = [pid for pid in pids if state(pid) not in (None, "Z")]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if state(pid) not in (None, "Z")]
    return left


@pytest.mark.slow
def test_the_job_runs_on_the_pool_started_before_hydra(tmp_path: Path) -> None:
    out, seen = run_runner(tmp_path, *SMALL, "shape=[[8],[16],[32]]", "workers=2")
    assert out.returncode == 0, out.stderr[-3000:]
    [start] = seen["starts"]  # one start, before Hydra; the parse then started nothing
    assert start["hydra"] is False and len(start["pids"]) == 2
    # the job ran on that pool: the same object, each worker started once
    assert seen["pool"] == start["pool"] and seen["worker_starts"] == [1, 1]
    rows = pd.read_parquet(next((tmp_path / "results").rglob("results.parquet")))
    assert set(rows["status"]) == {"ok"} and set(rows["worker"]) == {0, 1}
    assert seen["alive"] == []


@pytest.mark.slow
def test_workers_with_nothing_to_run_are_stopped(tmp_path: Path) -> None:
    # three workers for one trial: the two idle ones too are stopped when the command ends
    out, seen = run_runner(tmp_path, *SMALL, "shape=[8]", "workers=3")
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(seen["starts"][0]["pids"]) == 3 and seen["alive"] == []
    # a command line the checks refuse: exit 2, and its early workers are stopped
    out, seen = run_runner(tmp_path, "op=no_such_op", "workers=2", "device=cpu")
    assert out.returncode == 2, out.stderr[-3000:]
    assert seen["starts"][0]["hydra"] is False and len(seen["starts"][0]["pids"]) == 2
    assert seen["alive"] == []


@pytest.mark.slow
def test_workers_are_stopped_when_a_launcher_runs_every_job(tmp_path: Path) -> None:
    """An experiment that picks a launcher (its jobs start their own workers, elsewhere):
    the workers started for the command line are stopped before Hydra launches anything."""
    experiment = tmp_path / "configs" / "experiment" / "elsewhere.yaml"
    experiment.parent.mkdir(parents=True)
    experiment.write_text("# @package _global_\ndefaults:\n"
                          "  - override /hydra/launcher: submitit_local\n")
    check = ("import runner.config.guards as guards, runner.execution.pool as pool\n"
             "def stop_here():\n"
             "    sups = pool._POOL.supervisors if pool._POOL else []\n"
             "    print(json.dumps({'running': [bool(s.worker) for s in sups]}))\n"
             "    raise SystemExit(0)\n"
             "guards.guard_hydra_record = stop_here\n")
    script = SCRIPT.replace("atexit.register(report)\n", check)
    out = subprocess.run(
        [sys.executable, "-c", script, *SMALL, "workers=2",
         f"hydra.searchpath=[file://{tmp_path / 'configs'}]",
         "experiment=elsewhere", "seed=0,1", "-m",
         f"results_dir={tmp_path / 'results'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    # started once parsed (a hydra key: not before), then stopped by the pre-flight's finding
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"running": [False, False]}


@pytest.mark.parametrize("early", [True, False])
def test_the_start_up_line_gives_the_driver_s_steps_in_the_order_they_happened(
        monkeypatch: pytest.MonkeyPatch, early: bool) -> None:
    from datetime import datetime, timezone

    from runner.execution import timeline

    t0 = 1_000_000.0
    spawned, parsed = (t0 + 0.1, t0 + 0.4) if early else (t0 + 0.45, t0 + 0.4)
    monkeypatch.setattr(timeline, "_MARKS", {"main": t0 + 0.05, "spawned": spawned,
                                             "parsed": parsed, "checked": t0 + 0.5,
                                             "preflight": t0 + 1.0, "job": t0 + 1.2,
                                             "planned": t0 + 1.3})
    for name, value in (("_WORKERS", {}), ("_STARTUP", []), ("_SENT", {}),
                        ("_FIRST_TRIAL", [])):
        monkeypatch.setattr(timeline, name, value)
    timeline.trial_started(datetime.fromtimestamp(t0 + 4.0, timezone.utc))
    parts = timeline.startup(command_at=t0)
    driver = [key for key in parts if key.endswith("_s") and key in timeline.DRIVER_LABELS]
    assert sum(parts[key] for key in driver) == pytest.approx(parts["planned_at_s"])
    assert all(parts[key] >= 0 for key in driver)
    line = timeline.startup_line(parts)
    if early:  # the workers first, then Hydra's import and the parse
        assert parts["worker_spawn_s"] == pytest.approx(0.05)
        assert parts["parse_s"] == pytest.approx(0.3)
        assert "Python 0.05, starting workers 0.05, importing Hydra and parsing 0.30, " \
               "checks 0.10" in line, line
    else:  # started once parsed
        assert parts["parse_s"] == pytest.approx(0.35)
        assert "Python 0.05, importing Hydra and parsing 0.35, starting workers 0.05, " \
               "checks 0.05" in line, line
