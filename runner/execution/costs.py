"""What a trial will cost its worker, in seconds, estimated before it runs: for placing the
trials of ``workers=N`` (``runner.execution.schedule``), never for a result.

Why: a pool that balances trials by count, or by the size of their shape alone, leaves one
GPU busy long after the others. A 256³ matmul and an 8192³ one cost nearly the same to
*compute* on an H100 (microseconds either way), but the 8192³ bf16 one is power-capped: it
warms up for seconds before its time per call settles (docs/timing.md#what-a-trial-costs),
and its samples run to the timer's budget. So the estimate is the timer's cost, not the op's:

* **the call** from the op's FLOPs and bytes against the device's ceilings
  (``runner.analysis.devices``, the same table the roofline falls back to) and its launch
  floor: ``max(flops / peak, bytes / bandwidth, launch)``;
* **the warm-up**: a power-capped op (a tensor-core dtype, compute-bound, large; or one
  that may be, :data:`MAYBE_CAPPED_FLOPS`) settles for
  ``runner.timing.heat.HOT_CAPPED_MIN_S`` after capped work, and pays the rest of
  ``runner.timing.settle.CAPPED_MIN_S`` once when it starts cold (:attr:`TrialCost.cold_s`:
  charged once per heat group on a worker, which is why splitting a group costs something;
  a worker runs its capped trials back to back, so only its first capped group really starts
  cold, and the charge over-counts by this much for each further one);
* **the samples**: enough to reach the timer's minimum, at least the batch each sample takes,
  at most ``max_time_s``; the device time and the loop time each take theirs on CUDA; a
  capped op's device time samples for ``runner.timing.settle.CAPPED_SAMPLE_S`` and its loop
  time for at most ``runner.timing.heat.LOOP_HANDOVER_MAX_S`` after it;
* **the rest**: the accuracy check's float64 reference, and a fixed harness cost.

Where an earlier sweep in the same results folder ran the same trial with the same timer,
what its worker spent on it (``worker_trial_wall_s``) replaces the estimate
(:func:`earlier_walls`).

The FLOP formulas below are the shipped ops' own (each op's builder counts them exactly, in
the worker, for its row); here they only rank trials, in the driver, which never imports
torch or the ops.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.core.axes import DTYPE_BYTES
from runner.timing.heat import HOT_CAPPED_MIN_S, LOOP_HANDOVER_MAX_S
from runner.timing.measurement import TimerPlan
from runner.timing.settle import BAND_CAPPED_MIN_S, CAPPED_MIN_S, CAPPED_SAMPLE_S

#: Seconds every trial costs besides its warm-up and samples: the row's records, building
#: the inputs, the FLOP count, freeing memory (a few tens of ms on a GPU host).
HARNESS_S = 0.05
#: Samples a timer usually takes before its CI target is met on a steady op: three times
#: its minimum (the rest run to ``max_time_s``, which caps the estimate).
SAMPLES_FACTOR = 3
#: A call this many FLOPs or more, compute-bound, in a tensor-core dtype, holds the GPU at
#: its power cap (on H100/H200: fp16 2048³ already did; fp32 4096³, on the CUDA cores, did not).
CAPPED_FLOPS = 2 * 2048**3
#: From this many FLOPs up to :data:`CAPPED_FLOPS`, compute-bound, in a tensor-core dtype, a
#: call *may* be capped, depending on the GPU: an H100 held bf16 and fp16 1024³ matmuls at
#: its power cap, an H200 ran them at 1750-1830 MHz, light, and H200 hosts called tf32
#: 1024³ capped now and then. Costed as capped (called light, they ran last and
#: cold: on one GPU of four bf16 1024³ idled the others for 19% of the sweep, and on H200
#: hosts tf32 1024³ kept one GPU busy 1.3-2.0 s after the others), and run right after the
#: capped trials (``runner.execution.order.capped_first``), where one that is held starts
#: hot. Held only lightly, such a call warms up no longer from cold
#: (``runner.timing.settle.BAND_CAPPED_MIN_S``): no cold start is charged for it.
MAYBE_CAPPED_FLOPS = 2 * 1024**3
TENSOR_CORE = frozenset({"bf16", "fp16", "tf32"})
#: The device used for GPUs the table does not know (only the ratios between trials matter).
DEFAULT_GPU = "H100 SXM"
#: A CPU's rough ceilings (TFLOP/s per dtype, GB/s, launch µs): only the ratios matter.
CPU_TFLOPS = {"fp64": 0.05, "fp32": 0.1, "tf32": 0.1, "bf16": 0.02, "fp16": 0.02}
CPU_GBPS, CPU_LAUNCH_US = 10.0, 5.0


@dataclass(frozen=True)
class Rates:
    """A device's ceilings, for estimates: TFLOP/s per dtype, memory GB/s (read + written),
    launch floor µs."""

    name: str
    tflops: Mapping[str, float]
    memory_gbps: float
    launch_us: float


@dataclass(frozen=True)
class TrialCost:
    """A trial's estimated seconds when it follows a trial of its heat group (``seconds``),
    the seconds more it costs when it starts its group cold on a worker (``cold_s``), and
    whether it is power-capped, or may be on some GPUs (``maybe_capped``, then costed as a
    capped one)."""

    seconds: float
    cold_s: float = 0.0
    capped: bool = False
    maybe_capped: bool = False


def gpu_model(proc: Path = Path("/proc/driver/nvidia/gpus")) -> str | None:
    """The first GPU's model name as the NVIDIA driver lists it (no torch, no NVML)."""
    try:
        for folder in sorted(proc.iterdir()):
            text = (folder / "information").read_text()
            found = re.search(r"^Model:\s*(.+)$", text, flags=re.MULTILINE)
            if found:
                return found.group(1).strip()
    except OSError:
        pass
    return None


