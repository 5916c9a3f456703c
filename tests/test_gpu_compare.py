"""How the GPUs of a multi-GPU sweep compared (runner.execution.gpu_compare): the summary's
per-GPU lines and each row's ``gpu_clock_vs_host`` and ``gpu_time_vs_host``, from the
columns rows already have."""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

from runner.execution import gpu_compare
from runner.storage.columns import COLUMNS

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def row(gpu: int | None, clock: float | None, capped: bool | None, at_s: float = 0.0,
        temperature: int | None = 60, shape: str = "4096x4096x4096",
        time_us: float | None = None, seed: int = 0) -> dict[str, Any]:
    return {"gpu_index": gpu, "worker": gpu, "job_num": 0, "power_capped": capped,
            "sm_clock_mhz_samples_median": clock, "temperature_c_end": temperature,
            "timestamp": START + timedelta(seconds=at_s), "worker_trial_wall_s": 1.0,
            "op": "matmul", "shape": shape, "dtype": "bf16", "gpu_time_us": time_us,
            "seed": seed}


def four_gpus() -> list[dict[str, Any]]:
    """Each GPU runs the same trials (a sweep pinned to every GPU): two capped ones and a
    light one; GPU 3 sustains a 5% lower clock and runs hotter."""
    clocks = {0: 1600.0, 1: 1610.0, 2: 1590.0, 3: 1520.0}
    rows = []
    for gpu, clock in clocks.items():
        heat = 75 if gpu == 3 else 62
        rows += [row(gpu, clock, True, 0.0, heat),
                 row(gpu, clock + 2, True, 1.0, heat, shape="8192x8192x8192"),
                 row(gpu, 1980.0, False, 2.0, heat, shape="256x256x256")]
    return rows


def test_each_gpu_s_sustained_capped_clock_against_the_host_median() -> None:
    rows = four_gpus()
    assert gpu_compare.capped_clocks(rows) == {0: 1601.0, 1: 1611.0, 2: 1591.0, 3: 1521.0}
    ratios = gpu_compare.clock_ratios(rows)
    # each trial against the same trial on the other GPUs (medians 1595 and 1597 MHz)
    assert ratios[0] == pytest.approx((1600 / 1595 + 1602 / 1597) / 2)
    assert round(ratios[3], 3) == 0.953
    assert gpu_compare.clock_ratios(rows[:3]) == {}, "one GPU compares with nothing"


def test_gpus_that_ran_different_trials_are_not_compared() -> None:
    """A split schedule: each GPU ran other trials, and a smaller op sustains a higher clock
    at the same power limit, so their clocks say nothing about the GPUs."""
    rows = [row(0, 1400.0, True, shape="8192x8192x8192"),
            row(1, 1540.0, True, shape="2048x2048x2048")]
    assert gpu_compare.clock_ratios(rows) == {}
    lines = gpu_compare.per_gpu_lines(rows)
    assert all("differs" not in line for line in lines)
    assert "not compared" in lines[1] and "not compared" in lines[2]


def test_the_summary_shows_every_gpu_and_flags_the_slow_one() -> None:
    lines = gpu_compare.per_gpu_lines(four_gpus())
    assert len(lines) == 5
    assert "GPU 0: 3 rows, busy 100%, capped clock 1601 MHz (1.003 of the other GPUs' on the " \
           "same trials), up to 62 °C" in lines[1]
    assert "differs by more than 3%" in lines[4] and "up to 75 °C" in lines[4]
    assert not any("differs" in line for line in lines[1:4])
    cpu = [row(None, None, None, temperature=None) for _ in range(3)]
    assert gpu_compare.per_gpu_lines(cpu) == [], "a CPU sweep has no per-GPU lines"
    one = [r for r in four_gpus() if r["gpu_index"] == 0]
    assert gpu_compare.per_gpu_lines(one) == []


def test_each_row_says_how_its_gpu_compared() -> None:
    rows = four_gpus() + [row(None, None, None)]
    table = pa.Table.from_pylist(rows)
    annotated = gpu_compare.annotate(table)
    values = annotated.column(gpu_compare.COLUMN).to_pylist()
    assert values[0] == pytest.approx(1600 / 1595) and values[1] == pytest.approx(1602 / 1597)
    assert values[2] is None, "a light trial is not compared"
    assert round(values[9], 3) == 0.953  # GPU 3's first trial
    assert values[12] is None
    again = gpu_compare.annotate(annotated)  # replaced, not added twice
    assert again.column_names.count(gpu_compare.COLUMN) == 1
    assert gpu_compare.COLUMN in COLUMNS, "the column is declared in the result schema"


