"""What a trial *is*, independent of when or where it ran: spec keys, labels and filters.

Compare joins two result sets on the spec; the report groups by it and labels plots with
it; both accept ``--filter axis=value``. Keeping these rules in one place means a trial is
"the same trial" in every view. The spec is the axis columns (op, dtype, shape, modes...)
plus the op parameters (``param_*``); ids, timestamps and measurements are not part of it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from runner.core.axes import mode_label
from runner.storage.columns import AXES, AXIS_COLUMNS, MODE_COLUMNS

#: How an axis column is joined: ``shape`` (a list) by its text ``shape_str``; ``device``
#: (resolved, e.g. ``cuda:1``) by ``device_requested`` so that a run on another GPU index
#: still matches.
JOINED_AS = {"shape": "shape_str", "device": "device_requested"}

#: Columns a trial is joined on (when present), in label order ("matmul bf16 64x64x64 ..."):
#: the op, the dtype and its math settings, the shape, then the registry's other axes.
#: ``torch_dtype`` and ``numel`` are derived from ``dtype``/``shape``.
_LEADING = ("op", "target", "dtype", "tf32", "matmul_precision", "shape_str")
SPEC_AXES: tuple[str, ...] = _LEADING + tuple(
    JOINED_AS.get(name, name) for name in AXIS_COLUMNS
    if JOINED_AS.get(name, name) not in _LEADING)

#: Axes that name the execution mode, used for "eager / graph / compile / streams" views.
MODE_AXES: tuple[str, ...] = MODE_COLUMNS


def param_columns(df: pd.DataFrame) -> list[str]:
    """The op-parameter columns (``param_<name>``), sorted."""
    return sorted(c for c in df.columns if c.startswith("param_"))


def spec_columns(df: pd.DataFrame, ignore: Iterable[str] = ()) -> list[str]:
    """Spec columns present in ``df``: the axes plus the ``param_*`` columns.

    When a frame has no ``param_*`` columns but has ``params_json``, that column stands in.
    """
    ignored = set(ignore)
    axes = list(SPEC_AXES)
    if "device_requested" not in df.columns:  # older/leaner results: the resolved device
        axes[axes.index("device_requested")] = "device"
    cols = [c for c in axes if c in df.columns and c not in ignored]
    params = param_columns(df)
    if params:
        return cols + [c for c in params if c not in ignored]
    if "params_json" in df.columns and "params_json" not in ignored:
        return cols + ["params_json"]
    return cols


def canonical(value: object) -> object:
    """A hashable, type-stable form of a cell, so that 1, 1.0 and True/'true' do not split keys.

    Nulls (None, NaN, NA) become ``None``; integral floats become ints; lists become tuples.
    """
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return None
        return int(value) if float(value).is_integer() else float(value)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(canonical(v) for v in value)
    return str(value)


def spec_keys(df: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One JSON string per row identifying its spec over ``columns`` (missing columns are null)."""
    if df.empty:
        return pd.Series([], index=df.index, dtype=object)
    parts = []
    for c in columns:
        if c in df.columns:
            parts.append([canonical(v) for v in df[c].tolist()])
        else:
            parts.append([None] * len(df))
    keys = [json.dumps(dict(zip(columns, row, strict=True)), sort_keys=True, default=str)
            for row in zip(*parts, strict=True)]
    return pd.Series(keys, index=df.index, dtype=object)


