"""Result files: one Parquet per job, merged into one per sweep. Never overwritten blindly.

Where they lie is :mod:`runner.storage.layout`; the merge of a sweep's jobs is
:func:`runner.storage.journal.merge_sweep`.

Every file is written to a temporary name in the same folder first, so readers never see
half a file. A new file is then *hard-linked* to its final name (:func:`write_new`):
``os.link`` fails if the name exists, so it can never replace an existing result, even if two
processes race. An existing file is replaced (``os.replace``, atomic) only by a table that
verifiably holds every one of its rows (:func:`replace_with_superset`).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from runner.storage.attempts import compare_rows, row_keys
from runner.storage.column_reference import with_descriptions
from runner.storage.column_types import column_type
from runner.storage.columns import MODE_COLUMNS
from runner.storage.layout import JOB_FILE, job_number

METADATA_KEY = b"opsweep"
FORMAT_VERSION = 1


class FormatError(ValueError):
    """A result file this opsweep cannot read (written by a newer version)."""


def check_format(raw_metadata: dict[bytes, bytes] | None, path: Path | str) -> None:
    """Raise :class:`FormatError` for a file whose ``format_version`` is newer than ours."""
    raw = (raw_metadata or {}).get(METADATA_KEY)
    if not raw:
        return
    try:
        version = json.loads(raw).get("format_version", FORMAT_VERSION)
    except (ValueError, AttributeError):
        return
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise FormatError(f"{path} has format_version {version}, but this opsweep reads "
                          f"format_version <= {FORMAT_VERSION}. Upgrade opsweep to read it.")

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
        return pa.array(values, type=column_type(name))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        # e.g. an op parameter that is an int in one trial and a string in another, or an
        # integer beyond int64 (a FLOP count of a huge shape): this column becomes text, the
        # row and every other column are kept
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def write_new(table: pa.Table, path: Path, *, durable: bool = True) -> Path:
    """Write ``table`` to ``path`` atomically; refuse if ``path`` exists. ``durable``: fsync
    the file and its folder, so the write survives a crash of the machine, not only of us."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"refusing to overwrite result file {path}")
    tmp = _write_tmp(table, path, durable)
    try:
        os.link(tmp, path)  # atomic, and fails instead of replacing an existing file
    except FileExistsError:
        raise FileExistsError(f"refusing to overwrite result file {path}") from None
    finally:
        tmp.unlink(missing_ok=True)
    if durable:
        fsync_dir(path.parent)
    return path


def _write_tmp(table: pa.Table, path: Path, durable: bool) -> Path:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as handle:
            # every column says what it is and its unit: read_schema shows it
            pq.write_table(with_descriptions(table), handle)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
    except OSError as exc:  # a full disk, a file-size limit: name the file it was for
        tmp.unlink(missing_ok=True)
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def fsync_dir(folder: Path) -> None:
    """Make a new name in ``folder`` durable (POSIX: the directory entry needs its own fsync)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory
    finally:
        os.close(fd)


def replace_with_superset(table: pa.Table, path: Path) -> Path:
    """Write ``table`` to ``path``: a new file, or an atomic replacement of an existing one
    that is readable and whose rows ``table`` verifiably contains. An existing file that is
    damaged is kept beside as ``<name>.damaged-<n>`` (never deleted) and replaced."""
    if not path.exists():
        try:
            return write_new(table, path)
        except FileExistsError:
            pass  # a concurrent writer won: verify against its file below
    try:
        old = pq.read_table(path)
    except (OSError, pa.ArrowException, ValueError):
        old = None
    if old is not None:
        check_format(old.schema.metadata, path)
        problem, repaired = compare_rows(old, table)
        if problem:
            raise FileExistsError(f"refusing to replace {path}: {problem}")
        if repaired:
            print(f"opsweep: note: {path}: {len(repaired)} trial(s) had several finished "
                  f"attempts and kept a later one, e.g. {repaired[0]}; now each keeps its "
                  "earliest ok attempt (the others stay in the journal)", file=sys.stderr)
        if Counter(row_keys(old)) == Counter(row_keys(table)):
            return path  # same rows: leave the file (and its metadata) alone
    else:
        for n in range(1000):
            keep = path.with_name(f"{path.name}.damaged-{n}")
            try:
                os.link(path, keep)
                break
            except FileExistsError:
                continue
    tmp = _write_tmp(table, path, durable=True)
    try:
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return path


def read_metadata(path: Path) -> dict[str, Any]:
    """The ``opsweep`` metadata (config, overrides) of a result file: ``{}`` without it,
    ``{"unparsed": text}`` when it is not JSON."""
    raw = pq.read_schema(path).metadata or {}
    check_format(raw, path)
    text = raw.get(METADATA_KEY)
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return {"unparsed": text.decode("utf-8", "replace")}


def job_files(sweep_dir: Path) -> list[Path]:
    """The job files of a sweep, in job order."""
    return sorted(sweep_dir.glob(f"jobs/*/{JOB_FILE}"), key=lambda path: job_number(path.parent))


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
