"""CUDA-only behaviour of the modes and the timer. Skipped without a GPU (see conftest).

What is checked is that each mode computes the same thing as eager execution (graph replay,
graphed callables, streams, compile), that the event clock measures device time, and that
failures on the device (an op that synchronises during capture) become rows.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
import torch

from ops.base import OpContext
from runner.core.axes import CompileMode, GraphMode
from runner.execution import modes
from runner.execution.context import TORCH_DTYPES, trial_settings
from runner.execution.workload import builder
from runner.timing.clocks import CudaEventClock, HostClock, L2Flusher
from runner.timing.measurement import TimerPlan
from runner.timing.settle import CAPPED_MIN_S
from runner.timing.timer import LoopTimeOptions, measure

pytestmark = pytest.mark.gpu

CUDA = ("device=cuda", "timer=smoke")


def exact(actual: Any, expected: Any) -> None:
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


@pytest.fixture(scope="module")
def planned(compose: Any, plan_trials: Any) -> Any:
    """``planned(*overrides) -> (OpPlan, TrialSpec)`` for one CUDA trial."""
    def planned(*overrides: str) -> tuple[Any, Any]:
        trials = plan_trials(compose(*CUDA, *overrides))
        assert len(trials) == 1
        return trials[0]
    return planned


def build(plan: Any, spec: Any, offset: int = 0) -> Any:
    """The op's workload for ``spec`` with seed ``spec.seed + offset``, as the runner builds
    replica ``offset`` of a ``streams=N`` trial."""
    device = torch.device(spec.device)
    generator = torch.Generator(device=device)
    generator.manual_seed(spec.seed + offset)
    ctx = OpContext(shape=spec.shape, dtype=TORCH_DTYPES[spec.dtype], device=device,
                    generator=generator, seed=spec.seed + offset, dtype_name=spec.dtype.value)
    return builder(spec.target)(ctx, **spec.params_dict)


def prepared_for(spec: Any, workloads: list[Any]) -> modes.Prepared:
    with torch.cuda.device(torch.device(spec.device)), \
            trial_settings(spec.dtype, spec.num_threads):
        modes.check_supported(spec, workloads[0])
        if spec.backward:
            for workload in workloads:
                modes.enable_grads(workload)
        return modes.prepare(spec, workloads)


# ---------------------------------------------------------------------------------------
# CUDA graphs
# ---------------------------------------------------------------------------------------

GRAPH_OPS = [
    pytest.param(("op=pointwise_chain", "shape=[1000]", "op.iterations=1"), id="pointwise_chain"),
    pytest.param(("op=mlp", "shape=[16,64]", "op.layers=2"), id="mlp"),
]


@pytest.mark.parametrize("graph", ["cuda_graph", "graphed_callable"])
@pytest.mark.parametrize("op", GRAPH_OPS)
def test_graph_replay_equals_eager(planned: Any, op: tuple, graph: str) -> None:
    plan, spec = planned(*op)
    workload = build(plan, spec)
    eager = workload.fn().clone()
    prepared = prepared_for(dataclasses.replace(spec, graph=GraphMode(graph)), [workload])
    replayed = prepared.fn()
    torch.cuda.synchronize()
    torch.testing.assert_close(replayed, eager, rtol=1e-5, atol=1e-6)

    # The graph reads its inputs where they live: new values in place, new output.
    x = workload.inputs[0]
    with torch.no_grad():
        x.copy_(torch.randn_like(x) * 3)
    expected = workload.fn().clone()
    assert not torch.allclose(expected, eager), "the new input must change the output"
    replayed = prepared.fn()
    torch.cuda.synchronize()
    torch.testing.assert_close(replayed, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("graph", ["cuda_graph", "graphed_callable"])
@pytest.mark.parametrize("op", GRAPH_OPS)
def test_graph_trial_is_ok(run_one: Any, op: tuple, graph: str) -> None:
    row = run_one(*CUDA, *op, f"graph={graph}")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["accuracy_ok"] is True
    if graph == "cuda_graph":
        assert row["capture_time_s"] > 0


def test_graphed_callable_with_backward(run_one: Any) -> None:
    row = run_one(*CUDA, "op=mlp", "shape=[16,64]", "op.layers=2", "graph=graphed_callable",
                  "backward=true")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["accuracy_ok"] is True
    assert row["flops"] == pytest.approx(3 * 2 * 16 * 64 * 64 * 2)


def test_steady_device_time_settles_and_burst_is_apart(run_one: Any) -> None:
    """The device time is back to back and settled, its clock recorded; timer.burst adds the
    gapped boost-clock number in its own columns; the derived columns agree."""
    row = run_one("device=cuda", "op=matmul", "dtype=bf16", "shape=[2048,2048,2048]",
                  "timer.burst=true")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["gpu_time_method"] == "graph"
    assert row["gpu_time_settled"] is True
    if row["power_capped"]:  # the full back-to-back warm-up, and samples over a second
        assert row["gpu_time_settle_s"] >= CAPPED_MIN_S
    assert row["gpu_burst_time_median_us"] > 0
    assert row["gpu_burst_time_ci_low_us"] <= row["gpu_burst_time_median_us"]
    assert row["consistency_flag"] is None
    if row["sm_clock_mhz_samples_median"] is not None:  # NVML present
        assert row["sm_clock_mhz_samples_min"] <= row["sm_clock_mhz_samples_median"]


def test_the_clock_probe_reads_the_clock_the_sms_ran_at() -> None:
    """Two probes around a spin kernel: cycles over nanoseconds is an SM clock, in MHz."""
    from runner.timing.clock_probe import clock_probe, effective_mhz

    probe = clock_probe(torch.device("cuda"))
    assert probe is not None, "the CUDA driver did not load the clock probe's kernel"
    stamps = probe.stamps(2)
    probe.record(stamps, 0)
    torch.cuda._sleep(2_000_000)
    probe.record(stamps, 1)
    (mhz,) = effective_mhz(stamps.tolist())
    assert mhz is not None and 200 < mhz < 3000


def test_the_clock_probe_is_captured_into_a_cuda_graph() -> None:
    """The device time queues probes between samples inside captured chunks: each replay
    writes fresh stamps, and the clock between them is a clock."""
    from runner.timing.clock_probe import clock_probe, effective_mhz

    probe = clock_probe(torch.device("cuda"))
    assert probe is not None
    stamps = probe.stamps(2)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # the probe launches on the capturing stream
        probe.record(stamps, 0)
        torch.cuda._sleep(2_000_000)
        probe.record(stamps, 1)
    readings = []
    for _ in range(2):
        stamps.zero_()
        graph.replay()
        torch.cuda.synchronize()
        readings.append(stamps.tolist())
    for flat in readings:
        (mhz,) = effective_mhz(flat)
        assert mhz is not None and 200 < mhz < 3000
    assert readings[1][0] > readings[0][2]  # the second replay stamped later: it really ran


def test_cuda_graph_replays_faster_than_eager_launches(run_one: Any) -> None:
    """pointwise_chain is launch-bound (2000 tiny kernels): a graph replay removes the launch
    overhead, which is the point of the mode (the CUDA-operations tutorial's demo: about 3-4x)."""
    eager = run_one("device=cuda", "timer=quick", "op=pointwise_chain", "shape=[5]")
    graph = run_one("device=cuda", "timer=quick", "op=pointwise_chain", "shape=[5]",
                    "graph=cuda_graph")
    assert eager["status"] == graph["status"] == "ok"
    assert graph["time_median_us"] < eager["time_median_us"]


@pytest.mark.parametrize("target", ["fakes:reads_a_scalar", "fakes:synchronizes"])
def test_op_that_synchronises_during_capture_is_skipped(run_one: Any, target: str) -> None:
    row = run_one(*CUDA, "op=custom", f"op.target={target}", "shape=[64]", "graph=cuda_graph")
    assert row["status"] == "skipped", (row["status"], row["reason"],
                                        row.get("error_traceback"))
    assert "capture" in row["reason"]
    # ... and the process can still run CUDA work: the next trial is fine
    after = run_one(*CUDA, "op=matmul", "shape=[64,64,64]", "graph=cuda_graph")
    assert after["status"] == "ok", (after["reason"], after.get("error_traceback"))
    assert after["accuracy_ok"] is True


# ---------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("graph", ["none", "cuda_graph"])
def test_streams_output_equals_sequential_output(planned: Any, graph: str) -> None:
    plan, spec = planned("op=matmul", "shape=[256,256,256]", "streams=2", f"graph={graph}")
    workloads = [build(plan, spec, offset) for offset in range(spec.streams)]
    sequential = [w.fn().clone() for w in workloads]
    assert not torch.equal(sequential[0], sequential[1]), "replicas must differ (seeds)"
    prepared = prepared_for(spec, workloads)
    assert prepared.ops_per_sample == 2
    outputs = prepared.split(prepared.fn())
    torch.cuda.synchronize()
    assert len(outputs) == 2
    for output, expected in zip(outputs, sequential):
        exact(output, expected)


def test_streams_trial_reports_time_per_op(run_one: Any) -> None:
    row = run_one(*CUDA, "op=matmul", "shape=[256,256,256]", "streams=2")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["accuracy_ok"] is True
    assert row["time_per_op_us"] == pytest.approx(row["time_median_us"] / 2)
    assert row["flops"] == 2 * 2 * 256**3  # two replicas per call


def test_composite_op_parts_on_two_streams(run_one: Any) -> None:
    row = run_one(*CUDA, "op=copy_compute_overlap", "shape=[256,128,4]", "streams=2")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["accuracy_ok"] is True
    assert row["time_per_op_us"] == row["time_median_us"]  # one composite op per call


# ---------------------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------------------

def test_compile_output_matches_eager(planned: Any) -> None:
    plan, spec = planned("op=pointwise_chain", "shape=[4096]", "op.iterations=3")
    workload = build(plan, spec)
    eager = workload.fn().clone()
    with modes.compile_isolation(dataclasses.replace(spec, compile=CompileMode.default)):
        prepared = prepared_for(dataclasses.replace(spec, compile=CompileMode.default),
                                [workload])
        compiled = prepared.fn()
        torch.cuda.synchronize()
        assert prepared.compile_time_s > 0
        assert prepared.compile_stats["graph_count"] >= 1
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("graph", ["none", "cuda_graph"])
def test_compile_trial_is_ok(run_one: Any, graph: str) -> None:
    row = run_one(*CUDA, "op=mlp", "shape=[16,64]", "op.layers=2", "compile=default",
                  f"graph={graph}")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["accuracy_ok"] is True
    assert row["compile_time_s"] > 0 and row["graph_count"] >= 1


# ---------------------------------------------------------------------------------------
# The timer on a GPU
# ---------------------------------------------------------------------------------------

def _sleep(cycles: int) -> Any:
    return lambda: torch.cuda._sleep(cycles)


def test_event_clock_times_a_known_sleep() -> None:
    device = torch.device("cuda:0")
    plan = TimerPlan(warmup_calls=5, warmup_s=0.0, min_samples=15, max_samples=15,
                     target_rel=0.5, max_time_s=10.0, batch_below_us=0.0)  # one call a sample
    synced = HostClock(sync=lambda: torch.cuda.synchronize(device))
    # Calibrate: cycles per second of the spin loop on this GPU at its current clock.
    probe = measure(_sleep(1_000_000), plan, synced).stats.median
    cycles = int(1_000_000 * 1e-3 / probe)  # about 1 ms
    one = measure(_sleep(cycles), plan, CudaEventClock(device)).stats.median
    two = measure(_sleep(2 * cycles), plan, CudaEventClock(device)).stats.median
    host = measure(_sleep(cycles), plan, synced).stats.median
    assert 0.5e-3 < one < 2e-3, one
    assert two / one == pytest.approx(2.0, rel=0.1)  # device time scales with the work
    # the host clock adds a launch and a sync (tens of µs), never less than the device time
    assert one * 0.97 < host < one * 1.2 + 100e-6, (one, host)
    # without the sync a host clock only sees the launch: the hazard the event clock avoids
    launch = measure(_sleep(cycles), plan, HostClock()).stats.median
    torch.cuda.synchronize(device)
    assert launch < one / 4, (launch, one)


def test_short_kernels_are_batched_and_timed_back_to_back() -> None:
    """Timed alone, a ~2 µs kernel on an idle GPU measures the launch gap between the start
    event and the kernel too (~14 µs on an H200); batched, it measures the tight-loop time
    per call (hazard 3 in runner/timer.py)."""
    device = torch.device("cuda:0")
    x = torch.ones(16, device=device)
    op = lambda: x.add_(0)  # noqa: E731
    for _ in range(100):
        op()
    clock = CudaEventClock(device)
    token = clock.start()
    for _ in range(1000):
        op()
    back_to_back = clock.stop(token) / 1000
    m = measure(op, TimerPlan(warmup_calls=10, warmup_s=0.0, min_samples=5, max_samples=5,
                              target_rel=0.5, max_time_s=5.0), clock)  # default batching
    print(f"per call: back to back {back_to_back * 1e6:.2f} us, measured "
          f"{m.stats.median * 1e6:.2f} us with {m.calls_per_sample} calls per sample")
    assert m.calls_per_sample > 1
    assert m.stats.median < 2 * back_to_back


def test_settling_the_graph_state_captures_and_frees_its_graphs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's one-off graph settling (runner.timing.graph_state) captures and replays
    SETTLING_GRAPHS graphs on the device and leaves nothing allocated behind it."""
    from runner.timing import graph_state
    from runner.timing.cuda_device import capture_graph

    captured: list[int] = []

    def capture(fn: Any, device: Any, calls: int) -> Any:
        replay, output, seconds = capture_graph(fn, device, calls)
        captured.append(calls)
        return replay, output, seconds

    monkeypatch.setattr(graph_state, "capture_graph", capture)
    device = torch.device("cuda:0")
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    graph_state.settle_graph_state(device)
    assert len(captured) == graph_state.SETTLING_GRAPHS
    assert torch.cuda.memory_allocated(device) == before


def test_l2_flusher_writes_a_buffer_larger_than_l2() -> None:
    device = torch.device("cuda:0")
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    flusher = L2Flusher(device)
    buffer = flusher._buffer
    assert buffer.numel() * buffer.element_size() >= 2 * l2
    buffer.fill_(1)
    flusher()
    assert int(buffer.count_nonzero()) == 0  # it ran (count_nonzero waits for it)


def test_flush_runs_once_per_sample_outside_the_region() -> None:
    device = torch.device("cuda:0")
    flusher = L2Flusher(device)
    events: list[str] = []

    def flush() -> None:
        events.append("flush")
        flusher()

    class Clock(CudaEventClock):
        def start(self) -> Any:
            events.append("start")
            return super().start()

        def stop(self, token: Any) -> float:
            events.append("stop")
            return super().stop(token)

    x = torch.randn(1 << 20, device=device)
    plan = TimerPlan(warmup_calls=2, warmup_s=0.0, min_samples=4, max_samples=4,
                     target_rel=0.5, max_time_s=5.0, batch_below_us=0.0)
    m = measure(lambda: x.sum(), plan, Clock(device), LoopTimeOptions(flush=flush))
    assert len(m.samples_s) == 4
    assert events == ["start", "stop"] * 2 + ["flush", "start", "stop"] * 4


def test_flushed_samples_read_memory_not_l2(run_one: Any) -> None:
    """x + y on 4 MiB tensors (12 MiB touched) fits in L2: back to back it runs from L2,
    after a flush from device memory, one call per sample.

    Compared on the device time: the warm loop time of this ~3 µs kernel is the host's
    launch rate (5-7 µs on an H200 VM), which can exceed the cold kernel's own time."""
    args = ("device=cuda", "timer=quick", "op=add", "shape=[1024,1024]")
    warm = run_one(*args)
    cold = run_one(*args, "timer.flush_l2=true")
    print(f"add 1024x1024: warm {warm['gpu_time_median_us']:.2f} us "
          f"(K={warm['gpu_time_calls_per_sample']}), cold {cold['gpu_time_median_us']:.2f} us "
          f"(loop: {warm['time_median_us']:.2f} / {cold['time_median_us']:.2f} us)")
    assert cold["status"] == warm["status"] == "ok"
    assert (cold["l2_flush"], warm["l2_flush"]) == (True, False)
    assert cold["calls_per_sample"] == 1 < warm["calls_per_sample"]
    assert cold["gpu_time_calls_per_sample"] == 1 < warm["gpu_time_calls_per_sample"]
    assert cold["gpu_time_median_us"] > warm["gpu_time_median_us"]


def test_host_clock_on_cuda(run_one: Any) -> None:
    row = run_one(*CUDA, "op=matmul", "shape=[512,512,512]", "timer.clock=host")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["time_median_us"] > 0


# ---------------------------------------------------------------------------------------
# Ops and columns on CUDA
# ---------------------------------------------------------------------------------------

def test_copy_d2d_on_cuda(run_one: Any) -> None:
    numel = 1 << 24
    row = run_one(*CUDA, "op=copy", f"shape=[{numel}]", "op.direction=d2d")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["device"] == "cuda:0"
    assert row["accuracy_ok"] is True
    assert row["bytes_moved"] == 2 * numel * 4
    assert row["gbps"] > 100  # any CUDA GPU copies device memory faster than this
    assert row["peak_allocated_bytes"] >= 2 * numel * 4


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_pinned_host_copies_on_cuda(run_one: Any, direction: str) -> None:
    row = run_one(*CUDA, "op=copy", "shape=[1048576]", f"op.direction={direction}",
                  "op.pinned=true")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["accuracy_ok"] is True
    assert row["gbps"] > 1


def test_cuda_rows_carry_the_device_environment(run_one: Any) -> None:
    row = run_one(*CUDA, "op=matmul", "shape=[64,64,64]")
    assert row["status"] == "ok"
    assert row["device_name"] == torch.cuda.get_device_name(0)
    assert row["sm_count"] == torch.cuda.get_device_properties(0).multi_processor_count
    assert row["cuda_version"] == torch.version.cuda
    assert row["peak_allocated_bytes"] > 0 and row["peak_reserved_bytes"] > 0


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "bf16"])
def test_matmul_dtypes_on_cuda(run_one: Any, dtype: str) -> None:
    row = run_one(*CUDA, "op=matmul", "shape=[256,256,256]", f"dtype={dtype}")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["accuracy_ok"] is True, (row["rel_error"], row["rel_error_tol"])
    assert row["tf32"] is (dtype == "tf32")


