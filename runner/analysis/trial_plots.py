"""The report's per-trial figures: one row per trial, its time in each execution mode side
by side, and the spread of its raw samples around their median.

Why together: both read a trial's own measurements (its CI, its samples) rather than a
trend across trials, list one labelled row per trial and cap those rows at
:data:`runner.analysis.figure.MAX_ROWS`. Each returns a
:class:`runner.analysis.figure.Plot` with a note instead of a figure when the sweep lacks
the data (``runner.analysis.plots`` says why).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from runner.analysis.figure import (
    MARKERS,
    MAX_ROWS,
    Plot,
    legend_outside,
    log_axis,
    spans_decade,
    time_column,
    timed_rows,
    with_modes,
)
from runner.analysis.selection import (
    display_columns,
    label_columns,
    spec_keys,
    spec_label,
    varying_columns,
)

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
    legend_outside(ax, len(modes))
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
