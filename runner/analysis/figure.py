"""What every plot of the report shares: the :class:`Plot` it returns, the rows it draws,
how many series and rows one figure shows, where its legend goes, and its log axes.

The report's figures (``throughput_plots``, ``trial_plots``, ``axis_plots``), the history
figure (``history_plot``) and the energy figure (``insight``) all build on this, so none
imports another for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator

from runner.analysis.selection import MODE_AXES, ok_rows
from runner.core.axes import EAGER, mode_label


@dataclass
class Plot:
    """One figure of the report (or why it is absent)."""

    name: str  # file stem, e.g. "scaling_matmul"
    title: str
    figure: Figure | None
    note: str = ""


#: Most series / rows drawn in one figure; the rest are left out with a note.
MAX_SERIES = 12
MAX_ROWS = 40


def legend_outside(ax, n: int) -> None:
    """A legend beside the axes, never over the data; none for a single series."""
    if n > 1:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small",
                  frameon=False)


#: Markers cycled beside the ten colours, so that series past the tenth still look distinct,
#: and series with equal values do not hide each other. No triangles: history marks its steps
#: with them.
MARKERS = "osDPXhp"  # 7 against 10 colours: no look repeats before the 70th


def timed_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Timed trials only: the ok rows with a positive median."""
    rows = ok_rows(df)
    if rows.empty or "time_median_us" not in rows.columns:
        return df.iloc[0:0]
    return rows[(pd.to_numeric(rows["time_median_us"], errors="coerce") > 0).to_numpy()]


def with_modes(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` plus a ``mode`` column: :func:`runner.core.axes.mode_label` of each row."""
    cols = [c for c in MODE_AXES if c in df.columns]
    if df.empty:
        return df.assign(mode=pd.Series(dtype=object))
    modes = [mode_label(dict(zip(cols, values, strict=True)))
             for values in zip(*(df[c].astype(object).tolist() for c in cols), strict=True)] \
        if cols else [EAGER] * len(df)
    return df.assign(mode=modes)


def time_column(df: pd.DataFrame) -> str:
    """``time_per_op_us`` when present (it divides by streams), else ``time_median_us``."""
    return "time_per_op_us" if "time_per_op_us" in df.columns and \
        df["time_per_op_us"].notna().any() else "time_median_us"


def spans_decade(values: pd.Series) -> bool:
    values = pd.to_numeric(values, errors="coerce")
    values = values[values > 0]
    return len(values) > 1 and values.max() / values.min() >= 10


def short_number(value: float, digits: int = 6) -> str:
    """Tick text: ``0.02``, ``5``, ``50k``, ``2M``, ``1.07G`` (SI suffixes past a thousand,
    at most ``digits`` significant digits)."""
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g}{suffix}"
    return f"{value:.{digits}g}"


#: Fewest distinct sizes past which a size axis gets the usual 1-2-5 ticks instead of one
#: tick at each size measured.
MAX_SIZE_TICKS = 8


def size_axis(ax, values: pd.Series) -> None:
    """Problem sizes on ``ax``'s x axis: on a log scale always (sizes grow by factors, and
    two sizes on a linear axis read as a line with a ``1e9`` offset), with a tick at each size
    measured while there are few (``134M``, ``1.07G``)."""
    values = pd.to_numeric(values, errors="coerce")
    sizes = sorted(set(values[values > 0]))
    ax.set_xscale("log")
    if len(sizes) > MAX_SIZE_TICKS:
        log_axis(ax.xaxis, values)
        return
    digits = next(d for d in (3, 4, 5, 6, 12)  # as few digits as tell the sizes apart
                  if d == 12 or len({short_number(v, d) for v in sizes}) == len(sizes))
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: short_number(v, digits)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    if len(sizes) == 2 or sizes and sizes[-1] / sizes[0] < 10:  # room beside the outer points
        ax.set_xlim(sizes[0] / 1.3, sizes[-1] * 1.3)


def plain_axis(axis) -> None:
    """A linear axis whose labels are the values themselves (``2,171,000``, ``0.25``), never
    a shared ``1e8`` offset or a scientific exponent that a reader must multiply in."""
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.10g}"))


#: How a sweep id (its start time) is written: ``2026-11-27_08-19-57.016342``.
SWEEP_ID_FORMAT = "%Y-%m-%d_%H-%M-%S.%f"


def short_sweeps(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each sweep id written as briefly as still tells the sweeps apart
    (``11-27 08:19``, the seconds where two started in one minute, the year where they span
    years), so that a label of several sweeps does not repeat 26 characters per line. Ids
    that are not start times (a ``sweep_id=`` the user chose) stay as they are."""
    if "sweep_id" not in df.columns or df["sweep_id"].nunique() < 2:
        return df
    ids = list(dict.fromkeys(df["sweep_id"].astype(str)))
    times = pd.to_datetime(pd.Series(ids), format=SWEEP_ID_FORMAT, errors="coerce")
    if times.isna().any():
        return df
    year = "" if times.dt.year.nunique() == 1 else "%Y-"
    names = ids
    for form in (f"{year}%m-%d %H:%M", f"{year}%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f"):
        names = [t.strftime(form) for t in times]
        if len(set(names)) == len(names):
            break
    return df.assign(sweep_id=df["sweep_id"].astype(str).map(dict(zip(ids, names, strict=True))))


def log_axis(axis, values: pd.Series) -> None:
    """Put ``axis`` (``ax.xaxis``/``ax.yaxis``) on a log scale with plain labels (1, 2, 5, 10...).

    Over fewer than three decades, ticks at 1-2-5 steps keep enough labels to read values;
    minor ticks stay unlabelled so labels never collide.
    """
    values = pd.to_numeric(values, errors="coerce")
    values = values[values > 0]
    span = np.log10(values.max() / values.min()) if len(values) > 1 else 0.0
    if span < 3:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: short_number(v)))
    axis.set_minor_formatter(NullFormatter())
