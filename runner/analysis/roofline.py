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
trials need a CPU calibration. Whatever is missing leaves the fields null and says why in
``roofline_reason``. :func:`annotate` and :func:`store_calibration` never raise: the runner
calls them on every job and a failure here must not lose a measurement.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from runner.analysis.devices import DEFAULT_LAUNCH_US, match_device
from runner.analysis.values import is_missing

log = logging.getLogger(__name__)

ROOFLINE_COLUMNS = ("pct_of_peak", "bound", "roofline_source", "roofline_reason")
CALIBRATION_DIR = "calibration"
#: Environment variable naming the results root when :func:`annotate` is not given one.
RESULTS_ROOT_ENV = "OPSWEEP_RESULTS_ROOT"
LINK_DIRECTIONS = ("h2d", "d2h")
#: Execution modes that replay a captured graph: their launch floor is the graph one.
GRAPH_MODES = ("cuda_graph", "graphed_callable")


@dataclass(frozen=True)
class Ceilings:
    """A device's ceilings and where they came from."""

    device_name: str
    source: str  # "calibration:<slug>" or "fallback:<device>"
    matmul_tflops: dict[str, float] = field(default_factory=dict)
    copy_gbps: float | None = None  # device memory, bytes read + written
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    launch_us: float | None = None
    graph_launch_us: float | None = None  # floor of a replayed CUDA graph, when calibrated
    notes: tuple[str, ...] = ()  # caveats repeated in roofline_reason

    def memory_gbps(self, direction: str | None) -> float | None:
        """Bandwidth ceiling for a trial: host-device link for h2d/d2h copies, else memory."""
        if direction == "h2d":
            return self.h2d_gbps
        if direction == "d2h":
            return self.d2h_gbps
        return self.copy_gbps


# ----------------------------------------------------------------------------- device keys


def slugify(text: str) -> str:
    """Lower-case, ``[a-z0-9-]`` only: safe as a file name on every OS."""
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "unknown"


def device_kind(device: object) -> str:
    """``cpu``, ``cuda``... from a resolved device string such as ``cuda:0``."""
    text = "" if is_missing(device) else str(device)
    return text.split(":")[0].lower() or "unknown"


def device_identity(kind: str, device_name: object, driver_version: object,
                    cpu_model: object) -> tuple[str, str | None]:
    """``(name, driver)`` identifying a device for calibration: GPU name + driver, or CPU model."""
    if kind == "cpu":
        name = cpu_model if not is_missing(cpu_model) else device_name
        return (str(name) if not is_missing(name) else "cpu"), None
    name = None if is_missing(device_name) else str(device_name)
    return name or "", None if is_missing(driver_version) else str(driver_version)


def calibration_slug(kind: str, name: str, driver: str | None) -> str:
    """File stem of a device's calibration: ``<kind>-<name>[-driver-<version>]``."""
    base = f"{kind}-{name}" + (f"-driver-{driver}" if driver else "")
    return slugify(base)


def default_results_root() -> Path:
    """``$OPSWEEP_RESULTS_ROOT`` or ``./results``."""
    return Path(os.environ.get(RESULTS_ROOT_ENV) or "results")


# ----------------------------------------------------------------------------- store


