"""The per-job journal: every finished trial is on disk as soon as it ends.

Why: a job used to write its Parquet file only when it ended, so a SIGKILL (pre-emption, the
OOM killer, a closed laptop lid) lost every trial of the job. Now each finished trial is
appended as one line to the job's trial log (:mod:`runner.storage.trial_log`)::

    jobs/<n>/journal/log-<segment:06d>.jsonl

as soon as the trial ends; the job's metadata (config, overrides, argv) is written once per
writer, not with every trial, so the journal grows linearly (a few kB per trial). With one
worker that is before the next trial starts, so a SIGKILL at any instant loses at most the
trial in flight. With ``workers=N`` each worker's row is written by its own writer thread
while that worker already runs its next trial, so a SIGKILL can lose, per worker, the trial in
flight and the one whose row was still being written. ``runner.resume`` runs both again.
Journals of earlier opsweep versions (one Parquet file per trial,
``<trial_index:05d>.<attempt>.parquet``) are still read. The job's ``trials.parquet`` and the
sweep's ``results.parquet`` are views built from the journal (:func:`job_rows`,
:func:`merge_sweep`); ``python -m runner.collect`` and ``python -m runner.resume`` rebuild them.

A job file records the journal's state it was built from (:func:`journal_state`); the sweep's
merge reads a job file alone while the journal has not grown since, and the journal too
otherwise. So the end of a sweep reads each job file once.

A trial that runs again (a resumed sweep runs its failed trials again) is a new line; a line is
never replaced, so every attempt stays on disk. The view keeps one row per trial by one fixed
rule (:mod:`runner.storage.attempts`): ok over failed, then the earliest ok.
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

from runner.storage import trial_log
from runner.storage.attempts import DONE_STATUSES, keep_one
from runner.storage.files import (
    FORMAT_VERSION,
    METADATA_KEY,
    check_format,
    merge_tables,
    replace_with_superset,
    rows_to_table,
)
from runner.storage.layout import JOB_FILE, JOURNAL_DIR, SWEEP_FILE, job_number, journal_dir


def write_row(job_dir: Path, row: dict[str, Any], metadata: dict[str, Any]) -> Path:
    """Journal one finished trial (``row`` has ``trial_index``): in the kernel when this
    returns, so a kill of this process cannot lose it (:mod:`runner.storage.trial_log`)."""
    folder = journal_dir(job_dir)
    trial_log.append(folder, row, metadata)
    return folder


def close(job_dir: Path | None = None) -> None:
    """fsync and close the job's journal (every open one when ``None``)."""
    trial_log.close(None if job_dir is None else journal_dir(job_dir))


def count_entries(job_dir: Path) -> int:
    """How many attempts the job's journal holds (cheap: nothing is parsed)."""
    folder = journal_dir(job_dir)
    return len(list(folder.glob("*.parquet"))) + trial_log.count_rows(folder)


def journal_state(job_dir: Path) -> list[int]:
    """``[segments, bytes, legacy entries]`` of the job's journal: a job file built from it
    stays complete while this is unchanged (lines are only ever appended)."""
    folder = journal_dir(job_dir)
    sizes = []
    for path in trial_log.segments(folder):
        try:
            sizes.append(path.stat().st_size)
        except OSError:
            continue
    return [len(sizes), sum(sizes), len(list(folder.glob("*.parquet")))]


def read_entries(job_dir: Path, *, warn: bool = True,
                 skip: frozenset | set = frozenset()) -> list[pa.Table]:
    """Every readable journal entry of a job, oldest attempt first: one table per entry of an
    older journal, then one table holding the trial log's rows (with the metadata of its
    newest writer). A damaged entry or line is named on stderr and skipped (the rest still
    count); attempts (:func:`_attempts` keys) in ``skip`` are left out. A newer opsweep's
    entry raises :class:`~runner.storage.files.FormatError`."""
    folder = journal_dir(job_dir)
    if not folder.is_dir():
        return []
    tables = []
    for path in sorted(folder.glob("*.parquet"), key=_entry_order):
        table = read_checked(path, warn=warn)
        if table is not None and not skip.issuperset(_attempts(table)):
            tables.append(table)
    rows: list[dict[str, Any]] = []
    metadata: dict[str, Any] = {}
    checked = None
    for path in trial_log.segments(folder):
        found, metadata = trial_log.read(path, metadata, warn=warn)
        for row, meta in found:
            if meta is not checked:
                check_format({METADATA_KEY: json.dumps(meta, default=str).encode()}, path)
                checked = meta
            if not skip or _attempt(row) not in skip:
                rows.append(row)
    if rows:
        tables.append(rows_to_table(rows, metadata))
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
    for path in Path(sweep_dir).glob(f"jobs/*/{JOURNAL_DIR}/{trial_log.SEGMENT_GLOB}"):
        for metadata in trial_log.metadata_lines(path):
            check_format({METADATA_KEY: json.dumps(metadata).encode()}, path)


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


_ATTEMPT_KEY = ("trial_index", "trial_id", "timestamp")


def _attempts(table: pa.Table) -> list[tuple]:
    """(trial_index, trial_id, timestamp) of each row: one attempt of one trial."""
    columns = [table.column(n).to_pylist() if n in table.column_names else [None] * len(table)
               for n in _ATTEMPT_KEY]
    return list(zip(*columns))


def _attempt(row: dict[str, Any]) -> tuple:
    return tuple(row.get(n) for n in _ATTEMPT_KEY)


def job_rows(job_dir: Path, metadata: dict[str, Any] | None = None,
             held: Sequence[dict[str, Any]] | None = None) -> pa.Table | None:
    """The job's trials, one row each, from its ``trials.parquet`` (if any) and its journal;
    ``None`` when there is neither. ``metadata`` defaults to that of the newest input.

    ``held``: the rows this process journaled, when they are the whole journal (a job that
    started with none): the view is built from them, without reading back what was written.
    A job file whose recorded :func:`journal_state` still matches is read alone."""
    tables = []
    job_file = Path(job_dir) / JOB_FILE
    in_job_file: set[tuple] = set()
    state = journal_state(job_dir)
    if held is not None:
        if held:
            tables.append(rows_to_table(held, {}))
    else:
        if job_file.exists():
            table = read_checked(job_file)
            if table is not None:
                tables.append(table)
                in_job_file = set(_attempts(table))
                if _recorded_state(table) == state:
                    return _with_metadata(tables, metadata, state)
        # An entry the job file was built from is the same attempt without the columns the
        # job file adds (the roofline's): keep the job file's row. Newer entries (a resume)
        # still win.
        tables += read_entries(job_dir, skip=in_job_file)
    if not tables:
        return None
    return _with_metadata(tables, metadata, state)


def _recorded_state(table: pa.Table) -> list[int] | None:
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    try:
        return json.loads(raw).get("journal_state") if raw else None
    except (ValueError, AttributeError):
        return None


def _with_metadata(tables: list[pa.Table], metadata: dict[str, Any] | None,
                   state: list[int]) -> pa.Table:
    if metadata is None:
        raw = tables[-1].schema.metadata or {}
        metadata = json.loads(raw[METADATA_KEY]) if METADATA_KEY in raw else {}
        metadata.pop("journal_entries", None)
    metadata = {**metadata, "format_version": FORMAT_VERSION, "journal_state": state}
    table = tables[0] if len(tables) == 1 and _recorded_state(tables[0]) else best_rows(tables)
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
