"""Read sweep results into one pandas DataFrame with proper dtypes.

Why this exists: a sweep is spread over several Parquet files (one per Hydra job, plus the
merged ``results.parquet`` once the sweep finishes), sweeps differ in their columns (each
op has its own ``param_*`` columns), and a results tree holds many sweeps. Reading that by
hand invites two classic mistakes: counting a sweep twice (merged file *and* job files),
and losing rows whose schema differs. :func:`load` takes any of

* a sweep directory (``results/<sweep_id>``): its ``results.parquet``, or, when the sweep
  crashed before merging, its ``jobs/*/trials.parquet``;
* a ``.parquet`` file;
* a results root (``results/``): every sweep below it, each read once as above;
* a glob of any of these, or a list of paths/globs,

and returns one DataFrame whose schemas are unioned (missing columns are null), whose axis
columns are categoricals (small, fast to group by) and whose ``timestamp`` is UTC. Which
files those are, each sweep once, is :mod:`runner.storage.result_files`'s answer.

This module imports no torch, so ``import runner.storage.load`` is fast in notebooks and CLIs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# The runner's column types (pyarrow only, no torch): all-null columns get their real type.
from runner.storage.backfill import backfill, sources_to_read
from runner.storage.column_types import column_type
from runner.storage.columns import AXES, AXIS_COLUMNS, Status
from runner.storage.files import check_format, merge_tables
from runner.storage.files import read_metadata as read_file_metadata
from runner.storage.journal import job_rows
from runner.storage.layout import JOURNAL_DIR
from runner.storage.result_files import ResultsNotFoundError, find_result_files, sweep_id_from_path

#: Columns that describe *what* was measured (the spec): the registry's axes and the values
#: derived from them. ``param_*`` columns are axes too.
SPEC_COLUMNS: tuple[str, ...] = ("op", "target", *AXIS_COLUMNS, "torch_dtype", "tf32",
                                 "matmul_precision", "shape_str", "numel", "device_requested")

#: Known category orders, so that plots and tables list them in a sensible order: the
#: registry's closed choices, the statuses, and the roofline's regimes.
CATEGORY_ORDER: dict[str, tuple[str, ...]] = {
    "status": tuple(status.value for status in Status),
    **{axis.name: tuple(c for c in axis.choices if c != "null")
       for axis in AXES if axis.choices and axis.kind is not bool},
    "bound": ("overhead", "memory", "compute"),
}

#: String columns stored as categoricals (low cardinality, repeated on every row): the
#: registry's string axes, and these.
CATEGORICAL_COLUMNS: frozenset[str] = frozenset({
    *(axis.name for axis in AXES if axis.column_type == "string"),
    "sweep_id", "status", "op", "target", "torch_dtype", "matmul_precision",
    "shape_str", "device_requested", "timer_preset",
    "stop_reason", "device_name", "compute_capability", "torch_version", "cuda_version",
    "driver_version", "cpu_model", "hostname", "python_version", "git_commit", "bound",
    "roofline_source",
})

#: Free-text string columns (kept as ``str``, not categoricals).
STRING_COLUMNS: frozenset[str] = frozenset({
    "trial_id", "reason", "error_traceback", "params_json", "roofline_reason",
    "throttle_reasons_start", "throttle_reasons_end",
})

#: Columns kept by ``samples="long"`` when no ``columns`` are given.
LONG_ID_COLUMNS: tuple[str, ...] = (
    "sweep_id", "job_num", "trial_index", "trial_id", "status", *SPEC_COLUMNS,
    "time_median_us",
)

SamplesMode = Literal["list", "long", "drop"]


def read_metadata(path: str | os.PathLike) -> dict[str, dict]:
    """The ``opsweep`` key-value metadata (resolved config, overrides) of each result file.

    Returns ``{file path: runner.storage.files.read_metadata(file)}``.
    """
    return {str(file): read_file_metadata(file) for file in find_result_files(path)}


def load(paths: str | os.PathLike | Iterable[str | os.PathLike], *,
         samples: SamplesMode = "list", columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Read one sweep, many sweeps or a whole results tree into one DataFrame.

    paths
        A sweep directory, a ``.parquet`` file, a results root, a glob, or a list of these.
        A sweep is read from its merged ``results.parquet`` when present, else from its
        ``jobs/*/trials.parquet``; never both.
    samples
        ``"list"`` (default) keeps ``samples_us`` as one array per trial; ``"drop"`` skips
        reading it (fastest); ``"long"`` returns one row per raw sample, with columns
        ``sample_index`` and ``sample_us`` next to ``columns`` (default: ids, axes, status
        and ``time_median_us``; pass ``columns`` to keep others).
    columns
        Read only these columns (faster on wide or large results). Missing ones are null.

    Axis and environment strings come back as categoricals; ``param_*`` string columns too.
    Columns that differ between files are unioned with nulls; a column whose type differs
    between files (say int in one sweep, string in another) is read as string.
    """
    if samples not in ("list", "long", "drop"):
        raise ValueError(f"samples={samples!r} is not one of 'list', 'long', 'drop'")
    files = find_result_files(paths)
    wanted = None if columns is None else list(dict.fromkeys(columns))
    if wanted is not None and samples != "drop" and "samples_us" not in wanted:
        wanted.append("samples_us")
    if samples == "drop" and wanted is not None:
        wanted = [c for c in wanted if c != "samples_us"]
    table = _read_tables(files, wanted, drop_samples=samples == "drop")
    if samples == "long":
        keep = list(columns) if columns is not None else list(LONG_ID_COLUMNS)
        keep = [c for c in keep if c != "samples_us"]
        table = _long_table(table, keep)
    df = _to_pandas(table)
    df.attrs["sources"] = [str(f) for f in files]
    return df