def store_calibration(df: pd.DataFrame, results_root: str | os.PathLike) -> Path | None:
    """Write this device's ceilings from a ``calibrate`` sweep; return the JSON path.

    Writes ``<results_root>/calibration/<slug>.json`` (slug from device kind, name and
    driver; see :func:`calibration_slug`), one file per device found in ``df``; returns the
    path of the first (``None`` if nothing could be stored, with the why logged). Never raises.

    Rows used (``status == "ok"`` only; other rows are ignored):

    * ``op == "matmul"``: per ``dtype``, the **max** ``tflops`` -> ``matmul_tflops[dtype]``;
    * ``op == "copy"`` with ``param_direction == "d2d"``: max ``gbps`` -> ``copy_gbps``
      (the copy op counts bytes read plus bytes written);
    * ``op == "copy"`` with ``param_direction`` ``"h2d"`` / ``"d2h"``: max ``gbps`` ->
      ``h2d_gbps`` / ``d2h_gbps``;
    * ``op == "add"`` with ``shape == [1]`` (``numel == 1``), eager rows (``graph == "none"``,
      ``compile == "none"``, ``streams == 1``) when there are any: the **median** of
      ``time_median_us`` -> ``launch_us``;
    * the same adds with ``graph`` ``cuda_graph``/``graphed_callable``, if any: the median
      -> ``graph_launch_us``, the floor used for trials that replay graphs (optional).

    Ceilings with no rows are stored as null and listed under ``"missing"``.
    """
    try:
        root = Path(results_root) / CALIBRATION_DIR
        ok = df[df["status"].astype(str) == "ok"] if "status" in df.columns else df
        if ok.empty:
            log.warning("store_calibration: no ok rows in the calibrate sweep; nothing stored")
            return None
        first: Path | None = None
        for (kind, name, driver), rows in _group_by_device(ok):
            record = _calibration_record(rows, kind, name, driver)
            root.mkdir(parents=True, exist_ok=True)
            path = root / f"{record['slug']}.json"
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
            tmp.replace(path)
            _CACHE.clear()
            first = first or path
            if record["missing"]:
                log.warning("store_calibration: %s lacks %s", path, ", ".join(record["missing"]))
        return first
    except Exception as exc:  # never lose a sweep over its calibration
        log.warning("store_calibration failed: %s: %s", type(exc).__name__, exc)
        return None


def _device_keys(df: pd.DataFrame) -> list[tuple[str, str, str | None]]:
    """``(kind, name, driver)`` of every row (see :func:`device_identity`)."""
    cache: dict[tuple, tuple[str, str, str | None]] = {}
    out = []
    for raw in zip(_col(df, "device"), _col(df, "device_name"), _col(df, "driver_version"),
                   _col(df, "cpu_model"), strict=True):
        try:
            key = cache[raw]
        except KeyError:
            kind = device_kind(raw[0])
            key = cache[raw] = (kind, *device_identity(kind, *raw[1:]))
        except TypeError:  # unhashable cell
            kind = device_kind(raw[0])
            key = (kind, *device_identity(kind, *raw[1:]))
        out.append(key)
    return out


def _group_by_device(df: pd.DataFrame):
    keys = _device_keys(df)
    for key in dict.fromkeys(keys):
        yield key, df[np.array([k == key for k in keys], dtype=bool)]


def _col(df: pd.DataFrame, name: str) -> list:
    return df[name].astype(object).tolist() if name in df.columns else [None] * len(df)


def _calibration_record(rows: pd.DataFrame, kind: str, name: str, driver: str | None) -> dict:
    op = rows["op"].astype(str) if "op" in rows.columns else pd.Series("", index=rows.index)
    direction = rows["param_direction"].astype(str) if "param_direction" in rows.columns \
        else pd.Series("", index=rows.index)
    matmul = rows[op == "matmul"]
    peaks: dict[str, float] = {}
    if len(matmul) and "tflops" in rows.columns:
        for dtype, group in matmul.groupby(matmul["dtype"].astype(str)):
            value = pd.to_numeric(group["tflops"], errors="coerce").max()
            if _finite_pos(value):
                peaks[dtype] = float(value)

    def max_gbps(which: str) -> float | None:
        sel = rows[(op == "copy") & (direction == which)]
        value = pd.to_numeric(sel["gbps"], errors="coerce").max() if len(sel) else np.nan
        return float(value) if _finite_pos(value) else None

    launch = _launch_us(rows[op == "add"])
    graph_launch = _launch_us(rows[op == "add"], graphed=True)
    record: dict[str, Any] = {
        "schema": 1, "device_kind": kind, "device_name": name, "driver_version": driver,
        "slug": calibration_slug(kind, name, driver),
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "matmul_tflops": peaks, "copy_gbps": max_gbps("d2d"), "h2d_gbps": max_gbps("h2d"),
        "d2h_gbps": max_gbps("d2h"), "launch_us": launch, "graph_launch_us": graph_launch,
    }
    for meta in ("sweep_id", "hostname", "torch_version", "cuda_version", "compute_capability",
                 "sm_count", "git_commit"):
        if meta in rows.columns and len(rows):
            value = rows[meta].iloc[0]
            record[meta] = None if is_missing(value) else _plain(value)
    missing = [] if peaks else ["matmul_tflops (no ok op=matmul rows)"]
    for key, label in (("copy_gbps", "d2d"), ("h2d_gbps", "h2d"), ("d2h_gbps", "d2h")):
        if record[key] is None and not (kind == "cpu" and label != "d2d"):
            missing.append(f"{key} (no ok op=copy param_direction={label} rows)")
    if launch is None:
        missing.append("launch_us (no ok op=add shape=[1] rows)")
    record["missing"] = missing
    return record


