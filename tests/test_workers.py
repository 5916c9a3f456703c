"""``workers=N`` / ``workers=per_gpu`` (issue 12, docs/scale-out.md): the trials of one job run
in N supervised worker processes at once, fed from one longest-first queue.

The CPU path is the same machinery as the GPU one (placement aside), so these runs prove the
queue, the journal from several threads, crash isolation per worker and the merged file. GPU
placement (one GPU per worker, pinned trials) is checked on the GPU machine by the lead.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from runner.core.errors import ConfigError
from runner.execution import pool
from runner.storage.layout import SWEEP_FILE

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
    shapes = "shape=[" + ",".join(f"[{n}]" for n in range(1, 41)) + "]"
    run = start_cli(["op=vector_add", "timer=smoke", "workers=2", shapes], tmp_path)
    entries = tmp_path / "results"
    deadline = time.monotonic() + 120
    while len(list(entries.glob("*/jobs/0/journal/*.parquet"))) < 4 \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    run._proc.send_signal(signal.SIGINT)
    run.wait()
    assert run.returncode == 130, run.explain()
    (sweep,) = entries.iterdir()
    df = pd.read_parquet(sweep / SWEEP_FILE)
    assert 4 <= len(df) < 40 and set(df["status"]) == {"ok"}
    assert len(df) == len(list(sweep.glob("jobs/0/journal/*.parquet")))
    resumed = start_cli([str(sweep)], tmp_path, module="runner.resume").wait()
    assert resumed.returncode == 0, resumed.explain()
    df = pd.read_parquet(sweep / SWEEP_FILE)
    assert sorted(df["trial_index"]) == list(range(40)) and set(df["status"]) == {"ok"}


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
    order = [(t.spec.shape, t.spec.dtype.value) for t in pool.longest_first(planned)]
    assert order == [((64, 64, 64), "fp32"), ((64, 64, 64), "bf16"), ((16, 16, 16), "fp32"),
                     ((16, 16, 16), "bf16"), ((8, 8, 8), "fp32"), ((8, 8, 8), "bf16")]
    backward = replace(planned[0], spec=replace(planned[0].spec, backward=True))
    assert pool.cost(backward.spec) == 3 * pool.cost(planned[0].spec)


def test_cpu_workers_split_the_cores(planned: list) -> None:
    plan = pool.plan_workers(2, "process", planned, set(), gpus=[], cpu_count=8)
    assert [(s.index, s.gpu, s.env, s.threads) for s in plan.slots] == \
        [(0, None, (), 4), (1, None, (), 4)]
    assert plan.pinned == {}
    assert pool.plan_workers(1, "none", planned, set(), gpus=[]).slots[0].threads is None


def test_workers_own_the_visible_gpus_in_order(planned: list) -> None:
    trials = on_gpu(planned, "cuda:0")
    plan = pool.plan_workers("per_gpu", "process", trials, set(), gpus=["4", "5"], cpu_count=8)
    assert [(s.gpu, dict(s.env)) for s in plan.slots] == \
        [(0, {"CUDA_VISIBLE_DEVICES": "4"}), (1, {"CUDA_VISIBLE_DEVICES": "5"})]
    assert plan.pinned == {}  # device=cuda / auto: any worker's GPU


def test_cuda_n_pins_a_trial_to_its_worker(planned: list) -> None:
    trials = on_gpu(planned[:2], "cuda:1") + on_gpu(planned[2:], "cuda:0")
    plan = pool.plan_workers(2, "process", trials, {"cuda:1"}, gpus=["0", "1"])
    assert plan.pinned == {trials[0].index: 1, trials[1].index: 1}
    queue = pool.TrialQueue(trials, plan.pinned)
    first = plan.slots[0]
    taken = []
    while (trial := queue.take(first)) is not None:
        taken.append(trial.index)
    assert set(taken) == {t.index for t in trials[2:]}, "worker 0 took a trial pinned to GPU 1"
    assert {t.index for t in queue.items} == {trials[0].index, trials[1].index}
    assert queue.take(plan.slots[1]).index in plan.pinned


def test_bad_placements_are_config_errors(planned: list) -> None:
    with pytest.raises(ConfigError, match="'workers'.*no CUDA device"):
        pool.plan_workers("per_gpu", "process", planned, set(), gpus=[])
    with pytest.raises(ConfigError, match="'workers'.*isolation=none"):
        pool.plan_workers(2, "none", planned, set(), gpus=[])
    with pytest.raises(ConfigError, match="'workers': 3.*2 visible CUDA"):
        pool.plan_workers(3, "process", on_gpu(planned, "cuda:0"), set(), gpus=["0", "1"])
    with pytest.raises(ConfigError, match="'cuda:2'.*workers=2 runs on visible GPUs 0..1"):
        pool.plan_workers(2, "process", on_gpu(planned, "cuda:2"), {"cuda:2"},
                          gpus=["0", "1", "2"])


def test_only_cuda_n_as_written_pins() -> None:
    values = {"device": ["cuda", "cuda:1", "auto"], "cases": [{"device": "cuda:3"}, {"op": "x"}]}
    assert pool.explicit_gpus(values) == {"cuda:1", "cuda:3"}


def test_the_pool_is_reused_for_the_same_placement() -> None:
    slots = (pool.Slot(0, None, (), 1), pool.Slot(1, None, (), 1))
    first = pool.pool(slots)
    assert pool.pool(slots) is first
    other = pool.pool(slots[:1])
    assert other is not first
    other.stop()