def rates_for(device: str, model: str | None = None) -> Rates:
    """The ceilings of ``device`` (``cpu``, ``cuda...``): the fallback table's entry for the
    GPU ``model``, else the table's :data:`DEFAULT_GPU`; rough figures for a CPU."""
    if not device.startswith("cuda"):
        return Rates("cpu", CPU_TFLOPS, CPU_GBPS, CPU_LAUNCH_US)
    from runner.analysis.devices import DEFAULT_LAUNCH_US, match_device

    spec = match_device(model) or match_device(DEFAULT_GPU)
    if spec is None:  # a table without the default entry: any GPU-like figures rank alike
        return Rates("gpu", {"fp32": 50.0}, 3000.0, DEFAULT_LAUNCH_US)
    return Rates(spec.name, dict(spec.matmul_tflops), spec.copy_gbps or 1000.0,
                 spec.launch_us or DEFAULT_LAUNCH_US)


def work(op: str, shape: tuple[int, ...], element_bytes: int) -> tuple[float, float]:
    """``(flops, bytes)`` of one forward call, by the shipped op's formula where it has one
    (matmul-like ops and attention); else an elementwise pass over the shape."""
    numel = math.prod(shape) if shape else 1
    dims = list(shape)
    if op == "matmul" and len(dims) == 3:
        m, n, k = dims
        return 2.0 * m * n * k, float(m * k + k * n + m * n) * element_bytes
    if op == "bmm" and len(dims) == 4:
        b, m, n, k = dims
        return 2.0 * b * m * n * k, float(b * (m * k + k * n + m * n)) * element_bytes
    if op == "linear" and len(dims) == 3:
        n, inner, out = dims
        return 2.0 * n * inner * out, float(n * inner + inner * out + n * out) * element_bytes
    if op == "sdpa" and len(dims) == 4:
        b, h, s, d = dims
        return 4.0 * b * h * s * s * d, 4.0 * b * h * s * d * element_bytes
    if op == "mlp" and len(dims) == 2:
        b, w = dims
        return 16.0 * b * w * w, float(8 * w * w + 6 * b * w) * element_bytes
    return float(numel), 3.0 * numel * element_bytes