def _launch_us(add: pd.DataFrame, *, graphed: bool = False) -> float | None:
    """Median time of one-element adds: eager ones (any, if none is eager), or graphed ones."""
    if add.empty or "time_median_us" not in add.columns:
        return None
    if "numel" in add.columns:
        one = add[pd.to_numeric(add["numel"], errors="coerce") == 1]
    elif "shape_str" in add.columns:
        one = add[add["shape_str"].astype(str) == "1"]
    else:
        return None
    plain = one
    if "compile" in plain.columns:
        plain = plain[plain["compile"].astype(str) == "none"]
    if "streams" in plain.columns:
        plain = plain[pd.to_numeric(plain["streams"], errors="coerce").fillna(1) == 1]
    if "graph" in plain.columns:
        is_graph = plain["graph"].astype(str).isin(GRAPH_MODES)
        plain = plain[is_graph] if graphed else plain[~is_graph]
    elif graphed:
        return None
    chosen = plain if len(plain) or graphed else one
    value = pd.to_numeric(chosen["time_median_us"], errors="coerce").median()
    return float(value) if _finite_pos(value) else None


def _plain(value: object) -> object:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value if isinstance(value, (int, float, bool, str)) else str(value)


# ----------------------------------------------------------------------------- lookup

_CACHE: dict[tuple, tuple[float, dict | None]] = {}


def _read_json(path: Path) -> dict | None:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    key = (str(path),)
    hit = _CACHE.get(key)
    if hit and hit[0] == mtime:
        return hit[1]
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        log.warning("unreadable calibration %s: %s", path, exc)
        data = None
    _CACHE[key] = (mtime, data)
    return data


def load_calibration(kind: str, name: str, driver: str | None,
                     results_root: str | os.PathLike | None = None) -> tuple[dict | None, str]:
    """The stored calibration for a device, and a note.

    Exact (name, driver) first; else the newest calibration of the same device name with
    another driver, noted as such (a driver update rarely moves ceilings much).
    """
    root = Path(results_root) if results_root is not None else default_results_root()
    folder = root / CALIBRATION_DIR
    exact = folder / f"{calibration_slug(kind, name, driver)}.json"
    data = _read_json(exact)
    if data:
        return data, ""
    prefix = calibration_slug(kind, name, None)
    try:
        others = sorted(folder.glob(f"{prefix}*.json"), key=lambda p: p.stat().st_mtime,
                        reverse=True)
    except OSError:
        others = []
    for path in others:
        data = _read_json(path)
        if data and data.get("device_name") == name:
            return data, (f"calibrated with driver {data.get('driver_version')}, "
                          f"this trial ran driver {driver}")
    return None, ""


