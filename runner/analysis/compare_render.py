"""A :class:`~runner.analysis.compare_engine.Comparison` as text: rich table, Markdown, CSV.

Every output ends with the verdict rule in force (:func:`rule_line`), so a table read alone
still says what "faster" meant: which time or metric decided, the threshold and the noise.
"""

from __future__ import annotations

import io

import pandas as pd

from runner.analysis.compare_engine import Comparison
from runner.analysis.significance import rule_text
from runner.analysis.values import (
    fmt_p,
    fmt_ratio,
    fmt_time_us,
    is_missing,
    markdown_table,
    text_console,
)

_PAIR_HEADERS = ["trial", "time", "base", "new", "speedup", "95% CI", "p", "noise", "verdict",
                 "other time"]
_METRIC_HEADERS = ["trial", "base", "new", "speedup", "95% CI", "p", "noise", "verdict",
                   "time"]


def render(result: Comparison, fmt: str = "table", *, base_name: str = "BASE",
           new_name: str = "NEW", width: int | None = None) -> str:
    """The comparison as text: ``table`` (rich), ``csv`` or ``markdown``."""
    if fmt == "csv":
        buf = io.StringIO()
        result.to_frame().to_csv(buf, index=False)
        return buf.getvalue()
    if fmt == "markdown":
        return _render_markdown(result, base_name, new_name)
    if fmt == "table":
        return _render_rich(result, base_name, new_name, width)
    raise ValueError(f"format {fmt!r} is not one of table, csv, markdown")


def _time_pair(base_us: object, new_us: object) -> str:
    if is_missing(base_us) or is_missing(new_us):
        return "-"
    return f"{fmt_time_us(base_us)} → {fmt_time_us(new_us)}"


def _pair_cells(row: pd.Series, with_note: bool, metric: str = "time") -> list[str]:
    stats = [fmt_ratio(row["speedup"]), f"[{row['ci_low']:.3g}, {row['ci_high']:.3g}]",
             fmt_p(row["p_value"]), f"{row['noise_pct']:.1f}%", row["verdict"]]
    if metric == "time":
        cells = [row["trial"], row["time"], fmt_time_us(row["base_us"]),
                 fmt_time_us(row["new_us"]), *stats,
                 _time_pair(row["base_other_us"], row["new_other_us"])]
    else:
        shown = _time_pair(row["base_us"], row["new_us"])
        cells = [row["trial"], f"{row['base_value']:.4g}", f"{row['new_value']:.4g}", *stats,
                 shown if shown == "-" else f"{row['time']} {shown}"]
    return cells + [row.get("note") or ""] if with_note else cells


def _headers(result: Comparison) -> tuple[list[str], bool]:
    with_note = "note" in result.pairs.columns and result.pairs["note"].fillna("").ne("").any()
    headers = _PAIR_HEADERS if result.metric == "time" else _METRIC_HEADERS
    return headers + (["note"] if with_note else []), with_note


def summary_line(result: Comparison) -> str:
    """``N compared: a faster, b slower, c same; geomean 1.02x [0.99, 1.05]``."""
    c = result.counts()
    n = c["faster"] + c["slower"] + c["same"] + c["noisy"]
    line = f"{n} compared: {c['faster']} faster, {c['slower']} slower, {c['same']} same"
    if c["noisy"]:
        line += f", {c['noisy']} noisy (not judged)"
    if n:
        line += (f"; geomean speedup {fmt_ratio(result.geomean)} "
                 f"[{result.geomean_low:.3g}, {result.geomean_high:.3g}]")
    extra = [f"{c[k]} {k.replace('_', ' ')}" for k in ("not_compared", "only_base", "only_new")
             if c[k]]
    if extra:
        line += "; " + ", ".join(extra)
    return line


