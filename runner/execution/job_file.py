"""A job's file, ``trials.parquet``: the journal's rows plus the columns only the whole job
can fill (the roofline's, how the job's GPUs compared), written as a verified superset of
what was there.

These columns need pandas, and nothing before them does: loaded when the last trial has
ended, pandas and the roofline would stand between that trial's row and its file (0.2-0.5 s).
:func:`import_ahead` loads them while the driver only waits for its workers to import torch,
which takes seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.execution import gpu_compare
from runner.storage import journal
from runner.storage.files import replace_with_superset
from runner.storage.layout import JOB_FILE


def import_ahead() -> None:
    """Import now what the job's end needs: pandas and the roofline for :func:`write`, the
    summary's cells for the sweep's end (``runner.execution.callbacks.finish_sweep``). Only
    while the trials run in other processes: in the driver's own process it would delay the
    first trial, and leave pandas' objects for each trial's ``gc.collect`` to scan (the
    driver froze what it had imported before, ``runner.execution.job.run_job``)."""
    try:
        import pyarrow.dataset  # noqa: F401  (reading a job's or the sweep's file back)
        import pyarrow.pandas_compat  # noqa: F401  (a table's pandas view, for the roofline)

        from runner.analysis import roofline, selection  # noqa: F401  (pandas, numpy)
    except ImportError:  # the end imports what it can when it comes
        pass


def write(job_dir: Path, metadata: dict[str, Any], results_root: str,
          held: list[dict[str, Any]] | None = None) -> Path | None:
    """``trials.parquet``: one row per trial, roofline columns added; from the rows this
    process holds when they are the whole journal, else from the journal."""
    table = journal.job_rows(job_dir, metadata, held)
    if table is None:
        return None
    table = gpu_compare.annotate(_with_roofline(table, results_root))  # gpu_clock_vs_host
    return replace_with_superset(table, job_dir / JOB_FILE)


def _with_roofline(table: Any, results_root: str) -> Any:
    """Replace the roofline columns (``runner.analysis.roofline.ROOFLINE_COLUMNS``:
    pct_of_peak, bound, ...) with fresh ones: results need no manual step."""
    try:
        from runner.analysis import roofline
    except ImportError:
        return table
    import pyarrow as pa

    table = table.drop_columns([c for c in roofline.ROOFLINE_COLUMNS if c in table.column_names])
    annotated = roofline.annotate(table.to_pandas(), results_root=results_root)
    for name in roofline.ROOFLINE_COLUMNS:
        if name in annotated and name not in table.column_names:
            table = table.append_column(name, pa.Array.from_pandas(annotated[name]))
    return table
