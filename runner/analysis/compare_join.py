"""Joining two result sets on their spec, and reading a pair of joined records, for
:mod:`runner.analysis.compare_engine`.

Why a module of its own: matching is where a comparison silently goes wrong. Trials are
joined on their spec (axes + op params), never on ids or timestamps, which differ between
runs; rows repeating a spec are pooled (their raw samples concatenated); and every spec that
found no partner is kept with the axes that differ, so nothing is dropped without a word.
A joined pair then has up to two times (which one decides: :func:`pick_time`) and settings
that may make it incomparable (:func:`timer_note`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from runner.analysis.selection import (
    JOINED_AS,
    apply_filters,
    canonical,
    param_columns,
    spec_columns,
    spec_keys,
    spec_label,
    varying_columns,
)
from runner.analysis.significance import flag_or_reason
from runner.analysis.values import is_missing
from runner.storage.columns import time_column

#: Timer settings that, when they differ between the two runs of a trial, are noted:
#: e.g. an adaptive calls_per_sample of 11 vs 1 changes what a 3 µs op measures.
TIMER_FIELDS = ("timer_preset", "l2_flush")
#: The columns each time is read from (runner.storage.columns.time_column).
TIME_FIELDS = {t: {stat: time_column(t, stat) for stat in
                   ("samples_us", "median_us", "ci_low_us", "ci_high_us", "noisy",
                    "noisy_reason")}
               for t in ("loop", "gpu")}
#: Columns a collapsed spec record keeps from its first row (besides the spec keys).
_ROW_FIELDS = ("status", "reason", *(c for t in TIME_FIELDS.values() for c in t.values()
                                     if not c.endswith("samples_us")),
               "gpu_time_method", "gpu_time_reason", "bound", "sm_clock_mhz_end",
               "throttle_reasons_end", *TIMER_FIELDS, *("hostname", "gpu_index", "gpu_uuid",
               "sm_clock_mhz_samples_median", "temperature_c_timed"))
#: SM clocks further apart than this (relative) make two timings hard to compare.
CLOCK_NOTE_REL = 0.05


#: The axis a user names for each joined column (``shape`` for ``shape_str``...).
USER_NAMES = {column: axis for axis, column in JOINED_AS.items()}


def axis_names(name: str, base: pd.DataFrame, new: pd.DataFrame) -> set[str]:
    """The columns an ``--ignore-axis`` name means: the axis as the user sees it (``shape``,
    ``device``) with the column the join uses for it (``shape_str``, ``device_requested``),
    or a parameter's ``param_`` column."""
    columns = set(base.columns) | set(new.columns)
    axis = USER_NAMES.get(name, name)
    found = {c for c in (axis, JOINED_AS.get(axis)) if c and c in columns}
    if axis == "device":  # a file without device_requested joins on the resolved device
        found |= {"device"} & columns
    if found:
        return found
    if f"param_{name}" in columns:
        return {f"param_{name}"}
    shown = [USER_NAMES.get(c, c.removeprefix("param_"))
             for c in (spec_columns(base) or spec_columns(new))]
    raise ValueError(f"--ignore-axis {name!r}: no such axis in BASE or NEW; axes are: "
                     f"{', '.join(dict.fromkeys(shown))}")


def key_columns(base: pd.DataFrame, new: pd.DataFrame, ignored: set[str]) -> list[str]:
    """The spec columns of either side that the join uses, less the ignored ones."""
    axes = [c for c in spec_columns(base, ignored) if not c.startswith("param_")]
    axes += [c for c in spec_columns(new, ignored) if not c.startswith("param_")]
    keys = list(dict.fromkeys(axes))
    params = sorted(set(param_columns(base)) | set(param_columns(new)))
    if params:  # param_* columns say it all; params_json would also hold ignored params
        keys = [c for c in keys if c != "params_json"]
        keys += [c for c in params if c not in ignored]
    return keys


def joined(base: pd.DataFrame, new: pd.DataFrame, filters: list[str],
            ignore: Iterable[str]) -> tuple[pd.DataFrame, pd.DataFrame, list[str], list[str],
                                            list[str]]:
    """Both sides filtered and keyed on their spec: ``(base, new, keys, shown, labels)``.

    ``keys`` are the join's columns; ``shown`` the ignored axes that still tell a pair's
    sides apart (shown in its label, ``a → b``); ``labels`` the columns a pair's label names:
    the op, then whatever varies."""
    if filters:
        base = apply_filters(base, filters)
        new = apply_filters(new, filters)
    ignored = {c for a in ignore for c in axis_names(a, base, new)}
    keys = key_columns(base, new, ignored)
    shown = [c for c in ignored if c in base.columns and c in new.columns
             and c not in ("shape", "device")]
    # a result file's frame arrives in hundreds of blocks (a column added at a time):
    # copy() consolidates them, or pandas warns on the insert below
    base, new = base.copy(), new.copy()
    base = base.assign(_key=spec_keys(base, keys)) if len(base) else base.assign(_key=[])
    new = new.assign(_key=spec_keys(new, keys)) if len(new) else new.assign(_key=[])
    both = pd.concat([base[[c for c in keys if c in base.columns]],
                      new[[c for c in keys if c in new.columns]]], ignore_index=True)
    # target is implied by op; it stays in the join but would only clutter the labels
    labels = ["op", *[c for c in varying_columns(both, keys) if c not in ("op", "target")]]
    labels = [c for c in dict.fromkeys(labels) if c in both.columns]
    return base, new, keys, shown, labels