def rule_line(result: Comparison) -> str:
    """The verdict rule in force, printed under every output."""
    rule = (f"{rule_text(result.alpha, result.threshold)}; speedup = base/new "
            f"(> 1: NEW faster); ")
    if result.metric != "time":
        ignored = "" if result.time == "auto" else f"; --time {result.time} ignored"
        return rule + (f"metric {result.metric} (lower is better; 'faster' = lower in NEW; "
                       "one value per trial, so no p-value; the time column is context, "
                       f"gpu where both rows have it, else loop{ignored})")
    which = {"auto": "gpu (device time) where both rows have it, else loop time",
             "gpu": "gpu (device time) only", "loop": "loop time (host cost included)"}
    return rule + f"time: {which[result.time]} (--time {result.time})"


def _render_markdown(result: Comparison, base_name: str, new_name: str) -> str:
    out = [f"## {base_name} → {new_name}", ""]
    if len(result.pairs):
        headers, with_note = _headers(result)
        out.append(markdown_table(headers, (_pair_cells(r, with_note, result.metric)
                                            for _, r in result.pairs.iterrows())))
        out.append("")
    out += [f"**{summary_line(result)}**", "", rule_line(result), ""]
    if result.noisy():
        out += ["### Noisy: not judged", ""] + [f"- {line}" for line in result.noisy()] + [""]
    out += _side_sections_md(result)
    return "\n".join(out).rstrip() + "\n"


def _side_sections_md(result: Comparison) -> list[str]:
    out = []
    if len(result.not_compared):
        out += ["### Not compared", "",
                markdown_table(["trial", "base", "new", "reason"],
                               ([r["trial"], r["base_status"], r["new_status"],
                                 _reason(r)] for _, r in result.not_compared.iterrows())), ""]
    for title, frame in (("Only in BASE", result.only_base), ("Only in NEW", result.only_new)):
        if len(frame):
            out += [f"### {title}", "", markdown_table(
                ["trial", "status"], ([r["trial"], r["status"]] for _, r in frame.iterrows())), ""]
    if result.axis_notes:
        out += ["### Why some trials did not match", ""]
        out += [f"- {n}" for n in result.axis_notes] + [""]
    return out


def _reason(row: pd.Series) -> str:
    reasons = [str(row[k]) for k in ("new_reason", "base_reason")
               if k in row and not is_missing(row[k])]
    return (reasons[0] if reasons else "").splitlines()[0][:120] if reasons else ""


def _render_rich(result: Comparison, base_name: str, new_name: str, width: int | None) -> str:
    from rich.table import Table

    buf = io.StringIO()
    console = text_console(buf, width or 140)
    if len(result.pairs):
        title = f"{base_name} → {new_name}" + (
            "" if result.metric == "time" else f": {result.metric}")
        table = Table(title=title, show_lines=False)
        headers, with_note = _headers(result)
        for h in headers:
            text = h in ("trial", "time", "note")
            table.add_column(h, justify="left" if text else "right",
                             overflow="fold" if h in ("trial", "note") else "ellipsis")
        for _, row in result.pairs.iterrows():
            table.add_row(*_pair_cells(row, with_note, result.metric))
        console.print(table)
    else:
        console.print(f"{base_name} → {new_name}: no trial could be compared.")
    console.print(summary_line(result), markup=False)
    console.print(rule_line(result), markup=False)
    if result.noisy():
        console.print("Noisy, not judged on their medians (never 'slower'):", markup=False)
        for line in result.noisy():
            console.print(f"  - {line}", markup=False)
    if len(result.not_compared):
        side = Table(title="Not compared", title_justify="left")
        for h in ("trial", "base", "new", "reason"):
            side.add_column(h, overflow="fold")
        for _, r in result.not_compared.iterrows():
            side.add_row(r["trial"], r["base_status"], r["new_status"], _reason(r))
        console.print(side)
    for title, frame in (("Only in BASE", result.only_base), ("Only in NEW", result.only_new)):
        if len(frame):
            side = Table(title=title, title_justify="left")
            side.add_column("trial", overflow="fold")
            side.add_column("status")
            for _, r in frame.iterrows():
                side.add_row(r["trial"], str(r["status"]))
            console.print(side)
    if result.axis_notes:
        console.print("Why some trials did not match:", markup=False)
        for note in result.axis_notes:
            console.print(f"  - {note}", markup=False)
    return buf.getvalue()
