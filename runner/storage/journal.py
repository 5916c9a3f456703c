"""The per-job journal: every finished trial is on disk as soon as it ends.

Why: a job used to write its Parquet file only when it ended, so a SIGKILL (pre-emption, the
OOM killer, a closed laptop lid) lost every trial of the job. Now each finished trial is
written as its own one-row Parquet file::

    jobs/<n>/journal/<trial_index:05d>.<attempt>.parquet

atomically (temporary file, fsync, hard link to the final name, fsync of the folder), as
soon as the trial ends. With one worker that is before the next trial starts, so a SIGKILL at
any instant loses at most the trial in flight. With ``workers=N`` each worker's row is written
by its own writer thread while that worker already runs its next trial (the driver's round
trip stays off the GPUs' time), so a SIGKILL can lose, per worker, the trial in flight and the
one whose row was still being written (10-25 ms). ``runner.resume`` runs both again. The job's
``trials.parquet`` and the sweep's ``results.parquet`` are views built from the journal
(:func:`job_rows`, :func:`merge_sweep`); ``python -m runner.collect`` and
``python -m runner.resume`` rebuild them.

``attempt`` counts the runs of one trial (a resumed sweep runs its failed trials again); a
journal entry is never replaced, so every attempt stays on disk. The view keeps one row per
trial by one fixed rule (:mod:`runner.storage.attempts`): ok over failed, then the earliest ok.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from runner.storage.attempts import DONE_STATUSES, keep_one
from runner.storage.files import (
    FORMAT_VERSION,
    METADATA_KEY,
    check_format,
    merge_tables,
    replace_with_superset,
    rows_to_table,
    write_new,
)
from runner.storage.layout import JOB_FILE, JOURNAL_DIR, SWEEP_FILE, job_number, journal_dir


def write_row(job_dir: Path, row: dict[str, Any], metadata: dict[str, Any]) -> Path:
    """Journal one finished trial (``row`` has ``trial_index``); durable when this returns."""
    folder = journal_dir(job_dir)
    folder.mkdir(parents=True, exist_ok=True)
    table = rows_to_table([row], metadata)
    index = int(row["trial_index"])
    for attempt in range(1000):
        path = folder / f"{index:05d}.{attempt}.parquet"
        if path.exists():
            continue
        try:
            return write_new(table, path, durable=True)
        except FileExistsError:  # another writer took this attempt number: take the next
            continue
    raise RuntimeError(f"trial {index} of {job_dir} has 1000 journal entries; refusing more")


def read_entries(job_dir: Path, *, warn: bool = True) -> list[pa.Table]:
    """Every readable journal entry of a job, oldest attempt first. A damaged entry is named on
    stderr and skipped (the rest still count)."""
    folder = journal_dir(job_dir)
    if not folder.is_dir():
        return []
    tables = []
    for path in sorted(folder.glob("*.parquet"), key=_entry_order):
        table = read_checked(path, warn=warn)
        if table is not None:
            tables.append(table)
    return tables


def read_checked(path: Path, *, warn: bool = True) -> pa.Table | None:
    """Read a result file; ``None`` (and a line on stderr naming it) when it is damaged.
    A file from a newer opsweep raises :class:`~runner.storage.files.FormatError`."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException, ValueError) as exc:
        if warn:
            print(f"opsweep: warning: skipping damaged result file {path} "
                  f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
                  file=sys.stderr)
        return None
    check_format(table.schema.metadata, path)
    return table


def check_formats(sweep_dir: Path) -> None:
    """Raise :class:`~runner.storage.files.FormatError` when a job file or journal entry of the
    sweep was written by a newer opsweep (its metadata only: cheap for thousands of entries)."""
    for path in [*Path(sweep_dir).glob(f"jobs/*/{JOB_FILE}"),
                 *Path(sweep_dir).glob(f"jobs/*/{JOURNAL_DIR}/*.parquet")]:
        try:
            metadata = pq.read_schema(path).metadata
        except (OSError, pa.ArrowException, ValueError):
            continue  # damaged: named and skipped where it is read
        check_format(metadata, path)


def _entry_order(path: Path) -> tuple[int, int]:
    index, _, rest = path.name.partition(".")
    attempt = rest.partition(".")[0]
    return (int(index) if index.isdigit() else 1 << 30, int(attempt) if attempt.isdigit() else 0)


