"""The report's throughput figures: time and throughput against problem size, per op, and
the roofline (achieved TFLOP/s against arithmetic intensity, under the device's ceilings).

Why together: both show how fast an op runs for the work it does, each trial placed by its
problem (its size; its FLOPs per byte) against what it achieved (TFLOP/s or GB/s), and both
read its arithmetic intensity to do so.
Each returns a :class:`runner.analysis.figure.Plot` with a note instead of a figure when the
sweep lacks the data (``runner.analysis.plots`` says why).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from runner.analysis.figure import (
    MARKERS,
    MAX_SERIES,
    Plot,
    legend_outside,
    log_axis,
    plain_axis,
    size_axis,
    spans_decade,
    time_column,
    timed_rows,
    with_modes,
)
from runner.analysis.selection import label_columns, shown_columns, spec_keys, spec_label
from runner.storage.load import CATEGORY_ORDER

DTYPE_ORDER = CATEGORY_ORDER["dtype"]
#: Below this FLOP/byte an op's throughput is shown in GB/s rather than TFLOP/s.
MIN_FLOP_INTENSITY = 4.0
BOUND_MARKERS = {"compute": "o", "memory": "s", "overhead": "^", None: "x"}


def _series_label(row: pd.Series, columns: list[str]) -> str:
    return spec_label(row, columns) if columns else "all"


# ----------------------------------------------------------------------------- scaling


def plot_scaling(df: pd.DataFrame) -> list[Plot]:
    """Per op: time per op and throughput against problem size, one line per dtype/mode/param."""
    rows = with_modes(timed_rows(df))
    if rows.empty:
        return [Plot("scaling", "Time and throughput against size", None,
                     "no timed (ok) trials in this sweep")]
    plots = []
    tcol = time_column(rows)
    for op, group in rows.groupby(rows["op"].astype(str), sort=True):
        if group["numel"].nunique() < 2:
            plots.append(Plot(f"scaling_{op}", f"{op}: time against size", None,
                              f"{op}: one size only ({group['shape_str'].iloc[0]}); "
                              "sweep shape over several values to see scaling"))
            continue
        plots.append(_scaling_figure(op, group, tcol))
    return plots


def _scaling_figure(op: str, group: pd.DataFrame, tcol: str) -> Plot:
    series_cols = [c for c in shown_columns(group)[0] if c not in ("op", "shape_str")]
    # FLOP/s for ops that do real arithmetic per byte; GB/s for copies and elementwise ops
    intensity = pd.to_numeric(group.get("arithmetic_intensity"), errors="coerce")
    use_flops = pd.to_numeric(group.get("flops"), errors="coerce").fillna(0).gt(0).all() \
        and bool(intensity.median() >= MIN_FLOP_INTENSITY)
    rate_col, rate_label = ("tflops", "throughput (TFLOP/s)") if use_flops else \
        ("gbps", "bandwidth (GB/s, bytes read + written)")
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_t, ax_r = fig.subplots(1, 2)
    keys = spec_keys(group, series_cols) if series_cols else \
        pd.Series("all", index=group.index)
    names = list(dict.fromkeys(keys))
    note = ""
    if len(names) > MAX_SERIES:
        note = f"{op}: {len(names) - MAX_SERIES} of {len(names)} series left out"
        names = names[:MAX_SERIES]
    for i, name in enumerate(names):
        part = group[(keys == name).to_numpy()].sort_values("numel")
        part = part.groupby("numel", as_index=False).median(numeric_only=True)
        label = _series_label(group[(keys == name).to_numpy()].iloc[0], series_cols)
        look = {"marker": MARKERS[i % len(MARKERS)], "color": f"C{i % 10}",
                "markerfacecolor": "none", "label": label}  # equal series stay visible
        ax_t.plot(part["numel"], part[tcol], **look)
        if rate_col in part.columns:
            ax_r.plot(part["numel"], part[rate_col], **look)
    for ax, ylabel, col in ((ax_t, "time per op (µs)", tcol), (ax_r, rate_label, rate_col)):
        ax.set_xlabel("problem size (numel = product of shape)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        size_axis(ax, group["numel"])
        if col in group.columns and spans_decade(group[col]):
            ax.set_yscale("log")
            log_axis(ax.yaxis, group[col])
        else:
            plain_axis(ax.yaxis)
    ax_t.set_title(f"{op}: median time per op")
    ax_r.set_title(f"{op}: {rate_label.split(' (')[0]}")
    legend_outside(ax_r, len(names))
    return Plot(f"scaling_{op}", f"{op}: time and throughput against size", fig, note)


# ----------------------------------------------------------------------------- roofline


def plot_roofline(df: pd.DataFrame, ceilings: list) -> Plot:
    """Achieved TFLOP/s against arithmetic intensity, under the device's ceilings."""
    rows = timed_rows(df)
    name, title = "roofline", "Roofline: achieved throughput against arithmetic intensity"
    if rows.empty:
        return Plot(name, title, None, "no timed (ok) trials in this sweep")
    ai = pd.to_numeric(rows.get("arithmetic_intensity"), errors="coerce")
    tf = pd.to_numeric(rows.get("tflops"), errors="coerce")
    placed = rows[((ai > 0) & (tf > 0)).to_numpy()]
    left_out = len(rows) - len(placed)
    if placed.empty:
        return Plot(name, title, None, "no trial has both FLOPs and bytes (arithmetic "
                    "intensity > 0): nothing to place on a roofline")
    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = fig.subplots()
    x = pd.to_numeric(placed["arithmetic_intensity"], errors="coerce")
    y = pd.to_numeric(placed["tflops"], errors="coerce")
    dtypes = [d for d in DTYPE_ORDER if d in set(placed["dtype"].astype(str))]
    dtypes += sorted(set(placed["dtype"].astype(str)) - set(dtypes))
    colors = {d: f"C{i}" for i, d in enumerate(dtypes)}
    bounds = placed["bound"].astype(object).where(placed["bound"].notna(), None) \
        if "bound" in placed.columns else pd.Series([None] * len(placed), index=placed.index)
    for dtype in dtypes:
        for bound, marker in BOUND_MARKERS.items():
            sel = (placed["dtype"].astype(str) == dtype).to_numpy() & np.array(
                [b == bound for b in bounds])
            if sel.any():
                ax.scatter(x[sel], y[sel], color=colors[dtype], marker=marker, s=36,
                           label=f"{dtype}, {bound or 'unclassified'}", zorder=3)
    xmin, xmax = float(x.min()) / 4, float(x.max()) * 4
    grid = np.logspace(np.log10(max(xmin, 1e-3)), np.log10(xmax), 200)
    drawn = []
    for ceil in ceilings[:2]:
        bw = getattr(ceil, "copy_gbps", None)
        for dtype in dtypes:
            peak = getattr(ceil, "matmul_tflops", {}).get(dtype)
            if not peak or not bw:
                continue
            roof = np.minimum(peak, grid * bw / 1e3)
            ax.plot(grid, roof, color=colors[dtype], linestyle="--", linewidth=1.2,
                    label=f"ceiling {dtype}: {peak:.4g} TFLOP/s, {bw:.4g} GB/s")
            drawn.append(dtype)
    _key_points(ax, with_modes(placed), x, y)
    ax.set(xscale="log", yscale="log")
    ax.set_xlim(xmin, xmax)  # room for the numbers beside the outermost points
    log_axis(ax.xaxis, pd.concat([x, pd.Series([xmin, xmax])]))
    log_axis(ax.yaxis, y)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved throughput (TFLOP/s)")
    ax.grid(True, which="major", alpha=0.3)
    source = ", ".join(sorted({c.source for c in ceilings})) if ceilings else "none"
    ax.set_title(f"Roofline (ceilings: {source})", fontsize="medium")
    legend_outside(ax, 2)
    notes = []
    if left_out:
        notes.append(f"{left_out} trial(s) without FLOPs (e.g. copies) are not on this plot")
    if not drawn:
        notes.append("no ceilings for these dtypes on this device: run the calibrate "
                     "experiment (see docs/analysis.md)")
    return Plot(name, title, fig, "; ".join(notes))


