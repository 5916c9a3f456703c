"""Synthetic result sets for the analysis tests: trials with known answers, in the real format.

The analysis code (load, compare, roofline, report) must be testable without a GPU and
without waiting for real sweeps, and its tests need answers known in advance ("NEW is
exactly 2x faster", "this trial is memory-bound"). These helpers build DataFrames with
exactly the columns the runner writes (see ``COLUMNS``), with raw samples drawn around a
chosen median, and write them in the on-disk layout ``<root>/<sweep_id>/jobs/<n>/trials.parquet``
plus the merged ``<root>/<sweep_id>/results.parquet``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

#: Every column of a trial row, in the runner's order (the roofline columns come last).
COLUMNS: tuple[str, ...] = (
    # identity / status
    "sweep_id", "job_num", "trial_index", "trial_id", "timestamp", "status", "reason",
    "error_traceback",
    # axes
    "op", "target", "dtype", "torch_dtype", "tf32", "matmul_precision", "shape", "shape_str",
    "numel", "device", "device_requested", "seed", "num_threads", "streams", "graph",
    "compile", "compile_dynamic", "fullgraph", "backward", "params_json",
    # timing
    "timer_preset", "n_samples", "calls_per_sample", "warmup_calls", "stop_reason",
    "samples_us", "time_median_us", "time_mean_us", "time_std_us", "time_min_us",
    "time_max_us", "time_q25_us", "time_q75_us", "time_ci_low_us", "time_ci_high_us",
    "ci_rel_halfwidth", "noisy", "time_per_op_us", "l2_flush",
    # throughput
    "flops", "bytes_moved", "tflops", "gbps", "arithmetic_intensity",
    # memory / accuracy
    "peak_allocated_bytes", "peak_reserved_bytes", "rel_error", "rel_error_tol", "accuracy_ok",
    # modes
    "compile_time_s", "capture_time_s", "graph_count", "graph_break_count", "recompile_count",
    # environment
    "device_name", "compute_capability", "sm_count", "torch_version", "cuda_version",
    "driver_version", "cpu_model", "hostname", "python_version",
    "sm_clock_mhz_start", "sm_clock_mhz_end", "temperature_c_start", "temperature_c_end",
    "power_w_start", "power_w_end", "throttle_reasons_start", "throttle_reasons_end",
    # provenance
    "git_commit", "git_dirty",
    # roofline
    "pct_of_peak", "bound", "roofline_source", "roofline_reason",
)

_TORCH_DTYPE = {"fp64": "torch.float64", "fp32": "torch.float32", "tf32": "torch.float32",
                "fp16": "torch.float16", "bf16": "torch.bfloat16"}
_ELEMENT_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}

H100 = {"device": "cuda:0", "device_requested": "cuda", "device_name": "NVIDIA H100 80GB HBM3",
        "driver_version": "580.159.04", "compute_capability": "9.0", "sm_count": 132,
        "cuda_version": "13.0"}
CPU = {"device": "cpu", "device_requested": "cpu", "device_name": "cpu",
       "driver_version": None, "compute_capability": None, "sm_count": None,
       "cuda_version": None}

#: Not a speed claim (benchmarks/ holds those): a guard against a quadratic path in a
#: test of 100k rows, wide enough for a 2-core machine under load (about 1 s quiet).
SLOW_GUARD_S = 30.0


def default_counts(op: str, shape: tuple[int, ...], dtype: str) -> tuple[float, float]:
    """FLOP and byte counts of the synthetic ops: ``matmul`` (MxNxK), ``add``, ``copy``."""
    size = _ELEMENT_BYTES[dtype]
    if op == "matmul":
        m, n, k = (list(shape) + [1, 1, 1])[:3]
        return 2.0 * m * n * k, float(size * (m * k + k * n + m * n))
    numel = int(np.prod(shape))
    if op == "add":
        return float(numel), float(3 * numel * size)
    return 0.0, float(2 * numel * size)


def make_trials(specs: Iterable[dict[str, Any]], *, sweep_id: str = "synthetic",
                n_samples: int = 40, noise: float = 0.02, seed: int = 0,
                env: dict[str, Any] | None = None) -> pd.DataFrame:
    """One trial row per spec, with every column of ``COLUMNS``.

    Each spec is a dict of axis values (``op``, ``dtype``, ``shape``, ``graph``, ``compile``,
    ``streams``, ``params``...) plus optional outcome keys: ``median_us`` (the true median
    of the samples), ``status``/``reason``, ``flops``/``bytes_moved`` (else counted by
    :func:`default_counts`), ``samples`` (explicit raw samples), ``noise`` (relative spread).
    Samples are ``median_us * exp(N(0, noise))``, rescaled so their median is exactly
    ``median_us``: a known answer for speedups.
    """
    rng = np.random.default_rng(seed)
    env = dict(H100 if env is None else env)
    rows = []
    for index, spec in enumerate(specs):
        spec = dict(spec)
        op = spec.pop("op", "matmul")
        dtype = spec.pop("dtype", "fp32")
        shape = tuple(int(s) for s in spec.pop("shape", (64, 64, 64)))
        params = dict(spec.pop("params", {}))
        status = spec.pop("status", "ok")
        median_us = float(spec.pop("median_us", 100.0))
        rel_noise = float(spec.pop("noise", noise))
        flops, nbytes = default_counts(op, shape, dtype)
        flops = spec.pop("flops", flops)
        nbytes = spec.pop("bytes_moved", nbytes)
        streams = int(spec.pop("streams", 1))
        samples = spec.pop("samples", None)
        gpu_median_us = spec.pop("gpu_median_us", None)
        gpu_samples = spec.pop("gpu_samples", None)
        row: dict[str, Any] = {c: None for c in COLUMNS}
        row.update(env)
        row.update({
            "sweep_id": sweep_id, "job_num": index % 2, "trial_index": index,
            "timestamp": pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(seconds=index),
            "status": status, "reason": None,
            "op": op, "target": f"ops.{op}", "dtype": dtype,
            "torch_dtype": _TORCH_DTYPE[dtype], "tf32": dtype == "tf32",
            "matmul_precision": "high" if dtype == "tf32" else "highest",
            "shape": list(shape), "shape_str": "x".join(map(str, shape)),
            "numel": int(np.prod(shape)), "seed": 0, "num_threads": 1,
            "streams": streams, "graph": "none", "compile": "none",
            "compile_dynamic": False, "fullgraph": False, "backward": False,
            "params_json": json.dumps(params, sort_keys=True),
            "timer_preset": "quick", "warmup_calls": 3, "calls_per_sample": 1,
            "stop_reason": "max_samples", "l2_flush": False,
            "torch_version": "2.13.0", "cpu_model": "Synthetic CPU", "hostname": "synth",
            "python_version": "3.11.0", "git_commit": "0" * 40, "git_dirty": False,
        })
        for name, value in params.items():
            row[f"param_{name}"] = value
        row.update(spec)  # any remaining column overrides (graph, compile, device...)
        row["trial_id"] = hashlib.sha1(json.dumps(
            {k: row[k] for k in ("op", "dtype", "shape_str", "graph", "compile", "params_json")},
            sort_keys=True, default=str).encode()).hexdigest()[:16]
        if status == "ok":
            if samples is None:
                samples = _draw(rng, median_us, rel_noise, n_samples)
            samples = np.asarray(samples, dtype=float)
            med = float(np.median(samples))
            q25, q75 = np.quantile(samples, [0.25, 0.75])
            spread = samples.std(ddof=1) if len(samples) > 1 else 0.0
            half = 1.96 * 1.2533 * spread / np.sqrt(len(samples))
            row.update({
                "samples_us": samples.tolist(), "n_samples": len(samples),
                "time_median_us": med, "time_mean_us": float(samples.mean()),
                "time_std_us": float(samples.std(ddof=1)) if len(samples) > 1 else 0.0,
                "time_min_us": float(samples.min()), "time_max_us": float(samples.max()),
                "time_q25_us": float(q25), "time_q75_us": float(q75),
                "time_ci_low_us": med - half, "time_ci_high_us": med + half,
                "ci_rel_halfwidth": half / med, "noisy": half / med > 0.05,
                "time_per_op_us": med / streams,
                "flops": flops, "bytes_moved": nbytes,
                "tflops": flops / (med / streams * 1e-6) / 1e12,
                "gbps": nbytes / (med / streams * 1e-6) / 1e9,
                "arithmetic_intensity": flops / nbytes if nbytes else None,
                "peak_allocated_bytes": int(nbytes), "peak_reserved_bytes": int(2 * nbytes),
                "rel_error": 1e-7, "rel_error_tol": 1e-5, "accuracy_ok": True,
                "gpu_time_method": "unavailable", "gpu_time_reason": "synthetic",
            })
            if gpu_median_us is not None or gpu_samples is not None:
                if gpu_samples is None:
                    gpu_samples = _draw(rng, gpu_median_us, rel_noise, n_samples)
                row.update(_gpu_columns(gpu_samples, row))
        else:
            row["reason"] = row.get("reason") or f"synthetic {status}"
            row["samples_us"] = []
            row["n_samples"] = 0
            if status == "error":
                row["error_traceback"] = "Traceback (most recent call last):\nRuntimeError: boom"
        rows.append(row)
    df = pd.DataFrame(rows)
    ordered = [c for c in COLUMNS if c in df.columns]
    extra = sorted(c for c in df.columns if c not in COLUMNS)
    return df[ordered + extra]


def _draw(rng: np.random.Generator, median_us: float, noise: float,
          n_samples: int) -> np.ndarray:
    """``n_samples`` lognormal samples of relative spread ``noise`` whose median is exactly
    ``median_us``: tests assert on the median they asked for."""
    draws = np.exp(rng.normal(0.0, noise, n_samples))
    return median_us * draws / np.median(draws)


def _gpu_columns(samples: Any, row: dict[str, Any]) -> dict[str, Any]:
    """gpu_time_* columns (method graph) of ``samples``; rates at the device time, from the
    ``row``'s streams, flops, bytes_moved and loop time per op."""
    samples = np.asarray(samples, dtype=float)
    med = float(np.median(samples))
    half = 1.96 * 1.2533 * samples.std(ddof=1) / np.sqrt(len(samples)) \
        if len(samples) > 1 else 0.0
    per_op = med / row["streams"]
    loop_per_op_us, flops, nbytes = row["time_per_op_us"], row["flops"], row["bytes_moved"]
    return {"gpu_time_method": "graph", "gpu_time_reason": None,
            "gpu_time_samples_us": samples.tolist(), "gpu_time_n_samples": len(samples),
            "gpu_time_median_us": med, "gpu_time_us": med, "gpu_time_statistic": "median",
            "gpu_time_ci_low_us": med - half,
            "gpu_time_ci_high_us": med + half, "gpu_time_noisy": half / med > 0.05,
            "gpu_time_per_op_us": per_op, "host_overhead_ratio": loop_per_op_us / per_op,
            "tflops": flops / (per_op * 1e-6) / 1e12, "gbps": nbytes / (per_op * 1e-6) / 1e9}


