"""What a search sweeper minimises: one number per Hydra job, read from the job's file.

Hydra's sweepers that search (``hydra/sweeper=optuna``) minimise the value the task function
returns. With ``objective=COLUMN`` opsweep's task function (``runner.__main__``) returns the
job's value of that result column: the trial's value for a job of one trial, the geometric
mean over its trials for more (a shape list: each shape counts alike, whatever its size; the
arithmetic mean where a value is not positive). A job one of whose trials has no value (it
failed, was skipped, or the column is not measured here, as the device time on a CPU)
returns NaN, which the sweeper records as a failed point, never as the best one.
docs/scale-out.md ("Search instead of a grid") tells the whole story.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pyarrow.parquet as pq


def job_objective(path: Path | None, column: str, title: str = "job") -> float:
    """The job's value of ``column`` (see the module's docstring); said on stderr."""
    values = _values(path, column)
    if not values or any(v is None or not math.isfinite(v) for v in values):
        missing = sum(1 for v in values if v is None or not math.isfinite(v))
        hint = (" (a CPU trial has no device time: objective=time_median_us)"
                if column.startswith("gpu_") else "")
        print(f"opsweep: {title}: objective {column}: {missing or 'no'} trial(s) without a "
              f"value{hint}; the sweeper records this point as failed", file=sys.stderr)
        return math.nan
    if len(values) == 1:
        value = values[0]
    elif all(v > 0 for v in values):
        value = math.exp(sum(math.log(v) for v in values) / len(values))
    else:
        value = sum(values) / len(values)
    print(f"opsweep: {title}: objective {column} = {value:.6g}", file=sys.stderr)
    return value


def _values(path: Path | None, column: str) -> list[float | None]:
    """Each trial's value of ``column`` (None where it has none) from the job's file."""
    if path is None or not Path(path).is_file():
        return []
    table = pq.read_table(path)
    if column not in table.column_names:
        return [None] * table.num_rows
    return [None if v is None else float(v) for v in table.column(column).to_pylist()]