def varying_columns(df: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns among ``columns`` that take more than one value (nulls count) in ``df``."""
    out = []
    for c in columns:
        if c in df.columns and df[c].astype(object).map(canonical).nunique(dropna=False) > 1:
            out.append(c)
    return out


def spec_label(row: pd.Series | dict, columns: Sequence[str]) -> str:
    """A short human label of a trial from the given (usually the varying) columns.

    ``op`` and ``dtype`` and ``shape_str`` appear as bare values; other axes as ``name=value``
    (``param_`` dropped). Falsy defaults (``graph=none``, ``streams=1``) are left out.
    """
    bits = []
    for c in columns:
        value = canonical(row.get(c) if isinstance(row, dict) else row.get(c, None))
        if c in ("op", "dtype", "shape_str", "device_requested", "device", "sweep_id", "mode"):
            if value is not None:
                bits.append(str(value))
            continue
        if c == "params_json":
            bits.append(str(value))
            continue
        if value in (None, "none", False) or (c == "streams" and value == 1):
            continue
        name = c[len("param_"):] if c.startswith("param_") else c
        bits.append(name if value is True else f"{name}={display_value(c, value)}")
    return " ".join(bits) if bits else "(all)"


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows whose trial ran (``status == "ok"``): not skipped, not failed."""
    if df.empty or "status" not in df.columns:
        return df.iloc[0:0]
    return df[(df["status"].astype(str) == "ok").to_numpy()]


#: Derived (``dtype`` gives ``tf32``) or said twice (``target``): never columns of their own.
_NOT_SHOWN = ("target", "tf32", "matmul_precision", "device_requested", *MODE_AXES)


#: Axes whose default value goes unsaid in a table's line of fixed values.
_QUIET_DEFAULTS = {axis.name: axis.column_value(axis.default) for axis in AXES
                   if axis.name not in ("dtype", "device", "shape")}


def display_columns(df: pd.DataFrame) -> list[str]:
    """The columns a reader tells trials apart by, in label order: the sweep, the op, every
    axis (the mode axes as one ``mode`` label, from ``runner.analysis.figure.with_modes``),
    then the op parameters. Which of them to show is :func:`shown_columns`' job."""
    axes = [c for c in ("sweep_id", *SPEC_AXES) if c not in _NOT_SHOWN]
    if "device" not in axes:
        axes.insert(axes.index("shape_str") + 1, "device")
    axes.insert(axes.index("shape_str") + 2, "mode")
    return [c for c in axes if c in df.columns] + param_columns(df)


def shown_columns(df: pd.DataFrame) -> tuple[list[str], dict[str, str]]:
    """What a table or a plot label of ``df``'s rows shows: the display columns whose value
    varies among the rows (each its own column), and the rest with their one value
    (``{"dtype": "fp32"}``, for a line above the table). ``df`` needs a ``mode`` column
    (``runner.analysis.figure.with_modes``). A constant null, or an axis at its default that
    says nothing (``seed=0``, ``streams=1``, ``fullgraph=false``), is left out of both."""
    varying, fixed = [], {}
    for c in display_columns(df):
        if varying_columns(df, [c]):
            varying.append(c)
            continue
        value = canonical(df[c].iloc[0]) if not df.empty else None
        quiet = c in _QUIET_DEFAULTS and value == canonical(_QUIET_DEFAULTS[c])
        if value is not None and not quiet:
            fixed[c] = display_value(c, value)
    return varying, fixed


def display_name(column: str) -> str:
    """A column's header: ``param_impl`` -> ``impl``, ``shape_str`` -> ``shape``..."""
    if column.startswith("param_"):
        return column[len("param_"):]
    return {"shape_str": "shape", "sweep_id": "sweep"}.get(column, column)


def display_value(column: str, value: object) -> str:
    """A cell as text. A custom op's ``flops``/``bytes_moved`` of -1 reads ``auto`` (counted by
    opsweep), never as the sentinel."""
    value = canonical(value)
    if value is None:
        return "–"
    if column in ("param_flops", "param_bytes_moved") and isinstance(value, (int, float)) \
            and value < 0:
        return "auto"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


def spec_cells(rows: Sequence[dict]) -> tuple[list[str], list[list[str]], str]:
    """For a table of result rows (dicts): the headers of the display columns that vary
    (besides the op), each row's texts for them, and one line of those that do not."""
    frame = pd.DataFrame(list(rows)).assign(mode=[mode_label(r) for r in rows])
    varying, fixed = shown_columns(frame) if len(frame) else ([], {})
    varying = [c for c in varying if c not in ("op", "sweep_id")]
    cells = [[display_value(c, frame[c].iloc[i]) for c in varying] for i in range(len(frame))]
    line = "  ".join(f"{display_name(k)}={v}" for k, v in fixed.items()
                     if k not in ("op", "sweep_id"))
    return [display_name(c) for c in varying], cells, line


def label_columns(df: pd.DataFrame) -> list[str]:
    """The display columns that vary in ``df`` (which needs ``mode``), for plot labels;
    ``["op"]`` when nothing varies."""
    return shown_columns(df)[0] or ["op"]


def parse_filters(filters: Iterable[str], columns: Sequence[str]) -> dict[str, list[str]]:
    """Parse ``axis=value[,value...]`` filters; a bare parameter name means ``param_<name>``.

    Raises ``ValueError`` naming the bad filter and the columns that can be filtered on.
    Several filters on the same column are OR-ed; different columns are AND-ed.
    """
    out: dict[str, list[str]] = {}
    for text in filters:
        name, sep, value = text.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"filter {text!r} is not of the form axis=value "
                             "(e.g. --filter op=matmul --filter dtype=bf16,fp16)")
        if name not in columns and f"param_{name}" in columns:
            name = f"param_{name}"
        if name not in columns:
            shown = ", ".join(c for c in columns if c in SPEC_AXES or c.startswith("param_")
                              or c in ("status", "sweep_id", "device_name", "bound"))
            raise ValueError(f"filter {text!r}: no column {name!r} in the results; "
                             f"filter on one of: {shown}")
        out.setdefault(name, []).extend(v.strip() for v in value.split(","))
    return out


