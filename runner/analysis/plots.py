"""The report's plots, one function each, every one safe on a sweep that lacks its data.

Why this shape: a sweep may hold one op or twenty, one dtype or five, no mode variation, no
FLOP counts, or only failed trials. Each function here takes the loaded DataFrame and returns
a :class:`Plot` whose ``figure`` is ``None`` with a ``note`` saying why when there is nothing
to draw, so the report can say so instead of crashing. Figures are built with
``matplotlib.figure.Figure`` (no pyplot state, no backend switch), so the same functions work
in scripts, tests and notebooks. Axes carry units, sizes spanning a decade or more go on log
scales, legends sit outside the data, and figure heights grow with the number of labels so
that labels never overlap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import (
    PercentFormatter,
)

from runner.analysis import insight
from runner.analysis.axis_plots import plot_against_axes
from runner.analysis.figure import (
    MARKERS,
    Plot,
    log_axis,
    plain_axis,
    short_sweeps,
    size_axis,
    spans_decade,
    time_column,
    timed_rows,
    with_modes,
)
from runner.analysis.selection import (
    display_columns,
    label_columns,
    shown_columns,
    spec_keys,
    spec_label,
    varying_columns,
)
from runner.storage.load import CATEGORY_ORDER

#: Most series / rows drawn in one figure; the rest are left out with a note.
MAX_SERIES = 12
MAX_ROWS = 40
DTYPE_ORDER = CATEGORY_ORDER["dtype"]
#: Below this FLOP/byte an op's throughput is shown in GB/s rather than TFLOP/s.
MIN_FLOP_INTENSITY = 4.0
BOUND_MARKERS = {"compute": "o", "memory": "s", "overhead": "^", None: "x"}


def _series_label(row: pd.Series, columns: list[str]) -> str:
    return spec_label(row, columns) if columns else "all"


def _legend(ax, n: int) -> None:
    if n > 1:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small",
                  frameon=False)


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
    _legend(ax_r, len(names))
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
    _legend(ax, 2)
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


# ----------------------------------------------------------------------------- modes


def plot_modes(df: pd.DataFrame) -> Plot:
    """Bars of time per op for each execution mode (eager / graph / compile / streams),
    one group per trial that was run in several modes."""
    name, title = "modes", "Execution modes compared"
    rows = with_modes(timed_rows(df))
    if rows.empty:
        return Plot(name, title, None, "no timed (ok) trials in this sweep")
    if rows["mode"].nunique() < 2:
        return Plot(name, title, None, f"every trial ran in one mode ({rows['mode'].iloc[0]});"
                    " sweep graph=, compile= or streams= to compare modes")
    tcol = time_column(rows)
    group_cols = [c for c in display_columns(rows) if c not in ("mode", "sweep_id")]
    keys = spec_keys(rows, group_cols)
    groups = [(k, g) for k, g in rows.groupby(keys, sort=False) if g["mode"].nunique() > 1]
    if not groups:
        return Plot(name, title, None, "no trial was run in more than one mode")
    note = ""
    if len(groups) > MAX_ROWS // 2:
        note = f"{len(groups) - MAX_ROWS // 2} of {len(groups)} trial groups left out"
        groups = groups[:MAX_ROWS // 2]
    modes = list(dict.fromkeys(m for _, g in groups for m in g["mode"]))
    label_cols = varying_columns(rows, group_cols) or ["op"]
    height = 1.2 + 0.35 * len(groups) * max(1, len(modes)) ** 0.5
    fig = Figure(figsize=(10, min(height, 30)), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(modes)
    log = spans_decade(rows[tcol])
    for j, mode in enumerate(modes):
        ys, xs, errs = [], [], []
        for i, (_, g) in enumerate(groups):
            sel = g[g["mode"] == mode]
            if sel.empty:
                continue
            value = float(sel[tcol].median())
            ys.append(i + (j - (len(modes) - 1) / 2) * width)
            xs.append(value)
            scale = value / float(sel["time_median_us"].median())
            lo = pd.to_numeric(sel.get("time_ci_low_us"), errors="coerce").median() * scale
            hi = pd.to_numeric(sel.get("time_ci_high_us"), errors="coerce").median() * scale
            errs.append((max(value - lo, 0) if np.isfinite(lo) else 0,
                         max(hi - value, 0) if np.isfinite(hi) else 0))
        _mode_marks(ax, mode, j, ys, xs, errs, width if not log else None)
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels([spec_label(g.iloc[0], label_cols) for _, g in groups],
                       fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel(f"{'time per op' if tcol == 'time_per_op_us' else 'median time'} (µs), "
                  "whiskers: 95% CI of the median")
    if log:
        ax.set_xscale("log")
        log_axis(ax.xaxis, rows[tcol])
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title("Execution modes: lower is faster", fontsize="medium")
    ax.set_ylabel("trial")
    _legend(ax, len(modes))
    return Plot(name, title, fig, note)


def _mode_marks(ax, mode: str, j: int, ys: list, xs: list, errs: list,
                width: float | None) -> None:
    """One mode's times: bars ``width`` high with CI whiskers, or on a log axis (``width``
    None), where a bar's length says nothing, a point and its CI."""
    whiskers = np.array(errs).T if errs else None
    if width is None:
        ax.errorbar(xs, ys, xerr=whiskers, fmt=MARKERS[j % len(MARKERS)], color=f"C{j}",
                    label=mode, capsize=2, linestyle="none")
    else:
        ax.barh(ys, xs, height=width, label=mode, color=f"C{j}", xerr=whiskers, capsize=2)


