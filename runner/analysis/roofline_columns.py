"""The per-trial columns the roofline reads, gathered once per frame.

Why: :mod:`runner.analysis.roofline` classifies each device's rows separately, but every
step reads the same few columns (times, FLOPs, bytes, rates, dtype, copy direction, graph
mode, host overhead). Reading and coercing them once, with the rates derived where the
frame lacks them, keeps the parsing in one place and lets each step take one object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from runner.analysis.calibration import GRAPH_MODES, column_values
from runner.analysis.values import is_missing


@dataclass(frozen=True)
class TrialColumns:
    """One array per column, each over every row of the frame (nan / None: missing)."""

    time_us: np.ndarray  # loop time per op: ``time_per_op_us``, else ``time_median_us``
    flops: np.ndarray
    nbytes: np.ndarray  # ``bytes_moved``
    tflops: np.ndarray  # from the frame, else flops over the rate time
    gbps: np.ndarray  # from the frame, else bytes over the rate time
    host_ratio: np.ndarray  # ``host_overhead_ratio`` (nan: no device time)
    dtypes: np.ndarray  # str or None
    directions: np.ndarray  # ``param_direction``: str or None
    graphed: np.ndarray  # bool: the trial ran as a CUDA-graph replay


def trial_columns(df: pd.DataFrame) -> TrialColumns:
    """The columns of ``df`` the roofline reads, coerced; absent columns read as missing."""
    time_us = _num(df, "time_per_op_us")
    time_us = np.where(np.isfinite(time_us), time_us, _num(df, "time_median_us"))
    # Rates at the device time where there is one (the GPU's own speed), else the loop's.
    gpu_us = _num(df, "gpu_time_per_op_us")
    rate_us = np.where(np.isfinite(gpu_us), gpu_us, time_us)
    flops, nbytes = _num(df, "flops"), _num(df, "bytes_moved")
    tflops, gbps = _num(df, "tflops"), _num(df, "gbps")
    with np.errstate(divide="ignore", invalid="ignore"):
        tflops = np.where(np.isfinite(tflops), tflops, flops / (rate_us * 1e-6) / 1e12)
        gbps = np.where(np.isfinite(gbps), gbps, nbytes / (rate_us * 1e-6) / 1e9)
    host_ratio = _num(df, "host_overhead_ratio")
    dtypes = np.array([None if is_missing(v) else str(v)
                       for v in column_values(df, "dtype")], dtype=object)
    directions = np.array([None if is_missing(v) else str(v)
                           for v in column_values(df, "param_direction")], dtype=object)
    graphed = np.array([str(v) in GRAPH_MODES for v in column_values(df, "graph")], dtype=bool)
    return TrialColumns(time_us=time_us, flops=flops, nbytes=nbytes, tflops=tflops, gbps=gbps,
                        host_ratio=host_ratio, dtypes=dtypes, directions=directions,
                        graphed=graphed)


def _num(df: pd.DataFrame, name: str) -> np.ndarray:
    if name not in df.columns:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