def best_rows(tables: Sequence[pa.Table]) -> pa.Table:
    """One row per trial, by the one rule of :mod:`runner.storage.attempts` (ok over failed,
    then the earliest ok); ``tables`` in attempt order (oldest first)."""
    if not tables:
        return pa.table({})
    return keep_one(merge_tables([t.replace_schema_metadata(None) for t in tables]))[0]


def _attempts(table: pa.Table) -> list[tuple]:
    """(trial_index, trial_id, timestamp) of each row: one attempt of one trial."""
    names = ("trial_index", "trial_id", "timestamp")
    columns = [table.column(n).to_pylist() if n in table.column_names else [None] * len(table)
               for n in names]
    return list(zip(*columns))


def job_rows(job_dir: Path, metadata: dict[str, Any] | None = None) -> pa.Table | None:
    """The job's trials, one row each, from its ``trials.parquet`` (if any) and its journal;
    ``None`` when there is neither. ``metadata`` defaults to that of the newest input."""
    tables = []
    job_file = Path(job_dir) / JOB_FILE
    in_job_file: set[tuple] = set()
    if job_file.exists():
        table = read_checked(job_file)
        if table is not None:
            tables.append(table)
            in_job_file = set(_attempts(table))
    # An entry the job file was built from is the same attempt without the columns the job
    # file adds (the roofline's): keep the job file's row. Newer entries (a resume) still win.
    tables += [entry for entry in read_entries(job_dir)
               if not in_job_file.issuperset(_attempts(entry))]
    if not tables:
        return None
    if metadata is None:
        raw = tables[-1].schema.metadata or {}
        metadata = json.loads(raw[METADATA_KEY]) if METADATA_KEY in raw else {}
        metadata.pop("journal_entries", None)
    metadata = {**metadata, "format_version": FORMAT_VERSION}
    table = best_rows(tables)
    return table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, default=str)})


def done_trials(job_dir: Path) -> dict[int, str]:
    """``{trial_index: trial_id}`` of the job's trials that have an ``ok`` or ``skipped`` row
    (in the journal, or in a ``trials.parquet`` from before journals existed)."""
    table = job_rows(job_dir)
    tables = [] if table is None else [table]
    done: dict[int, str] = {}
    for table in tables:
        if not {"trial_index", "trial_id", "status"} <= set(table.column_names):
            continue
        for index, trial_id, status in zip(*(table.column(c).to_pylist()
                                             for c in ("trial_index", "trial_id", "status"))):
            if status in DONE_STATUSES:
                done[int(index)] = trial_id
    return done


def merge_sweep(sweep_dir: Path) -> Path | None:
    """Merge a sweep's jobs (their journals and ``trials.parquet`` files) into
    ``<sweep_dir>/results.parquet``.

    Returns the merged path, or None when the sweep has no trial at all. An existing merged
    file is replaced only by a verified superset of its rows (a ``collect`` of a running sweep
    leaves a partial file that the sweep's own end merge then completes); a damaged one is
    rebuilt from the job files.
    """
    tables, metas, inputs = [], [], []
    for job_dir in job_dirs(sweep_dir):
        table = job_rows(job_dir)
        if table is None:
            continue
        meta = json.loads((table.schema.metadata or {}).get(METADATA_KEY, b"{}"))
        tables.append(table.replace_schema_metadata(None))
        metas.append(meta)
        inputs.append({"job": job_dir.name, "rows": table.num_rows})
    if not tables:
        return None
    metadata = {
        "format_version": FORMAT_VERSION,
        "sweep_id": sweep_dir.name,
        "merged_utc": datetime.now(timezone.utc).isoformat(),
        "inputs": inputs,
        "jobs": metas,
    }
    merged = merge_tables(tables)
    merged = merged.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, default=str)})
    return replace_with_superset(merged, sweep_dir / SWEEP_FILE)


def job_dirs(sweep_dir: Path) -> list[Path]:
    """The job folders of a sweep (those holding a journal or a job file), in job order."""
    folders = [p for p in (sweep_dir / "jobs").glob("*")
               if (p / JOB_FILE).exists() or journal_dir(p).is_dir()]
    return sorted(folders, key=job_number)
