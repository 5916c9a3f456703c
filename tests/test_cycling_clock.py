"""A power-capped series sampled back to back is summarised by its mean, every other series
by its median (``runner.timing.measurement.Measurement.statistic``), and the row's device
time (``gpu_time_us``) is that number: the power controller cycles the clock to hold the
board's averaged power at its limit, so the average time per call is what a long job pays,
and the median is whichever phase of the cycle the samples dwelt in longest
(docs/timing.md#the-median-of-a-cycling-clock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_device_time import AT_CAP, US, FakeDevice, plan, run

from runner.execution.measured import device_time_columns
from runner.storage.load import load
from runner.summary_table import summary_table
from runner.timing.device_time import DeviceTime
from runner.timing.measurement import Measurement

#: The plan order's tf32 4096³ on an H200 (µs per call, its settled samples in twenty
#: stretches, in the order they ran) and 15 s of it back to back, the last third's median.
H200_STRETCHES_US = (391, 392, 393, 391, 393, 393, 403, 427, 439, 433,
                     425, 416, 417, 409, 397, 391, 390, 390, 394, 394)
H200_REFERENCE_US = 408.6


def _series(*, capped: bool | None, back_to_back: bool) -> Measurement:
    samples = tuple(us * 1e-6 for us in H200_STRETCHES_US for _ in range(50))
    return Measurement(samples_s=samples, calls_per_sample=3, warmup_calls=0, warmup_s=2.5,
                       stop_reason="converged", target_rel=0.01, power_capped=capped,
                       back_to_back=back_to_back)


def test_a_capped_back_to_back_series_is_its_mean_and_every_other_its_median() -> None:
    capped = _series(capped=True, back_to_back=True)
    assert capped.statistic == "mean" and capped.time_s == capped.stats.mean
    # the replayed H200 trace: the median reads it 3.5% fast, the mean within 1.2%
    assert capped.stats.median * 1e6 < 0.97 * H200_REFERENCE_US
    assert capped.time_s * 1e6 == pytest.approx(H200_REFERENCE_US, rel=0.012)
    for other in (_series(capped=False, back_to_back=True),  # light: noise is one-sided
                  _series(capped=None, back_to_back=True),  # not told: the robust one
                  _series(capped=True, back_to_back=False)):  # gapped or a loop's samples
        assert other.statistic == "median" and other.time_s == other.stats.median


class CyclingDevice(FakeDevice):
    """A fake device under the power cap: each call takes ``slow_s`` during the part of
    every ``period_s`` in which the controller holds the clock down, ``fast_s`` else."""

    def __init__(self, fast_s: float, slow_s: float, period_s: float,
                 dip: tuple[float, float]) -> None:
        self.fast_s, self.slow_s, self.period_s, self.dip = fast_s, slow_s, period_s, dip
        super().__init__(per_call_s=fast_s, clock_at=lambda t: 1450.0)

    @property
    def per_call_s(self) -> float:
        phase = (self.now % self.period_s) / self.period_s
        return self.slow_s if self.dip[0] <= phase < self.dip[1] else self.fast_s

    @per_call_s.setter
    def per_call_s(self, value: float) -> None:  # the base class sets it once: derived here
        pass


def test_the_device_time_of_a_cycling_capped_op_is_its_average_not_its_fast_phase() -> None:
    """Replays the H200's cycle: 392 µs a call, and 430 µs for 36% of every 1.25 s. A long
    job averages 405.7 µs; the median of the samples reads the fast phase."""
    device = CyclingDevice(392 * US, 430 * US, 1.25, (0.32, 0.68))
    long_run_us = 392 + 0.36 * (430 - 392)
    m = run(device, 3, steady=True, loop_s=392 * US, loop_capped=True,
            read_clock=lambda: AT_CAP, timer_plan=plan(warmup_s=0.05, max_samples=100000,
                                                       min_samples=10, settle_max_s=5.0)
            ).measurement
    assert m.back_to_back and m.power_capped and m.statistic == "mean"
    assert m.stats.median * 1e6 == pytest.approx(392, rel=0.002)  # the fast phase
    assert m.time_s * 1e6 == pytest.approx(long_run_us, rel=0.01)


def test_the_row_s_device_time_is_the_measurement_s_number_and_says_which() -> None:
    capped = _series(capped=True, back_to_back=True)
    row = device_time_columns(DeviceTime("graph", measurement=capped), ops_per_sample=2,
                              time_per_op_us=500.0)
    assert row["gpu_time_us"] == pytest.approx(capped.stats.mean * 1e6)
    assert row["gpu_time_statistic"] == "mean"
    assert row["gpu_time_median_us"] == pytest.approx(capped.stats.median * 1e6)
    assert row["gpu_time_per_op_us"] == pytest.approx(capped.stats.mean * 1e6 / 2)
    light_series = _series(capped=False, back_to_back=True)
    light = device_time_columns(DeviceTime("graph", measurement=light_series),
                                ops_per_sample=1, time_per_op_us=500.0)
    assert light["gpu_time_us"] == light["gpu_time_median_us"]
    assert light["gpu_time_statistic"] == "median"
    none = device_time_columns(DeviceTime("unavailable", "cpu"), 1, 500.0)
    assert none["gpu_time_us"] is None and none["gpu_time_statistic"] is None


def test_the_summary_says_a_capped_row_s_device_time_is_a_mean() -> None:
    row: dict[str, Any] = {"op": "matmul", "status": "ok", "gpu_time_us": 403.9,
                           "time_median_us": 426.7, "power_capped": True,
                           "temperature_c_timed": 57.0}
    mean_caption = "is the mean of its samples (gpu_time_statistic)"
    table = summary_table([{**row, "gpu_time_statistic": "mean"}], "trials")
    assert mean_caption in str(table.caption)
    table = summary_table([{**row, "gpu_time_statistic": "median"}], "trials")
    assert mean_caption not in str(table.caption or "")


def test_a_file_written_before_the_column_reads_its_median_as_the_device_time(
        tmp_path: Path) -> None:
    """Every device time was the median of its samples before ``gpu_time_us``: reading such
    a file fills it from ``gpu_time_median_us``, whichever columns are asked for."""
    old = tmp_path / "old.parquet"
    pq.write_table(pa.table({"op": ["matmul", "add"], "gpu_time_median_us": [12.5, None],
                             "time_median_us": [20.0, 3.0]}), old)
    df = load(old)
    assert df["gpu_time_us"].tolist()[0] == 12.5 and df["gpu_time_us"].isna().tolist()[1]
    assert df["gpu_time_statistic"].tolist()[0] == "median"
    assert df["gpu_time_statistic"].isna().tolist()[1]
    narrow = load(old, columns=["op", "gpu_time_us"], samples="drop")
    assert list(narrow.columns) == ["op", "gpu_time_us"]
    assert narrow["gpu_time_us"].tolist()[0] == 12.5
    new = tmp_path / "new.parquet"  # a newer file keeps its own numbers
    pq.write_table(pa.table({"op": ["matmul"], "gpu_time_median_us": [394.0],
                             "gpu_time_us": [403.9], "gpu_time_statistic": ["mean"]}), new)
    assert load(new)["gpu_time_us"].tolist() == [403.9]
    both = load([old, new])
    assert sorted(both["gpu_time_us"].dropna().tolist()) == [12.5, 403.9]


def test_a_sweep_resumed_across_versions_reads_every_row_s_device_time(tmp_path: Path) -> None:
    """A file joining rows from before ``gpu_time_us`` (null there) and after: filled row by
    row, a newer row's own mean kept."""
    mixed = tmp_path / "mixed.parquet"
    pq.write_table(pa.table({"op": ["old", "new"], "gpu_time_median_us": [12.5, 394.0],
                             "gpu_time_us": [None, 403.9],
                             "gpu_time_statistic": [None, "mean"]}), mixed)
    df = load(mixed)
    assert df["gpu_time_us"].tolist() == [12.5, 403.9]
    assert df["gpu_time_statistic"].tolist() == ["median", "mean"]


