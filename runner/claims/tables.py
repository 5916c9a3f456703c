"""Markdown tables of one experiment's rows: every ok trial, the trials that did not run, the
declared pivots, and where it was all measured. Rendering only: no verdicts here."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from runner.analysis.selection import canonical, column_for, ok_rows, select
from runner.analysis.values import fmt_num, fmt_time_us, is_missing, markdown_table
from runner.claims.bespoke import ALLOCATOR_COLUMN, allocator_steps
from runner.claims.engine import MIB, aggregate, fmt_metric, metric_for
from runner.claims.spec import Pivot
from runner.core.axes import mode_label

Cell = Callable[[pd.Series], str]


def _params(row: pd.Series) -> str:
    text = row.get("params_json")
    try:
        params = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        params = {}
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()))


def _device(row: pd.Series) -> str:
    threads = row.get("num_threads")
    return str(row.get("device")) + ("" if is_missing(threads) else f" ({int(threads)} thr)")


def _mib(v: Any) -> str:
    return "-" if is_missing(v) else fmt_num(float(v) / MIB)


def _extra_columns(df: pd.DataFrame, metrics: Iterable[str]) -> list[tuple[str, Cell]]:
    """The columns a table shows beyond the common ones, as (header, cell function). Peak
    memory and rel_error are on nearly every row: shown where a claim or pivot reads them."""
    metrics = {m for m in metrics if m}
    cols: list[tuple[str, Cell]] = []

    def has(col: str) -> bool:
        return col in df and df[col].notna().any()

    streams = "streams" in df and (pd.to_numeric(df["streams"], errors="coerce") > 1).any()
    if has("time_per_op_us") and streams:
        cols.append(("loop per op", lambda r: fmt_time_us(r.get("time_per_op_us"))))
    if has("gpu_time_us"):
        cols.append(("device time", lambda r: fmt_time_us(r.get("gpu_time_us"))))
        if streams:
            cols.append(("device per op", lambda r: fmt_time_us(r.get("gpu_time_per_op_us"))))
    if has("peak_allocated_bytes") and metrics & {"peak_allocated_bytes", "peak_reserved_bytes"}:
        cols.append(("peak alloc MiB", lambda r: _mib(r.get("peak_allocated_bytes"))))
        cols.append(("peak reserved MiB", lambda r: _mib(r.get("peak_reserved_bytes"))))
    if has("recompile_count"):
        cols.append(("recompiles", lambda r: fmt_num(r.get("recompile_count"))))
        cols.append(("graph breaks", lambda r: fmt_num(r.get("graph_break_count"))))
    if has("compile_time_s"):
        cols.append(("compile s", lambda r: fmt_num(r.get("compile_time_s"))))
    if has("capture_time_s"):
        cols.append(("capture s", lambda r: fmt_num(r.get("capture_time_s"))))
    if has("rel_error") and "rel_error" in metrics:
        cols.append(("rel_error", lambda r: fmt_num(r.get("rel_error"))))
    allocator = [c for c in df.columns if ALLOCATOR_COLUMN.match(str(c)) and has(c)]
    if allocator:
        for kind in ("allocated", "reserved"):
            cols.append((f"{kind} MiB, steps 1/2/3",
                         lambda r, k=kind: " / ".join(
                             _mib(step.get(k)) for _, step in sorted(allocator_steps(r).items()))
                         or "-"))
    for col in df.columns:
        if str(col).startswith("extra_") and col not in allocator and has(col):
            cols.append((str(col)[len("extra_"):], lambda r, c=col: fmt_num(r.get(c))))
    return cols


def results_table(df: pd.DataFrame, metrics: Iterable[str] = ()) -> str:
    """The ok rows of one experiment; ``metrics`` (those its claims read) pick extra columns."""
    ok = ok_rows(df)
    if ok.empty:
        return "_No trial ran (ok) in this experiment's results._"
    extra = _extra_columns(ok, metrics)
    headers = ["op", "params", "dtype", "shape", "device", "mode", "loop median",
               "TFLOP/s", "GB/s"] + [h for h, _ in extra]
    rows = []
    for _, r in ok.iterrows():
        rows.append([r.get("op"), _params(r), r.get("dtype"), r.get("shape_str"), _device(r),
                     mode_label(r), fmt_time_us(r.get("time_median_us")), fmt_num(r.get("tflops")),
                     fmt_num(r.get("gbps"))] + [f(r) for _, f in extra])
    return markdown_table(headers, rows)


def not_run_table(df: pd.DataFrame) -> str:
    bad = df[df["status"].astype(str) != "ok"] if "status" in df else df.iloc[0:0]
    if bad.empty:
        return ""
    rows = []
    for _, r in bad.iterrows():
        reason = "" if is_missing(r.get("reason")) else str(r.get("reason")).splitlines()[0]
        rows.append([r.get("op"), _params(r), r.get("dtype"), r.get("shape_str"), _device(r),
                     mode_label(r), r.get("status"), reason[:200]])
    return markdown_table(["op", "params", "dtype", "shape", "device", "mode", "status",
                           "reason"], rows)


def pivot_table(df: pd.DataFrame, pivot: Pivot) -> str:
    """A declared pivot: its time or metric (``runner.claims.engine.metric_for``) by the
    ``rows`` columns (× ``columns``), in the order the values first appear; empty when no ok
    row matches."""
    rows = select(ok_rows(df), pivot.where)
    metric = metric_for(pivot, rows)
    keys = [column_for(rows.columns, k) for k in pivot.rows]
    across = column_for(rows.columns, pivot.columns) if pivot.columns else None
    if rows.empty or None in keys or (pivot.columns and across is None):
        return ""

    def text(value: Any) -> str:
        value = canonical(value)
        return "null" if value is None else str(value).lower() if isinstance(value, bool) \
            else str(value)

    labels = rows[keys].apply(lambda r: tuple(text(v) for v in r), axis=1)
    heads = rows[across].map(text) if across else pd.Series("", index=rows.index)
    out = []
    for label in dict.fromkeys(labels):
        at = rows[labels == label]
        out.append([*label] + [fmt_metric(metric, aggregate(
            at[heads[at.index] == head], metric, pivot.aggregate))
            for head in dict.fromkeys(heads)])
    columns = [f"{pivot.columns} = {h}" for h in dict.fromkeys(heads)] if across else [
        metric]
    return markdown_table([*pivot.rows, *columns], out)


def _unique(df: pd.DataFrame, col: str) -> list[str]:
    if col not in df:
        return []
    out = []
    for v in dict.fromkeys(df[col].dropna()):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if str(v) not in ("", "nan", "None"):
            out.append(str(v))
    return out


def environment_line(df: pd.DataFrame) -> str:
    """Where, with what and when the experiment's rows were measured."""
    parts = []
    gpu = select(df, {"device": "cuda"}) if "device" in df else df.iloc[0:0]
    if not gpu.empty:
        text = ", ".join(_unique(gpu, "device_name")) or "a CUDA device"
        cc, sms = _unique(gpu, "compute_capability"), _unique(gpu, "sm_count")
        cuda, driver = _unique(gpu, "cuda_version"), _unique(gpu, "driver_version")
        extra = [f"cc {cc[0]}" if cc else "", f"{sms[0]} SMs" if sms else "",
                 f"CUDA {', '.join(cuda)}" if cuda else "",
                 f"driver {', '.join(driver)}" if driver else ""]
        parts.append(f"GPU: {text} ({', '.join(e for e in extra if e)})")
    cpu = select(df, {"device": "cpu"}) if "device" in df else df.iloc[0:0]
    if not cpu.empty:
        counts = _unique(cpu, "cpu_count")
        parts.append(f"CPU: {', '.join(_unique(cpu, 'cpu_model')) or 'unknown'}"
                     + (f" ({counts[0]} logical CPUs)" if counts else ""))
    parts.append(f"torch {', '.join(_unique(df, 'torch_version')) or '?'}")
    parts.append(f"timer {', '.join(_unique(df, 'timer_preset')) or '?'}")
    if "timestamp" in df and df["timestamp"].notna().any():
        stamp = pd.to_datetime(df["timestamp"], utc=True, errors="coerce").dropna()
        if not stamp.empty:
            parts.append(f"measured {stamp.min().strftime('%Y-%m-%d')}")
    commits = _unique(df, "git_commit")
    if commits:
        parts.append(f"opsweep {', '.join(c[:10] for c in commits)}")
    return "; ".join(parts) + "."