def grid(**axes: Any) -> list[dict[str, Any]]:
    """Cartesian product of axis values: ``grid(op=["matmul"], dtype=["fp32", "bf16"])``."""
    names = list(axes)
    values = [v if isinstance(v, list) else [v] for v in axes.values()]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def to_table(df: pd.DataFrame, metadata: dict[str, Any] | None = None) -> pa.Table:
    """Arrow table with the runner's types (list columns, UTC times) and ``opsweep`` metadata."""
    df = df.copy()
    for column in df.columns:
        if df[column].isna().all() and column not in ("shape", "samples_us"):
            df[column] = df[column].astype("object")
    table = pa.Table.from_pandas(df, preserve_index=False)
    fields = []
    for field in table.schema:
        if field.name == "samples_us":
            field = field.with_type(pa.list_(pa.float64()))
        elif field.name == "shape":
            field = field.with_type(pa.list_(pa.int64()))
        fields.append(field)
    table = table.cast(pa.schema(fields))
    meta = {"opsweep": json.dumps(metadata or {"overrides": [], "config": {}})}
    return table.replace_schema_metadata(meta)


def write_sweep(root: Path, df: pd.DataFrame, *, merged: bool = True,
                jobs: bool = True) -> Path:
    """Write ``df`` as sweep ``<root>/<sweep_id>``: per-job files and/or the merged file.

    Returns the sweep directory. ``merged=False`` imitates a sweep that crashed before
    merging; ``jobs=False`` one whose job files were cleaned up.
    """
    sweep_id = str(df["sweep_id"].iloc[0])
    sweep_dir = Path(root) / sweep_id
    sweep_dir.mkdir(parents=True, exist_ok=True)
    meta = {"sweep_id": sweep_id, "overrides": ["op=matmul"], "config": {"timer": "quick"}}
    if jobs:
        for job_num, part in df.groupby("job_num", sort=True):
            job_dir = sweep_dir / "jobs" / str(job_num)
            job_dir.mkdir(parents=True, exist_ok=True)
            pq.write_table(to_table(part, meta), job_dir / "trials.parquet")
    if merged:
        pq.write_table(to_table(df, meta), sweep_dir / "results.parquet")
    return sweep_dir


