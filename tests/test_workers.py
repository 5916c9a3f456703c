"""``workers=N`` / ``workers=per_gpu`` (docs/scale-out.md): the trials of one job run in N
supervised worker processes at once, each with its own list, placed by estimated cost; where
the time goes (start-up parts, each worker's busy time: ``runner.execution.timeline``).

The CPU path is the same machinery as the GPU one (placement aside), so these runs prove the
queue, the journal from several threads, crash isolation per worker and the merged file. GPU
placement (one GPU per worker, pinned trials) is checked on the GPU machine by the lead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from runner.core.axes import DTYPE_BYTES
from runner.core.errors import ConfigError
from runner.execution import order, placement, pool, timeline
from runner.execution.costs import TrialCost
from runner.storage import journal
from runner.storage.files import METADATA_KEY
from runner.storage.layout import JOB_FILE, SWEEP_FILE

ROOT = Path(__file__).resolve().parent.parent

SWEEP = ["op=vector_add", "timer=smoke", "shape=[[8],[16],[32],[64]]", "dtype=[fp32,fp64]"]
FINE = "ops.examples:gelu_mul"


def CLI_RUNS() -> dict[str, Any]:  # noqa: N802 (the name conftest looks for)
    return {
        # two Hydra jobs each: the second reuses the first one's workers
        "two": SWEEP + ["workers=2", "seed=0,1", "-m"],
        "one": SWEEP + ["workers=1", "seed=0,1", "-m"],
        # (fine, os._exit, fine) x 2 shapes: the crashes are rows, the other trials finish
        "crash": ["op=custom", "timer=smoke", "workers=2", "shape=[[8,8],[16,16]]",
                  f"op.target=[{FINE},ops.faults:exits,torch:mul]"],
    }


def merged(run: Any) -> pd.DataFrame:
    run.wait()
    assert run.returncode == 0, run.explain()
    files = sorted((run.cwd / "results").glob(f"*/{SWEEP_FILE}"))
    assert len(files) == 1, (files, run.explain())
    return pd.read_parquet(files[0])


# ---------------------------------------------------------------------------------------
# End to end, on CPU workers
# ---------------------------------------------------------------------------------------

def test_two_workers_give_the_trial_set_of_one_in_one_file(cli_runs: dict[str, Any]) -> None:
    two, one = merged(cli_runs["two"]), merged(cli_runs["one"])
    assert len(two) == 16 and (two["status"] == "ok").all(), two[["status", "reason"]]
    assert Counter(two["trial_id"]) == Counter(one["trial_id"])
    for _, job in two.groupby("job_num"):  # the plan's index, not the order the trials ran in
        assert sorted(job["trial_index"]) == list(range(8))
        assert set(job["worker"]) == {0, 1}, "both workers must have run trials of each job"
    assert set(one["worker"]) == {0}
    # each of two workers runs with its share of the cores, and the rows say how many
    import os
    assert set(two["num_threads_used"]) == {max(1, (os.cpu_count() or 1) // 2)}
    # same trial, same index, in both runs
    assert dict(zip(two["trial_id"], two["trial_index"])) == \
        dict(zip(one["trial_id"], one["trial_index"]))


def test_a_crash_in_one_worker_is_a_row_and_the_rest_finish(cli_runs: dict[str, Any]) -> None:
    df = merged(cli_runs["crash"])
    assert len(df) == 6
    crashed = df[df["param_target"] == "ops.faults:exits"]
    assert list(crashed["status"]) == ["crashed"] * 2, crashed[["status", "reason"]]
    assert crashed["reason"].str.contains("exited with status 3").all()
    rest = df[df["param_target"] != "ops.faults:exits"]
    assert (rest["status"] == "ok").all(), rest[["status", "reason"]]


def test_per_gpu_without_cuda_is_refused(start_cli: Any, tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    run = start_cli(SWEEP + ["workers=per_gpu"], tmp_path).wait()
    assert run.returncode == 2, run.explain()
    assert "'workers'" in run.err and "no CUDA device" in run.err
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_ctrl_c_lets_the_workers_finish_then_resume_completes(start_cli: Any,
                                                              tmp_path: Path) -> None:
    # enough trials that a quiet machine cannot finish them all before the Ctrl-C lands
    n_trials = 200
    shapes = "shape=[" + ",".join(f"[{n}]" for n in range(1, n_trials + 1)) + "]"
    run = start_cli(["op=vector_add", "timer=smoke", "workers=2", shapes], tmp_path)
    entries = tmp_path / "results"
    deadline = time.monotonic() + 120
    while sum(journal.count_entries(job) for job in entries.glob("*/jobs/0")) < 4 \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    run._proc.send_signal(signal.SIGINT)
    run.wait()
    assert run.returncode == 130, run.explain()
    (sweep,) = entries.iterdir()
    df = pd.read_parquet(sweep / SWEEP_FILE)
    assert 4 <= len(df) < n_trials and set(df["status"]) == {"ok"}
    assert len(df) == journal.count_entries(sweep / "jobs" / "0")
    resumed = start_cli([str(sweep)], tmp_path, module="runner.resume").wait()
    assert resumed.returncode == 0, resumed.explain()
    df = pd.read_parquet(sweep / SWEEP_FILE)
    assert sorted(df["trial_index"]) == list(range(n_trials)) and set(df["status"]) == {"ok"}


# ---------------------------------------------------------------------------------------
# Placement, pinning, order (no processes)
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def planned(compose: Any) -> list:
    from runner.config.planner import plan_job

    return plan_job(compose("op=matmul", "device=cpu", "shape=[[8,8,8],[64,64,64],[16,16,16]]",
                            "dtype=[bf16,fp32]"))


def on_gpu(trials: list, device: str) -> list:
    return [replace(t, spec=replace(t.spec, device=device)) for t in trials]


def test_longest_first_orders_by_shape_product_and_dtype_bytes(planned: list) -> None:
    ranked = [(t.spec.shape, t.spec.dtype.value) for t in order.longest_first(planned)]
    assert ranked == [((64, 64, 64), "fp32"), ((64, 64, 64), "bf16"), ((16, 16, 16), "fp32"),
                     ((16, 16, 16), "bf16"), ((8, 8, 8), "fp32"), ((8, 8, 8), "bf16")]
    backward = replace(planned[0], spec=replace(planned[0].spec, backward=True))
    assert order.cost(backward.spec) == 3 * order.cost(planned[0].spec)
    # the driver's bytes per element (no torch) are the workers' torch dtypes' sizes
    from runner.execution.context import TORCH_DTYPES

    assert {d: t.itemsize for d, t in TORCH_DTYPES.items()} == DTYPE_BYTES


def test_cpu_workers_split_the_cores(planned: list) -> None:
    plan = placement.plan_workers(2, "process", planned, set(), gpus=[], cpu_count=8)
    assert [(s.index, s.gpu, s.env, s.threads) for s in plan.slots] == \
        [(0, None, (), 4), (1, None, (), 4)]
    assert plan.pinned == {}
    assert placement.plan_workers(1, "none", planned, set(), gpus=[]).slots[0].threads is None


def test_workers_own_the_visible_gpus_in_order(planned: list) -> None:
    trials = on_gpu(planned, "cuda:0")
    plan = placement.plan_workers("per_gpu", "process", trials, set(), gpus=["4", "5"], cpu_count=8)
    assert [(s.gpu, dict(s.env)) for s in plan.slots] == \
        [(0, {"CUDA_VISIBLE_DEVICES": "4"}), (1, {"CUDA_VISIBLE_DEVICES": "5"})]
    assert plan.pinned == {}  # device=cuda / auto: any worker's GPU


def test_cuda_n_pins_a_trial_to_its_worker(planned: list) -> None:
    trials = on_gpu(planned[:2], "cuda:1") + on_gpu(planned[2:], "cuda:0")
    plan = placement.plan_workers(2, "process", trials, {"cuda:1"}, gpus=["0", "1"])
    assert plan.pinned == {trials[0].index: 1, trials[1].index: 1}
    queue = pool.trial_queue(trials, plan.pinned, plan.slots,
                             {t.index: TrialCost(1.0) for t in trials})
    assert {t.index for t in queue.lists[1]} >= set(plan.pinned)
    taken = []
    while (trial := queue.take(0)) is not None:
        taken.append(trial.index)
    assert set(taken) == {t.index for t in trials[2:]}, "worker 0 took a trial pinned to GPU 1"
    assert {t.index for t in queue.items} == {trials[0].index, trials[1].index}
    assert queue.take(1).index in plan.pinned


def test_bad_placements_are_config_errors(planned: list) -> None:
    with pytest.raises(ConfigError, match="'workers'.*no CUDA device"):
        placement.plan_workers("per_gpu", "process", planned, set(), gpus=[])
    with pytest.raises(ConfigError, match="'workers'.*isolation=none"):
        placement.plan_workers(2, "none", planned, set(), gpus=[])
    with pytest.raises(ConfigError, match="'workers': 3.*2 visible CUDA"):
        placement.plan_workers(3, "process", on_gpu(planned, "cuda:0"), set(), gpus=["0", "1"])
    with pytest.raises(ConfigError, match="'cuda:2'.*workers=2 runs on visible GPUs 0..1"):
        placement.plan_workers(2, "process", on_gpu(planned, "cuda:2"), {"cuda:2"},
                          gpus=["0", "1", "2"])


def test_only_cuda_n_as_written_pins() -> None:
    values = {"device": ["cuda", "cuda:1", "auto"], "cases": [{"device": "cuda:3"}, {"op": "x"}]}
    assert placement.explicit_gpus(values) == {"cuda:1", "cuda:3"}


def test_the_pool_is_reused_for_the_same_placement() -> None:
    slots = (placement.Slot(0, None, (), 1), placement.Slot(1, None, (), 1))
    first = pool.pool(slots)
    assert pool.pool(slots) is first
    other = pool.pool(slots[:1])
    assert other is not first
    other.stop()


class _DyingWorkerProcess:
    """A killed worker whose GPU context takes long to tear down: it never finishes dying,
    so whoever waits for it (``join``, or ``multiprocessing``'s exit handler through
    ``active_children``) hangs; here a wait fails the test instead."""

    def __init__(self) -> None:
        self.killed = False

    def is_alive(self) -> bool:
        return True

    def kill(self) -> None:
        self.killed = True

    def join(self, timeout: float | None = None) -> None:
        raise AssertionError("waited for a killed worker at the driver's exit")


@pytest.mark.parametrize("stopping", ["one worker", "a pool"])
def test_the_driver_s_exit_kills_its_workers_without_waiting_for_them(
        monkeypatch: pytest.MonkeyPatch, stopping: str) -> None:
    """What the driver registers with ``atexit`` kills the worker and waits for nothing."""
    import multiprocessing.process

    from runner.execution import worker

    dying = _DyingWorkerProcess()
    fake = object.__new__(worker.Worker)
    fake.process, fake.conn = dying, type("Conn", (), {"close": lambda self: None})()
    children = {dying}
    monkeypatch.setattr(multiprocessing.process, "_children", children)
    registered: list[tuple] = []
    monkeypatch.setattr(worker.atexit, "register", lambda *call: registered.append(call))
    if stopping == "a pool":
        monkeypatch.setattr(pool, "_POOL", None)
        pool.pool((placement.Slot(0, None, (), 1),)).supervisors[0].worker = fake
    else:
        monkeypatch.setattr(worker, "_SUPERVISOR", None)
        worker.supervisor().worker = fake
    handler, *args = registered[0]
    handler(*args)
    assert dying.killed
    assert not children  # multiprocessing's exit handler will not join it either


# ---------------------------------------------------------------------------------------
# Where the time goes: start-up parts, busy time per worker
# ---------------------------------------------------------------------------------------

def test_every_row_has_its_busy_time_and_job_0_its_startup(cli_runs: dict[str, Any]) -> None:
    run = cli_runs["two"]
    df = merged(run)
    assert (df["worker_trial_wall_s"] > 0).all()
    (sweep,) = (run.cwd / "results").iterdir()
    startups = [json.loads(pq.read_schema(sweep / "jobs" / str(n) / JOB_FILE)
                           .metadata[METADATA_KEY])["startup"] for n in (0, 1)]
    parts, later = startups
    assert later is None, "a later job of the multirun reuses the workers: no start-up"
    driver = ("python_s", "worker_spawn_s", "parse_s", "checks_s", "preflight_s", "hydra_s",
              "planning_s")
    for key in (*driver, "workers", "worker_process_s", "worker_torch_import_s",
                "worker_imports_s", "worker_warm_s"):
        assert parts[key] >= 0, key
    assert parts["workers"] == 2
    # only the workers run trials: the driver must not have paid torch's import before the
    # first trial went out (it checks, plans and places without it)
    assert parts["driver_torch_imported"] is False
    # the driver's steps add up to its planning; the workers start before the driver imports
    # torch (workers=2 on the command line, no GPU here); the first trial starts once they
    # are ready and the job is planned
    assert sum(parts[key] for key in driver) == pytest.approx(parts["planned_at_s"], abs=0.01)
    assert parts["workers_started_at_s"] <= parts["python_s"] + parts["worker_spawn_s"] + 0.002
    # workers=2 plainly: they started before Hydra was imported and the command line parsed
    assert list(parts).index("worker_spawn_s") < list(parts).index("parse_s")
    assert parts["planned_at_s"] <= parts["first_trial_at_s"]
    assert parts["workers_ready_at_s"] <= parts["first_trial_at_s"] + 0.05
    assert "busy: worker 0 (cpu)" in run.err and "worker 1 (cpu)" in run.err
    assert "start-up: first trial" in run.err and "2 worker(s) started at" in run.err


def stamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(1_000_000 + seconds, timezone.utc)


def test_busy_time_is_the_sum_of_a_worker_s_trials_over_the_trial_spans() -> None:
    def row(job: int, worker: int, gpu: int, at: float, wall: float | None) -> dict:
        return {"job_num": job, "worker": worker, "gpu_index": gpu, "timestamp": stamp(at),
                "worker_trial_wall_s": wall}

    rows = [row(0, 0, 3, 0, 6.0), row(0, 0, 3, 6, 4.0), row(0, 1, 5, 1, 7.0),  # 0..10 s
            row(1, 0, 3, 100, 2.0), row(1, 1, 5, 101, 3.0),  # 100..104 s: gaps not counted
            row(1, 1, 5, 101, None)]  # no busy time: not counted
    busy = timeline.busy(rows)
    assert {w: (b["busy_s"], b["trials"], b["gpus"]) for w, b in busy.items()} == \
        {0: (12.0, 3, {3}), 1: (10.0, 2, {5})}
    assert busy[0]["span_s"] == busy[1]["span_s"] == 14.0
    assert busy[0]["fraction"] == pytest.approx(12 / 14)
    line = timeline.busy_line(rows)
    assert line.startswith("busy: worker 0 (GPU 3) 86% (3 trials), worker 1 (GPU 5) 71% "
                           "(2 trials) of 14 s of trials"), line
    driver = [{"job_num": 0, "worker": None, "timestamp": stamp(0), "worker_trial_wall_s": 1.0}]
    assert "driver (cpu) 100%" in timeline.busy_line(driver)
    assert timeline.busy_line([{"job_num": 0, "worker": 0}]) is None  # older files


def test_startup_parts_are_measured_from_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = 1_000_000.0
    monkeypatch.setattr(timeline, "_MARKS", {"main": t0 + 0.05, "spawned": t0 + 0.1,
                                             "checked": t0 + 1.7,
                                             "preflight": t0 + 2.2, "job": t0 + 2.6,
                                             "planned": t0 + 2.75})
    workers = {f"opsweep-worker-{i}": {"spawned_at": t0 + 0.2 + i / 100, "main_at": t0 + 0.5,
                                       "torch_import_s": 1.6 + i, "imports_s": 0.3,
                                       "ready_at": t0 + 2.5 + i, "cuda_context_s": 0.4,
                                       "warm_s": 0.6, "warmed_at": t0 + 3.1 + i}
               for i in range(3)}
    monkeypatch.setattr(timeline, "_WORKERS", workers)
    monkeypatch.setattr(timeline, "_STARTUP", [])
    monkeypatch.setattr(timeline, "_FIRST_TRIAL", [])
    monkeypatch.setattr(timeline, "_SENT", {})
    timeline.trial_started(stamp(4.0))
    timeline.trial_started(stamp(3.5))  # rows come back in any order: the earliest counts
    timeline.trial_started(None)  # a row without a timestamp changes nothing
    parts = timeline.startup(command_at=t0)
    assert parts == {
        "first_trial_at_s": 3.5, "python_s": 0.05, "worker_spawn_s": 0.05,
        "checks_s": 1.6, "preflight_s": 0.5, "hydra_s": 0.4,
        "planning_s": 0.15, "planned_at_s": 2.75,
        "workers": 3, "workers_started_at_s": 0.2, "worker_process_s": 0.3,
        "worker_torch_import_s": 3.6, "worker_imports_s": 0.3, "worker_cuda_context_s": 0.4,
        "worker_warm_s": 0.6, "workers_ready_at_s": 5.1}
    assert timeline.startup(command_at=t0) is None, "only the first job has a start-up"
    assert timeline.reported_startup() is parts
    line = timeline.startup_line(parts)
    assert line.startswith("start-up: first trial 3.50 s after the command. Driver: Python "
                           "0.05, starting workers 0.05, checks 1.60, "
                           "composing and planning every job 0.50, Hydra 0.40, planning "
                           "0.15 (planned at 2.75 s)"), line
    assert "3 worker(s) started at 0.20 s" in line and "CUDA context 0.40" in line
    assert "imported torch" not in line
    assert "(imported torch before the first trial)" in timeline.startup_line(
        {**parts, "driver_torch_imported": True})


def test_startup_names_the_bytecode_cache_the_workers_loaded_torch_from(
        monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = 1_000_000.0
    report = {"spawned_at": t0, "main_at": t0 + 0.1, "torch_import_s": 1.6, "imports_s": 0.3,
              "ready_at": t0 + 2.0}
    monkeypatch.setattr(timeline, "_MARKS", {"main": t0})
    monkeypatch.setattr(timeline, "_WORKERS", {
        "opsweep-worker-0": {**report, "bytecode_cache": "/home/u/.cache/opsweep/bytecode"},
        "opsweep-worker-1": {**report, "bytecode_cache": None}})
    monkeypatch.setattr(timeline, "_STARTUP", [])
    monkeypatch.setattr(timeline, "_FIRST_TRIAL", [t0 + 2.5])
    monkeypatch.setattr(timeline, "_SENT", {})
    parts = timeline.startup(command_at=t0)
    assert parts["worker_bytecode_cache"] == "/home/u/.cache/opsweep/bytecode"
    assert timeline.startup_line(parts).endswith(
        "; torch's bytecode from /home/u/.cache/opsweep/bytecode.")
    parts.pop("worker_bytecode_cache")
    assert "bytecode" not in timeline.startup_line(parts)


def test_process_start_is_before_now() -> None:
    started = timeline.process_start()
    if started is None:
        pytest.skip("no /proc on this platform")
    assert 0 < time.time() - started < 3600


# ---------------------------------------------------------------------------------------
# Design for N: placement with any GPU count, predicted before Hydra composes the job
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("count", [2, 3, 8])
def test_n_gpus_n_workers_each_owning_one(planned: list, count: int) -> None:
    gpus = [str(10 + i) for i in range(count)]
    trials = on_gpu(planned, "cuda:0")
    plan = placement.plan_workers("per_gpu", "process", trials, set(), gpus=gpus, cpu_count=64)
    assert [(s.index, s.gpu, dict(s.env), s.threads) for s in plan.slots] == \
        [(i, i, {"CUDA_VISIBLE_DEVICES": gpus[i]}, 64 // count) for i in range(count)]
    # what __main__ starts before Hydra composes the job is what the job then asks for, so
    # the job reuses those workers (pool() compares slots)
    assert placement.predicted_slots("per_gpu", gpus, 64) == plan.slots
    half = placement.plan_workers(count // 2 or 1, "process", trials, set(), gpus=gpus,
                                  cpu_count=64)
    assert placement.predicted_slots(str(count // 2), gpus, 64) == \
        (half.slots if count // 2 > 1 else None)


def test_predicted_slots_for_cpu_workers_and_what_is_not_predicted(planned: list) -> None:
    assert placement.predicted_slots("3", [], 6) == \
        placement.plan_workers(3, "process", planned, set(), gpus=[], cpu_count=6).slots
    assert placement.predicted_slots("1", ["0"], 6) is None  # one worker: the supervisor
    assert placement.predicted_slots("per_gpu", ["0"], 6) is None
    assert placement.predicted_slots("4", ["0", "1"], 6) is None  # refused by the job's check
    assert placement.predicted_slots("two", ["0", "1"], 6) is None
    assert placement.predicted_slots("7", [], 6) is None  # more CPU workers than cores
    assert len(placement.predicted_slots("4", [], 2)) == 4  # a few: started all the same


def test_only_a_plain_command_line_starts_its_worker_before_hydra_s_parser() -> None:
    from runner.config.early_workers import WorkerRequest, early_request

    one = WorkerRequest(1, None)
    assert early_request(["op=matmul", "dtype=fp16,fp32", "-m", "+experiment=x"]) == one
    assert early_request([]) == one
    for placed in (["isolation=none"], ["+device=cuda:1"], ["~workers"], ["device.x=1"],
                   ["hydra/launcher=submitit_local"], ["hydra.launcher.timeout_min=5"],
                   ["op=matmul", "--help"], ["--cfg", "job"], ["-c"], ["op"]):
        assert early_request(placed) is None, placed


def test_python_m_runner_starts_the_worker_before_it_imports_hydra(tmp_path: Path) -> None:
    # A fresh interpreter (this one has imported Hydra long ago); the start is recorded, not
    # made, and a bad op then stops the command before any trial.
    script = (
        "import runpy, sys\n"
        "import runner.execution.pool as pool\n"
        "seen = []\n"
        "pool.prestart = lambda workers, device, *heat: seen.append('hydra' in sys.modules)\n"
        "sys.argv = ['runner', 'op=no_such_op']\n"
        "try:\n"
        "    runpy.run_module('runner', run_name='__main__', alter_sys=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(seen)\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    # before Hydra (the early start), and not again once parsed: the same request
    assert out.stdout.strip().splitlines()[-1] == "[False]", out.stdout + out.stderr


def test_the_opsweep_script_with_a_plain_command_line_runs_its_trial(tmp_path: Path) -> None:
    # A spawned worker runs the main script again: the `opsweep` script's worker must not
    # start a worker of its own (it would die starting, and every trial crash).
    script = tmp_path / "bin" / "opsweep"
    script.parent.mkdir()
    script.write_text("import sys\nfrom runner.__main__ import main\n"  # as pip writes it
                      "if __name__ == '__main__':\n    sys.exit(main())\n")
    out = subprocess.run([sys.executable, str(script), "op=vector_add", "shape=[8]",
                          "timer=smoke", "check_accuracy=false",
                          f"results_dir={tmp_path / 'results'}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    rows = pd.read_parquet(next((tmp_path / "results").rglob("results.parquet")))
    assert list(rows["status"]) == ["ok"], out.stderr[-3000:]


def test_devices_to_warm_are_guessed_from_the_command_line() -> None:
    from runner.config.commandline import parse_command_line

    def guess(args: list[str], gpus: list[str]) -> tuple[str, ...]:
        return placement.guess_devices(parse_command_line(args).values_of("device"), gpus)

    assert guess(["op=matmul"], ["0", "1"]) == ("cuda:0",)  # auto, with GPUs
    assert guess(["op=matmul"], []) == ("cpu",)  # auto, without
    assert guess(["device=cuda"], ["0"]) == ("cuda:0",)
    assert guess(["device=cpu", "device=[cuda:1,cpu,cuda:1]"], ["0", "1"]) == \
        ("cuda:1", "cpu")  # the last device= wins, as on Hydra's command line
    assert guess(["device=cpu,auto", "-m"], ["0"]) == ("cpu", "cuda:0")
    assert guess(["device=tpu"], ["0"]) == ()  # the job's check refuses it: nothing warmed


def test_warm_devices_are_the_job_s_devices_once(planned: list) -> None:
    trials = on_gpu(planned[:2], "cuda:1") + on_gpu(planned[2:], "cpu") + \
        on_gpu(planned[:1], "cuda:1")
    assert pool.warm_devices(trials) == ("cuda:1", "cpu")


# ---------------------------------------------------------------------------------------
# The driver round trip: workers never wait on the journal
# ---------------------------------------------------------------------------------------

class FakeSupervisor:
    """Runs a 'trial' by calling ``on_run`` (in the worker's thread)."""

    def __init__(self, on_run: Any) -> None:
        self.on_run, self.calls = on_run, []

    def wait_ready(self) -> None:
        pass

    def run(self, trial: Any) -> dict[str, Any]:
        self.calls.append(trial.index)
        self.on_run(trial)
        return {"trial_index": trial.index}

    def stop(self) -> None:
        pass


class NoStop:
    requested = False


def fake_pool(count: int, on_run: Any) -> pool.Pool:
    workers = pool.Pool.__new__(pool.Pool)
    workers.slots = tuple(placement.Slot(i, None, (), 1) for i in range(count))
    workers.supervisors = [FakeSupervisor(on_run) for _ in range(count)]
    return workers


def test_a_worker_runs_its_next_trial_while_its_row_is_journaled(planned: list) -> None:
    """While the journal is stuck, each worker runs exactly one trial past its last
    journaled row, then waits: no worker waits on the journal for its next trial, and at
    most one finished row per worker is not yet on disk."""
    started: list[int] = []
    two_each, release = threading.Event(), threading.Event()

    def on_run(trial: Any) -> None:
        started.append(trial.index)
        if len(started) == 4:
            two_each.set()

    recorded: list[int] = []

    def record(row: dict[str, Any], trial: Any) -> None:
        assert release.wait(10), "the test did not release the journal"
        assert threading.current_thread().name.startswith("opsweep-journal-")
        recorded.append(row["trial_index"])

    workers = fake_pool(2, on_run)
    runner = threading.Thread(target=workers.run, args=(list(planned), {}),
                              kwargs={"stop": NoStop(), "record": record})
    runner.start()
    assert two_each.wait(10), "the workers waited for the journal before their next trial"
    time.sleep(0.2)
    assert len(started) == 4, "a worker ran on with two rows not yet journaled"
    assert [len(s.calls) for s in workers.supervisors] == [2, 2]
    release.set()
    runner.join(20)
    assert sorted(recorded) == sorted(t.index for t in planned)


def test_a_failing_record_stops_the_queue_and_is_raised(planned: list) -> None:
    def record(row: dict[str, Any], trial: Any) -> None:
        raise SystemExit(1)  # what a failed journal write does

    workers = fake_pool(2, lambda trial: time.sleep(0.01))
    with pytest.raises(SystemExit):
        workers.run(list(planned), {}, stop=NoStop(), record=record)
    ran = sum(len(s.calls) for s in workers.supervisors)
    assert ran < len(planned), "trials were still handed out after the journal failed"


def test_gpus_are_counted_without_torch_as_cuda_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver counts GPUs from the NVIDIA driver and CUDA_VISIBLE_DEVICES; where only CUDA
    can tell, it says so (None) and the caller asks torch."""
    from runner.core import gpus

    monkeypatch.setattr(gpus, "_driver_gpu_count", lambda: 4)
    monkeypatch.setattr(gpus, "_torch_cuda_build", lambda: True)
    cases = {None: ["0", "1", "2", "3"], "2,0": ["2", "0"], "1,7,2": ["1"], "": [],
             "GPU-8f6c": None, "0,0": None, "-1": None}
    for listed, expected in cases.items():
        if listed is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
        assert gpus.visible_gpus() == expected, listed
    monkeypatch.setattr(gpus, "_torch_cuda_build", lambda: False)  # a CPU torch sees none
    assert gpus.visible_gpus() is None
    monkeypatch.setattr(gpus, "_driver_gpu_count", lambda: 0)
    assert gpus.visible_gpus() == []


class HeatingSupervisor(FakeSupervisor):
    """Also records the heat and keep-warm requests, in order with the trials."""

    def __init__(self, log: list) -> None:
        super().__init__(lambda trial: log.append(("trial", trial.index)))
        self.log = log

    def heat(self, device: str, seconds: float) -> None:
        self.log.append(("heat", device, seconds))

    def keep_warm(self, device: str, max_s: float) -> None:
        self.log.append(("keep_warm", device))


@pytest.mark.parametrize("heat_s", [0.0, 5.0])
def test_with_gpu_warmup_each_gpu_is_kept_warm_through_the_waits(planned: list,
                                                                 heat_s: float) -> None:
    """gpu_warmup_s: each worker heats its GPU, keeps it warm while the others get ready,
    and again after its last trial, until the next job's request; never without it."""
    logs: list[list] = [[], []]
    workers = pool.Pool.__new__(pool.Pool)
    workers.slots = tuple(placement.Slot(i, i, (), 1) for i in range(2))
    workers.supervisors = [HeatingSupervisor(log) for log in logs]
    workers.run(on_gpu(list(planned), "cuda"), {}, stop=NoStop(), record=lambda r, t: None,
                heat_s=heat_s)
    for log in logs:
        kinds = [entry[0] for entry in log]  # a worker may have taken over every trial
        if not heat_s:
            assert set(kinds) <= {"trial"}
            continue
        assert kinds[:2] == ["heat", "keep_warm"] and kinds[-1] == "keep_warm"
        assert set(kinds[2:-1]) <= {"trial"} and log[1] == ("keep_warm", "cuda:0")
    assert sum(kind == "trial" for log in logs for kind, *_ in log) == len(planned)


def test_gpu_warmup_on_the_command_line_keeps_each_gpu_warm_from_its_warm_up() -> None:
    """Given ``gpu_warmup_s``, each GPU worker is asked to keep its GPU warm right after its
    warm-up, while the driver still plans; a CPU job's workers are not."""
    class Recorder:
        def __init__(self) -> None:
            self.calls: list[tuple] = []

        def prestart(self, warm: Any = None) -> None:
            self.calls.append(("prestart", warm))

        def keep_warm(self, device: str, max_s: float) -> None:
            self.calls.append(("keep_warm", device))

    for warm, keep, expected in [(("cuda:0",), True, ("keep_warm", "cuda:0")),
                                 (("cuda:0",), False, None), (("cpu",), True, None)]:
        workers = pool.Pool.__new__(pool.Pool)
        workers.slots = tuple(placement.Slot(i, i, (), 1) for i in range(2))
        workers.supervisors = [Recorder(), Recorder()]
        workers.prestart(warm, keep_warm=keep)
        for recorder in workers.supervisors:
            assert recorder.calls[0][0] == "prestart"
            assert (recorder.calls[1] if len(recorder.calls) > 1 else None) == expected