def _read_tables(files: list[Path], columns: list[str] | None, *,
                 drop_samples: bool) -> pa.Table:
    def read(file: Path) -> pa.Table | None:
        try:
            schema = pq.read_schema(file)
        except (OSError, pa.ArrowException, ValueError) as exc:
            print(f"opsweep: warning: skipping damaged result file {file} "
                  f"({type(exc).__name__})", file=sys.stderr)
            return None
        check_format(schema.metadata, file)  # a newer format: a clear error, not a guess
        cols = _columns_to_read(schema.names, columns, drop_samples)
        try:
            table = backfill(pq.read_table(file, columns=cols), columns)
        except (OSError, pa.ArrowException, ValueError) as exc:
            print(f"opsweep: warning: skipping damaged result file {file} "
                  f"({type(exc).__name__})", file=sys.stderr)
            return None
        if "sweep_id" not in table.column_names and (columns is None or "sweep_id" in columns):
            sweep = sweep_id_from_path(file)
            table = table.append_column("sweep_id", pa.array([sweep] * table.num_rows))
        return table.replace_schema_metadata(None)

    def read_journal(job_dir: Path) -> pa.Table | None:
        # one row per trial by the one rule (runner.storage.attempts), never every attempt
        table = job_rows(job_dir)
        if table is None:
            return None
        table = backfill(table, None)
        keep = _columns_to_read(table.column_names, columns, drop_samples)
        return table.select(keep).replace_schema_metadata(None)

    # a job with no trials.parquet yet is read from its journal: one entry per attempt
    units: dict[Path, Path | None] = {}
    for file in files:
        if file.parent.name == JOURNAL_DIR:
            units.setdefault(file.parent.parent, None)
        else:
            units[file] = file
    readers = [(read, file) if file is not None else (read_journal, job_dir)
               for job_dir, file in units.items()]
    if len(readers) > 4:
        with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
            tables = list(pool.map(lambda unit: unit[0](unit[1]), readers))
    else:
        tables = [reader(arg) for reader, arg in readers]
    tables = [t for t in tables if t is not None]
    if not tables:
        raise ResultsNotFoundError(f"every result file is damaged: {', '.join(map(str, files))}")
    table = merge_tables(tables)
    if columns is not None:
        for name in columns:
            if name not in table.column_names:
                table = table.append_column(name, pa.nulls(table.num_rows))
    return table


def _columns_to_read(names: Sequence[str], columns: Sequence[str] | None,
                     drop_samples: bool) -> list[str]:
    """Of a file's column ``names``: those asked for (None: all), the older ones that
    ``runner.storage.backfill`` fills an asked-for newer one from, and no samples where
    dropped."""
    cols = list(names) if columns is None else [c for c in columns if c in names]
    cols += [old for old in sources_to_read(names, columns) if old not in cols]
    return [c for c in cols if not (drop_samples and c == "samples_us")]


def _long_table(table: pa.Table, keep: list[str]) -> pa.Table:
    """One row per raw sample: ``keep`` columns repeated, plus sample_index and sample_us."""
    n = table.num_rows
    if "samples_us" in table.column_names and n:
        lists = table.column("samples_us").combine_chunks()
        if pa.types.is_null(lists.type):
            lists = pa.array([None] * n, pa.list_(pa.float64()))
        parents = pc.list_parent_indices(lists)
        values = pc.cast(pc.list_flatten(lists), pa.float64())
        lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy()
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        index = np.arange(len(values)) - starts
    else:
        parents = pa.array([], pa.int64())
        values = pa.array([], pa.float64())
        index = np.array([], dtype=np.int64)
    present = [c for c in keep if c in table.column_names]
    out = table.select(present).take(parents)
    for name in keep:
        if name not in out.column_names:
            out = out.append_column(name, pa.nulls(out.num_rows))
    out = out.append_column("sample_index", pa.array(index.astype(np.int64)))
    return out.append_column("sample_us", values)


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    for i, field in enumerate(table.schema):
        name = field.name
        if pa.types.is_null(field.type):
            # An all-null column (e.g. a job with no roofline): give it its natural type.
            textual = name in STRING_COLUMNS or name in CATEGORICAL_COLUMNS \
                or name.startswith("param_")
            kind = column_type(name) or (pa.string() if textual else pa.float64())
            table = table.set_column(i, name, pa.nulls(table.num_rows, kind))
            field = table.schema.field(i)
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            if name in CATEGORICAL_COLUMNS or name.startswith("param_"):
                table = table.set_column(i, name, pc.dictionary_encode(table.column(name)))
    nullable_bools = [f.name for f in table.schema
                      if pa.types.is_boolean(f.type) and table.column(f.name).null_count]
    df = table.to_pandas(split_blocks=True, self_destruct=True)
    for name, order in CATEGORY_ORDER.items():
        if name in df.columns and isinstance(df[name].dtype, pd.CategoricalDtype):
            present = [c for c in df[name].cat.categories if c not in order]
            df[name] = df[name].cat.set_categories([*order, *present])
    for name in nullable_bools:
        df[name] = df[name].astype("boolean")
    if "timestamp" in df.columns:
        df["timestamp"] = _as_utc(df["timestamp"])
    return df


def _as_utc(series: pd.Series) -> pd.Series:
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        return series.dt.tz_convert("UTC")
    return pd.to_datetime(series, utc=True, errors="coerce")

