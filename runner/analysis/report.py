"""``python -m runner.report DIR``: a self-contained report of a sweep (or several).

Why: a results table answers "what was measured"; a person wants to *see* how time scales
with size, how close each op gets to the device's ceilings, what the execution modes buy and
how noisy the measurements are. This writes, into ``DIR/report/`` by default:

* ``index.html`` (or ``report.md`` with ``--format markdown``): summary, every plot (PNGs
  embedded in the HTML, so the one file can be mailed or attached to a CI run), a note for
  each plot that has no data in this sweep, and a table of every trial with its status;
* one PNG per plot (``scaling_<op>.png``, ``roofline.png``, ``modes.png``, ``samples.png``);
* ``trials.csv``: the full trial table, as numbers with units in the headers.

Roofline fields missing from the results (older sweeps) are computed at report time from
the calibration under the results root or the fallback table (``runner.analysis.roofline``).
"""

from __future__ import annotations

import base64
import html
import io
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from runner.analysis import insight
from runner.analysis.calibration import CALIBRATION_DIR
from runner.analysis.ceilings import ceilings_for
from runner.analysis.figure import Plot, with_modes
from runner.analysis.plots import all_plots
from runner.analysis.roofline import annotate
from runner.analysis.selection import (
    apply_filters,
    display_columns,
    display_name,
    display_value,
    shown_columns,
)
from runner.analysis.values import (
    fmt_num,
    html_table,
    is_missing,
    markdown_table,
)
from runner.cli import OneLineArgumentParser, fail, program
from runner.storage.load import load
from runner.storage.result_files import find_result_files

