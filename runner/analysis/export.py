"""Results in the formats other tools read: ``python -m runner.export SWEEP --format F``.

Why: a CI dashboard, a spreadsheet or another benchmark tool should not need pandas and
pyarrow to read a sweep. Every format holds one record per trial, read through
:func:`runner.storage.load.load` (reading results never runs code):

* ``json``: a list of objects, one per trial, every column by its name; nulls are ``null``,
  times ISO 8601, list columns (``shape``; ``samples_us`` with ``--samples``) JSON lists,
  floats written exactly (``repr``), so ``json.load`` gives back the stored values.
* ``csv``: the same records as a header and one line per trial; a list cell is its JSON
  text, a null is empty, a boolean ``true``/``false``.
* ``benchmark-action``: the custom format of github-action-benchmark (``tool:
  customSmallerIsBetter``): a list of ``{"name", "unit", "value", "range", "extra"}``, one
  per trial that has a time. ``value`` is the median in microseconds: the device time where
  the trial has one, else the loop time, and the name says which, so that a dashboard's
  series never mixes the two. ``name`` is the trial's spec (never the sweep), so the same
  trial in the next commit's sweep extends the same series. docs/analysis.md ("Export")
  says how to use it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from runner.analysis.figure import with_modes
from runner.analysis.selection import display_columns, spec_label
from runner.cli import OneLineArgumentParser, fail, program
from runner.storage.load import load

FORMATS = ("json", "csv", "benchmark-action")
#: The keys github-action-benchmark reads from each entry of its custom format: the
#: required ones, then the optional ones (its src/extract.ts, ``BenchmarkResult``).
BENCHMARK_ACTION_KEYS = ("name", "unit", "value")
BENCHMARK_ACTION_OPTIONAL = ("range", "extra")
#: The time of each entry: (which, median, CI low, CI high, noisy flag, noisy reason).
_TIMES = (("device time", "gpu_time_median_us", "gpu_time_ci_low_us", "gpu_time_ci_high_us",
           "gpu_time_noisy", "gpu_time_noisy_reason"),
          ("loop time", "time_median_us", "time_ci_low_us", "time_ci_high_us", "noisy",
           "noisy_reason"))


def native(value: Any) -> Any:
    """A cell as a JSON value: nulls (None, NaN, NA, NaT) ``None``, NumPy scalars Python
    ones, arrays lists, times ISO 8601 text; any other object its text."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [native(v) for v in value]
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) or math.isinf(value) else float(value)
    if isinstance(value, (pd.Timestamp, np.datetime64)):
        return pd.Timestamp(value).isoformat()
    return value if isinstance(value, str) else str(value)


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """One dict per trial (row), every column of ``df`` in its order, as JSON values."""
    columns = [df[c].astype(object).tolist() for c in df.columns]
    return [dict(zip(df.columns, (native(v) for v in row), strict=True))
            for row in zip(*columns, strict=True)]


def to_json(df: pd.DataFrame) -> str:
    return json.dumps(records(df), indent=1, allow_nan=False) + "\n"


def to_csv(df: pd.DataFrame) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(df.columns)
    for record in records(df):
        writer.writerow(_csv_cell(v) for v in record.values())
    return out.getvalue()


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return json.dumps(value)
    return repr(value) if isinstance(value, float) else str(value)


def benchmark_action(df: pd.DataFrame) -> tuple[list[dict[str, Any]], int]:
    """github-action-benchmark's entries (``customSmallerIsBetter``) for the trials of
    ``df`` that have a time, and how many trials had none (failed, skipped, unmeasured)."""
    frame = with_modes(df.reset_index(drop=True))
    label_by = [c for c in display_columns(frame) if c != "sweep_id"]
    timed = []
    for i in range(len(frame)):
        row = frame.iloc[i]
        time = next((t for t in _TIMES if native(row.get(t[1])) is not None), None)
        if time is not None:
            timed.append((row, _entry(row, spec_label(row, label_by), *time)))
    names = Counter(entry["name"] for _, entry in timed)
    for row, entry in timed:
        if names[entry["name"]] > 1:  # the action keys a series by its name
            entry["name"] += (f" [{native(row.get('sweep_id'))} job "
                              f"{native(row.get('job_num'))} trial "
                              f"{native(row.get('trial_index'))}]")
    return [entry for _, entry in timed], len(frame) - len(timed)


def _entry(row: pd.Series, label: str, which: str, median: str, low: str, high: str,
           noisy: str, reason: str) -> dict[str, Any]:
    """One trial's entry; ``extra`` (the tooltip) says what was timed, on how many samples,
    whether to trust it and where it ran."""
    entry = {"name": f"{label} ({which})", "unit": "us", "value": native(row[median])}
    ci = [native(row.get(c)) for c in (low, high)]
    if None not in ci:
        entry["range"] = f"± {(ci[1] - ci[0]) / 2:.4g}"
    lines = [f"median {which} per call in µs; range: half the 95% CI"]
    samples = native(row.get("gpu_time_n_samples" if which == "device time" else "n_samples"))
    if samples is not None:
        lines.append(f"samples: {samples}")
    if native(row.get(noisy)):
        lines.append(f"noisy: {native(row.get(reason)) or 'yes'}")
    for column in ("device_name", "sweep_id", "git_commit"):
        value = native(row.get(column))
        if value is not None:
            lines.append(f"{column}: {value}")
    entry["extra"] = "\n".join(lines)
    return entry


def render(df: pd.DataFrame, fmt: str) -> tuple[str, int]:
    """The text of ``df`` in format ``fmt`` and how many trials it left out."""
    if fmt == "json":
        return to_json(df), 0
    if fmt == "csv":
        return to_csv(df), 0
    entries, left_out = benchmark_action(df)
    return json.dumps(entries, indent=1, allow_nan=False) + "\n", left_out


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(
        prog=program("runner.export"),
        description="Write a sweep's results as JSON, CSV or github-action-benchmark's "
                    "format, one record per trial. Reads the results only (docs/analysis.md).")
    parser.add_argument("sweep", metavar="SWEEP",
                        help="a sweep folder (results/<sweep_id>), a .parquet file or a "
                             "results root")
    parser.add_argument("--format", required=True, choices=FORMATS,
                        help="json: every column; csv: the same as a table; benchmark-action: "
                             "github-action-benchmark's customSmallerIsBetter entries")
    parser.add_argument("--output", "-o", metavar="FILE", default=None,
                        help="write to FILE instead of stdout")
    parser.add_argument("--samples", action="store_true",
                        help="json and csv: keep each trial's raw samples (samples_us)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        df = load(args.sweep, samples="list" if args.samples else "drop")
    except ValueError as exc:  # includes ResultsNotFoundError
        fail(str(exc), prog=parser.prog)
    text, left_out = render(df, args.format)
    if left_out:
        print(f"{parser.prog}: {left_out} of {len(df)} trials have no time (failed, skipped or "
              "not measured) and are left out", file=sys.stderr)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {args.output}: {exc}", prog=parser.prog)
    return 0


if __name__ == "__main__":
    sys.exit(main())