def _capped_row(**extra: Any) -> dict[str, Any]:
    """A capped row whose mean (gpu_time_us) is 2.5% over its median."""
    return {"op": "matmul", "status": "ok", "device": "cuda:0", "gpu_time_us": 403.9,
            "gpu_time_median_us": 394.0, "gpu_time_statistic": "mean",
            "gpu_time_ci_rel_halfwidth": 0.0009, "time_median_us": 426.7,
            "power_capped": True, "temperature_c_timed": 57.0, **extra}


def test_the_summary_and_the_report_show_the_mean_without_the_median_s_ci() -> None:
    import pandas as pd

    from runner.analysis.report import trial_table

    light = _capped_row(gpu_time_us=25.0, gpu_time_median_us=25.0,
                        gpu_time_statistic="median", power_capped=False)
    table = summary_table([_capped_row(), light], "trials")
    cells = [list(column.cells) for column in table.columns]
    device = next(c for c in table.columns if c.header == "device µs")
    ci = next(c for c in table.columns if c.header == "±CI")
    assert list(device.cells)[0] == "404" and list(ci.cells) == ["–", "0.1%"], cells
    report = trial_table(pd.DataFrame([_capped_row(), light]))
    assert report["device time (µs)"].tolist() == [403.9, 25.0]
    assert pd.isna(report["±CI (%)"].iloc[0]) and report["±CI (%)"].iloc[1] == pytest.approx(0.09)