#: Most trial rows written into the HTML/Markdown table (all are in trials.csv).
MAX_TABLE_ROWS = 2000
PNG_DPI = 110

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
img { max-width: 100%; border: 1px solid #ddd; }
.note { color: #8a6d3b; background: #fcf8e3; padding: .4em .8em; border-radius: 4px; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: left; }
th { background: #f4f4f4; position: sticky; top: 0; }
tr.error td, tr.oom td { background: #fdecea; } tr.skipped td { background: #f4f4f4; }
"""


def guess_results_root(source: Path) -> Path | None:
    """The results root holding ``calibration/`` for a sweep dir, file or root."""
    start = source if source.is_dir() else source.parent
    for candidate in (start, *start.parents[:3]):
        if (candidate / CALIBRATION_DIR).is_dir():
            return candidate
    return None


def trial_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per trial, as data: every display column (sweep, op, axes, ``mode``, op
    parameters), status, then the times, throughput and roofline as numbers with the unit
    in the header (``trials.csv`` is this table). The device time, where a row has one, is
    the headline: TFLOP/s and GB/s come from it (``tflops``, ``gbps``)."""
    df = with_modes(df)

    def number(name: str, scale: float = 1.0) -> pd.Series:
        if name not in df.columns:
            return pd.Series([float("nan")] * len(df), index=df.index)
        return pd.to_numeric(df[name], errors="coerce") * scale

    def reason_text(value: object) -> str:
        text = "" if is_missing(value) else (str(value).strip().splitlines() or [""])[0]
        return text if len(text) <= 120 else text[:117] + "..."

    spec = {display_name(c): [display_value(c, v) for v in df[c]]
            for c in display_columns(df) if df[c].notna().any()}
    out = pd.DataFrame(spec, index=df.index)
    out["status"] = df["status"].astype(object) if "status" in df.columns else ""
    none = pd.Series(index=df.index, dtype=object)  # a column the rows lack
    out["reason"] = [reason_text(v) for v in df.get("reason", none)]
    device = number("gpu_time_us")
    has_device = bool(device.notna().any())
    if has_device:  # the headline on CUDA rows
        out["device time (µs)"] = device
    out["loop time median (µs)"] = number("time_median_us")
    ci = number("gpu_time_ci_rel_halfwidth", 100.0).where(device.notna(), number(
        "ci_rel_halfwidth", 100.0)).mask(df.get("gpu_time_statistic", none) == "mean")  # median's
    out["±CI (%)"] = ci.where(ci.map(lambda v: v == v and v != float("inf")))
    out["TFLOP/s"] = number("tflops")
    out["GB/s"] = number("gbps")
    out["bound"] = df["bound"].astype(object) if "bound" in df.columns else None
    out["% of peak"] = number("pct_of_peak")
    out["noisy"] = [v is True for v in df.get("noisy", none).astype(object)]
    out = out.assign(**insight.table_columns(df))  # kernels and energy, when measured
    if has_device:
        out["device time reason"] = [reason_text(v) for v in df.get("gpu_time_reason", none)]
    return out.reset_index(drop=True)


def shown_table(table: pd.DataFrame, df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The trial table as the HTML/Markdown report shows it: the display columns that do not
    vary left out (returned as one line, ``dtype=fp32 device=cpu``), empty columns dropped,
    numbers as text."""
    df = with_modes(df)
    varying, fixed = shown_columns(df)
    constant = [display_name(c) for c in display_columns(df) if c not in varying]
    if "op" in constant and len(table):
        constant.remove("op")  # the op stays: a row must say what it timed
    shown = table.drop(columns=[c for c in constant if c in table.columns])
    if "noisy" in shown.columns:
        shown["noisy"] = shown["noisy"].map(lambda v: "yes" if v is True else "")
    shown = shown.drop(columns=[c for c in shown.columns
                                if shown[c].map(lambda v: is_missing(v) or v == "").all()
                                and c != "status"])
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            shown[c] = shown[c].map(_number_text)
    fixed.pop("sweep_id", None)
    fixed.pop("op", None)
    return shown, "  ".join(f"{display_name(k)}={v}" for k, v in fixed.items())


def _number_text(value: object) -> str:
    """``3,440`` rather than ``3.44e+03``; three significant digits below 1000."""
    return fmt_num(value) if is_missing(value) or abs(float(value)) < 1000 else f"{value:,.0f}"


def build_report(source: str | os.PathLike | Sequence[str | os.PathLike], out_dir:
                 str | os.PathLike | None = None, *, fmt: str = "html",
                 filters: Iterable[str] = (), results_root: str | os.PathLike | None = None
                 ) -> Path:
    """Write the report for ``source`` (sweep dir, file, root, glob) and return its main file.

    Raises ``ValueError`` for a bad source, filter or format.
    """
    if fmt not in ("html", "markdown"):
        raise ValueError(f"format {fmt!r} is not one of html, markdown")
    first = Path(source if isinstance(source, (str, os.PathLike)) else list(source)[0])
    df = load(source)
    filters = list(filters)
    if filters:
        df = apply_filters(df, filters)
    root = Path(results_root) if results_root is not None else guess_results_root(first)
    notes = []
    if "bound" not in df.columns or df["bound"].isna().all():
        df = annotate(df, results_root=root)
        notes.append("roofline fields were computed when this report was built")
    out = Path(out_dir) if out_dir is not None else _default_out_dir(first)
    out.mkdir(parents=True, exist_ok=True)
    ceilings = ceilings_for(df, root) if len(df) else []
    plots = all_plots(df, ceilings)
    images = {}
    for plot in plots:
        if plot.figure is not None:
            images[plot.name] = _save_png(plot, out)
    table = trial_table(df)
    table.to_csv(out / "trials.csv", index=False)
    table, fixed = shown_table(table, df)
    summary = _summary(df, ceilings, notes, [str(f) for f in find_result_files(source)])
    if fixed:
        summary.append(("same in every trial", fixed))
    if fmt == "markdown":
        path = out / "report.md"
        path.write_text(_markdown(summary, plots, table), encoding="utf-8")
    else:
        path = out / "index.html"
        path.write_text(_html(summary, plots, images, table), encoding="utf-8")
    return path


def _default_out_dir(first: Path) -> Path:
    base = first if first.is_dir() else first.parent
    return base / "report"


def _save_png(plot: Plot, out: Path) -> bytes:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", plot.name)
    buf = io.BytesIO()
    plot.figure.savefig(buf, format="png", dpi=PNG_DPI)
    data = buf.getvalue()
    (out / f"{safe}.png").write_bytes(data)
    plot.name = safe
    return data


def _summary(df: pd.DataFrame, ceilings: list, notes: list[str], sources: list[str]
             ) -> list[tuple[str, str]]:
    def values(name: str) -> str:
        if name not in df.columns:
            return "-"
        return ", ".join(sorted({str(v) for v in df[name].dropna().astype(object)})) or "-"

    counts = df["status"].astype(str).value_counts().to_dict() if "status" in df.columns else {}
    items = [
        ("sweeps", values("sweep_id")),
        ("trials", f"{len(df)} (" + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")"),
        ("devices", values("device_name")),
        ("ops", values("op")),
        ("torch", values("torch_version")),
        ("ceilings", ", ".join(sorted({c.source for c in ceilings})) or
         "none (no calibration, no fallback entry)"),
        ("files", f"{len(sources)} result file(s)"),
    ]
    items += [("note", n) for n in notes]
    return items


def _html(summary, plots: list[Plot], images: dict[str, bytes], table: pd.DataFrame) -> str:
    title = "opsweep report"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>",
             f"<style>{_CSS}</style></head><body>", f"<h1>{title}</h1>", "<dl>"]
    parts += [f"<dt><b>{html.escape(k)}</b></dt><dd>{html.escape(v)}</dd>" for k, v in summary]
    parts.append("</dl>")
    for plot in plots:
        parts.append(f"<h2>{html.escape(plot.title)}</h2>")
        if plot.figure is not None:
            data = base64.b64encode(images[plot.name]).decode("ascii")
            parts.append(f"<img alt='{html.escape(plot.title)}' "
                         f"src='data:image/png;base64,{data}'>")
        if plot.note:
            kind = "left out: " if plot.figure is None else ""
            parts.append(f"<p class='note'>{html.escape(kind + plot.note)}</p>")
    parts.append(f"<h2>Every trial ({len(table)})</h2>")
    shown = table.head(MAX_TABLE_ROWS)
    if len(table) > len(shown):
        parts.append(f"<p class='note'>first {len(shown)} rows shown; all are in "
                     "trials.csv</p>")
    status = shown["status"].astype(str).tolist() if "status" in shown.columns else None
    parts.append(html_table(list(shown.columns), shown.itertuples(index=False), status))
    parts.append("</body></html>")
    return "\n".join(parts)


def _markdown(summary, plots: list[Plot], table: pd.DataFrame) -> str:
    lines = ["# opsweep report", ""]
    lines += [f"- **{k}**: {v}" for k, v in summary] + [""]
    for plot in plots:
        lines += [f"## {plot.title}", ""]
        if plot.figure is not None:
            lines += [f"![{plot.title}]({plot.name}.png)", ""]
        if plot.note:
            lines += [f"> {'left out: ' if plot.figure is None else ''}{plot.note}", ""]
    shown = table.head(MAX_TABLE_ROWS)
    lines += [f"## Every trial ({len(table)})", ""]
    if len(table) > len(shown):
        lines += [f"> first {len(shown)} rows shown; all are in trials.csv", ""]
    lines += [markdown_table(list(shown.columns), shown.itertuples(index=False)), ""]
    return "\n".join(lines)


def build_parser() -> OneLineArgumentParser:
    p = OneLineArgumentParser(prog=program("runner.report"),
                              description="Write an HTML or Markdown report with plots.")
    p.add_argument("source", nargs="+", metavar="DIR",
                   help="sweep dir (results/<sweep_id>), .parquet file, results root or glob")
    p.add_argument("--out", "-o", metavar="OUT_DIR", help="where to write (default DIR/report)")
    p.add_argument("--format", choices=("html", "markdown"), default="html")
    p.add_argument("--filter", action="append", default=[], metavar="AXIS=VALUE",
                   help="keep trials with AXIS=VALUE[,VALUE]; repeat to AND")
    p.add_argument("--results-root", metavar="ROOT",
                   help="where calibration/ lives (default: found above DIR)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    source = args.source[0] if len(args.source) == 1 else args.source
    try:
        path = build_report(source, args.out, fmt=args.format, filters=args.filter,
                            results_root=args.results_root)
    except ValueError as exc:
        fail(str(exc), prog=parser.prog)
    except OSError as exc:
        fail(f"cannot write the report: {exc}", prog=parser.prog)
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
