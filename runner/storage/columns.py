"""Every result column: its Arrow type and what it means. The one source of truth.

``results.rows_to_table`` writes known columns with these types (so an all-null column still
has its real type and pandas reads proper dtypes), and ``results/README.md``'s column table is
generated from here (``python -m runner.storage.columns``). Op parameters become ``param_<name>``
columns and op-specific measurements ``extra_<name>``; their types are inferred.
"""

from __future__ import annotations

import pyarrow as pa

_S, _I, _F, _B = pa.string(), pa.int64(), pa.float64(), pa.bool_()
_TS = pa.timestamp("us", tz="UTC")

#: name → (type, description), grouped as in the README.
COLUMNS: dict[str, tuple[pa.DataType, str]] = {
    # identity and status
    "sweep_id": (_S, "folder name of the sweep under results/ (sub-second timestamp)"),
    "job_num": (_I, "Hydra job number within the sweep (0 for a single run)"),
    "trial_index": (_I, "position of the trial within its job"),
    "trial_id": (_S, "stable hash of the trial spec (op, axes, params); equal on every machine"),
    "timestamp": (_TS, "UTC time the trial started"),
    "status": (_S, "ok | error | skipped | oom | crashed (worker died or CUDA context "
                       "poisoned) | timeout (over trial_timeout_s)"),
    "reason": (_S, "why a trial is not ok (exception or unsupported combination)"),
    "error_traceback": (_S, "full traceback of an error row"),
    # axes
    "op": (_S, "op name (conf/op/<name>.yaml)"),
    "target": (_S, "the op's builder, as a dotted path"),
    "dtype": (_S, "fp64 | fp32 | tf32 | fp16 | bf16"),
    "torch_dtype": (_S, "storage dtype (tf32 is stored as float32)"),
    "tf32": (_B, "true when TF32 tensor-core math was allowed (dtype=tf32 only)"),
    "matmul_precision": (_S, "torch.get_float32_matmul_precision() during the trial"),
    "shape": (pa.list_(_I), "the op's shape, e.g. [M, N, K] for matmul"),
    "shape_str": (_S, "shape as text, e.g. 4096x4096x4096"),
    "numel": (_I, "product of the shape"),
    "device": (_S, "resolved device: cpu or cuda:N"),
    "seed": (_I, "seed of the trial's random inputs"),
    "num_threads": (_I, "torch intra-op threads set for the trial (null = default)"),
    "streams": (_I, "CUDA streams the op ran on"),
    "graph": (_S, "none | cuda_graph | graphed_callable"),
    "compile": (_S, "none | default | reduce-overhead | max-autotune | "
                    "max-autotune-no-cudagraphs"),
    "compile_dynamic": (_B, "torch.compile's dynamic argument (null = automatic)"),
    "fullgraph": (_B, "torch.compile's fullgraph argument"),
    "backward": (_B, "true when each call ran forward and backward"),
    "params_json": (_S, "the op parameters as JSON"),
    # timing
    "timer_preset": (_S, "timer preset (conf/timer)"),
    "n_samples": (_I, "number of timed samples"),
    "calls_per_sample": (_I, "back-to-back calls per sample (batching for short ops)"),
    "warmup_calls": (_I, "calls run before sampling"),
    "warmup_time_s": (_F, "wall time of the warm-up"),
    "stop_reason": (_S, "converged | max_samples | max_time"),
    "samples_us": (pa.list_(_F), "raw samples: µs per call (sample time / calls_per_sample)"),
    "time_median_us": (_F, "median µs per call (the headline number)"),
    "time_mean_us": (_F, "mean µs per call"),
    "time_std_us": (_F, "sample standard deviation, µs"),
    "time_min_us": (_F, "fastest sample, µs"),
    "time_max_us": (_F, "slowest sample, µs"),
    "time_q25_us": (_F, "25th percentile, µs"),
    "time_q75_us": (_F, "75th percentile, µs"),
    "time_ci_low_us": (_F, "95% CI of the median, low end, µs (order statistics)"),
    "time_ci_high_us": (_F, "95% CI of the median, high end, µs"),
    "ci_rel_halfwidth": (_F, "half the CI's width over the median"),
    "noisy": (_B, "true when the CI never got within timer.target_rel"),
    "time_per_op_us": (_F, "median / number of op instances per call (streams=N)"),
    "l2_flush": (_B, "true when L2 was flushed before every sample"),
    # throughput
    "flops": (_F, "floating-point operations per call"),
    "bytes_moved": (_F, "minimum bytes read + written per call"),
    "tflops": (_F, "TFLOP/s at the median"),
    "gbps": (_F, "GB/s (1e9 bytes/s) at the median"),
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
    "l2_cache_bytes": (_I, "L2 cache size"),
    "total_memory_bytes": (_I, "device memory"),
    "driver_version": (_S, "NVIDIA driver (via nvidia-ml-py)"),
    "torch_version": (_S, "torch.__version__"),
    "cuda_version": (_S, "torch.version.cuda"),
    "cpu_model": (_S, "host CPU model"),
    "cpu_count": (_I, "host logical CPUs"),
    "hostname": (_S, "host name"),
    "python_version": (_S, "Python version"),
    "platform": (_S, "platform.platform()"),
    "git_commit": (_S, "opsweep's git commit"),
    "git_dirty": (_B, "true when opsweep's tree had uncommitted changes"),
    # roofline
    "pct_of_peak": (_F, "percent of the binding roofline ceiling reached"),
    "bound": (_S, "compute | memory | overhead"),
    "roofline_source": (_S, "where the ceilings came from (calibration file or fallback)"),
    "roofline_reason": (_S, "why pct_of_peak/bound are null, when they are"),
}

_GPU_STATE = {
    "sm_clock_mhz": (_I, "SM clock, MHz"), "mem_clock_mhz": (_I, "memory clock, MHz"),
    "temperature_c": (_I, "GPU temperature, °C"), "power_w": (_F, "board power, W"),
    "throttle_reasons": (_S, "active clock-event (throttle) reasons, comma-separated"),
}
for _name, (_type, _text) in _GPU_STATE.items():
    for _when in ("start", "end"):
        COLUMNS[f"{_name}_{_when}"] = (_type, f"{_text}, at the trial's {_when}")


def markdown_table() -> str:
    lines = ["| column | type | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{name}` | {dtype} | {text} |" for name, (dtype, text) in COLUMNS.items()]
    lines += ["| `param_<name>` | inferred | one column per op parameter |",
              "| `extra_<name>` | inferred | op-specific measurements (e.g. allocator bytes) |"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
