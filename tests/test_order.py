"""The order a job runs its trials in (runner.execution.order): what one trial leaves the
device in is where the next one starts."""

from __future__ import annotations

from typing import Any

import pytest

from runner.execution import order


@pytest.fixture(scope="module")
def size_sweep(compose: Any) -> list:
    """The plan of a size sweep over three dtypes (the plan's order: shape outermost)."""
    from runner.config.planner import plan_job

    return plan_job(compose("op=matmul", "device=cpu", "dtype=[bf16,fp32,tf32]",
                            "shape=[[512,512,512],[64,64,64],[256,256,256]]"))


def labels(trials: list) -> list[tuple[str, int]]:
    return [(t.spec.dtype.value, t.spec.shape[0]) for t in trials]


def test_heat_order_runs_each_group_of_shapes_together_largest_first(size_sweep: list) -> None:
    # planned: 512 (bf16, fp32, tf32), 64 (...), 256 (...): every tf32 trial after an fp32
    # one, which runs at full clock, so every capped tf32 trial would start cold
    assert labels(size_sweep)[:3] == [("bf16", 512), ("fp32", 512), ("tf32", 512)]
    assert labels(order.heat_order(size_sweep)) == [
        ("bf16", 512), ("bf16", 256), ("bf16", 64),
        ("fp32", 512), ("fp32", 256), ("fp32", 64),
        ("tf32", 512), ("tf32", 256), ("tf32", 64)]
    # the same trials, each once
    assert sorted(t.index for t in order.heat_order(size_sweep)) == list(range(9))


def test_plan_order_is_kept_when_asked(size_sweep: list) -> None:
    assert order.in_order(size_sweep, "plan") == size_sweep
    assert order.in_order(size_sweep, "heat") == order.heat_order(size_sweep)


def test_trials_that_differ_in_more_than_shape_are_not_grouped(compose: Any) -> None:
    from runner.config.planner import plan_job

    planned = plan_job(compose("op=matmul", "device=cpu", "dtype=bf16", "seed=[0,1]",
                               "shape=[[64,64,64],[32,32,32]]"))
    # shape outermost in the plan; each seed's shapes run together, the seeds in plan order
    assert [(t.spec.seed, t.spec.shape[0]) for t in order.heat_order(planned)] == [
        (0, 64), (0, 32), (1, 64), (1, 32)]



def test_capped_trials_of_every_group_run_before_any_light_one(size_sweep: list) -> None:
    # bf16 and tf32 at 512 and 256 "capped" (as a large tensor-core matmul on a GPU): no
    # light trial between two capped ones lets the clock back up, so only the first starts
    # cold; the light ones follow, largest first across groups (a tie keeps the order they
    # had, here the groups'), so none follows a tiny one of another group
    capped = {("bf16", 512), ("bf16", 256), ("tf32", 512), ("tf32", 256)}
    ordered = order.heat_order(size_sweep, lambda t: labels([t])[0] in capped)
    assert labels(ordered) == [
        ("bf16", 512), ("bf16", 256), ("tf32", 512), ("tf32", 256),
        ("fp32", 512), ("fp32", 256), ("fp32", 64), ("tf32", 64), ("bf16", 64)]
    assert order.in_order(size_sweep, "heat", lambda t: labels([t])[0] in capped) == ordered
    assert order.in_order(size_sweep, "plan", lambda t: True) == size_sweep


def test_the_size_sweep_on_a_gpu_runs_its_estimated_capped_trials_first() -> None:
    # the 24-trial sweep of the timing gates, estimated as the driver does before any trial
    from dataclasses import dataclass
    from types import SimpleNamespace

    from runner.execution import costs

    @dataclass(frozen=True)
    class Spec:  # what the order and the estimate read of a trial's spec
        dtype: str
        shape: tuple[int, ...]
        op: str = "matmul"
        device: str = "cuda:0"
        backward: bool = False
        streams: int = 1
        trial_id: str = ""

    sizes, dtypes = (8192, 4096, 2048, 1024, 512, 256), ("bf16", "fp16", "fp32", "tf32")
    trials = [SimpleNamespace(index=i, spec=Spec(d, (s, s, s)))
              for i, (s, d) in enumerate((s, d) for s in sizes for d in dtypes)]
    ordered = order.one_worker_order(trials, "heat")  # as a job with one worker runs them
    shown = [(t.spec.dtype, t.spec.shape[0]) for t in ordered]
    assert shown[:9] == [(d, s) for d in ("bf16", "fp16", "tf32") for s in (8192, 4096, 2048)]
    # the 1024³ tensor-core ones may be capped (on an H100 bf16 and fp16 are): right after the
    # capped ones, hot, not cold after fp32 work at full clock; tf32, at half the tensor
    # cores' rate, draws the least of them and comes last, so each steps down in power
    assert shown[9:12] == [("bf16", 1024), ("fp16", 1024), ("tf32", 1024)]
    assert shown[12:16] == [("fp32", 8192), ("fp32", 4096), ("fp32", 2048), ("fp32", 1024)]
    assert sorted(t.index for t in ordered) == list(range(24))
    # without the second estimate they are light, and follow the fp32 work
    capped, _ = costs.power_estimates()
    light = [(t.spec.dtype, t.spec.shape[0]) for t in order.in_order(trials, "heat", capped)]
    assert light.index(("bf16", 1024)) > light.index(("fp32", 4096))


def test_trials_that_may_be_capped_step_down_in_power_whatever_the_plan_s_order() -> None:
    """Compute-bound, their FLOPs say which draws the most power, not their bytes; at equal
    FLOPs the narrower dtype runs the tensor cores faster (an H100 drew 97% of its limit on
    bf16 1024³, 71% on tf32 1024³)."""
    from types import SimpleNamespace

    def trial(dtype: str, size: int, streams: int = 1, backward: bool = False
              ) -> SimpleNamespace:
        return SimpleNamespace(spec=SimpleNamespace(op="matmul", dtype=dtype,
                                                    shape=(size, size, size),
                                                    streams=streams, backward=backward))

    planned = [trial("tf32", 1024), trial("bf16", 1024), trial("fp16", 1536)]
    shown = [(t.spec.dtype, t.spec.shape[0]) for t in order.most_work_first(planned)]
    assert shown == [("fp16", 1536), ("bf16", 1024), ("tf32", 1024)]
    # four streams run four copies at once (4 x 1024³ > 1536³); a backward pass runs more
    # calls one after another, not more at once, and does not count
    planned = [trial("fp16", 1536), trial("bf16", 1024, streams=4),
               trial("bf16", 1280, backward=True)]
    shown = [(t.spec.dtype, t.spec.shape[0]) for t in order.most_work_first(planned)]
    assert shown == [("bf16", 1024), ("fp16", 1536), ("bf16", 1280)]
