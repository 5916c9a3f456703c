"""What the user sees in the terminal: a progress bar over trials and a summary table.

Everything goes to stderr except the summary table, so ``python -m runner ... > table.txt``
captures just the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from runner.core.axes import mode_label


def _console(stderr: bool) -> Console:
    """A console that is at least 160 columns wide when output is not a terminal (CI, pipes,
    notebooks), so the summary table is not folded into unreadable slivers."""
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=160)


stderr = _console(stderr=True)
stdout = _console(stderr=False)

#: Summary rows shown before the table is cut (the Parquet file has them all).
MAX_SUMMARY_ROWS = 60


def _bar_columns() -> tuple[Any, ...]:
    return (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("{task.fields[current]}"))


@contextmanager
def progress(total: int, title: str) -> Iterator[Callable[[str], None]]:
    """A progress bar for work that finishes out of order (``workers=N``): yields
    ``advance(label)``, to call as each item finishes (under the caller's lock)."""
    with Progress(*_bar_columns(), console=stderr, transient=False) as bar:
        task = bar.add_task(title, total=total, current="")
        yield lambda label: bar.update(task, current=label, advance=1)
        bar.update(task, current="done")


def track(items: Sequence[Any], title: str, label: Any = str) -> Iterator[Any]:
    """Yield ``items`` under a progress bar whose text shows the current item's label."""
    with Progress(*_bar_columns(), console=stderr, transient=False) as progress:
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


def summary_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    """Compact per-trial table: what ran, how long, how fast, how sure, how accurate, and a
    note (why a trial is not ok, or that its median is noisy)."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for name, justify in (("op", "left"), ("params", "left"), ("dtype", "left"),
                          ("shape", "left"), ("mode", "left"), ("status", "left"),
                          ("median µs", "right"), ("±CI", "right"), ("TFLOP/s", "right"),
                          ("GB/s", "right"), ("n", "right"), ("acc", "center"),
                          ("note", "left")):
        table.add_column(name, justify=justify, overflow="fold",
                         no_wrap=name not in ("params", "note", "shape"))
    styles = {"ok": "green", "skipped": "yellow"}
    for row in rows[:MAX_SUMMARY_ROWS]:
        status = row.get("status") or "?"
        params = " ".join(f"{k[6:]}={row[k]}" for k in row
                          if k.startswith("param_") and row[k] is not None)
        ci = row.get("ci_rel_halfwidth")
        ci_text = "–" if ci is None or math.isinf(ci) else f"{100 * ci:.1f}%"
        accurate = row.get("accuracy_ok")
        acc = "–" if accurate is None else ("[green]✓[/]" if accurate else "[red]✗[/]")
        note = (row.get("reason") or "")[:120]
        if status == "ok" and row.get("noisy"):
            note = f"[yellow]noisy ({row.get('noisy_reason') or 'CI > target_rel'})[/]"
        ok = status == "ok"
        table.add_row(
            row.get("op"), params, row.get("dtype"), row.get("shape_str"), mode_label(row),
            f"[{styles.get(status, 'red')}]{status}[/]",
            _fmt(row.get("time_median_us")) if ok else "", ci_text if ok else "",
            _fmt(row.get("tflops")) if ok else "", _fmt(row.get("gbps")) if ok else "",
            _fmt(row.get("n_samples")) if ok else "", acc if ok else "", note)
    if len(rows) > MAX_SUMMARY_ROWS:
        table.caption = f"{len(rows) - MAX_SUMMARY_ROWS} more rows in the Parquet file"
    return table
