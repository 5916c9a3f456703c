"""The history command's table: one row per trial, one table per group of trials that ran in
the same sweeps (``runner.analysis.history``), rendered as compare renders its table: times in
a readable unit (``209 µs``, ``2.17 s``), columns aligned by rich, Markdown for a pull request
and HTML for a page."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd

from runner.analysis.values import fmt_time_us, html_table, markdown_table, text_console

HEADERS = ["trial", "op", "time", "sweeps", "first", "last", "change", "steps"]


def render(result: Any, fmt: str = "table", width: int | None = None) -> str:
    """The per-trial table of ``result`` (a ``History``) as ``table`` (rich), ``markdown`` or
    ``html``."""
    trials = result.trials
    groups = sorted(trials["group"].unique()) if "group" in trials else [1]
    if fmt in ("markdown", "html"):
        several = len(groups) > 1
        headers = (["group"] if several else []) + HEADERS
        rows = [([row["group"]] if several else []) + _cells(row)
                for _, row in trials.sort_values("group", kind="stable").iterrows()]
        table = markdown_table if fmt == "markdown" else html_table
        return table(headers, rows) + "\n"
    if fmt != "table":
        raise ValueError(f"format {fmt!r} is not one of table, markdown, html")
    from rich.table import Table

    buf = io.StringIO()
    console = text_console(buf, width or 140)
    for group in groups:
        mine = trials[trials["group"] == group] if "group" in trials else trials
        table = Table(title=_title(result.points, mine, group, len(groups)))
        for h in HEADERS:
            table.add_column(h, justify="right" if h in ("sweeps", "first", "last", "change")
                             else "left", overflow="fold" if h in ("trial", "steps") else
                             "ellipsis")
        for _, row in mine.iterrows():
            table.add_row(*map(str, _cells(row)))
        console.print(table)
    return buf.getvalue()


def _cells(row: pd.Series) -> list[object]:
    return [row["trial"], row["op"], row["time"], row["sweeps"], fmt_time_us(row["first_us"]),
            fmt_time_us(row["last_us"]), f"{row['change_pct']:+.1f}%", row["steps"] or ""]


def _title(points: pd.DataFrame, trials: pd.DataFrame, group: int, groups: int) -> str:
    """``trials over N sweeps (first → last)``, the sweeps named by commit and start time."""
    mine = points[points["trial_id"].isin(trials["trial_id"])]
    sweeps = mine.drop_duplicates("sweep_index").sort_values("sweep_index")
    ends = [sweep_name(r) for r in (sweeps.iloc[0], sweeps.iloc[-1])]
    span = ends[0] if len(sweeps) == 1 else f"{ends[0]} → {ends[1]}"
    lead = f"group {group} of {groups}: " if groups > 1 else ""
    return f"{lead}{len(trials)} trial(s) over {len(sweeps)} sweep(s) ({span})"


def sweep_name(point: pd.Series, form: str = "%Y-%m-%d %H:%M") -> str:
    """A sweep as a reader tells it apart: its commit (when recorded) and start time, or its
    id when the start time is unknown (``point``: a row of ``History.points``)."""
    started = point["started"]
    when = started.strftime(form) if isinstance(started, pd.Timestamp) and not pd.isna(started) \
        else str(point["sweep_id"])
    return f"{point['commit']} {when}" if point["commit"] else when


def where(commit: str, sweep_id: str) -> str:
    """Where a step happened: ``abc1234 (sweep id)``, or the sweep alone without git."""
    return f"{commit} ({sweep_id})" if commit else f"sweep {sweep_id}"
