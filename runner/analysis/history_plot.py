"""The history command's figures: each trial's time against the sweeps it ran in
(``runner.analysis.history``), readable with one sweep and with a dozen series.

One figure per op and group of trials (trials that ran in the same sweeps), over that
group's sweeps only: a sweep of another experiment neither shares the lines nor widens the
axis. A line is one trial (its ``trial_id``), never a label shared by two trials.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from runner.analysis.figure import MARKERS, MAX_SERIES, log_axis, spans_decade
from runner.analysis.history_table import sweep_name

#: Most sweep labels written under a history plot (the rest of the ticks stay unlabelled).
MAX_TICKS = 16


def plot_history(result: Any) -> dict[str, Figure]:
    """One figure per op and group: each trial's time against the group's sweeps, steps
    marked (``result``: a ``runner.analysis.history.History``). Keys: the op, or
    ``<op>_<group>`` where an op has trials in several groups."""
    figures = {}
    points = result.points if "group" in result.points else result.points.assign(group=1)
    for op, of_op in points.groupby("op", sort=True):
        groups = sorted(of_op["group"].unique())
        for group in groups:
            name = str(op) if len(groups) == 1 else f"{op}_{group}"
            title = str(op) if len(groups) == 1 else f"{op} (group {group} of {len(groups)})"
            figures[name] = _figure(title, of_op[of_op["group"] == group])
    return figures


def _ticks(sweeps: pd.DataFrame) -> list[str]:
    """Each sweep's tick text: its commit over its start time; the seconds where two sweeps
    started in one minute."""
    def text(form: str) -> list[str]:
        return [sweep_name(r, form).replace(" ", "\n", 1) if r["commit"] else
                sweep_name(r, form) for _, r in sweeps.iterrows()]
    ticks = text("%Y-%m-%d %H:%M")
    return ticks if len(set(ticks)) == len(ticks) else text("%Y-%m-%d %H:%M:%S")


def _figure(title: str, group: pd.DataFrame) -> Figure:
    sweeps = group.drop_duplicates("sweep_index").sort_values("sweep_index")
    ticks = _ticks(sweeps)
    at = {s: i for i, s in enumerate(sweeps["sweep_index"])}  # the group's sweeps, no gaps
    # past a few sweeps the labels slant; past MAX_TICKS only every k-th is written
    every = max(1, -(-len(ticks) // MAX_TICKS))
    fig = Figure(figsize=(min(18.0, max(11.0, 0.55 * len(ticks) + 8)), 4.8),
                 layout="constrained")
    ax = fig.subplots()
    trials = list(dict.fromkeys(group["trial_id"]))
    labels = _unique_labels(group, trials)
    for i, trial in enumerate(trials[:MAX_SERIES]):
        line = group[group["trial_id"] == trial].sort_values("sweep_index")
        x = line["sweep_index"].map(at)
        # colour and marker both change, so 12 series never share a look
        ax.plot(x, line["median_us"], marker=MARKERS[i % len(MARKERS)], color=f"C{i % 10}",
                label=f"{labels[trial]} ({line['time'].iloc[0]} time)")
        for verdict, marker in (("slower", "v"), ("faster", "^")):
            hit = line["step"] == verdict
            ax.scatter(x[hit], line.loc[hit, "median_us"], s=140, marker=marker,
                       facecolors="none", edgecolors="red" if verdict == "slower"
                       else "green", linewidths=2, zorder=3)
    ax.set_xticks(range(len(ticks)), [t if k % every == 0 else "" for k, t in enumerate(ticks)],
                  fontsize="small", rotation=30 if len(ticks) > 4 else 0,
                  ha="right" if len(ticks) > 4 else "center")
    if len(ticks) == 1:  # one sweep: the point in the middle, not on an edge
        ax.set_xlim(-1, 1)
    with_commit = bool(sweeps["commit"].astype(bool).any())
    ax.set_xlabel(("sweep (commit, start time)" if with_commit else "sweep (start time)")
                  + (", one so far" if len(ticks) == 1 else ""))
    ax.set_ylabel("median time per call (µs)")
    if spans_decade(group["median_us"]):
        ax.set_yscale("log")
        log_axis(ax.yaxis, group["median_us"])
    ax.grid(True, alpha=0.3)
    left_out = f", {len(trials) - MAX_SERIES} trials left out" \
        if len(trials) > MAX_SERIES else ""
    fig.suptitle(f"{title}: time by sweep (red ▽ slower, green △ faster step){left_out}",
                 fontsize="medium")  # the figure's width: the legend narrows the axes
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small", frameon=False)
    return fig


def _unique_labels(group: pd.DataFrame, trials: list[str]) -> dict[str, str]:
    """Each trial's label; two trials that a label cannot tell apart get their id beside it."""
    first = group.drop_duplicates("trial_id").set_index("trial_id")["trial"]
    counts = first.value_counts()
    return {t: first[t] if counts[first[t]] == 1 else f"{first[t]} [{t[:7]}]" for t in trials}
