"""The summary table printed after a sweep: one line per trial, what varies between them,
how long, how fast, how sure, how accurate, and a note.

A device time is shown with what it is: ``capped °C`` says the power cap set the clock and
how hot the board was as its timing ended (``temperature_c_timed``), since a capped
number is the sustained one at that temperature (docs/timing.md#burst-and-sustained-the-power-cap);
a ``sustained_flag`` leads the note, since that number may not be what the GPU sustains, and
an ``allocation_flag`` follows it: that number depends on where the process put the op's bytes."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

#: Summary rows shown before the table is cut (the Parquet file has them all).
MAX_SUMMARY_ROWS = 60
#: Characters of a note shown in the table (the row has the whole text).
NOTE_CHARS = 160


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.{digits}g}"
    return str(value)


def _number(row: dict[str, Any], name: str) -> float | None:
    """A finite number (NumPy's too, from a DataFrame's rows), else None."""
    value = row.get(name)
    if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return None if math.isnan(value) or math.isinf(value) else float(value)


def _text(row: dict[str, Any], name: str) -> str | None:
    """A non-empty string, else None (a DataFrame's missing text is NaN)."""
    value = row.get(name)
    return value if isinstance(value, str) and value else None


def _capped(row: dict[str, Any]) -> bool:
    """Whether the row's op was power-capped (None or NaN: not told, not capped)."""
    value = row.get("power_capped")
    return value is not None and value == value and bool(value)


def _blank_reason(rows: Sequence[dict[str, Any]], column: str, what: str) -> str | None:
    """Why ok rows have no ``column`` (TFLOP/s, GB/s): which ops declare no ``what``."""
    ops = sorted({str(row.get("op")) for row in rows
                  if row.get("status") == "ok" and _number(row, column) is None})
    if not ops:
        return None
    key = "flops" if column == "tflops" else "bytes_moved"
    fix = f"; for op=custom set op.{key}" * ("custom" in ops)
    return f"– under {column_title(column)}: the op declares no {what} ({', '.join(ops)}{fix})"


def column_title(column: str) -> str:
    return {"tflops": "TFLOP/s", "gbps": "GB/s"}.get(column, column)


#: What varies between the rows: headers, each row's cells for them, and one line of what
#: does not (``runner.analysis.selection.spec_cells`` makes it; the console draws it).
Spec = tuple[list[str], list[list[str]], str]


def summary_table(rows: Sequence[dict[str, Any]], title: str, spec: Spec | None = None
                  ) -> Table:
    """Compact per-trial table: what varies between the trials (every axis and op parameter
    that takes more than one value, each its own column; the ones that do not are one line
    under the title), how long, how fast, how sure, how accurate, and a note (why a trial is
    not ok, or that its median is noisy).

    On rows with a device time (CUDA) that time is the headline, next to the loop time, with
    ``bound``; TFLOP/s and GB/s come from the device time there (``tflops``, ``gbps``).
    ``spec``: what varies, for the first :data:`MAX_SUMMARY_ROWS` rows (None: the op only)."""
    shown = list(rows[:MAX_SUMMARY_ROWS])
    headers, spec_texts, fixed = spec if spec is not None else ([], [[] for _ in shown], "")
    table = Table(title=f"{title}\n" + escape(fixed) if fixed else title, title_justify="left",
                  header_style="bold", caption_justify="left")
    has = {"device": any(_number(r, "gpu_time_us") is not None for r in shown),
           "bound": any(r.get("bound") for r in shown),
           "capped": any(_capped(r) for r in shown),
           "note": any(_text(r, "reason") or r.get("noisy") or _text(r, "sustained_flag")
                       or _text(r, "allocation_flag") for r in shown)}
    table.add_column("op", no_wrap=True)
    for header in headers:
        table.add_column(header, overflow="fold")
    for name, justify in _measures(has):
        # the note wraps at words, never mid-word, and keeps room to be read
        table.add_column(name, justify=justify, no_wrap=name != "note",
                         min_width=30 if name == "note" else None)
    for index, row in enumerate(shown):
        table.add_row(escape(str(row.get("op"))), *(escape(t) for t in spec_texts[index]),
                      *_measured_cells(row, has))
    table.caption = "\n".join(_captions(rows, shown, has)) or None
    return table


def _measures(has: dict[str, bool]) -> list[tuple[str, str]]:
    """The measured columns (name, justify): those no shown row fills are left out."""
    times = [("device µs", "right"), ("loop µs", "right")] if has["device"] \
        else [("median µs", "right")]
    times += [("capped °C", "right")] if has["capped"] else []
    return [("status", "left"), *times, ("±CI", "right"), ("TFLOP/s", "right"),
            ("GB/s", "right"), *([("bound", "left")] if has["bound"] else []),
            ("n", "right"), ("acc", "center"), *([("note", "left")] if has["note"] else [])]


def _measured_cells(row: dict[str, Any], has: dict[str, bool]) -> list[str]:
    """One row's cells under :func:`_measures`: a trial not ok shows its status and note."""
    status = row.get("status") or "?"
    ok = status == "ok"
    device = _number(row, "gpu_time_us")
    ci = _number(row, "gpu_time_ci_rel_halfwidth" if device is not None else "ci_rel_halfwidth")
    if row.get("gpu_time_statistic") == "mean":  # the CI columns are the median's
        ci = None
    note = escape(_cut(_text(row, "reason") or ""))
    flag, placed = _text(row, "sustained_flag"), _text(row, "allocation_flag")
    if ok and (row.get("noisy") or flag or placed):  # noisy first: short; a flag may be cut
        words = [*([f"noisy ({_text(row, 'noisy_reason') or 'CI > target_rel'})"]
                   if row.get("noisy") else []),
                 *([f"may not be sustained: {flag}"] if flag else []),
                 *([placed] if placed else [])]
        note = f"[yellow]{escape(_cut('; '.join(words)))}[/]"
    acc = row.get("accuracy_ok")
    accurate = "–" if acc is None else ("[green]✓[/]" if acc else "[red]✗[/]")
    times = ([_fmt(device)] if has["device"] else []) + [_fmt(_number(row, "time_median_us"))]
    if has["capped"]:  # the board's temperature sets the capped clock it sustains
        temperature_c = _number(row, "temperature_c_timed")
        times.append("–" if not _capped(row) else
                      "yes" if temperature_c is None else f"{temperature_c:.0f}")
    bound = [escape(str(row.get("bound") or "–"))] if has["bound"] else []
    measured = [*times, "–" if ci is None else f"{100 * ci:.1f}%", _fmt(row.get("tflops")),
                _fmt(row.get("gbps")), *bound, _fmt(row.get("n_samples")), accurate]
    style = {"ok": "green", "skipped": "yellow"}.get(status, "red")
    return [f"[{style}]{status}[/]", *(m if ok else "" for m in measured),
            *([note] if has["note"] else [])]


def _cut(text: str) -> str:
    """``text`` cut to :data:`NOTE_CHARS` at a word, with an ellipsis where it was cut."""
    return text if len(text) <= NOTE_CHARS else text[:NOTE_CHARS].rsplit(" ", 1)[0] + " …"


def _captions(rows: Sequence[dict[str, Any]], shown: list, has: dict[str, bool]) -> list[str]:
    """The lines under the table: why cells are blank, what was cut, where traces are."""
    captions = [text for text in (_blank_reason(shown, "tflops", "FLOP count"),
                                  _blank_reason(shown, "gbps", "byte count")) if text]
    if len(rows) > MAX_SUMMARY_ROWS:
        captions.append(f"{len(rows) - MAX_SUMMARY_ROWS} more rows in the Parquet file")
    traces = sorted({str(Path(r["trace_path"]).parent) for r in rows if r.get("trace_path")})
    if traces:
        captions.append(escape(f"profile traces (trace_path): {', '.join(traces)} under the "
                               "sweep folder; open one in ui.perfetto.dev"))
    if has["device"]:
        captions.append("device µs: the GPU's own time per call (docs/timing.md); loop µs: "
                        "a back-to-back eager loop on this host")
    if has["capped"]:
        captions.append("capped °C: the power cap set the clock; the device time is what the "
                        "GPU sustains at that temperature (temperature_c_timed), and a hotter "
                        "board reads slower")
    if any(row.get("gpu_time_statistic") == "mean" for row in shown):
        captions.append("device µs of a row sampled back to back under the power cap is the "
                        "mean of its samples (gpu_time_statistic): the clock cycles there, and "
                        "the power limit sets the average; the CI columns are the median's, so "
                        "its ±CI is left out (docs/timing.md#the-median-of-a-cycling-clock)")
    return captions