# ----------------------------------------------------------------------------- samples


def plot_samples(df: pd.DataFrame) -> Plot:
    """Raw samples of each trial relative to its median, so noise and outliers show."""
    name, title = "samples", "Sample distributions (noise)"
    rows = timed_rows(df)
    if rows.empty:
        return Plot(name, title, None, "no timed (ok) trials in this sweep")
    if "samples_us" not in rows.columns:
        return Plot(name, title, None, "no raw samples (samples_us) in these results")
    data, labels = [], []
    rows = with_modes(rows)
    label_cols = label_columns(rows)
    for _, row in rows.iterrows():
        samples = row["samples_us"]
        if samples is None or not hasattr(samples, "__len__") or len(samples) < 2:
            continue
        samples = np.asarray(samples, dtype=float)
        med = np.median(samples)
        if med > 0:
            data.append(samples / med)
            labels.append(f"{spec_label(row, label_cols)} ({med:,.0f} µs)" if med >= 1000
                          else f"{spec_label(row, label_cols)} ({med:.3g} µs)")
    if not data:
        return Plot(name, title, None, "no trial has two or more raw samples")
    note = ""
    if len(data) > MAX_ROWS:
        order = np.argsort([-np.subtract(*np.quantile(d, [0.75, 0.25])) for d in data])
        keep = sorted(order[:MAX_ROWS])
        note = f"the {MAX_ROWS} noisiest of {len(data)} trials are shown"
        data, labels = [data[i] for i in keep], [labels[i] for i in keep]
    # the labels take what they need beside an axes at least 5.5 inches wide
    width = 5.5 + 0.08 * max(len(label) for label in labels)
    fig = Figure(figsize=(min(max(10.0, width), 20.0), 1.2 + 0.32 * len(data)),
                 layout="constrained")
    ax = fig.subplots()
    try:
        ax.boxplot(data, orientation="horizontal", widths=0.6, showfliers=False)
    except TypeError:  # matplotlib < 3.10
        ax.boxplot(data, vert=False, widths=0.6, showfliers=False)
    rng = np.random.default_rng(0)
    for i, d in enumerate(data, start=1):
        ax.scatter(d, i + rng.uniform(-0.2, 0.2, len(d)), s=6, alpha=0.4, color="C0")
    ax.set_yticks(range(1, len(data) + 1))
    ax.set_yticklabels(labels, fontsize="small")
    ax.invert_yaxis()
    ax.axvline(1.0, color="grey", linewidth=0.8)
    if spans_decade(pd.Series(np.concatenate(data))):  # a few slow outliers: log, or one line
        ax.set_xscale("log")
        log_axis(ax.xaxis, pd.Series(np.concatenate(data)))
    ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_xlabel("sample / the trial's median (100% = median)")
    ax.set_ylabel("trial (its median)")
    ax.set_title("Raw samples per trial (box: quartiles; dots: samples)", fontsize="medium")
    ax.grid(True, axis="x", alpha=0.3)
    return Plot(name, title, fig, note)


def all_plots(df: pd.DataFrame, ceilings: list) -> list[Plot]:
    """Every plot of the report, in report order.

    A plot that fails on unexpected data becomes a note naming the error, so one bad
    column never costs the whole report. Sweeps are named briefly in every label
    (:func:`runner.analysis.figure.short_sweeps`).
    """
    df = short_sweeps(df)
    makers = [("scaling", "Time and throughput against size", lambda: plot_scaling(df)),
              ("roofline", "Roofline", lambda: [plot_roofline(df, ceilings)]),
              ("against", "Time against a numeric axis", lambda: plot_against_axes(df)),
              ("modes", "Execution modes compared", lambda: [plot_modes(df)]),
              ("samples", "Sample distributions (noise)", lambda: [plot_samples(df)])]
    if insight.has(df, "energy_per_call_mJ"):
        makers.append(("energy", "Energy per call against time per call",
                       lambda: [insight.plot_energy(df)]))
    out: list[Plot] = []
    for name, title, make in makers:
        try:
            out.extend(make())
        except Exception as exc:  # noqa: BLE001 - reported in the page instead
            out.append(Plot(name, title, None, f"could not be drawn: {type(exc).__name__}: "
                                               f"{exc}"))
    return out