def apply_filters(df: pd.DataFrame, filters: Iterable[str]) -> pd.DataFrame:
    """Rows of ``df`` matching every ``axis=value`` filter (values compared as text).

    Booleans match ``true/false`` (any case) as well as ``True/False``; numbers match their
    usual spelling (``streams=4``).
    """
    parsed = parse_filters(list(filters), list(df.columns))
    mask = np.ones(len(df), dtype=bool)
    for name, values in parsed.items():
        wanted = {_norm_text(v) for v in values}
        column = df[name].astype(object).map(lambda v: _norm_text(canonical(v)))
        mask &= column.isin(wanted).to_numpy()
    return df[mask]


def _norm_text(value: object) -> str:
    if value is None:
        return "null"
    text = str(value)
    return text.lower() if text.lower() in ("true", "false", "none", "null", "nan") else text


def column_for(columns: Iterable[str], key: str) -> str | None:
    """The column a selector key names: itself, ``param_<key>`` for an op parameter, or
    ``shape_str`` for ``shape``; None when the results have no such column."""
    columns = set(columns)
    if key == "shape" and "shape_str" in columns:
        return "shape_str"
    for name in (key, f"param_{key}"):
        if name in columns:
            return name
    return None


def select(df: pd.DataFrame, where: dict[str, object]) -> pd.DataFrame:
    """Rows of ``df`` matching every ``column: value`` of ``where`` (a claim's selector).

    Values compare as :func:`apply_filters`' do (``True`` matches ``true``, ``1.0`` matches
    ``1``); ``None`` matches a missing value; a list is any of its values, except that
    ``shape: [M, N, K]`` is one shape (``[[...], [...]]`` several); ``device: cuda`` matches
    every ``cuda:N``. A key naming no column matches no row: data that lacks it cannot
    answer a question about it.
    """
    if df.empty:
        return df
    mask = np.ones(len(df), dtype=bool)
    for key, wanted in where.items():
        column = column_for(df.columns, key)
        if column is None:
            return df.iloc[0:0]
        options = wanted if isinstance(wanted, (list, tuple)) else [wanted]
        if key == "shape" and column == "shape_str":
            if options and not isinstance(options[0], (list, tuple)):
                options = [options]
            options = ["x".join(str(int(d)) for d in s) for s in options]
        texts = df[column].astype(object).map(lambda v: _norm_text(canonical(v)))
        wanted_texts = {_norm_text(canonical(v)) for v in options}
        if key == "device":  # a device class: cuda matches cuda:0, cuda:1, ...
            match = texts.isin(wanted_texts) | texts.str.partition(":")[0].isin(wanted_texts)
        else:
            match = texts.isin(wanted_texts)
        mask &= match.to_numpy(dtype=bool)
    return df[mask]