# ---------------------------------------------------------------------------------------
# Device time (runner.timing.device_time)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("graph", ["none", "cuda_graph"])
def test_device_time_of_a_launch_bound_add_is_below_its_loop_time(run_one: Any,
                                                                   graph: str) -> None:
    row = run_one("device=cuda", "timer=quick", "op=add", "shape=[1]", "op.inplace=true",
                  f"graph={graph}")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["gpu_time_method"] == "graph", row["gpu_time_reason"]
    # The loop's launch-bound K gives a short replay: the graph is captured with the K that
    # fills half a sample (runner.timing.graph_size).
    assert row["gpu_time_calls_per_sample"] > row["calls_per_sample"] > 1
    assert row["gpu_time_median_us"] < row["time_median_us"]
    assert row["host_overhead_ratio"] > 1.2
    assert len(row["gpu_time_samples_us"]) == row["gpu_time_n_samples"]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
@pytest.mark.parametrize("graph", ["none", "cuda_graph"])
def test_a_second_gpu_after_the_first_captures_its_own_work(run_one: Any, graph: str) -> None:
    # One process captures on cuda:0, then on cuda:1. torch.cuda.graph's default capture
    # stream belongs to the device it was first used on; capturing cuda:1's kernels there
    # gives an empty graph, whose replays read ~0.01 µs a call.
    rows = [run_one(f"device=cuda:{index}", "timer=quick", "op=add", "shape=[1]",
                    "op.inplace=true", f"graph={graph}") for index in (0, 1)]
    for row in rows:
        assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
        assert row["gpu_time_method"] == "graph", row["gpu_time_reason"]
        assert row["gpu_time_median_us"] > 0.5
    assert rows[1]["gpu_time_median_us"] == pytest.approx(rows[0]["gpu_time_median_us"],
                                                          rel=0.5)