def seeds_over_three_gpus() -> list[dict[str, Any]]:
    """A sweep over seeds, split over three GPUs at one clock: GPU 1 runs the small matmul
    6% slower (one chip, one kernel), every other trial agrees."""
    rows = []
    for seed, gpu in enumerate((0, 1, 2)):
        rows += [row(gpu, 1835.0, False, 0.0, shape="1024x1024x1024", seed=seed,
                     time_us=13.44 if gpu == 1 else 12.7),
                 row(gpu, 1400.0, True, 1.0, shape="8192x8192x8192", seed=seed,
                     time_us=1650.0 + gpu)]
    return rows + [row(0, 1980.0, False, 2.0, shape="256x256x256", time_us=5.0)]


def test_each_row_s_device_time_against_the_same_trial_on_the_other_gpus() -> None:
    """The clock cannot show a GPU that is slower at the same clock; the device time does,
    and a trial that differs only in its seed counts as the same trial."""
    rows = seeds_over_three_gpus()
    ratios = gpu_compare.time_ratios(rows)
    assert ratios[2] == pytest.approx(13.44 / 12.7), "GPU 1 against GPUs 0 and 2"
    assert ratios[0] == pytest.approx(12.7 / statistics.median([13.44, 12.7]))
    assert ratios[3] == pytest.approx(1651.0 / statistics.median([1650.0, 1652.0]))
    assert ratios[6] is None, "a trial only one GPU ran is compared with nothing"
    assert gpu_compare.time_ratios([row(0, 1.0, False, time_us=None),
                                    row(1, 1.0, False, time_us=4.0)]) == [None, None]
    same_gpu = [row(0, 1.0, False, time_us=4.0, seed=0),
                row(0, 1.0, False, time_us=8.0, seed=1)]
    assert gpu_compare.time_ratios(same_gpu) == [None, None], "only other GPUs count"
    lines = gpu_compare.per_gpu_lines(rows)  # GPU 1: the median of 1.058 and 1.000
    assert "device time 1.029 of the other GPUs' on the same trials; 1 beyond 3% (column " \
           "gpu_time_vs_host)" in lines[2]
    assert "beyond" not in lines[1] and "beyond" not in lines[3]


def test_each_row_carries_its_device_time_against_the_other_gpus() -> None:
    table = gpu_compare.annotate(pa.Table.from_pylist(seeds_over_three_gpus()))
    values = table.column(gpu_compare.TIME_COLUMN).to_pylist()
    assert values[2] == pytest.approx(13.44 / 12.7) and values[6] is None
    again = gpu_compare.annotate(table)
    assert again.column_names.count(gpu_compare.TIME_COLUMN) == 1
    assert gpu_compare.TIME_COLUMN in COLUMNS, "the column is declared in the result schema"


def test_seeds_on_one_gpu_are_not_compared_and_each_gpu_has_one_vote() -> None:
    """Seed-to-seed noise on one GPU is no GPU difference; a GPU that ran more seeds does
    not outvote the others."""
    one_gpu = [row(0, 1400.0 + 50 * seed, True, time_us=100.0 + seed, seed=seed)
               for seed in range(3)]
    assert gpu_compare.row_ratios(one_gpu) == [None, None, None]
    assert gpu_compare.time_ratios(one_gpu) == [None, None, None]
    uneven = ([row(0, 1400.0, True, time_us=10.0, seed=seed) for seed in range(3)]
              + [row(1, 1500.0, True, time_us=12.0, seed=3),
                 row(2, 1600.0, True, time_us=13.0, seed=4)])
    assert gpu_compare.time_ratios(uneven)[3] == pytest.approx(12.0 / 11.5)  # GPUs 0 and 2
    assert gpu_compare.row_ratios(uneven)[3] == pytest.approx(1500.0 / 1500.0)


def test_the_device_time_column_needs_no_clock_columns() -> None:
    rows = [{k: v for k, v in r.items() if k not in ("power_capped",
                                                      "sm_clock_mhz_samples_median")}
            for r in seeds_over_three_gpus()]
    table = gpu_compare.annotate(pa.Table.from_pylist(rows))
    assert gpu_compare.COLUMN not in table.column_names
    assert table.column(gpu_compare.TIME_COLUMN).to_pylist()[2] == pytest.approx(13.44 / 12.7)
