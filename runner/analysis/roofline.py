"""Roofline annotation: how close each trial came to the device's ceilings, and which bounds it.

Why: a time alone does not say whether an op is good. The roofline does: with the
device's measured ceilings (matmul peak P per dtype, memory bandwidth B, launch-latency
floor L) the best possible time of a trial doing F FLOPs and moving Q bytes is

    t_best = max(L, F / P, Q / B)

and the term that wins names the regime, the ``bound`` column:

* ``overhead``: the host sets the pace. Measured where the trial has a device time
  (``host_overhead_ratio`` = loop time / device time >= :data:`OVERHEAD_RATIO`), whatever
  the launch floor says; else L wins: the work would finish faster than one launch, so the
  runtime stays near the launch floor and does not scale with size;
* ``memory``: Q/B wins, i.e. arithmetic intensity F/Q is below the ridge P/B;
* ``compute``: F/P wins, intensity above the ridge.

``pct_of_peak = 100 * t_best / t_measured``: for a compute-bound trial its TFLOP/s as a
share of P, for a memory-bound one its GB/s as a share of B, for an overhead-bound one
L as a share of its time. Above 100 means the trial beat the ceiling used (data in L2
beats DRAM bandwidth, CUDA graphs beat the eager launch floor, or the calibration is stale).
Rates come from the ``tflops``/``gbps`` columns (per op, at the device time where the trial
has one, else at ``time_per_op_us``), falling back to ``flops``/``bytes_moved`` over that time;
the launch floor is held against the loop time (``time_per_op_us``). Copies with
``param_direction`` h2d/d2h are held against the host-device bandwidth instead of B.

Ceilings come from ``<results_root>/calibration/<slug>.json`` written by
:func:`store_calibration` after a ``calibrate`` sweep (``roofline_source="calibration:<slug>"``),
else from the fallback table in ``runner.analysis.devices`` (``"fallback:<device>"``); CPU
trials need a CPU calibration. This module classifies; the ceilings are resolved by
:mod:`runner.analysis.ceilings` and stored by :mod:`runner.analysis.calibration`, whose
public names are importable from here too (``from runner.analysis.roofline import ...``);
the columns it reads are gathered by :mod:`runner.analysis.roofline_columns`.
Whatever is missing leaves the fields null and says why in ``roofline_reason``.
:func:`annotate` and :func:`store_calibration` never raise: the runner calls them on every
job and a failure here must not lose a measurement.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from runner.analysis.calibration import (
    CALIBRATION_DIR,
    RESULTS_ROOT_ENV,
    calibration_slug,
    column_values,
    default_results_root,
    device_keys,
    load_calibration,
    store_calibration,
)
from runner.analysis.ceilings import Ceilings, ceilings_for, resolve_ceilings
from runner.analysis.roofline_columns import TrialColumns, trial_columns
from runner.analysis.values import finite_positive, is_missing
from runner.core.host_link import crosses_host_link

log = logging.getLogger(__name__)

ROOFLINE_COLUMNS = ("pct_of_peak", "bound", "roofline_source", "roofline_reason")


def annotate(df: pd.DataFrame, results_root: str | os.PathLike | None = None) -> pd.DataFrame:
    """Return ``df`` with ``pct_of_peak``, ``bound``, ``roofline_source``, ``roofline_reason``.

    ``results_root`` is where ``calibration/`` lives (default ``$OPSWEEP_RESULTS_ROOT`` or
    ``./results``). Never raises: on any unexpected failure the four columns are null and
    ``roofline_reason`` names the failure. Vectorised per device; cheap on 100k rows.
    """
    try:
        return _annotate(df, results_root)
    except Exception as exc:  # the runner must never lose rows over the roofline
        log.warning("roofline annotate failed: %s: %s", type(exc).__name__, exc)
        try:
            out = df.copy()
            out["pct_of_peak"] = np.nan
            out["bound"] = None
            out["roofline_source"] = None
            out["roofline_reason"] = f"roofline failed: {type(exc).__name__}: {exc}"
            return out
        except Exception:
            return df


def _annotate(df: pd.DataFrame, results_root: str | os.PathLike | None) -> pd.DataFrame:
    n = len(df)
    out = df.copy()
    pct = np.full(n, np.nan)
    bound = np.full(n, None, dtype=object)
    source = np.full(n, None, dtype=object)
    reason = np.full(n, None, dtype=object)
    if n == 0:
        return _assign(out, pct, bound, source, reason)

    status = np.array(column_values(df, "status"), dtype=object)
    not_ok = np.array([s != "ok" and not is_missing(s) for s in status], dtype=bool)
    for i in np.flatnonzero(not_ok):
        reason[i] = f"status={status[i]}: not timed"

    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(device_keys(df)):
        groups.setdefault(key, []).append(i)
    columns = trial_columns(df)

    for key, idx in groups.items():
        rows = np.asarray(idx)
        rows = rows[~not_ok[rows]]
        if not len(rows):
            continue
        kind, name, driver = key
        ceil, why = resolve_ceilings(kind, name, driver, results_root)
        if ceil is None:
            reason[rows] = why
            continue
        source[rows] = ceil.source
        pct[rows], bound[rows], reason[rows] = _classify(rows, ceil, columns)
    return _assign(out, pct, bound, source, reason)


_REGIMES = ("compute", "memory", "overhead")
#: ``host_overhead_ratio`` (loop time / device time) from which the host sets the pace.
#: GPU-paced trials measure 1.00-1.05 (the loop's batch edge, stream vs graph ordering); at
#: 1.2 the GPU sat idle for a sixth of the loop, waiting on the host: well clear of noise
#: and of L2 warmth effects, and far below what launch-bound ops read (1.5-5×).
OVERHEAD_RATIO = 1.2


@dataclass(frozen=True)
class _Held:
    """One device's rows (``rows``, indices into the frame) and the ceilings each is held
    against; every array runs over ``rows``."""

    rows: np.ndarray
    flops: np.ndarray
    nbytes: np.ndarray
    peak: np.ndarray  # matmul TFLOP/s of the row's dtype (nan: none calibrated)
    bw: np.ndarray  # GB/s of the row's copy direction, else of memory
    launch: np.ndarray  # the launch floor, µs: the graph floor for a graphed trial
    eager_floor_for_graph: np.ndarray  # graphed, but no graph floor: the eager one stands in
    #: share of each ceiling reached, rows compute, memory, launch; -inf: does not apply
    frac: np.ndarray
    ratio: np.ndarray  # host_overhead_ratio (nan: no device time)
    measured: np.ndarray
    host_paced: np.ndarray


def _classify(rows: np.ndarray, ceil: Ceilings,
              columns: TrialColumns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``pct_of_peak``, ``bound`` and ``roofline_reason`` of ``rows`` (all on one device),
    each an array over ``rows``, vectorised.

    Where the trial has a device time, the measured ``host_overhead_ratio`` decides the
    overhead regime, whatever the launch floor says: at or above :data:`OVERHEAD_RATIO` the
    trial is ``overhead`` (pct_of_peak: the launch floor over its loop time); below it the
    launch floor is out of the contest and the trial is compute- or memory-bound."""
    suffix = ("; " + "; ".join(ceil.notes)) if ceil.notes else ""
    held = _held(rows, ceil, columns)
    problems = _problems(held, ceil, columns.dtypes[rows], columns.directions[rows],
                         columns.time_us[rows], suffix)
    best = np.where(held.host_paced, 2, np.argmax(held.frac, axis=0))
    top = held.frac[best, np.arange(len(rows))]
    none_apply = ~np.isfinite(top) & (problems == None) & ~held.host_paced  # noqa: E711
    problems[none_apply] = f"no ceiling applies (no flops, bytes or launch floor){suffix}"
    good = problems == None  # noqa: E711
    pct = np.full(len(rows), np.nan)
    bound = np.full(len(rows), None, dtype=object)
    reason = problems  # a row that cannot be placed keeps its problem as the reason
    for j in np.flatnonzero(good):
        bound[j] = _REGIMES[best[j]]
        pct[j] = 100.0 * top[j] if np.isfinite(top[j]) else np.nan
        reason[j] = _reason(held, j, bound[j], top[j]) + suffix
    return pct, bound, reason


