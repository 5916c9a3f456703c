"""The history command's figures: each trial's time against the sweeps it ran in
(``runner.analysis.history``), readable with one sweep and with a dozen series."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from runner.analysis.figure import MARKERS, log_axis, spans_decade
from runner.analysis.plots import MAX_SERIES

#: Most sweep labels written under a history plot (the rest of the ticks stay unlabelled).
MAX_TICKS = 16


def plot_history(result: Any) -> dict[str, Figure]:
    """One figure per op: each trial's time against the sweeps, steps marked (``result``: a
    ``runner.analysis.history.History``)."""
    figures = {}
    sweeps = result.points.drop_duplicates("sweep_index").sort_values("sweep_index")
    ticks = [f"{r.commit}\n{_day(r.started, r.sweep_id)}" for r in sweeps.itertuples()]
    if len(set(ticks)) < len(ticks):  # sweeps started in one minute: the seconds tell them
        ticks = [f"{r.commit}\n{_day(r.started, r.sweep_id, '%Y-%m-%d %H:%M:%S')}"
                 for r in sweeps.itertuples()]
    # past a few sweeps the labels slant; past MAX_TICKS only every k-th is written
    every = max(1, -(-len(ticks) // MAX_TICKS))
    for op, group in result.points.groupby("op", sort=True):
        fig = Figure(figsize=(min(18.0, max(11.0, 0.55 * len(ticks) + 8)), 4.8),
                     layout="constrained")
        ax = fig.subplots()
        names = list(dict.fromkeys(group["trial"]))
        for i, name in enumerate(names[:MAX_SERIES]):
            line = group[group["trial"] == name].sort_values("sweep_index")
            # colour and marker both change, so 12 series never share a look
            ax.plot(line["sweep_index"], line["median_us"], marker=MARKERS[i % len(MARKERS)],
                    color=f"C{i % 10}", label=f"{name} ({line['time'].iloc[0]} time)")
            for verdict, marker in (("slower", "v"), ("faster", "^")):
                hit = line[line["step"] == verdict]
                ax.scatter(hit["sweep_index"], hit["median_us"], s=140, marker=marker,
                           facecolors="none", edgecolors="red" if verdict == "slower"
                           else "green", linewidths=2, zorder=3)
        ax.set_xticks(list(sweeps["sweep_index"]),
                      [t if k % every == 0 else "" for k, t in enumerate(ticks)],
                      fontsize="small", rotation=30 if len(ticks) > 4 else 0,
                      ha="right" if len(ticks) > 4 else "center")
        if len(ticks) == 1:  # one sweep: the point in the middle, not on an edge
            ax.set_xlim(sweeps["sweep_index"].iloc[0] - 1, sweeps["sweep_index"].iloc[0] + 1)
        ax.set_xlabel("sweep (commit, start time)" + (", one so far" if len(ticks) == 1 else ""))
        ax.set_ylabel("median time per call (µs)")
        if spans_decade(group["median_us"]):
            ax.set_yscale("log")
            log_axis(ax.yaxis, group["median_us"])
        ax.grid(True, alpha=0.3)
        left_out = f", {len(names) - MAX_SERIES} trials left out" \
            if len(names) > MAX_SERIES else ""
        fig.suptitle(f"{op}: time by sweep (red ▽ slower, green △ faster step){left_out}",
                     fontsize="medium")  # the figure's width: the legend narrows the axes
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small",
                  frameon=False)
        figures[op] = fig
    return figures


def _day(started: object, sweep_id: str, form: str = "%Y-%m-%d %H:%M") -> str:
    if isinstance(started, pd.Timestamp) and not pd.isna(started):
        return started.strftime(form)
    return sweep_id[:16] if form.endswith("%M") else sweep_id[:19]
