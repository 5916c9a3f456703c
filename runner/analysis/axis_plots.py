"""Time against a numeric axis: ``num_threads``, ``streams``, a numeric op parameter.

Why a plot of its own: the scaling plot's x axis is the problem size, so an experiment that
sweeps threads or streams at one size (``cpu_threads``, ``streams``) had no picture of the
one thing it varies. One figure per numeric axis that takes two or more values, one line per
combination of everything else that varies.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from runner.analysis.figure import (
    MARKERS,
    MAX_SERIES,
    Plot,
    legend_outside,
    log_axis,
    spans_decade,
    time_column,
    timed_rows,
    with_modes,
)
from runner.analysis.selection import param_columns, shown_columns, spec_keys, spec_label

#: Numeric axes a reader sweeps to see a trend (the size has the scaling plot; ``seed`` and
#: shard numbers are no trend).
NUMERIC_AXES = ("num_threads", "streams")
#: Most figures of this kind in one report (lines in one figure: ``MAX_SERIES``).
MAX_AXES = 3


def numeric_axes(rows: pd.DataFrame) -> list[str]:
    """The numeric axes and op parameters that take two or more values in ``rows``."""
    found = []
    for column in [*NUMERIC_AXES, *param_columns(rows)]:
        if column not in rows.columns:
            continue
        values = pd.to_numeric(rows[column].astype(object), errors="coerce")
        if values.notna().all() and values.nunique() >= 2 and \
                not rows[column].astype(object).map(lambda v: isinstance(v, bool)).any():
            found.append(column)
    return found[:MAX_AXES]


def plot_against_axes(df: pd.DataFrame) -> list[Plot]:
    """One line plot of time against each numeric axis the sweep varies (none: no plot)."""
    rows = with_modes(timed_rows(df))
    if rows.empty:
        return []
    return [_figure(rows, column) for column in numeric_axes(rows)]


def _figure(rows: pd.DataFrame, column: str) -> Plot:
    name = column.removeprefix("param_")
    tcol = time_column(rows)
    x = pd.to_numeric(rows[column].astype(object), errors="coerce")
    others = [c for c in shown_columns(rows)[0] if c != column]
    keys = spec_keys(rows, others) if others else pd.Series("all", index=rows.index)
    lines = list(dict.fromkeys(keys))
    fig = Figure(figsize=(10, 4.5), layout="constrained")
    ax = fig.subplots()
    for i, key in enumerate(lines[:MAX_SERIES]):
        part = rows[(keys == key).to_numpy()].assign(_x=x)
        points = part.groupby("_x")[tcol].median().sort_index()
        label = spec_label(part.iloc[0], others) if others else "all trials"
        ax.plot(points.index, points.to_numpy(), marker=MARKERS[i % len(MARKERS)],
                color=f"C{i % 10}", label=label)
    ax.set_xlabel(name)
    ax.set_ylabel(f"{'time per op' if tcol == 'time_per_op_us' else 'median time'} (µs)")
    ax.set_xticks(sorted(x.unique()))
    if spans_decade(x):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(x.unique()), [f"{v:g}" for v in sorted(x.unique())])
    if spans_decade(rows[tcol]):
        ax.set_yscale("log")
        log_axis(ax.yaxis, rows[tcol])
    ax.grid(True, alpha=0.3)
    ax.set_title(f"Median time against {name} (lower is faster)", fontsize="medium")
    legend_outside(ax, len(lines))
    note = f"{len(lines) - MAX_SERIES} of {len(lines)} lines left out" \
        if len(lines) > MAX_SERIES else ""
    return Plot(f"against_{name}", f"Time against {name}", fig, note)