def test_device_time_captures_streams_fork_join(run_one: Any) -> None:
    row = run_one(*CUDA, "op=matmul", "shape=[256,256,256]", "streams=2")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["gpu_time_method"] == "graph", row["gpu_time_reason"]


def test_device_time_of_a_syncing_op_is_not_taken_from_a_graph(run_one: Any) -> None:
    row = run_one(*CUDA, "op=custom", "op.target=fakes:synchronizes", "shape=[64]")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["gpu_time_method"] in ("blocked", "unavailable")
    assert row["gpu_time_reason"].startswith("graph capture failed")
    if row["gpu_time_method"] == "unavailable":
        assert row["gpu_time_median_us"] is None or row["gpu_time_median_us"] != \
            row["gpu_time_median_us"]


def test_device_time_of_reduce_overhead_is_blocked(run_one: Any) -> None:
    row = run_one(*CUDA, "op=pointwise_chain", "shape=[64]", "op.iterations=2",
                  "compile=reduce-overhead")
    assert row["status"] == "ok", (row["reason"], row.get("error_traceback"))
    assert row["gpu_time_method"] in ("blocked", "unavailable")
    assert "replays CUDA graphs of its own" in row["gpu_time_reason"]


# ---------------------------------------------------------------------------------------
# The energy window (runner.execution.energy), on the timing layer's device
# ---------------------------------------------------------------------------------------