def resolve_ceilings(kind: str, name: str, driver: str | None,
                     results_root: str | os.PathLike | None = None
                     ) -> tuple[Ceilings | None, str]:
    """This device's ceilings (calibration, else fallback table), or ``None`` and why not."""
    data, note = load_calibration(kind, name, driver, results_root)
    if data:
        notes = tuple(n for n in (note,) if n)
        launch = data.get("launch_us")
        if launch is None:
            notes += ("no launch floor in the calibration: overhead regime not tested",)
        return Ceilings(
            device_name=name, source=f"calibration:{data.get('slug')}",
            matmul_tflops={k: float(v) for k, v in (data.get("matmul_tflops") or {}).items()
                           if _finite_pos(v)},
            copy_gbps=data.get("copy_gbps"), h2d_gbps=data.get("h2d_gbps"),
            d2h_gbps=data.get("d2h_gbps"), launch_us=launch,
            graph_launch_us=data.get("graph_launch_us"), notes=notes), ""
    if kind == "cpu":
        return None, (f"no CPU calibration for {name!r}: run the calibrate experiment on "
                      "this CPU (python -m runner experiment=calibrate device=cpu)")
    spec = match_device(name)
    if spec is None:
        shown = name or "(no device_name)"
        return None, (f"no calibration and no fallback entry for {shown!r}: run the "
                      "calibrate experiment on this device")
    notes: tuple[str, ...] = ("fallback ceilings (" + spec.source.split(":")[0]
                              + "), calibrate to measure",)
    launch = spec.launch_us
    if launch is None:
        launch = DEFAULT_LAUNCH_US
        notes += (f"launch floor {DEFAULT_LAUNCH_US:g} us assumed",)
    return Ceilings(device_name=name, source=f"fallback:{spec.name}",
                    matmul_tflops=dict(spec.matmul_tflops), copy_gbps=spec.copy_gbps,
                    h2d_gbps=spec.h2d_gbps, d2h_gbps=spec.d2h_gbps, launch_us=launch,
                    graph_launch_us=spec.graph_launch_us, notes=notes), ""


def ceilings_for(df: pd.DataFrame, results_root: str | os.PathLike | None = None
                 ) -> list[Ceilings]:
    """The ceilings of every device in ``df`` that has some (for plots)."""
    out = []
    if df.empty:
        return out
    for (kind, name, driver), _ in _group_by_device(df):
        ceil, _why = resolve_ceilings(kind, name, driver, results_root)
        if ceil is not None:
            out.append(ceil)
    return out


# ----------------------------------------------------------------------------- annotate


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

    status = np.array(_col(df, "status"), dtype=object)
    not_ok = np.array([s != "ok" and not is_missing(s) for s in status], dtype=bool)
    for i in np.flatnonzero(not_ok):
        reason[i] = f"status={status[i]}: not timed"

    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(_device_keys(df)):
        groups.setdefault(key, []).append(i)
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
    dtypes = np.array([None if is_missing(v) else str(v) for v in _col(df, "dtype")], dtype=object)
    directions = np.array([None if is_missing(v) else str(v)
                           for v in _col(df, "param_direction")], dtype=object)
    graphed = np.array([str(v) in GRAPH_MODES for v in _col(df, "graph")], dtype=bool)

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
        _classify(rows, ceil, time_us, flops, nbytes, tflops, gbps, dtypes, directions,
                  graphed, host_ratio, pct, bound, reason)
    return _assign(out, pct, bound, source, reason)


_REGIMES = ("compute", "memory", "overhead")
#: ``host_overhead_ratio`` (loop time / device time) from which the host sets the pace.
#: GPU-paced trials measure 1.00-1.05 (the loop's batch edge, stream vs graph ordering); at
#: 1.2 the GPU sat idle for a sixth of the loop, waiting on the host: well clear of noise
#: and of L2 warmth effects, and far below what launch-bound ops read (1.5-5×).
OVERHEAD_RATIO = 1.2


