"""Every result column: its Arrow type (named as Arrow prints it, ``double``, so a worker
reads the names without importing pyarrow; :mod:`runner.storage.column_types` makes the
types) and what it means. The one source of truth; the axis columns come from the axis
registry (:mod:`runner.core.axes`). ``runner.storage.files.rows_to_table`` writes known
columns with these types (an all-null column keeps its real type);
:mod:`runner.storage.column_reference` derives each column's unit, the description and unit
in every file's field metadata, ``opsweep --columns`` and ``results/README.md``'s column table.
Op parameters become ``param_<name>`` columns and op-specific measurements ``extra_<name>``;
their types are inferred."""

from __future__ import annotations

from runner.core.axes import AXES, MODE_AXES, Axis
from runner.core.status import Status
from runner.storage import arrow_names as arrow
from runner.storage.insight_columns import ENERGY_COLUMNS, PROFILE_COLUMNS

__all__ = ["AXES", "AXIS_COLUMNS", "COLUMNS", "COST_COLUMNS", "MODE_COLUMNS", "REPEAT_FLAGS",
           "Status", "axis_doc"]

_S, _I, _F, _B = arrow.ARROW_STRING, arrow.ARROW_INT, arrow.ARROW_FLOAT, arrow.ARROW_BOOL
_TS, _LIST_F = arrow.ARROW_TIMESTAMP, arrow.ARROW_LIST_FLOAT
_ARROW_TYPES = {"string": _S, "int64": _I, "bool": _B, "list<int64>": "list<item: int64>"}

#: The trial axes' columns, in registry order, and those that name an execution mode: the read
#: side (compare, report, plots, claims) takes its axis lists from here.
AXIS_COLUMNS: tuple[str, ...] = tuple(axis.name for axis in AXES)
MODE_COLUMNS: tuple[str, ...] = MODE_AXES


def axis_doc(axis: Axis) -> str:
    """An axis column's meaning: the registry's text, with the choices of an enum axis."""
    doc = axis.column_doc or axis.doc
    if axis.choices and axis.kind is not bool:
        return f"{doc}: {' | '.join(c for c in axis.choices if c != 'null')}"
    return doc

#: The statistics recorded for each of the two times, as (stat, type, meaning); ``{what}``
#: is filled with the time's description.
_TIME_STATS: tuple[tuple[str, str, str], ...] = (
    ("n_samples", _I, "number of timed samples of the {what}"),
    ("calls_per_sample", _I, "calls per sample of the {what} (K: batching for short ops)"),
    ("warmup_calls", _I, "warm-up calls (or samples) before sampling the {what}"),
    ("warmup_time_s", _F, "wall time of the {what}'s warm-up"),
    ("stop_reason", _S, "converged | max_samples | max_time, for the {what}"),
    ("samples_us", _LIST_F, "raw samples of the {what}: µs per call (sample / K)"),
    ("median_us", _F, "median µs per call of the {what}"),
    ("mean_us", _F, "mean µs per call of the {what}"),
    ("std_us", _F, "sample standard deviation of the {what}, µs"),
    ("min_us", _F, "fastest sample of the {what}, µs"),
    ("max_us", _F, "slowest sample of the {what}, µs"),
    ("q25_us", _F, "25th percentile of the {what}, µs"),
    ("q75_us", _F, "75th percentile of the {what}, µs"),
    ("ci_low_us", _F, "95% CI of the {what}'s median, low end, µs (order statistics)"),
    ("ci_high_us", _F, "95% CI of the {what}'s median, high end, µs"),
    ("ci_rel_halfwidth", _F, "half the CI's width over the median, {what}"),
    ("noisy", _B, "true when the {what} is not to be trusted: too few samples, a CI wider "
                  "than timer.target_rel (twice it for a CUDA loop time taken after the "
                  "device time), or samples one median cannot describe (noisy_reason)"),
    ("noisy_reason", _S, "why the {what} is noisy (null when it is not)"),
    ("per_op_us", _F, "{what} per op instance: its number (the loop time's median, the "
                      "device time's gpu_time_us) / op instances per call (streams=N)"),
)
#: The two times (docs/timing.md): the loop time keeps its historical column names.
TIMES = {"loop": "loop time", "gpu": "device time"}