def scaled(df: pd.DataFrame, factor: float, *, sweep_id: str, seed: int = 1,
           noise: float = 0.02) -> pd.DataFrame:
    """The same trials with every time multiplied by ``factor`` and fresh noise (a "NEW" run)."""
    out = df.copy()
    rng = np.random.default_rng(seed)
    out["sweep_id"] = sweep_id
    new_samples = []
    for samples in out["samples_us"]:
        samples = np.asarray(samples if samples is not None else [], dtype=float)
        if len(samples):
            draws = np.exp(rng.normal(0.0, noise, len(samples)))
            samples = np.median(samples) * factor * draws / np.median(draws)
        new_samples.append(samples.tolist())
    out["samples_us"] = new_samples
    for column in ("time_median_us", "time_mean_us", "time_min_us", "time_max_us",
                   "time_q25_us", "time_q75_us", "time_ci_low_us", "time_ci_high_us",
                   "time_per_op_us", "time_std_us"):
        out[column] = out[column] * factor
    out["tflops"] = out["tflops"] / factor
    out["gbps"] = out["gbps"] / factor
    return out


# ----------------------------------------------------------------------------- real sweeps

REPO = Path(__file__).resolve().parent.parent
#: A tiny CPU sweep through the real runner: two ops, several sizes, a second dtype, and a
#: CUDA-graph trial that a CPU must skip (a non-ok row).
TINY_SWEEP_ARGS = (
    "cases=[{op:matmul,shape:[[32,32,32],[128,128,128]],dtype:[fp32,fp64]},"
    "{op:add,shape:[[1],[4096],[65536]]},{op:add,shape:[[4096]],graph:cuda_graph}]",
    "device=cpu", "timer=quick",
)
_TINY_SWEEPS: dict[str, Path] = {}


