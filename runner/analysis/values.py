"""Values on the read side, once each: the missing-value test, number formats, tables.

The compare, report and claims commands print the same quantities (times, speedups,
p-values); one formatter per quantity keeps them alike. Result frames read through
:func:`runner.load` have nullable columns whose ``pd.NA`` is neither equal to itself nor a
bool: :func:`is_missing` is the one test for a missing cell.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

import pandas as pd


def is_missing(value: object) -> bool:
    """True for None, NaN and pandas' missing markers."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    try:
        return bool(value != value)  # NaN
    except (TypeError, ValueError):
        return False


def finite_positive(value: object) -> bool:
    """True for a number (or numeric text) that is finite and > 0: a usable rate or time."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return math.isfinite(v) and v > 0


def fmt_time_us(value: float | None) -> str:
    """A duration given in µs, in a readable unit: ``850 ns``, ``12.3 µs``, ``4.56 ms``."""
    if is_missing(value):
        return "-"
    v = float(value)
    if v < 1:
        return f"{v * 1e3:.3g} ns"
    if v < 1e3:
        return f"{v:.3g} µs"
    if v < 1e6:
        return f"{v / 1e3:.3g} ms"
    return f"{v / 1e6:.3g} s"


def fmt_ratio(value: float | None) -> str:
    """A speedup: ``1.98x``."""
    return "-" if is_missing(value) else f"{float(value):.3g}x"


def fmt_p(value: float | None) -> str:
    """A p-value: ``0.012``, ``<1e-6`` or ``-`` when there is none."""
    if is_missing(value):
        return "-"
    v = float(value)
    return "<1e-6" if v < 1e-6 else f"{v:.2g}"


def fmt_num(value: object, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, or the value as text."""
    if is_missing(value):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if math.isfinite(value) else str(value)
    return str(value)


def text_console(buf: object, width: int = 140) -> object:
    """A rich ``Console`` that writes plain text into ``buf`` (a ``StringIO``): no colour, no
    bold or italic codes, and never a notebook's display. Inside Jupyter rich would otherwise
    send the table to the cell's output itself, with raw ANSI codes in its plain text, and
    leave ``buf`` (what the caller prints or returns) empty."""
    from rich.console import Console

    return Console(file=buf, width=width, force_terminal=False, force_jupyter=False,
                   no_color=True, color_system=None, highlight=False)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""
    def cell(v: object) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def html_table(headers: Sequence[str], rows: Iterable[Sequence[object]],
               row_classes: Sequence[str] | None = None) -> str:
    """A plain HTML table with escaped cells; ``row_classes`` adds a CSS class per row."""
    out = ["<table>", "<thead><tr>" + "".join(f"<th>{html.escape(str(h))}</th>"
                                              for h in headers) + "</tr></thead>", "<tbody>"]
    for i, row in enumerate(rows):
        cls = f' class="{html.escape(row_classes[i])}"' if row_classes else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row)
                   + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)