def time_column(time: str, stat: str) -> str:
    """The column of statistic ``stat`` (e.g. ``median_us``) for ``time`` (loop | gpu):
    ``time_median_us`` / ``gpu_time_median_us``; loop counts keep bare names
    (``n_samples``, ``noisy``)."""
    if time == "gpu":
        return f"gpu_time_{stat}"
    return f"time_{stat}" if stat.endswith("_us") and stat != "samples_us" else stat


def timing_columns(time: str) -> dict[str, tuple[str, str]]:
    """The statistic columns of one time, in order."""
    return {time_column(time, stat): (dtype, text.format(what=TIMES[time]))
            for stat, dtype, text in _TIME_STATS}


#: name → (type, description), grouped as in the README.
COLUMNS: dict[str, tuple[str, str]] = {
    # identity and status
    "sweep_id": (_S, "folder name of the sweep under results/ (sub-second timestamp)"),
    "job_num": (_I, "Hydra job number within the sweep (0 for a single run)"),
    "experiment": (_S, "the experiment the job was composed from (conf/experiment/NAME.yaml)"),
    "trial_index": (_I, "position of the trial in its job's plan (before sharding: the shards "
                        "of one job number their trials alike)"),
    "shard": (_I, "which shard of its job's trials this row's job ran (shard=i)"),
    "num_shards": (_I, "how many shards the job's trials were split into (1: not sharded)"),
    "worker": (_I, "which of the job's worker processes ran the trial (0..workers-1; null: "
                   "isolation=none, in the driver)"),
    "worker_trial_wall_s": (_F, "seconds the worker spent on this trial, from receiving it to "
                                "sending its row (build, checks, timing, clean-up; the "
                                "driver's wait for a crashed or hung one): a worker's busy "
                                "time is the sum over its rows"),
    "launcher": (_S, "the Hydra launcher that started the job: basic, submitit_local, "
                     "submitit_slurm, ray, ..."),
    "launcher_job_id": (_S, "the job's id in its launcher: the SLURM job (array_task), the "
                            "submitit job or the Ray task; null for the basic launcher"),
    "node": (_S, "host name of the machine that ran the job (and its Ray node)"),
    "job_pid": (_I, "process id of the job's driver process on that node"),
    "trial_id": (_S, "stable hash of the trial spec (op, axes, params); equal on every machine"),
    "timestamp": (_TS, "UTC time the trial started"),
    "status": (_S, " | ".join(status.value for status in Status)),
    "reason": (_S, "why a trial is not ok (exception or unsupported combination)"),
    "error_traceback": (_S, "full traceback of an error row"),
    # axes: op and target, then every registry axis (runner.core.axes), then derived values
    "op": (_S, "op name (conf/op/<name>.yaml)"),
    "target": (_S, "the op's builder, as a dotted path"),
    **{axis.name: (_ARROW_TYPES[axis.column_type], axis_doc(axis)) for axis in AXES},
    "torch_dtype": (_S, "storage dtype (tf32 is stored as float32)"),
    "tf32": (_B, "true when TF32 tensor-core math was allowed (dtype=tf32 only)"),
    "matmul_precision": (_S, "torch.get_float32_matmul_precision() during the trial"),
    "shape_str": (_S, "shape as text, e.g. 4096x4096x4096"),
    "numel": (_I, "product of the shape"),
    "params_json": (_S, "the op parameters as JSON"),
    # timing: the loop time (back-to-back eager calls on this host; the headline number)
    "timer_preset": (_S, "timer preset (conf/timer)"),
    **timing_columns("loop"),
    "l2_flush": (_B, "true when L2 was flushed before every sample"),
    # device time: the GPU's own time per call, independent of the host (docs/timing.md)
    **timing_columns("gpu"),
    "gpu_time_us": (_F, "the device time, µs per call: the median of its samples, or their "
                        "mean where they ran power-capped back to back (the controller holds "
                        "the averaged power at the limit by cycling the clock, and a long job "
                        "pays the average; docs/timing.md#the-median-of-a-cycling-clock)"),
    "gpu_time_statistic": (_S, "median | mean: which statistic of the samples gpu_time_us is"),
    "gpu_time_method": (_S, "graph (the replay method: the timer's own CUDA graph of K calls) "
                            "| blocked | unavailable: how gpu_time was taken (docs/timing.md)"),
    "gpu_time_reason": (_S, "why gpu_time is unavailable or taken by the fallback, and any "
                            "cut of K (memory, launch queue)"),
    "host_overhead_ratio": (_F, "time_per_op_us / gpu_time_per_op_us: > 1 when the host, not "
                                "the GPU, sets the loop's pace"),
    # an op whose bytes stay in L2, timed on other allocations (runner.execution.allocations)
    "allocations": (_I, "allocations of the inputs the device time was taken on: the "
                        "trial's own and timer.allocations - 1 more, for a warm memory-bound "
                        "op whose bytes fit in L2 (null: not such a trial)"),
    "gpu_time_allocations_median_us": (_F, "median over the allocations' device-time "
                                           "medians, µs per call (gpu_time_median_us is the "
                                           "trial's own allocation)"),
    "allocation_spread": (_F, "the allocations' slowest median over their fastest, minus one"),
    "allocation_flag": (_S, "set when allocation_spread is more than the samples and "
                            "timer.target_rel allow: the device time depends on where the "
                            "process put the op's bytes; with the GPU's clock and temperature"),
    "allocation_reason": (_S, "why a trial that should have been timed on more allocations "
                              "was not: what failed, or that they gave no device time"),
    # settling (runner/timing/settle.py): warm-ups run until the samples show no trend
    "warmup_settled": (_B, "true when the loop time's warm-up settled, false when it hit "
                           "timer.settle_max_s"),
    "gpu_time_settle_s": (_F, "seconds the device time's back-to-back warm-up ran to settle"),
    "gpu_time_settled": (_B, "true when the device time's warm-up settled (no trend in the "
                             "time per call, SM clock no longer falling), false at the cap"),
    "gpu_time_settled_samples": (_I, "samples that are the settled last half of the device "
                                     "time's warm-up (power-capped ops: docs/timing.md)"),
    "settle_reason": (_S, "what was still moving when a warm-up hit timer.settle_max_s"),
    "power_capped": (_B, "true when the warm-up found the op power-capped (its SMs ran below "
                         "85% of the maximum clock, or below 95% while falling or drawing 80% "
                         "of the power limit; with no clock probe, it drew 90% of the limit): "
                         "its device time is "
                         "what the capped GPU sustains, sampled over the span that "
                         "runner.timing.settle.CAPPED_SAMPLE_S sets"),
    "sm_clock_mhz_samples_median": (_F, "median SM clock the device-time samples really ran "
                                        "at, MHz: cycles over ns between probes on SM 0 "
                                        "(nvbench's way); NVML's reported clock where there "
                                        "is no probe"),
    "sm_clock_mhz_samples_min": (_F, "lowest SM clock of the device-time samples, MHz"),
    "heat_before": (_S, "what the trial before left the GPU in: cold, hot (power-capped work "
                        "just ended) or recovering (its clock may still be coming back)"),
    "sm_clock_mhz_capped_sustained": (_F, "SM clock capped work last sustained on this GPU "
                                          "before the trial, MHz (docs/timing.md)"),
    "power_share_samples": (_F, "board power over its limit while the device-time samples "
                                "ran: NVML's one-second average, read once per sampled "
                                "chunk, the median (a settled capped op draws 0.96-1.0)"),
    "sustained_flag": (_S, "set when the device time may not be the sustained number: capped "
                           "samples that drew under 93% of the power limit (averaged), never "
                           "settled, or read over 8% faster than the loop time right after "
                           "them; faster than its own burst time; uncapped at the averaged "
                           "limit, slower than that loop, or held by the cap after a light "
                           "warm-up; or the GPU lowering its clock for its temperature "
                           "(NVML's thermal clock-event reasons, read after that loop time)"),
    # timer.burst=true: gapped samples at the boost clock (docs/timing.md)
    "gpu_burst_time_median_us": (_F, "burst device time per call, µs: gapped samples at the "
                                     "boost clock; not what a sustained job sees"),
    "gpu_burst_time_ci_low_us": (_F, "95% CI low end of the burst time's median, µs"),
    "gpu_burst_time_ci_high_us": (_F, "95% CI high end of the burst time's median, µs"),
    "consistency_flag": (_S, "set when the row's derived columns disagree: avg_power_W above "
                             "1.03 × power_limit_w, or energy_time_per_call_us more than 3% "
                             "from gpu_time_us"),
    # throughput
    "flops": (_F, "floating-point operations per call"),
    "bytes_moved": (_F, "minimum bytes read + written per call"),
    "tflops": (_F, "TFLOP/s at the device time (gpu_time_us) where there is one, else the "
                   "loop's median"),
    "gbps": (_F, "GB/s (1e9 bytes/s) at the device time (gpu_time_us) where there is one, "
                 "else the loop's median"),
    "arithmetic_intensity": (_F, "FLOP per byte"),
    # modes
    "compile_time_s": (_F, "wall time of the first compiled call (compile + run)"),
    "capture_time_s": (_F, "wall time of the CUDA-graph capture"),
    "graph_count": (_I, "graphs dynamo compiled"),
    "graph_break_count": (_I, "dynamo graph breaks"),
    "graph_break_reasons": (_S, "first line of each graph-break reason"),
    "recompile_count": (_I, "graphs dynamo compiled after the first call (recompiles)"),
    # memory and accuracy
    "peak_allocated_bytes": (_I, "peak bytes held by tensors while timing (CUDA)"),
    "peak_reserved_bytes": (_I, "peak bytes reserved by the caching allocator (CUDA)"),
    "rel_error": (_F, "‖out − ref‖ / ‖ref‖ against the float64 reference"),
    "rel_error_tol": (_F, "tolerance rel_error is held to"),
    "accuracy_ok": (_B, "rel_error <= rel_error_tol"),
    # environment
    "device_name": (_S, "GPU name, or the CPU model on cpu"),
    "compute_capability": (_S, "CUDA compute capability, e.g. 9.0"),
    "sm_count": (_I, "streaming multiprocessors"),
    "l2_cache_bytes": (_I, "L2 cache size"), "total_memory_bytes": (_I, "device memory"),
    "driver_version": (_S, "NVIDIA driver (via nvidia-ml-py)"),
    "torch_version": (_S, "torch.__version__"), "cuda_version": (_S, "torch.version.cuda"),
    "cpu_model": (_S, "host CPU model"), "cpu_count": (_I, "host logical CPUs"),
    "num_threads_used": (_I, "torch intra-op CPU threads the trial ran with (num_threads, "
                             "else the worker's share of the cores under workers=N)"),
    "hostname": (_S, "host name"),
    "cuda_visible_devices": (_S, "CUDA_VISIBLE_DEVICES of the process that ran the trial"),
    "gpu_index": (_I, "physical GPU index on the host (NVML's numbering), null on cpu"),
    "gpu_uuid": (_S, "the GPU's UUID (GPU-...), null on cpu"),
    "gpu_clock_vs_host": (_F, "a capped trial's samples' clock over the same trial's median on "
                              "the job's GPUs (docs/scale-out.md); null if it ran on one GPU"),
    "gpu_time_vs_host": (_F, "the device time over the median of the same trial's (any seed) "
                             "on the job's other GPUs (docs/scale-out.md); null if none ran it"),
    "gpu_pci_bus_id": (_S, "the GPU's PCI bus id, null on cpu"),
    "power_limit_w": (_F, "the GPU's enforced board power limit, W (NVML), null on cpu"),
    "python_version": (_S, "Python version"), "platform": (_S, "platform.platform()"),
    "git_commit": (_S, "opsweep's git commit"),
    "git_dirty": (_B, "true when opsweep's tree had uncommitted changes"),
    "user_git_commit": (_S, "git commit of the repository holding the code the trial ran "
                            "(op.target or the op's _target_), null when that is opsweep's "
                            "own tree or not in git"),
    "user_git_dirty": (_B, "true when that repository had uncommitted changes"),
    **PROFILE_COLUMNS,
    "sm_clock_mhz_timed": (_I, "SM clock read right after the last timed sample, MHz"),
    "power_w_timed": (_F, "board power right after the last timed sample, W"),
    "temperature_c_timed": (_I, "GPU temperature right after the last timed sample, °C"),
    "throttle_reasons_timed": (_S, "clock-event reasons right after the last timed sample "
                                   "(SwPowerCap: the samples' clock was set by the power cap)"),
    "clock_note": (_S, "set only when the SM clock drifted by more than 3% between the first "
                       "and last third of the device-time samples, or they ran 3% or more off "
                       "the settled clock"),
    **ENERGY_COLUMNS,
    # roofline
    "pct_of_peak": (_F, "percent of the binding roofline ceiling reached"),
    "bound": (_S, "compute | memory | overhead"),
    "roofline_source": (_S, "where the ceilings came from (calibration file or fallback)"),
    "roofline_reason": (_S, "why pct_of_peak/bound are null, when they are"),
}


