"""What the user sees in the terminal: a progress bar over trials and a summary table.

Everything goes to stderr except the summary table, so ``python -m runner ... > table.txt``
captures just the table.
"""

from __future__ import annotations

import math
from typing import Any, Iterator, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

def _console(stderr: bool) -> Console:
    """A console that is at least 160 columns wide when output is not a terminal (CI, pipes,
    notebooks), so the summary table is not folded into unreadable slivers."""
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=160)


stderr = _console(stderr=True)
stdout = _console(stderr=False)

#: Summary rows shown before the table is cut (the Parquet file has them all).
MAX_SUMMARY_ROWS = 60


def track(items: Sequence[Any], title: str, label: Any = str) -> Iterator[Any]:
    """Yield ``items`` under a progress bar whose text shows the current item's label."""
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("{task.fields[current]}"))
    with Progress(*columns, console=stderr, transient=False) as progress:
        task = progress.add_task(title, total=len(items), current="")
        for item in items:
            progress.update(task, current=label(item))
            yield item
            progress.advance(task)
        progress.update(task, current="done")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.{digits}g}"
    return str(value)


def _mode(row: dict[str, Any]) -> str:
    parts = []
    if row.get("streams", 1) not in (1, None):
        parts.append(f"streams={row['streams']}")
    if row.get("graph") not in ("none", None):
        parts.append(row["graph"])
    if row.get("compile") not in ("none", None):
        parts.append(f"compile={row['compile']}")
    if row.get("backward"):
        parts.append("fwd+bwd")
    return " ".join(parts) or "eager"


def summary_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    """Compact per-trial table: what ran, how long, how fast, how sure, how accurate."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for name, justify in (("op", "left"), ("params", "left"), ("dtype", "left"),
                          ("shape", "left"), ("mode", "left"), ("status", "left"),
                          ("median µs", "right"), ("±CI", "right"), ("TFLOP/s", "right"),
                          ("GB/s", "right"), ("n", "right"), ("acc", "center")):
        table.add_column(name, justify=justify, overflow="fold")
    for row in rows[:MAX_SUMMARY_ROWS]:
        status = row.get("status")
        params = " ".join(f"{k[6:]}={row[k]}" for k in row
                          if k.startswith("param_") and row[k] is not None)
        if status != "ok":
            reason = (row.get("reason") or "")[:80]
            style = "yellow" if status == "skipped" else "red"
            table.add_row(row.get("op"), params, row.get("dtype"), row.get("shape_str"),
                          _mode(row), f"[{style}]{status}[/]", f"[{style}]{reason}[/]",
                          "", "", "", "", "")
            continue
        ci = row.get("ci_rel_halfwidth")
        ci_text = "–" if ci is None or math.isinf(ci) else f"{100 * ci:.1f}%"
        if row.get("noisy"):
            ci_text = f"[yellow]{ci_text} noisy[/]"
        accurate = row.get("accuracy_ok")
        acc = "–" if accurate is None else ("[green]✓[/]" if accurate else "[red]✗[/]")
        table.add_row(row.get("op"), params, row.get("dtype"), row.get("shape_str"), _mode(row),
                      "ok", _fmt(row.get("time_median_us")), ci_text, _fmt(row.get("tflops")),
                      _fmt(row.get("gbps")), _fmt(row.get("n_samples")), acc)
    if len(rows) > MAX_SUMMARY_ROWS:
        table.caption = f"{len(rows) - MAX_SUMMARY_ROWS} more rows in the Parquet file"
    return table