def estimate(task: Any, rates: Rates) -> TrialCost:
    """The seconds ``task`` (a :class:`~runner.execution.task.TrialTask`) will take its
    worker on a device with ``rates``."""
    spec = task.spec
    timer = getattr(task, "timer", None)  # a planned trial without its task: the defaults
    plan = timer.plan if timer is not None else TimerPlan()
    device_time = timer.device_time if timer is not None else True
    dtype = getattr(spec.dtype, "value", str(spec.dtype))
    flops, moved = work(spec.op, tuple(spec.shape), DTYPE_BYTES[spec.dtype])
    factor = 3 if spec.backward else 1
    compute_s = flops / (rates.tflops.get(dtype, min(rates.tflops.values())) * 1e12)
    memory_s = moved / (rates.memory_gbps * 1e9)
    call_s = factor * spec.streams * max(compute_s, memory_s, rates.launch_us * 1e-6)
    heavy = spec.device.startswith("cuda") and dtype in TENSOR_CORE and compute_s >= memory_s
    capped = heavy and flops >= CAPPED_FLOPS
    maybe_capped = heavy and MAYBE_CAPPED_FLOPS <= flops < CAPPED_FLOPS
    held = capped or maybe_capped  # costed as the power cap would make it cost
    sample_s = max(call_s, plan.batch_target_us * 1e-6 if call_s * 1e6 < plan.batch_below_us
                   else call_s)
    samples_s = min(plan.max_time_s, SAMPLES_FACTOR * plan.min_samples * sample_s)
    both = spec.device.startswith("cuda") and device_time  # a device time, then a loop time
    settle_s = HOT_CAPPED_MIN_S if held else plan.warmup_s + plan.warmup_calls * call_s
    if held:  # the device time samples its swings, the loop time follows it briefly
        timed_s = (min(plan.max_time_s, CAPPED_SAMPLE_S)
                   + (min(plan.max_time_s, LOOP_HANDOVER_MAX_S) if both else 0.0))
    else:
        timed_s = samples_s * (2 if both else 1)
    checked = getattr(task, "check_accuracy", True)
    accuracy_s = flops / (rates.tflops.get("fp64", 1.0) * 1e12) if checked else 0.0
    seconds = HARNESS_S + settle_s + timed_s + accuracy_s
    cold_s = CAPPED_MIN_S if capped else BAND_CAPPED_MIN_S if maybe_capped else 0.0
    return TrialCost(seconds, max(cold_s - HOT_CAPPED_MIN_S, 0.0), capped, maybe_capped)


def earlier_walls(results_dir: str | Path, newest: int = 5) -> dict[tuple[str, str], float]:
    """What the workers of the ``newest`` sweeps in ``results_dir`` spent on each trial they
    finished, by ``(trial_id, timer_preset)``: the newest sweep's figure wins. Empty where
    there is none, or a file cannot be read (an estimate then stands in)."""
    import pyarrow.parquet as pq

    from runner.storage.layout import SWEEP_FILE

    root = Path(results_dir)
    try:
        files = sorted(root.glob(f"*/{SWEEP_FILE}"), key=lambda p: p.stat().st_mtime)
    except OSError:
        return {}
    walls: dict[tuple[str, str], float] = {}
    columns = ["trial_id", "timer_preset", "status", "worker_trial_wall_s"]
    for path in files[-newest:]:
        try:
            table = pq.read_table(path, columns=columns).to_pylist()
        except Exception:  # an older schema, a file being replaced: no figure from it
            continue
        for row in table:
            wall = row["worker_trial_wall_s"]
            if row["status"] == "ok" and wall is not None and wall == wall:
                walls[(row["trial_id"], row["timer_preset"])] = float(wall)
    return walls


def costs(tasks: Iterable[Any], rates: Rates,
          walls: Mapping[tuple[str, str], float] | None = None) -> dict[int, TrialCost]:
    """Each task's cost by its index: what an earlier sweep measured for it (``walls``),
    else :func:`estimate`."""
    out: dict[int, TrialCost] = {}
    for task in tasks:
        guess = estimate(task, rates)
        preset = getattr(getattr(task, "timer", None), "preset", None)
        measured = (walls or {}).get((task.spec.trial_id, preset))
        out[task.index] = guess if measured is None else TrialCost(
            measured, guess.cold_s, guess.capped, guess.maybe_capped)
    return out


def device_rates() -> Callable[[str], Rates]:
    """Each device's ceilings (:func:`rates_for`, the GPU model read from the driver), read
    once per device and only when first asked."""
    known: dict[str, Rates] = {}

    def rates(device: str) -> Rates:
        if device not in known:
            known[device] = rates_for(device, gpu_model() if device.startswith("cuda")
                                      else None)
        return known[device]

    return rates


def for_tasks(tasks: list[Any], results_dir: str | Path | None = None) -> dict[int, TrialCost]:
    """:func:`costs` of a job's tasks, each on its own device's ceilings, with what earlier
    sweeps in ``results_dir`` measured."""
    rates = device_rates()
    walls = earlier_walls(results_dir) if results_dir else None
    out: dict[int, TrialCost] = {}
    for device in dict.fromkeys(task.spec.device for task in tasks):
        out.update(costs([t for t in tasks if t.spec.device == device], rates(device), walls))
    return out


def power_estimates() -> tuple[Callable[[Any], bool], Callable[[Any], bool]]:
    """Whether a task is estimated power-capped, and whether it may be (:func:`estimate`, on
    the ceilings of its own device): what the order one worker runs its trials in needs
    (``runner.execution.order.capped_first``). Nothing is read until it is first asked."""
    rates = device_rates()

    def cost(task: Any) -> TrialCost:
        return estimate(task, rates(task.spec.device))

    return (lambda task: cost(task).capped), (lambda task: cost(task).maybe_capped)