def collapse(df: pd.DataFrame, keys: Sequence[str],
             value_col: str | None = None) -> dict[str, dict]:
    """One record per spec key (``df`` has a ``_key`` column). Rows repeating a spec
    (repeated sweeps, merged globs) are pooled: their raw samples concatenated, ok rows
    preferred over failed ones. With ``value_col`` (a per-trial scalar such as
    ``energy_per_call_mJ``) the record's ``value`` is that column's median over the ok rows,
    NaN when none has it.

    Works on column lists rather than per-group DataFrames: thousands of specs stay fast.
    """
    out: dict[str, dict] = {}
    if not len(df):
        return out
    wanted = [*keys, *_ROW_FIELDS, *([value_col] if value_col else [])]
    fields = [c for c in dict.fromkeys(wanted) if c in df.columns]
    columns = {c: df[c].astype(object).tolist() for c in fields}
    samples_cols = {t: df[f["samples_us"]].tolist() if f["samples_us"] in df.columns else None
                    for t, f in TIME_FIELDS.items()}
    status = columns.get("status", ["ok"] * len(df))
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(df["_key"].tolist()):
        groups.setdefault(key, []).append(i)
    for key, idx in groups.items():
        ok = [i for i in idx if status[i] == "ok"]
        chosen = ok or idx
        first = {c: columns[c][chosen[0]] for c in fields}
        times = {t: _pooled_time(first, samples_cols[t], ok, len(chosen), f)
                 for t, f in TIME_FIELDS.items()}
        values = [to_float(columns[value_col][i]) for i in ok] if value_col in columns else []
        values = [v for v in values if math.isfinite(v)]
        state = first.get("status")
        out[key] = {"row": first, "status": "ok" if state is None else str(state),
                    "reason": first.get("reason"), "count": len(chosen),
                    "times": {t: v for t, v in times.items() if v is not None},
                    "value": float(np.median(values)) if values else float("nan")}
    return out


def _pooled_time(first: dict, samples_col: list | None, ok: list[int], n_rows: int,
                 fields: dict[str, str]) -> dict | None:
    """One time of a spec: pooled raw samples, median and (single row) CI; None when no
    row has it (a CPU trial's device time, or a file older than the column)."""
    samples = None
    if samples_col is not None and ok:
        arrays = [np.asarray(samples_col[i], dtype=float) for i in ok
                  if samples_col[i] is not None and not is_missing_array(samples_col[i])]
        arrays = [a for a in arrays if len(a)]
        samples = np.concatenate(arrays) if arrays else None
    median = float(np.median(samples)) if samples is not None else \
        to_float(first.get(fields["median_us"]))
    if not math.isfinite(median):
        return None
    ci = (to_float(first.get(fields["ci_low_us"])), to_float(first.get(fields["ci_high_us"]))) \
        if n_rows == 1 else None
    return {"samples": samples, "median": median, "ci": ci,
            "noisy": flag_or_reason(canonical(first.get(fields["noisy"])),
                                    first.get(fields["noisy_reason"]))}


def is_missing_array(value: object) -> bool:
    """True for a missing samples cell (None/NaN) as opposed to an array."""
    return not isinstance(value, (list, tuple, np.ndarray)) and is_missing(value)


def to_float(value: object) -> float:
    """A cell as a float, NaN when missing."""
    return float("nan") if is_missing(value) else float(value)


def spec_dict(row: dict, keys: Sequence[str]) -> dict:
    """The spec of a record's row: its key columns, canonical values."""
    return {k: canonical(row.get(k)) for k in keys}


def one_side(specs: dict[str, dict], other: dict[str, dict], keys: list[str],
             label_cols: list[str]) -> pd.DataFrame:
    """The specs of ``specs`` that ``other`` lacks, with their status and reason."""
    rows = []
    for key, rec in specs.items():
        if key in other:
            continue
        spec = spec_dict(rec["row"], keys)
        rows.append({"trial": spec_label(spec, label_cols), "status": rec["status"],
                     "reason": rec["reason"], **spec})
    return pd.DataFrame(rows)


