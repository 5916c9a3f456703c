"""profile=true and energy=true: trace parsing, energy math with a fake NVML, CPU rows.

The kernel columns come from a synthetic Chrome trace with known intervals, and the energy
columns from a fake counter that steps every 100 ms under a fake clock, so every expected
value below is exact: a change in the parsing or the energy rule breaks these tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.execution import energy, environment, profiling
from runner.execution.insight import InsightOptions
from runner.execution.task import TrialTask, TrialTimer
from runner.execution.timed_call import TimedCall
from runner.execution.trial import run_trial


def _event(name: str, ts: float, dur: float, cat: str = "kernel") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7}


# --------------------------------------------------------------------------- trace parsing

def test_kernel_summary_counts_per_call_and_measures_gaps_and_overlap():
    # Two calls. Device busy: [0,10] gemm, [12,14] add, [13,15] add (overlaps), memcpy [20,26],
    # [30,40] gemm. Host-side and annotation events must be ignored.
    trace = {"traceEvents": [
        _event("gemm", 0, 10), _event("add", 12, 2), _event("add", 13, 2),
        _event("Memcpy DtoD", 20, 6, cat="gpu_memcpy"), _event("gemm", 30, 10),
        _event("aten::mm", 0, 50, cat="cpu_op"),
        _event("my_range", 0, 40, cat="gpu_user_annotation"),
        _event("cudaLaunchKernel", 1, 3, cat="cuda_runtime"),
        {"ph": "i", "cat": "kernel", "name": "instant", "ts": 5},
    ]}
    out = profiling.kernel_summary(trace, calls=2)
    assert out["kernel_count"] == 2.0  # 4 kernels / 2 calls; the memcpy is a memop
    assert out["kernel_time_sum_us"] == pytest.approx(24 / 2)  # 10+2+2+10
    assert out["memop_count"] == 0.5 and out["memop_time_sum_us"] == pytest.approx(3.0)
    assert out["kernel_span_us"] == pytest.approx(40 / 2)
    # busy = 10 + 3 (12..15, overlap counted once) + 6 + 10 = 29 of the 40 µs span
    assert out["gpu_idle_fraction"] == pytest.approx(1 - 29 / 40)
    # with the timed median per call (25 µs), idle refers to the timed loop: 1 - 14.5/25
    timed = profiling.kernel_summary(trace, calls=2, period_us=25.0)
    assert timed["gpu_idle_fraction"] == pytest.approx(1 - 14.5 / 25)
    assert out["top_kernel"] == "gemm"
    assert out["top_kernel_share"] == pytest.approx(20 / 30)
    top = json.loads(out["top_kernels_json"])
    assert [k["name"] for k in top] == ["gemm", "Memcpy DtoD", "add"]
    assert top[0]["count_per_call"] == 1.0 and top[0]["time_us_per_call"] == 10.0
    assert out["profile_reason"] is None


def test_kernel_summary_without_device_activity_says_why():
    out = profiling.kernel_summary({"traceEvents": [_event("aten::add", 0, 5, "cpu_op")]}, 3)
    assert out["kernel_count"] is None and out["gpu_idle_fraction"] is None
    assert "no device activity" in out["profile_reason"]
    with pytest.raises(ValueError, match="calls=0"):
        profiling.kernel_summary({"traceEvents": []}, 0)


def test_cpu_profile_pass_writes_a_trace_and_lists_cpu_operators(tmp_path: Path):
    import torch

    x = torch.randn(64)
    out = profiling.profile_columns(lambda: torch.relu(x * 2), "cpu", 3,
                                    tmp_path / "t.pt.trace.json", trace_name="jobs/0/t")
    trace = json.loads((tmp_path / "t.pt.trace.json").read_text())
    assert any(e.get("name") == "aten::mul" for e in trace["traceEvents"])
    assert out["trace_path"] == "jobs/0/t" and out["profile_calls"] == 3
    assert out["kernel_count"] is None and out["profile_reason"].startswith("cpu:")
    names = {op["name"]: op for op in json.loads(out["top_kernels_json"])}
    assert names["aten::mul"]["count_per_call"] == 1.0


# --------------------------------------------------------------------------- energy math

class FakeBoard:
    """A fake clock, NVML and device (``runner.timing.device_time.Device``): power ``busy_w``
    while work is queued, ``idle_w`` otherwise; the energy counter publishes its integral
    only every ``step_s`` (as NVML does). Each chunk ``enqueue`` queues runs its work on the
    host (as a launch does) and ``chunk_s`` of device time."""

    def __init__(self, busy_w: float = 600.0, idle_w: float = 100.0, step_s: float = 0.1,
                 chunk_s: float = 0.01) -> None:
        self.now, self.busy_w, self.idle_w, self.step_s = 0.0, busy_w, idle_w, step_s
        self.chunk_s = chunk_s
        self.energy_j = 0.0
        self.published_mj, self.next_publish = 0, step_s
        self.queue_end = 0.0  # when the queued work finishes
        self.captured: list[int] = []  # calls of each capture
        self.capture_error: Exception | None = None
        self.enqueued: list[tuple[int, float, object]] = []  # (samples, spin_s, before_sample)
        self.synced_at: list[float] = []

    def wall(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end - 1e-12:
            dt = min(end - self.now, self.next_publish - self.now)
            busy = max(0.0, min(self.queue_end, self.now + dt) - self.now)
            self.energy_j += busy * self.busy_w + (dt - busy) * self.idle_w
            self.now += dt
            if self.now >= self.next_publish - 1e-12:
                self.published_mj = round(self.energy_j * 1e3)
                self.next_publish += self.step_s

    # the device
    def capture(self, fn, calls: int):
        self.captured.append(calls)
        if self.capture_error is not None:
            raise self.capture_error
        self.replays = 0

        def replay() -> None:
            self.replays += 1
        return replay

    def synchronize(self) -> None:
        self.synced_at.append(self.now)
        self.sleep(max(0.0, self.queue_end - self.now))

    def enqueue(self, work, samples: int, spin_s: float, before_sample, fill: int = 0) -> float:
        self.enqueued.append((samples, spin_s, before_sample))
        work()
        self.queue_end = max(self.queue_end, self.now) + self.chunk_s
        return self.queue_end

    def finished(self, chunk: float) -> bool:
        return self.now >= chunk - 1e-12

    def wait(self, chunk: float) -> list[float]:
        assert self.finished(chunk), "the window waits only for finished chunks"
        return [self.chunk_s]

    # NVML
    def energy_mj(self) -> int:
        return self.published_mj

    def state(self) -> dict:
        busy = self.now < self.queue_end
        return {"sm_clock_mhz": 1500 if busy else 1980, "mem_clock_mhz": 3201,
                "temperature_c": 40 + int(self.now), "power_instant_w": self.busy_w if busy
                else self.idle_w, "throttle_reasons": "SwPowerCap" if busy else ""}

    def board(self):
        return energy.Board(self, self, self.wall, self.sleep)


def test_energy_window_uses_whole_counter_steps_and_gives_exact_energy_per_call():
    board = FakeBoard()
    kwargs = {"wall": board.wall, "sleep": board.sleep}
    idle = energy.run_window(board, 1.0, **kwargs)
    load = energy.run_window(board, 5.0, load=energy.Load(board, lambda: None, 10), **kwargs)
    out = energy.energy_columns(load, idle, flops=2e12 * 0.001, bytes_moved=None,
                                method="graph")
    # 10 calls per 10 ms chunk: 1 ms per call at 600 W -> 600 mJ per call, 2 GFLOP per call.
    assert out["energy_time_per_call_us"] == pytest.approx(1000.0, rel=1e-3)
    assert out["avg_power_W"] == pytest.approx(600.0, rel=1e-3)
    assert out["energy_per_call_mJ"] == pytest.approx(600.0, rel=2e-3)
    assert out["idle_power_W"] == pytest.approx(100.0, rel=1e-3)
    assert out["energy_above_idle_per_call_mJ"] == pytest.approx(500.0, rel=3e-3)
    assert out["tflops_per_joule"] == pytest.approx(2.0 / 600.0, rel=2e-3)
    assert out["gb_per_joule"] is None
    # steps every 100 ms over 5 s, the first 0.5 s skipped as ramp: ~45 steps used
    assert 43 <= out["energy_counter_steps"] <= 47
    assert out["energy_counter_s"] == pytest.approx(4.4, abs=0.1)
    assert out["energy_sm_clock_mhz_median"] == 1500
    assert out["power_instant_median_W"] == 600.0
    assert out["energy_throttle_reasons"] == "SwPowerCap"
    assert out["energy_busy_fraction"] == pytest.approx(1.0, abs=2e-3)  # never idle
    assert out["energy_method"] == "graph" and out["energy_reason"] is None
    # every chunk is one sample of the work, unheld, queued as the device time queues
    assert set(board.enqueued) == {(1, 0.0, None)}
    assert load.calls == 10 * len(board.enqueued)


def test_energy_window_too_short_for_the_counter_says_why():
    board = FakeBoard(step_s=1.0)
    load = energy.run_window(board, 0.5, load=energy.Load(board, lambda: None, 10),
                             wall=board.wall, sleep=board.sleep)
    out = energy.energy_columns(load, None, flops=None, bytes_moved=None, method="eager")
    assert out["energy_per_call_mJ"] is None and out["avg_power_W"] is None
    assert "lengthen energy_window_s" in out["energy_reason"]
    assert out["energy_calls"] == load.calls > 0


def _measure(board: FakeBoard, fn, capturable: bool = True, before_call=None) -> dict:
    call = TimedCall(fn, per_call_s=1e-3, flops=None, bytes_moved=None, capturable=capturable,
                     before_call=before_call)
    return energy.measure_energy(call, "cuda:0", window_s=2.0, idle_s=0.5, board=board.board())


def test_energy_window_replays_the_timing_layers_capture():
    """The window's chunk is one graph of K calls captured by the device (the device time's
    ``capture``), replayed once per chunk through the device's enqueue; 1 ms calls make
    50 ms chunks of 50 calls."""
    board = FakeBoard(chunk_s=0.05)
    calls = []
    out = _measure(board, lambda: calls.append(1))
    assert board.captured == [50] and calls == []  # the fake capture never runs fn
    assert out["energy_method"] == "graph" and out["energy_reason"] is None
    assert out["energy_calls"] == 50 * board.replays == 50 * len(board.enqueued)
    assert out["energy_per_call_mJ"] == pytest.approx(600.0, rel=5e-3)
    assert out["idle_power_W"] == pytest.approx(100.0, rel=1e-3)
    assert out["energy_busy_fraction"] == pytest.approx(1.0, abs=5e-3)
    assert board.synced_at == [0.0]  # drained once, before the idle baseline


def test_a_failed_capture_runs_the_window_eagerly_and_says_why():
    board = FakeBoard(chunk_s=0.05)
    board.capture_error = RuntimeError("operation not permitted when stream is capturing\nmore")
    calls = []
    out = _measure(board, lambda: calls.append(1))
    assert board.captured == [50]
    assert out["energy_method"] == "eager"
    assert out["energy_reason"] == ("ran eagerly, graph capture failed: operation not "
                                    "permitted when stream is capturing")
    assert len(calls) == out["energy_calls"] == 50 * len(board.enqueued) > 0
    assert out["energy_per_call_mJ"] == pytest.approx(600.0, rel=5e-3)


def test_graph_and_compile_trials_are_not_recaptured_and_before_call_runs_each_call():
    board = FakeBoard(chunk_s=0.05)
    out = _measure(board, lambda: None, capturable=False)
    assert board.captured == [] and out["energy_method"] == "eager"
    assert out["energy_reason"] == ("ran eagerly: graph/compile/backward trials are not "
                                    "re-captured")
    # a callable with work before each call (an L2 flush) is run eagerly, without a note
    board = FakeBoard(chunk_s=0.05)
    order = []
    out = _measure(board, lambda: order.append("call"),
                   before_call=lambda: order.append("before"))
    assert board.captured == [] and out["energy_method"] == "eager"
    assert out["energy_reason"] is None
    assert order == ["before", "call"] * out["energy_calls"]


def test_missing_nvml_is_a_reason_not_an_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(environment, "_nvml", lambda: None)
    call = TimedCall(lambda: None, per_call_s=1e-3, flops=None, bytes_moved=None,
                     capturable=True)
    out = energy.measure_energy(call, "cuda:0", window_s=1.0, idle_s=0.0)
    assert out["energy_method"] == "unavailable"
    assert "nvidia-ml-py" in out["energy_reason"] and ".[gpu]" in out["energy_reason"]
    assert out["energy_per_call_mJ"] is None
    cpu = energy.measure_energy(call, "cpu", window_s=1.0, idle_s=0.0)
    assert "needs a CUDA device" in cpu["energy_reason"]


# --------------------------------------------------------------------------- in a trial

def test_options_are_none_when_both_passes_are_off(compose):
    assert InsightOptions.from_config(compose(), None) is None
    options = InsightOptions.from_config(compose("profile=true", "profile_calls=3"), None)
    assert options.profile and options.profile_calls == 3 and not options.energy
    with pytest.raises(ValueError, match="energy_window_s"):
        InsightOptions.from_config(compose("energy=true", "energy_window_s=0"), None)


def test_cpu_trial_has_profile_and_energy_columns_with_reasons(compose, plan_trials,
                                                              tmp_path: Path, frozen_gc):
    cfg = compose("op=pointwise_chain", "op.iterations=5", "shape=[256]", "device=cpu",
                  "timer=smoke", "profile=true", "energy=true", "profile_calls=2")
    [(_, spec)] = plan_trials(cfg)
    job_dir = tmp_path / "sweep" / "jobs" / "0"
    options = InsightOptions.from_config(cfg, job_dir)
    timer = TrialTimer.from_settings(cfg.timer)
    row = run_trial(TrialTask(0, spec, timer, insight=options))
    assert row["status"] == "ok", row["reason"]
    assert row["trace_path"].startswith("jobs/0/traces/pointwise_chain")
    trace = json.loads((tmp_path / "sweep" / row["trace_path"]).read_text())
    assert sum(e.get("name") == "aten::sigmoid" for e in trace["traceEvents"]) == 2 * 5
    assert row["kernel_count"] is None and row["profile_reason"].startswith("cpu:")
    assert row["energy_method"] == "unavailable"
    assert "needs a CUDA device" in row["energy_reason"]
    assert row["sm_clock_mhz_timed"] is None and row["throttle_reasons_timed"] is None
    plain = run_trial(TrialTask(0, spec, timer))
    assert "trace_path" not in plain and "energy_method" not in plain


# --------------------------------------------------------------------------- analysis

def _energy_sweep(sweep_id: str, mj: list[float | None]):
    try:
        from synthetic import grid, make_trials
    except ImportError:  # tests/ imported as a package
        from tests.synthetic import grid, make_trials

    df = make_trials(grid(op="matmul", dtype=["fp32", "bf16"], shape=[(64, 64, 64)]),
                     sweep_id=sweep_id, seed=0)
    return df.assign(energy_per_call_mJ=mj, avg_power_W=[600.0, 650.0],
                     energy_time_per_call_us=[100.0, 50.0], energy_counter_s=[4.9, 4.9],
                     tflops_per_joule=[0.5, 0.9], energy_sm_clock_mhz_median=[1500, 1490],
                     kernel_count=[1.0, 1.0], kernel_time_sum_us=[99.0, 49.0],
                     gpu_idle_fraction=[0.01, 0.02], top_kernel=["sm90_xmma_gemm_f32", "x"])


def test_compare_energy_metric_judges_energy_not_time():
    from runner.analysis.compare import CompareOptions, compare, render

    base = _energy_sweep("base", [60.0, 30.0])
    new = _energy_sweep("new", [60.3, 20.0])  # same times, bf16 uses a third less energy
    result = compare(base, new, CompareOptions(metric="energy_per_call_mJ"))
    verdicts = dict(zip(result.pairs["dtype"], result.pairs["verdict"]))
    assert verdicts == {"fp32": "same", "bf16": "faster"}
    assert result.pairs.set_index("dtype").loc["bf16", "speedup"] == pytest.approx(1.5)
    assert "metric energy_per_call_mJ" in render(result, "markdown")
    missing = compare(base, _energy_sweep("new", [None, 20.0]),
                      CompareOptions(metric="energy_per_call_mJ"))
    assert len(missing.not_compared) == 1
    assert "no energy_per_call_mJ" in missing.not_compared["new_reason"].iloc[0]
    with pytest.raises(ValueError, match="metric 'joules'"):
        compare(base, new, CompareOptions(metric="joules"))
    # the default still compares time: identical samples on both sides
    assert set(compare(base, new).pairs["verdict"]) == {"same"}


def test_compare_metric_ignores_time_and_says_so(tmp_path, capsys):
    from runner.analysis.compare import CompareOptions, compare, main

    try:
        from synthetic import write_sweep
    except ImportError:  # tests/ imported as a package
        from tests.synthetic import write_sweep

    base = _energy_sweep("base", [60.0, 30.0])
    new = _energy_sweep("new", [60.0, 45.0])  # same times, bf16 now uses half as much again
    # these synthetic trials have no device time: --time gpu alone compares nothing
    assert len(compare(base, new, CompareOptions(time="gpu")).pairs) == 0
    b, n = write_sweep(tmp_path, base), write_sweep(tmp_path, new)
    argv = [str(b), str(n), "--metric", "energy_per_call_mJ", "--time", "gpu",
            "--format", "markdown", "--fail-on-regression", "10"]
    assert main(argv) == 1
    out = capsys.readouterr()
    assert "--time gpu ignored" in out.out and "--time gpu ignored" in out.err
    assert "| matmul bf16 | 30 | 45 | 0.667x |" in out.out
    assert "matmul bf16: +50.0% (30 energy_per_call_mJ -> 45 energy_per_call_mJ)" in out.err
    kernels = compare(base, new.assign(kernel_time_sum_us=[None, 49.0]),
                      CompareOptions(metric="kernel_time_sum_us"))
    assert "run with profile=true" in kernels.not_compared["new_reason"].iloc[0]


def test_report_shows_kernel_and_energy_columns_and_the_energy_plot():
    from runner.analysis import insight
    from runner.analysis.plots import all_plots
    from runner.analysis.report import trial_table

    df = _energy_sweep("s", [60.0, 30.0])
    table = trial_table(df)
    assert list(table["kernels/call"]) == [1.0, 1.0]
    assert list(table["mJ/call"]) == [60.0, 30.0]
    assert table["top kernel"].iloc[0] == "sm90_xmma_gemm_f32"
    plot = insight.plot_energy(df)
    assert plot.figure is not None
    assert "energy" in [p.name for p in all_plots(df, [])]
    plain = df.drop(columns=[c for c in df.columns if "energy" in c or "kernel" in c])
    assert "mJ/call" not in trial_table(plain).columns
    assert "energy" not in [p.name for p in all_plots(plain, [])]


def test_every_insight_column_is_declared_with_a_type():
    from runner.storage.columns import COLUMNS

    names = (*profiling.PROFILE_COLUMNS, *energy.ENERGY_COLUMNS, "sm_clock_mhz_timed",
             "power_w_timed", "throttle_reasons_timed")
    assert [n for n in names if n not in COLUMNS] == []


# ------------------------------------------------------- energy over the device time's samples

def test_energy_read_over_the_samples_takes_their_time_and_the_boards_power():
    from runner.execution.energy_samples import SampleWindow

    board = FakeBoard()
    window = SampleWindow(board, 2.0, 1.0, wall=board.wall, sleep=board.sleep)

    def run_chunk() -> None:  # one chunk of 10 calls, the host polling while it runs
        handle = board.enqueue(lambda: None, 1, 0.0, None)
        while not board.finished(handle):
            window.poll()

    run_chunk()
    window.begin()  # the first sampled chunk has completed
    for _ in range(250):  # 2.5 s of back-to-back chunks
        run_chunk()
        window.chunk(10, board.chunk_s)
    out = window.columns(flops=2e12 * 0.001, bytes_moved=None, device_time_s=1e-3)
    assert out["energy_method"] == "samples" and out["energy_reason"] is None
    assert out["energy_time_per_call_us"] == pytest.approx(1000.0, rel=2e-3)
    assert out["avg_power_W"] == pytest.approx(600.0, rel=2e-3)
    assert out["idle_power_W"] == pytest.approx(100.0, rel=1e-3)  # read before the load
    assert out["energy_per_call_mJ"] == pytest.approx(600.0, rel=2e-3)
    assert out["energy_busy_fraction"] == pytest.approx(1.0, abs=2e-3)
    assert SampleWindow(board, 2.0, 0.0).columns(flops=None, bytes_moved=None,
                                                 device_time_s=None) is None  # never begun


def test_a_watch_that_left_the_device_idle_is_starved() -> None:
    """The host, reading NVML between chunks, let the queue drain: the samples ran with
    clock headroom, and the window says so (busy below MIN_BUSY)."""
    from runner.execution.energy_samples import SampleWindow

    def watched(idle_per_chunk_s: float) -> SampleWindow:
        board = FakeBoard()
        window = SampleWindow(board, 2.0, 0.0, wall=board.wall, sleep=board.sleep)
        window.begin()
        for _ in range(50):
            handle = board.enqueue(lambda: None, 1, 0.0, None)
            while not board.finished(handle):
                window.poll()
            window.chunk(10, board.chunk_s)
            board.sleep(idle_per_chunk_s)  # the host late: nothing queued meanwhile
        return window

    assert watched(0.0).starved() is None
    reason = watched(0.0016).starved()  # 1.6 ms idle per 10 ms chunk: busy 0.86
    assert reason is not None and "busy 0.86" in reason and "again without it" in reason


def test_a_starved_watch_is_dropped_and_the_device_time_taken_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.execution import timed
    from runner.timing.device_time import DeviceTime

    taken: list[object] = []

    def device_time_of(*args: object, watch: object = None, **kwargs: object) -> DeviceTime:
        taken.append(watch)
        return DeviceTime("graph", None if watch is None else "watched")

    class Watch:
        discarded = False

        def __init__(self, why: str | None) -> None:
            self.why = why

        def starved(self) -> str | None:
            return self.why

        def discard(self) -> None:
            self.discarded = True

    monkeypatch.setattr(timed, "device_time_of", device_time_of)
    fine = Watch(None)
    call = timed._DeviceTimeCall(None, None, None, "cuda:9", None, 0)
    state = timed.WorkerTiming()
    got = timed._steady_device_time(call, state, fine)
    assert taken == [fine] and got.reason == "watched" and not fine.discarded
    taken.clear()
    starved = Watch("the energy watch left the device idle")
    got = timed._steady_device_time(call, state, starved)
    assert taken == [starved, None] and starved.discarded
    assert got.reason == "the energy watch left the device idle"