#: Most roofline points numbered and keyed beside the plot (trials.csv has them all).
MAX_KEYED = 30


def _key_points(ax, placed: pd.DataFrame, x: pd.Series, y: pd.Series) -> None:
    """Number each trial and list what each number is beside the plot: colour and marker say
    dtype and bound; the key says which trial (what varies between them). One trial measured
    in several sweeps is one number; points that fall on one spot (closer than 1/30 of the
    y span, log, at one x) share one annotation, ``3,4``, never numbers drawn over each
    other or strung out to the right where they would read as points of other x."""
    columns = [c for c in label_columns(placed) if c != "sweep_id"] or ["op"]
    labels = [spec_label(row, columns) for _, row in placed.iterrows()]
    names = list(dict.fromkeys(labels))
    numbers = {name: k + 1 for k, name in enumerate(names[:MAX_KEYED])}
    logs = np.log10(y.to_numpy(dtype=float))
    step = max(float(logs.max() - logs.min()), 0.5) / 30
    spots: list[tuple[float, float, float, float, set[int]]] = []  # log x, log y, x, y, keys
    for label, xv, log_y, yv in zip(labels, x, logs, y, strict=True):
        if label not in numbers:
            continue
        log_x = float(np.log10(xv))
        near = next((s for s in spots if abs(s[0] - log_x) < 0.01 and abs(s[1] - log_y) < step),
                    None)
        if near is None:
            near = (log_x, log_y, xv, yv, set())
            spots.append(near)
        near[4].add(numbers[label])
    for _, _, xv, yv, keyed in spots:
        ax.annotate(",".join(map(str, sorted(keyed))), (xv, yv), xytext=(5, 3),
                    textcoords="offset points", fontsize="x-small", zorder=4)
    key = "\n".join(f"{n}: {name}" for name, n in numbers.items())
    if len(names) > MAX_KEYED:
        key += f"\n({len(names) - MAX_KEYED} more: trials.csv)"
    ax.text(1.02, 0.0, key, transform=ax.transAxes, fontsize="x-small", va="bottom",
            ha="left")