class SteppingCounter:
    """NVML's energy counter as if the board drew exactly 100 W: the window runs on the real
    device, its capture and events, whether or not nvidia-ml-py is installed."""

    def energy_mj(self) -> int:
        return int(time.perf_counter() * 100e3)

    def state(self) -> dict:
        return {}


def _energy_window(fn: Any, per_call_s: float, capturable: bool) -> dict:
    from runner.execution import energy
    from runner.execution.timed_call import TimedCall
    from runner.timing.cuda_device import CudaDevice

    device = torch.device("cuda", torch.cuda.current_device())
    board = energy.Board(SteppingCounter(), CudaDevice(device))
    call = TimedCall(fn, per_call_s=per_call_s, flops=None, bytes_moved=None,
                     capturable=capturable)
    return energy.measure_energy(call, str(device), window_s=0.5, idle_s=0.1, board=board)


def test_energy_window_replays_the_timing_layers_graph_on_cuda() -> None:
    x = torch.randn(1 << 20, device="cuda")
    out = _energy_window(lambda: x * 2, 20e-6, capturable=True)  # K = 50 ms / 20 µs = 2500
    assert out["energy_method"] == "graph", out["energy_reason"]
    assert out["energy_reason"] is None
    assert out["energy_calls"] > 0 and out["energy_calls"] % 2500 == 0
    assert 0 < out["energy_busy_fraction"] <= 1
    assert out["energy_time_per_call_us"] > 0
    assert out["avg_power_W"] == pytest.approx(100.0, rel=0.01)
    torch.cuda.synchronize()


