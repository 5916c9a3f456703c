"""An op whose bytes stay in L2 is timed on several allocations of its inputs
(``runner.execution.allocations``): which trials take them, that each allocation is new
memory, and what the row says of their spread."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace
from typing import Any

import pytest

from runner.execution.allocations import (
    MEMORY_BOUND_FLOP_PER_BYTE,
    NO_ALLOCATIONS,
    Allocating,
    columns_over,
    spread_columns,
    takes_allocations,
    time_allocations,
)
from runner.timing.measurement import Measurement

L2_BYTES = 60 << 20


def _allocating(device: str = "cuda:0", allocations: int = 4, flush_l2: bool = False,
                eager: bool = True, own: Measurement | None = None,
                row: dict[str, Any] | None = None, params: dict[str, Any] | None = None
                ) -> Allocating:
    """An Allocating whose task has the fields that decide whether it takes allocations."""
    task = SimpleNamespace(timer=SimpleNamespace(allocations=allocations, flush_l2=flush_l2),
                           spec=SimpleNamespace(device=device, params_dict=params or {}))
    return Allocating(task, own, LAYER_NORM_ROW if row is None else row, None, None,
                      eager=eager)


def _measured(median_us: float, n: int = 41, jitter: float = 0.001) -> Measurement:
    """Samples around ``median_us`` (±``jitter`` of it), their median exactly that."""
    half = [median_us * (1 + jitter * (i + 1) / n) * 1e-6 for i in range(n // 2)]
    low = [median_us * (1 - jitter * (i + 1) / n) * 1e-6 for i in range(n // 2)]
    return Measurement(samples_s=(*low, median_us * 1e-6, *half), calls_per_sample=100,
                       warmup_calls=0, warmup_s=0.0, stop_reason="converged", target_rel=0.01)


LAYER_NORM_ROW = {"bytes_moved": 32 << 20, "arithmetic_intensity": 0.875,
                  "sm_clock_mhz_samples_median": 1980.0, "temperature_c_timed": 45}


def test_a_warm_l2_resident_memory_bound_trial_takes_allocations_and_no_other() -> None:
    own = _measured(12.2)
    assert takes_allocations(_allocating(own=own), L2_BYTES)
    copy_row = {**LAYER_NORM_ROW, "arithmetic_intensity": None}  # a copy: no FLOPs
    assert takes_allocations(_allocating(own=own, row=copy_row), L2_BYTES)
    assert takes_allocations(_allocating(own=own, row=copy_row, params={"direction": "d2d"}),
                             L2_BYTES)
    not_taken = {
        "on the CPU": _allocating(device="cpu", own=own),
        "L2 flushed": _allocating(flush_l2=True, own=own),
        "one allocation asked": _allocating(allocations=1, own=own),
        "compiled or captured": _allocating(eager=False, own=own),
        "no device time": _allocating(own=None),
        "bigger than L2": _allocating(own=own, row={**LAYER_NORM_ROW,
                                                    "bytes_moved": L2_BYTES + 1}),
        "bytes unknown": _allocating(own=own, row={**LAYER_NORM_ROW, "bytes_moved": None}),
        **{f"a {way} copy over the host link": _allocating(own=own, row=copy_row,
                                                            params={"direction": way})
           for way in ("h2d", "d2h")},
        "compute-bound": _allocating(own=own, row={
            **LAYER_NORM_ROW, "arithmetic_intensity": MEMORY_BOUND_FLOP_PER_BYTE}),
    }
    for why, allocating in not_taken.items():
        assert not takes_allocations(allocating, L2_BYTES), why


def test_each_allocation_is_built_while_the_ones_before_it_are_alive() -> None:
    """A freed block goes back to the caching allocator and the next build gets it again:
    the same memory, not another allocation. Every build must find the earlier ones alive."""
    alive: list[weakref.ref] = []
    alive_at_build: list[int] = []

    class Inputs:
        pass

    def build() -> Inputs:
        gc.collect()
        alive_at_build.append(sum(ref() is not None for ref in alive))
        made = Inputs()
        alive.append(weakref.ref(made))
        return made

    timed: list[Inputs] = []
    measured = time_allocations(3, build, lambda inputs: timed.append(inputs) or _measured(1.0))
    assert alive_at_build == [0, 1, 2]
    assert len(measured) == 3 and len({id(t) for t in timed}) == 3


def test_a_spread_beyond_what_the_samples_allow_is_flagged_with_clock_and_temperature() -> None:
    spread = spread_columns([_measured(12.20), _measured(12.15), _measured(12.32),
                             _measured(12.25)], LAYER_NORM_ROW)
    assert spread["allocations"] == 4
    assert spread["gpu_time_allocations_median_us"] == pytest.approx(12.225)
    assert spread["allocation_spread"] == pytest.approx(12.32 / 12.15 - 1)
    flag = spread["allocation_flag"]
    assert "4 allocations of its inputs read 12.15-12.32 µs, 1.4% apart (its samples and " \
        "timer.target_rel allow 1.0%)" in flag
    assert "at 1980 MHz, 45 °C" in flag and "timer.flush_l2=true" in flag

    # a spread within the precision asked for (timer.target_rel, 1% here): shown, not flagged
    asked = spread_columns([_measured(12.20), _measured(12.29)], LAYER_NORM_ROW)
    assert asked["allocation_spread"] == pytest.approx(12.29 / 12.20 - 1)
    assert asked["allocation_flag"] is None
    # the same spread within what wide samples allow: shown, not flagged
    wide = spread_columns([_measured(12.20, jitter=0.2), _measured(12.45, jitter=0.2)],
                          LAYER_NORM_ROW)
    assert wide["allocation_spread"] == pytest.approx(12.45 / 12.20 - 1)  # 2%: over the 1%
    assert wide["allocation_flag"] is None
    # no clock or temperature read: the flag still says what moved
    bare = spread_columns([_measured(12.15), _measured(12.32)], {})
    assert "2 allocations" in bare["allocation_flag"] and "MHz" not in bare["allocation_flag"]


def test_allocations_that_gave_no_device_time_leave_no_spread_and_say_so() -> None:
    assert spread_columns([_measured(12.2), None, None], LAYER_NORM_ROW) == {
        **NO_ALLOCATIONS, "allocations": 1,
        "allocation_reason": "2 of 3 allocations gave no device time"}


def test_a_failure_timing_more_allocations_costs_their_columns_not_the_row() -> None:
    """The trial's own time is measured when the other allocations are built: no memory for
    more copies must not turn a measured trial into an error row."""
    def build() -> Any:
        raise MemoryError("CUDA out of memory. Tried to allocate 16.00 MiB")

    columns = columns_over(_measured(12.2), 3, build, lambda _: _measured(12.2), LAYER_NORM_ROW)
    assert columns["allocations"] is None and columns["allocation_flag"] is None
    assert columns["allocation_reason"] == ("3 more allocations failed: MemoryError: CUDA out "
                                            "of memory. Tried to allocate 16.00 MiB")
    ok = columns_over(_measured(12.2), 1, object, lambda _: _measured(12.3), LAYER_NORM_ROW)
    assert ok["allocations"] == 2 and ok["allocation_reason"] is None


def test_a_cpu_row_carries_the_allocation_columns_empty(run_one: Any) -> None:
    row = run_one("op=layer_norm", "shape=[8,16]", "device=cpu", "timer=smoke")
    assert row["status"] == "ok"
    assert {key: row[key] for key in NO_ALLOCATIONS} == NO_ALLOCATIONS


@pytest.mark.gpu
def test_a_gpu_trial_in_l2_is_timed_on_its_allocations(run_one: Any) -> None:
    cuda = ("device=cuda", "timer=quick", "op=layer_norm", "shape=[1024,4096]", "dtype=fp32")
    row = run_one(*cuda)
    assert row["status"] == "ok" and row["allocations"] == 4
    assert row["gpu_time_allocations_median_us"] == pytest.approx(row["gpu_time_median_us"],
                                                                  rel=0.1)
    flushed = run_one(*cuda, "timer.flush_l2=true")
    big = run_one("device=cuda", "timer=quick", "op=layer_norm", "shape=[16384,4096]")
    matmul = run_one("device=cuda", "timer=quick", "op=matmul", "shape=[1024,1024,1024]")
    captured = run_one(*cuda, "graph=cuda_graph")
    assert flushed["allocations"] is None and big["allocations"] is None
    assert matmul["allocations"] is None and captured["allocations"] is None
    copies = {way: run_one("device=cuda", "timer=quick", "op=copy", "shape=[1048576]",
                           f"op.direction={way}") for way in ("d2d", "h2d", "d2h")}
    assert copies["d2d"]["allocations"] == 4  # 8 MiB in L2
    assert copies["h2d"]["allocations"] is None and copies["d2h"]["allocations"] is None