#: The flags that say a row's device time may not repeat in another run: it may not be what
#: the GPU sustains, or it depends on where the process put the op's bytes.
REPEAT_FLAGS: tuple[str, ...] = ("sustained_flag", "allocation_flag")

#: Where a trial's wall time went (docs/timing.md#what-a-trial-costs): they add up to its wall.
COST_COLUMNS: dict[str, tuple[str, str]] = {
    "cost_setup_s": (_F, "seconds of building the inputs, counting the FLOPs and composing "
                         "the modes (compiling, capturing)"),
    "cost_settle_s": (_F, "seconds of the trial spent warming up until settled (the device "
                          "time's and the loop time's warm-ups)"),
    "cost_loop_s": (_F, "seconds of the loop time's samples (its warm-up is in cost_settle_s)"),
    "cost_device_s": (_F, "seconds of the device time besides its warm-up: the probe that "
                          "sizes it, the graph's capture, its samples"),
    "cost_accuracy_s": (_F, "seconds of the accuracy check (the float64 reference, one call)"),
    "cost_other_s": (_F, "the rest of the trial's seconds: burst time, other allocations, "
                         "profile and energy passes, GPU state, freeing memory"),
}
COLUMNS.update(COST_COLUMNS)

_GPU_STATE = {
    "sm_clock_mhz": (_I, "SM clock, MHz"), "mem_clock_mhz": (_I, "memory clock, MHz"),
    "temperature_c": (_I, "GPU temperature, °C"), "power_w": (_F, "board power, W"),
    "throttle_reasons": (_S, "active clock-event (throttle) reasons, comma-separated"),
}
for _name, (_type, _text) in _GPU_STATE.items():
    for _when in ("start", "end"):
        COLUMNS[f"{_name}_{_when}"] = (_type, f"{_text}, at the trial's {_when}")