def runner_missing() -> str | None:
    """Why ``python -m runner`` cannot run here (None when it can)."""
    import importlib.util

    for module in ("runner.__main__", "runner.execution.job", "hydra"):
        try:
            if importlib.util.find_spec(module) is None:
                return f"{module} is not importable yet (the runner core is not in place)"
        except ImportError as exc:
            return f"{module} is not importable yet: {exc}"
    return None


def tiny_cpu_sweep(tmp_path_factory) -> Path:
    """Run (once per test session) a tiny CPU sweep with the real runner; its sweep dir.

    Skips the calling test when the runner is not importable; fails with the runner's own
    output when it is importable but the sweep fails.
    """
    import os
    import subprocess
    import sys

    import pytest

    why = runner_missing()
    if why:
        pytest.skip(f"needs the real runner: {why}")
    if "tiny" in _TINY_SWEEPS:
        return _TINY_SWEEPS["tiny"]
    workdir = tmp_path_factory.mktemp("tiny_sweep")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, "-m", "runner", *TINY_SWEEP_ARGS], cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"python -m runner {' '.join(TINY_SWEEP_ARGS)} failed "
                    f"(exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    sweeps = sorted(p for p in (workdir / "results").iterdir() if p.is_dir())
    assert len(sweeps) == 1, f"expected one sweep under {workdir / 'results'}, got {sweeps}"
    _TINY_SWEEPS["tiny"] = sweeps[0]
    return sweeps[0]
