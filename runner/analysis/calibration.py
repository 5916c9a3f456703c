"""Calibration files: which device a row ran on, and its measured ceilings on disk.

Why: the roofline (:mod:`runner.analysis.roofline`) needs each device's ceilings, and the
right numbers are measured ones. A ``calibrate`` sweep measures them; :func:`store_calibration`
keeps them as ``<results_root>/calibration/<slug>.json`` (one file per device: GPU name +
driver, or CPU model) and :func:`load_calibration` finds them again for any later row of the
same device. Storing never raises: the runner calls it at the end of a sweep and a failure
here must not lose a measurement.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from runner.analysis.values import finite_positive, is_missing
from runner.core.axes import GraphMode

log = logging.getLogger(__name__)

CALIBRATION_DIR = "calibration"
#: Environment variable naming the results root when none is given.
RESULTS_ROOT_ENV = "OPSWEEP_RESULTS_ROOT"
#: Execution modes that replay a captured graph (every ``graph`` axis value but ``none``):
#: their launch floor is the graph one.
GRAPH_MODES = tuple(mode.value for mode in GraphMode if mode is not GraphMode.none)


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


def device_keys(df: pd.DataFrame) -> list[tuple[str, str, str | None]]:
    """``(kind, name, driver)`` of every row (see :func:`device_identity`)."""
    cache: dict[tuple, tuple[str, str, str | None]] = {}
    out = []
    columns = ("device", "device_name", "driver_version", "cpu_model")
    for raw in zip(*(column_values(df, c) for c in columns), strict=True):
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


def group_by_device(df: pd.DataFrame):
    """``((kind, name, driver), rows)`` for every device in ``df``, in order of appearance."""
    keys = device_keys(df)
    for key in dict.fromkeys(keys):
        yield key, df[np.array([k == key for k in keys], dtype=bool)]


def column_values(df: pd.DataFrame, name: str) -> list:
    """A column as a list of Python objects; all None when ``df`` lacks it."""
    return df[name].astype(object).tolist() if name in df.columns else [None] * len(df)


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
        for (kind, name, driver), rows in group_by_device(ok):
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


def _calibration_record(rows: pd.DataFrame, kind: str, name: str, driver: str | None) -> dict:
    op = rows["op"].astype(str) if "op" in rows.columns else pd.Series("", index=rows.index)
    direction = rows["param_direction"].astype(str) if "param_direction" in rows.columns \
        else pd.Series("", index=rows.index)
    matmul = rows[op == "matmul"]
    peaks: dict[str, float] = {}
    if len(matmul) and "tflops" in rows.columns:
        for dtype, group in matmul.groupby(matmul["dtype"].astype(str)):
            value = pd.to_numeric(group["tflops"], errors="coerce").max()
            if finite_positive(value):
                peaks[dtype] = float(value)

    def max_gbps(which: str) -> float | None:
        sel = rows[(op == "copy") & (direction == which)]
        value = pd.to_numeric(sel["gbps"], errors="coerce").max() if len(sel) else np.nan
        return float(value) if finite_positive(value) else None

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
    return float(value) if finite_positive(value) else None


def _plain(value: object) -> object:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value if isinstance(value, (int, float, bool, str)) else str(value)


# ----------------------------------------------------------------------------- load

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

