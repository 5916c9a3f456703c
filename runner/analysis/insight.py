"""The report's view of ``profile=true`` and ``energy=true`` results: table columns and the
energy-against-time plot. Both appear only when a sweep has the data, so reports of sweeps
run without them are unchanged.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from runner.analysis.figure import Plot, log_axis, spans_decade, timed_rows, with_modes
from runner.analysis.selection import label_columns, spec_label
from runner.analysis.values import is_missing

#: Longest kernel name shown in the trial table (cuBLAS names run to 100+ characters).
KERNEL_NAME_CHARS = 48


def has(df: pd.DataFrame, column: str) -> bool:
    """True when ``column`` exists and holds at least one value."""
    return column in df.columns and bool(df[column].notna().any())


def table_columns(df: pd.DataFrame) -> dict[str, pd.Series]:
    """Trial-table columns for kernels and energy, as numbers with the unit in the header
    (empty when the sweep has neither)."""
    def number(column: str, scale: float = 1.0) -> pd.Series:
        if column not in df.columns:
            return pd.Series([float("nan")] * len(df), index=df.index)
        return pd.to_numeric(df[column], errors="coerce") * scale

    out: dict[str, pd.Series] = {}
    if has(df, "kernel_count"):
        out["kernels/call"] = number("kernel_count")
        out["kernel sum (µs)"] = number("kernel_time_sum_us")
        out["GPU idle (%)"] = number("gpu_idle_fraction", 100.0)
        out["top kernel"] = df["top_kernel"].map(
            lambda v: "" if is_missing(v) else _short_name(v)) \
            if "top_kernel" in df.columns else pd.Series([""] * len(df), index=df.index)
    if has(df, "energy_per_call_mJ"):
        out["mJ/call"] = number("energy_per_call_mJ")
        out["W"] = number("avg_power_W")
        out["TFLOP/J"] = number("tflops_per_joule")
        out["SM MHz (energy)"] = number("energy_sm_clock_mhz_median")
    return out


def _short_name(name: object) -> str:
    text = str(name)
    return text if len(text) <= KERNEL_NAME_CHARS else text[:KERNEL_NAME_CHARS - 1] + "…"


def plot_energy(df: pd.DataFrame) -> Plot:
    """Energy per call against time per call, one point per trial with energy.

    Lines of constant power run diagonally (energy = power × time): a point above another's
    line drew more power. Time is the energy window's own time per call (sustained clocks),
    so both axes describe the same calls."""
    name, title = "energy", "Energy per call against time per call"
    rows = timed_rows(df)
    if not has(rows, "energy_per_call_mJ"):
        return Plot(name, title, None, "no trial has energy_per_call_mJ (run with energy=true "
                                       "on a CUDA device)")
    rows = with_modes(rows[rows["energy_per_call_mJ"].notna()])
    time_us = pd.to_numeric(rows["energy_time_per_call_us"], errors="coerce")
    energy_mj = pd.to_numeric(rows["energy_per_call_mJ"], errors="coerce")
    label_cols = label_columns(rows)
    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    for i, (_, row) in enumerate(rows.iterrows()):
        label = spec_label(row, label_cols) if label_cols else row["op"]
        ax.scatter(time_us.loc[row.name] / 1e3, energy_mj.loc[row.name], color=f"C{i % 10}",
                   label=f"{label}, {row['energy_counter_s']:.1f} s window "
                         f"({row['avg_power_W']:.0f} W)", s=40)
    x_ms, y_mj = time_us / 1e3, energy_mj
    logs = spans_decade(x_ms) or spans_decade(y_mj)
    lo, hi = float(x_ms.min()) / 1.6, float(x_ms.max()) * 1.6
    if logs:  # constant power stays a straight line (slope 1) on log-log axes
        ax.set_xscale("log")
        ax.set_yscale("log")
        log_axis(ax.xaxis, pd.concat([x_ms, pd.Series([lo, hi])]))
        log_axis(ax.yaxis, pd.concat([y_mj, pd.Series([float(y_mj.min()) / 1.6,
                                                        float(y_mj.max()) * 1.6])]))
    else:
        lo = 0.0
    ax.set_xlim(lo, hi)
    ax.set_ylim(float(y_mj.min()) / 1.6 if logs else 0.0, float(y_mj.max()) * 1.6)
    for watts in (100, 300, 700):
        xs = np.geomspace(max(lo, hi / 1e3), hi, 30) if logs else np.linspace(0, hi, 30)
        ax.plot(xs, xs * watts, color="grey", linewidth=0.6, linestyle=":")
        inside = [x for x in xs if x * watts <= ax.get_ylim()[1]]
        if inside:
            ax.annotate(f"{watts} W", (inside[-1], inside[-1] * watts), fontsize="x-small",
                        color="grey", ha="right", va="bottom")
    ax.set_xlabel("time per call in the energy window (ms)")
    ax.set_ylabel("board energy per call (mJ)")
    ax.set_title("Energy vs time per call (dotted: constant power)", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return Plot(name, title, fig, "")
