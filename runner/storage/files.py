"""Result files: one Parquet per job, merged into one per sweep. Never overwritten.

Layout under ``results/``::

    <sweep_id>/                      one folder per `python -m runner` invocation
        results.parquet              all trials of the sweep (merged at the end)
        jobs/<n>/trials.parquet      the trials of Hydra job n, written when the job ends
        jobs/<n>/.hydra/             Hydra's record of the job's config and overrides

Every file is written to a temporary name in the same folder and then *hard-linked* to its
final name. ``os.link`` fails if the name exists, so a write is atomic (readers never see half
a file) and can never replace an existing result, even if two processes race.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from runner.storage.columns import COLUMNS, MODE_COLUMNS

JOB_FILE = "trials.parquet"
SWEEP_FILE = "results.parquet"
METADATA_KEY = b"opsweep"
FORMAT_VERSION = 1

#: Columns that lead the table, in this order; all others follow in first-seen order.
LEADING_COLUMNS = (
    "sweep_id", "job_num", "trial_index", "trial_id", "timestamp", "status", "reason",
    "op", "dtype", "shape", "shape_str", "device", *MODE_COLUMNS,
    "time_median_us", "tflops", "gbps", "n_samples",
)


def rows_to_table(rows: Sequence[dict[str, Any]], metadata: dict[str, Any]) -> pa.Table:
    """Column-wise table from row dicts; a key missing from a row is null there.

    (``pa.Table.from_pylist`` would take the columns of the *first* row only, losing every
    timing column when the first trial failed.)
    """
    names: dict[str, None] = dict.fromkeys(c for c in LEADING_COLUMNS
                                           if any(c in row for row in rows))
    for row in rows:
        names.update(dict.fromkeys(row))
    columns = {name: _column([row.get(name) for row in rows], name) for name in names}
    table = pa.table(columns) if columns else pa.table({})
    return table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, default=str)})


def _column(values: list[Any], name: str) -> pa.Array:
    try:
        known = COLUMNS.get(name)
        return pa.array(values, type=known[0] if known else None)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # e.g. an op parameter that is an int in one trial and a string in another
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def write_new(table: pa.Table, path: Path) -> Path:
    """Write ``table`` to ``path`` atomically; refuse if ``path`` exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"refusing to overwrite result file {path}")
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    pq.write_table(table, tmp)
    try:
        os.link(tmp, path)  # atomic, and fails instead of replacing an existing file
    except FileExistsError:
        raise FileExistsError(f"refusing to overwrite result file {path}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_metadata(path: Path) -> dict[str, Any]:
    """The ``opsweep`` metadata (config, overrides) of a result file."""
    raw = pq.read_schema(path).metadata or {}
    return json.loads(raw[METADATA_KEY]) if METADATA_KEY in raw else {}


def job_files(sweep_dir: Path) -> list[Path]:
    """The job files of a sweep, in job order."""
    def job_number(path: Path) -> tuple[int, str]:
        name = path.parent.name
        return (int(name), "") if name.isdigit() else (1 << 30, name)

    return sorted(sweep_dir.glob(f"jobs/*/{JOB_FILE}"), key=job_number)


def merge_tables(tables: Iterable[pa.Table]) -> pa.Table:
    """Concatenate result tables whose columns differ (op parameters, newer columns): missing
    columns are null, a column that is all-null in one table takes its type from another, and
    a column whose types conflict (an op parameter that is an int in one job and a string in
    another) is read as strings."""
    tables = list(tables)
    if not tables:
        return pa.table({})
    if len(tables) == 1:
        return tables[0]
    errors = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except errors:
        pass
    types_by_name: dict[str, set[pa.DataType]] = {}
    for table in tables:
        for column in table.schema:
            if not pa.types.is_null(column.type):
                types_by_name.setdefault(column.name, set()).add(column.type)
    conflicting = set()
    for name, kinds in types_by_name.items():
        try:
            pa.unify_schemas([pa.schema([(name, k)]) for k in kinds],
                             promote_options="permissive")
        except errors:
            conflicting.add(name)
    fixed = []
    for table in tables:
        for name in conflicting & set(table.column_names):
            index = table.column_names.index(name)
            table = table.set_column(index, name, _as_string(table.column(name)))
        fixed.append(table)
    return pa.concat_tables(fixed, promote_options="permissive")


def _as_string(column: pa.ChunkedArray) -> pa.ChunkedArray:
    try:
        return pc.cast(column, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = [None if v is None else json.dumps(v, default=str) for v in column.to_pylist()]
        return pa.chunked_array([pa.array(values, pa.string())])


def merge_sweep(sweep_dir: Path) -> Path | None:
    """Merge a sweep's job files into ``<sweep_dir>/results.parquet``.

    Returns the merged path, or None when the sweep has no job file. An existing merged file
    is left untouched (and returned): merging is idempotent, never destructive.
    """
    target = sweep_dir / SWEEP_FILE
    if target.exists():
        return target
    files = job_files(sweep_dir)
    if not files:
        return None
    tables = [pq.read_table(f) for f in files]
    metadata = {
        "format_version": FORMAT_VERSION,
        "sweep_id": sweep_dir.name,
        "merged_utc": datetime.now(timezone.utc).isoformat(),
        "jobs": [read_metadata(f) for f in files],
    }
    merged = merge_tables(tables)
    merged = merged.replace_schema_metadata({METADATA_KEY: json.dumps(metadata, default=str)})
    return write_new(merged, target)