def axis_notes(base: pd.DataFrame, new: pd.DataFrame, keys: list[str]) -> list[str]:
    """Explain why specs did not match: which axes differ between the two sides."""
    if not len(base) or not len(new):
        side = "BASE" if not len(base) else "NEW"
        return [f"{side} has no trials (after filters): nothing to match against"]
    notes = []
    for col in keys:
        in_b, in_n = col in base.columns, col in new.columns
        if in_b != in_n:
            side, frame = ("BASE", base) if in_b else ("NEW", new)
            values = sorted({str(canonical(v)) for v in frame[col].astype(object)})
            notes.append(f"column {col} only in {side} (values: {', '.join(values[:8])}); "
                         f"--ignore-axis {col} joins without it")
            continue
        vb = {canonical(v) for v in base[col].astype(object)} if len(base) else set()
        vn = {canonical(v) for v in new[col].astype(object)} if len(new) else set()
        if vb != vn:
            parts = []
            if vb - vn:
                parts.append("only BASE has " + ", ".join(sorted(map(str, vb - vn))[:8]))
            if vn - vb:
                parts.append("only NEW has " + ", ".join(sorted(map(str, vn - vb))[:8]))
            notes.append(f"axis {col}: " + "; ".join(parts))
    return notes


def pick_time(base_times: dict, new_times: dict, time: str = "auto") -> str | None:
    """The time a pair is judged on: ``gpu`` when asked (auto or gpu) and both sides have
    it, else ``loop`` (unless ``time == "gpu"``: then None, the pair is not compared)."""
    both_gpu = "gpu" in base_times and "gpu" in new_times
    if time in ("auto", "gpu") and both_gpu:
        return "gpu"
    if time == "gpu":
        return None
    return "loop" if "loop" in base_times and "loop" in new_times else None


def median_of(record: dict | None) -> float:
    """The median of one time of a record, NaN when the record lacks that time."""
    return record["median"] if record else float("nan")


def no_gpu_reason(rec: dict) -> str | None:
    """Why a record has no device time (for ``--time gpu``), None when it has one."""
    if "gpu" in rec["times"]:
        return None
    row = rec["row"]
    why = row.get("gpu_time_reason") or "no gpu_time column"
    return f"--time gpu: no gpu_time ({canonical(row.get('gpu_time_method')) or '-'}: {why})"


def timer_note(base_row: dict, new_row: dict, which: str | None = "loop") -> str:
    """Why two measurements may not be comparable: different timer settings, a noisy run
    (of the time ``which`` decided; None: no time decided), a different GPU clock or a
    throttled GPU."""
    bits = []
    for name in TIMER_FIELDS:
        b, n = canonical(base_row.get(name)), canonical(new_row.get(name))
        if b is not None and n is not None and b != n:
            bits.append(f"{name} {b} vs {n}")
    if which is not None:
        noisy_col = TIME_FIELDS[which]["noisy"]
        noisy = [side for side, row in (("BASE", base_row), ("NEW", new_row))
                 if canonical(row.get(noisy_col)) is True]
        if noisy:
            bits.append(f"noisy in {' and '.join(noisy)}")
    clocks = [canonical(row.get("sm_clock_mhz_end")) for row in (base_row, new_row)]
    other_gpu = _other_gpu(base_row, new_row)
    if other_gpu:
        bits.append(other_gpu)
    elif all(isinstance(c, (int, float)) and c > 0 for c in clocks) and \
            abs(clocks[0] - clocks[1]) > CLOCK_NOTE_REL * max(clocks):
        bits.append(f"SM clock {clocks[0]:.0f} vs {clocks[1]:.0f} MHz")
    throttled = [side for side, row in (("BASE", base_row), ("NEW", new_row))
                 if canonical(row.get("throttle_reasons_end")) not in (None, "")]
    if throttled:
        bits.append(f"throttled in {' and '.join(throttled)}")
    return "; ".join(bits)


def _other_gpu(base_row: dict, new_row: dict) -> str:
    """Where the two ran on different GPUs of one host (one GPU against a worker per GPU):
    each side's GPU, its samples' clock and its heat. GPUs of one host differ, in clock and at
    one clock (docs/scale-out.md#the-same-number-on-every-gpu)."""
    uuids = [canonical(row.get("gpu_uuid")) for row in (base_row, new_row)]
    hosts = [canonical(row.get("hostname")) for row in (base_row, new_row)]
    if None in uuids or uuids[0] == uuids[1] or hosts[0] != hosts[1]:
        return ""

    def state(row: dict) -> str:
        mhz = canonical(row.get("sm_clock_mhz_samples_median"))
        mhz = canonical(row.get("sm_clock_mhz_end")) if mhz is None else mhz
        celsius = canonical(row.get("temperature_c_timed"))
        parts = [f"{mhz:.0f} MHz" if isinstance(mhz, (int, float)) else "",
                 f"{celsius:.0f} °C" if isinstance(celsius, (int, float)) else ""]
        detail = ", ".join(part for part in parts if part)
        return f"GPU {canonical(row.get('gpu_index'))}" + (f" ({detail})" if detail else "")

    return f"{state(base_row)} → {state(new_row)}"