def _held(rows: np.ndarray, ceil: Ceilings, columns: TrialColumns) -> _Held:
    """Each row's ceilings and the share of each it reached."""
    t, f, q = columns.time_us[rows], columns.flops[rows], columns.nbytes[rows]
    direction = columns.directions[rows]
    peak = np.array([_pos_or_nan(ceil.matmul_tflops.get(d)) if d else np.nan
                     for d in columns.dtypes[rows]])
    bw_by_dir = {d: _pos_or_nan(ceil.memory_gbps(d)) for d in set(direction)}
    bw = np.array([bw_by_dir[d] for d in direction])
    eager_floor, graph_floor = _pos_or_nan(ceil.launch_us), _pos_or_nan(ceil.graph_launch_us)
    in_graph = columns.graphed[rows]
    launch = np.where(in_graph & np.isfinite(graph_floor), graph_floor, eager_floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.stack([
            np.where(np.isfinite(f) & (f > 0), columns.tflops[rows] / peak, -np.inf),
            np.where(np.isfinite(q) & (q > 0), columns.gbps[rows] / bw, -np.inf),
            np.where(np.isfinite(launch), launch / t, -np.inf),
        ])
    frac = np.where(np.isnan(frac), -np.inf, frac)
    ratio = columns.host_ratio[rows]
    measured = np.isfinite(ratio)
    host_paced = measured & (ratio >= OVERHEAD_RATIO)
    # a measured GPU-paced trial: the launch floor is out of the contest
    frac[2] = np.where(measured & ~host_paced, -np.inf, frac[2])
    return _Held(rows=rows, flops=f, nbytes=q, peak=peak, bw=bw, launch=launch,
                 eager_floor_for_graph=in_graph & ~np.isfinite(graph_floor), frac=frac,
                 ratio=ratio, measured=measured, host_paced=host_paced)


def _problems(held: _Held, ceil: Ceilings, dt: np.ndarray, direction: np.ndarray,
              t: np.ndarray, suffix: str) -> np.ndarray:
    """Why each row cannot be placed on the roofline (None: it can), later reasons winning."""
    f, q = held.flops, held.nbytes
    problems = np.full(len(held.rows), None, dtype=object)
    no_time = ~(np.isfinite(t) & (t > 0))
    for j in np.flatnonzero(np.isfinite(q) & (q > 0) & ~np.isfinite(held.bw)):
        which = direction[j] if crosses_host_link(direction[j]) else "d2d copy"
        problems[j] = f"no {which} bandwidth in {ceil.source}{suffix}"
    for j in np.flatnonzero(np.isfinite(f) & (f > 0) & ~np.isfinite(held.peak)):
        problems[j] = (f"no matmul peak for dtype {dt[j]} in {ceil.source}: calibrate "
                       f"{dt[j]} to classify this trial{suffix}")
    problems[~np.isfinite(f) & ~np.isfinite(q)] = \
        "flops and bytes_moved unknown: cannot place on the roofline"
    problems[no_time] = "no time_per_op_us / time_median_us: cannot place on the roofline"
    problems[held.host_paced & ~no_time] = None  # measured: no ceiling needed to say overhead
    return problems


def _reason(held: _Held, j: int, regime: str, top: float) -> str:
    """Row ``j``'s ``roofline_reason``: why ``regime`` won, with the numbers that decided."""
    extra = "; no CUDA-graph launch floor calibrated: eager floor used" \
        if held.eager_floor_for_graph[j] and regime == "overhead" else ""
    launch, ratio = held.launch[j], held.ratio[j]
    if held.host_paced[j]:
        return (f"host-paced: loop time {ratio:.3g}x the device time (>= {OVERHEAD_RATIO:g})"
                + (f"; at {top * 100:.3g}% of the {launch:.3g} us launch floor"
                   if np.isfinite(top) else "") + extra)
    why = _why(regime, held.frac[:, j], held.peak[j], held.bw[j], launch, held.flops[j],
               held.nbytes[j])
    if held.measured[j]:
        why += f"; GPU-paced: loop time {ratio:.3g}x the device time"
    return why + extra


def _pos_or_nan(value: object) -> float:
    return float(value) if finite_positive(value) else np.nan  # type: ignore[arg-type]


def _why(regime: str, frac: np.ndarray, peak: float, bw: float, launch: float,
         f: float, q: float) -> str:
    """One line on why this regime won, with the numbers that decided it."""
    if regime == "overhead":
        t_roof = max(f / peak * 1e-6 if np.isfinite(frac[0]) else 0.0,
                     q / bw * 1e-3 if np.isfinite(frac[1]) else 0.0)
        return (f"roofline time {t_roof:.3g} us < launch floor {launch:.3g} us; "
                f"at {frac[2] * 100:.3g}% of the floor's speed")
    finite_f, finite_q = np.isfinite(f), np.isfinite(q) and q > 0
    ridge = peak * 1e3 / bw if np.isfinite(peak) and np.isfinite(bw) else None
    if regime == "memory":
        ai = f / q if finite_f and finite_q else 0.0
        side = f" < ridge {ridge:.3g}" if ridge else ""
        return f"intensity {ai:.3g} FLOP/B{side}; {frac[1] * 100:.3g}% of {bw:.4g} GB/s"
    ai = f / q if finite_q else math.inf
    side = f" >= ridge {ridge:.3g}" if ridge else ""
    return f"intensity {ai:.3g} FLOP/B{side}; {frac[0] * 100:.3g}% of {peak:.4g} TFLOP/s"


def _assign(out: pd.DataFrame, pct, bound, source, reason) -> pd.DataFrame:
    out["pct_of_peak"] = pct.astype(float)
    out["bound"] = pd.array(bound, dtype="object")
    out["roofline_source"] = pd.array(source, dtype="object")
    out["roofline_reason"] = pd.array(reason, dtype="object")
    return out


__all__ = ["CALIBRATION_DIR", "Ceilings", "OVERHEAD_RATIO", "RESULTS_ROOT_ENV", "ROOFLINE_COLUMNS",
           "annotate", "calibration_slug", "ceilings_for", "default_results_root",
           "load_calibration", "resolve_ceilings", "store_calibration"]