def test_the_experiments_tables_show_the_device_time() -> None:
    import pandas as pd

    from runner.claims.tables import results_table

    text = results_table(pd.DataFrame([_capped_row(dtype="tf32", shape_str="4096x4096x4096")]))
    assert "| device time |" in text and "404" in text and "394" not in text


def test_the_loop_witness_judges_the_device_time_a_row_reports() -> None:
    """The flag for a capped device time well faster than the loop time right after it reads
    the row's number: the mean of a cycling series, not its fast median."""
    from runner.execution.sustained import LOOP_GAP_SHARE, sustained_flag

    capped = _series(capped=True, back_to_back=True)
    # a loop time under 8% over the mean, and over 8% over the median
    between = (1 + LOOP_GAP_SHARE) * (capped.stats.mean + capped.stats.median) / 2
    assert between < (1 + LOOP_GAP_SHARE) * capped.stats.mean
    assert between > (1 + LOOP_GAP_SHARE) * capped.stats.median
    loop = Measurement(samples_s=(between,) * 20, calls_per_sample=1, warmup_calls=0,
                       warmup_s=0.0, stop_reason="converged", target_rel=0.02)
    assert sustained_flag(capped, None, loop) is None
    as_median = _series(capped=True, back_to_back=False)
    assert "faster than the loop time right after it" in sustained_flag(as_median, None, loop)


def test_a_trial_s_rates_are_taken_at_its_device_time(run_one: Any, monkeypatch: Any) -> None:
    """TFLOP/s and GB/s come from the row's device time: for a capped series, its mean."""
    from runner.execution import trial
    from runner.execution.timed import TrialTimes

    capped = _series(capped=True, back_to_back=True)
    loop = Measurement(samples_s=(430e-6,) * 20, calls_per_sample=1, warmup_calls=0,
                       warmup_s=0.0, stop_reason="converged", target_rel=0.02)

    def timed(*_args: Any, **_kwargs: Any) -> TrialTimes:
        return TrialTimes(loop, DeviceTime("graph", measurement=capped),
                          {"peak_allocated_bytes": None, "peak_reserved_bytes": None},
                          loop_s=0.01, device_s=0.01)

    monkeypatch.setattr(trial, "time_trial", timed)
    row = run_one("op=matmul", "shape=[64,64,64]", "device=cpu", "timer=smoke")
    assert row["status"] == "ok" and row["gpu_time_statistic"] == "mean"
    assert row["gpu_time_us"] == pytest.approx(capped.stats.mean * 1e6)
    assert row["tflops"] == pytest.approx(row["flops"] / capped.stats.mean / 1e12)