def _classify(rows: np.ndarray, ceil: Ceilings, time_us, flops, nbytes, tflops, gbps,
              dtypes, directions, graphed, host_ratio, pct, bound, reason) -> None:
    """Fill the roofline fields of ``rows`` (all on one device) in place, vectorised.

    Where the trial has a device time, the measured ``host_overhead_ratio`` decides the
    overhead regime, whatever the launch floor says: at or above :data:`OVERHEAD_RATIO` the
    trial is ``overhead`` (pct_of_peak: the launch floor over its loop time); below it the
    launch floor is out of the contest and the trial is compute- or memory-bound."""
    suffix = ("; " + "; ".join(ceil.notes)) if ceil.notes else ""
    t, f, q = time_us[rows], flops[rows], nbytes[rows]
    dt, direction = dtypes[rows], directions[rows]
    peak = np.array([_pos_or_nan(ceil.matmul_tflops.get(d)) if d else np.nan for d in dt])
    bw_by_dir = {d: _pos_or_nan(ceil.memory_gbps(d)) for d in set(direction)}
    bw = np.array([bw_by_dir[d] for d in direction])
    eager_floor, graph_floor = _pos_or_nan(ceil.launch_us), _pos_or_nan(ceil.graph_launch_us)
    in_graph = graphed[rows]
    launch = np.where(in_graph & np.isfinite(graph_floor), graph_floor, eager_floor)
    eager_floor_for_graph = in_graph & ~np.isfinite(graph_floor)
    has_f = np.isfinite(f) & (f > 0)
    has_q = np.isfinite(q) & (q > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.stack([
            np.where(has_f, tflops[rows] / peak, -np.inf),
            np.where(has_q, gbps[rows] / bw, -np.inf),
            np.where(np.isfinite(launch), launch / t, -np.inf),
        ])
    frac = np.where(np.isnan(frac), -np.inf, frac)
    ratio = host_ratio[rows]
    measured = np.isfinite(ratio)
    host_paced = measured & (ratio >= OVERHEAD_RATIO)
    frac[2] = np.where(measured & ~host_paced, -np.inf, frac[2])
    problems = np.full(len(rows), None, dtype=object)
    no_time = ~(np.isfinite(t) & (t > 0))
    unknown = ~np.isfinite(f) & ~np.isfinite(q)
    no_peak = has_f & ~np.isfinite(peak)
    no_bw = has_q & ~np.isfinite(bw)
    for j in np.flatnonzero(no_bw):
        which = direction[j] if direction[j] in LINK_DIRECTIONS else "d2d copy"
        problems[j] = f"no {which} bandwidth in {ceil.source}{suffix}"
    for j in np.flatnonzero(no_peak):
        problems[j] = (f"no matmul peak for dtype {dt[j]} in {ceil.source}: calibrate "
                       f"{dt[j]} to classify this trial{suffix}")
    problems[unknown] = "flops and bytes_moved unknown: cannot place on the roofline"
    problems[no_time] = "no time_per_op_us / time_median_us: cannot place on the roofline"
    problems[host_paced & ~no_time] = None  # measured: no ceiling needed to say overhead
    best = np.where(host_paced, 2, np.argmax(frac, axis=0))
    top = frac[best, np.arange(len(rows))]
    none_apply = ~np.isfinite(top) & (problems == None) & ~host_paced  # noqa: E711
    problems[none_apply] = f"no ceiling applies (no flops, bytes or launch floor){suffix}"
    good = problems == None  # noqa: E711
    reason[rows[~good]] = problems[~good]
    for j in np.flatnonzero(good):
        regime = _REGIMES[best[j]]
        i = rows[j]
        bound[i] = regime
        pct[i] = 100.0 * top[j] if np.isfinite(top[j]) else np.nan
        extra = "; no CUDA-graph launch floor calibrated: eager floor used" \
            if eager_floor_for_graph[j] and regime == "overhead" else ""
        why = _why(regime, frac[:, j], peak[j], bw[j], launch[j], f[j], q[j])
        if host_paced[j]:
            why = (f"host-paced: loop time {ratio[j]:.3g}x the device time (>= "
                   f"{OVERHEAD_RATIO:g})" + (f"; at {top[j] * 100:.3g}% of the "
                                              f"{launch[j]:.3g} us launch floor"
                                              if np.isfinite(top[j]) else ""))
        elif measured[j]:
            why += f"; GPU-paced: loop time {ratio[j]:.3g}x the device time"
        reason[i] = why + extra + suffix


def _pos_or_nan(value: object) -> float:
    return float(value) if _finite_pos(value) else np.nan  # type: ignore[arg-type]


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


def _num(df: pd.DataFrame, name: str) -> np.ndarray:
    if name not in df.columns:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _finite_pos(value: object) -> bool:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return math.isfinite(v) and v > 0


__all__ = ["Ceilings", "annotate", "store_calibration", "resolve_ceilings", "ceilings_for",
           "load_calibration", "calibration_slug", "ROOFLINE_COLUMNS"]