def test_energy_window_of_an_uncapturable_op_runs_eagerly_on_cuda() -> None:
    x = torch.randn(64, device="cuda")
    out = _energy_window(lambda: x * x.sum().item(), 50e-6, capturable=True)  # K = 1000
    assert out["energy_method"] == "eager", out
    assert out["energy_reason"].startswith("ran eagerly, graph capture failed: "), out
    assert out["energy_calls"] > 0 and out["energy_calls"] % 1000 == 0, out
    assert 0 < out["energy_busy_fraction"] <= 1, out
    # the device is still usable after the failed capture
    assert (x * 2).sum().item() == pytest.approx(2 * x.sum().item(), rel=1e-5)
    graph_trial = _energy_window(lambda: x * 2, 50e-6, capturable=False)
    assert graph_trial["energy_method"] == "eager", graph_trial
    assert graph_trial["energy_reason"] == ("ran eagerly: graph/compile/backward trials are "
                                            "not re-captured"), graph_trial
    assert graph_trial["energy_calls"] > 0, graph_trial


def test_energy_window_with_nvml_on_cuda() -> None:
    """The real board: NVML's counter read around the timing layer's replays."""
    pytest.importorskip("pynvml")
    from runner.execution import energy
    from runner.execution.timed_call import TimedCall

    x = torch.randn(1 << 20, device="cuda")
    device = f"cuda:{torch.cuda.current_device()}"
    call = TimedCall(lambda: x * 2, per_call_s=20e-6, flops=None, bytes_moved=None,
                     capturable=True)
    out = energy.measure_energy(call, device, window_s=1.0, idle_s=0.5)
    if out["energy_method"] == "unavailable":
        pytest.skip(out["energy_reason"])
    assert out["energy_method"] == "graph", out["energy_reason"]
    assert out["avg_power_W"] > 0 and out["idle_power_W"] > 0, out["energy_reason"]
    assert out["energy_per_call_mJ"] > 0 and 0 < out["energy_busy_fraction"] <= 1
