"""Columns that rows written before them lack, filled on reading from what held their
meaning then. Reading never changes a file: the fill happens on the table in memory, for
each file that :mod:`runner.storage.load` reads and for each job or sweep table that
:mod:`runner.storage.journal` joins, so a sweep resumed across an upgrade (old rows and new
in one file) reads whole.

Every device time was the median of its samples before ``gpu_time_us`` (the mean of a
power-capped series sampled back to back since:
``runner.timing.measurement.Measurement.statistic``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

#: column -> (the older column it is filled from, the constant it takes where that one is
#: set; None: that one's value).
BACKFILLED: dict[str, tuple[str, str | None]] = {
    "gpu_time_us": ("gpu_time_median_us", None),
    "gpu_time_statistic": ("gpu_time_median_us", "median"),
}


def sources_to_read(names: Sequence[str], columns: Sequence[str] | None) -> list[str]:
    """The older columns of a file with ``names`` to read besides ``columns`` (None: all),
    so that :func:`backfill` can fill the asked-for newer ones."""
    return list(dict.fromkeys(
        old for new, (old, _) in BACKFILLED.items()
        if old in names and (columns is None or (new in columns and old not in columns))))


def backfill(table: pa.Table, columns: Sequence[str] | None = None) -> pa.Table:
    """``table`` with each :data:`BACKFILLED` column (that ``columns`` asks for; None: all)
    filled, row by row, where it is missing or null and its older column is set; an older
    column read only for this (not in ``columns``) is dropped again."""
    sources: set[str] = set()
    for new, (old, constant) in BACKFILLED.items():
        if old not in table.column_names or (columns is not None and new not in columns):
            continue
        sources.add(old)
        values = table.column(old)
        filled = values if constant is None else pc.if_else(
            pc.is_valid(values), pa.scalar(constant), pa.scalar(None, pa.string()))
        if new not in table.column_names:
            table = table.append_column(new, filled)
            continue
        current = table.column(new)
        if current.null_count == 0:
            continue
        index = table.column_names.index(new)
        table = table.set_column(index, new, filled if pa.types.is_null(current.type)
                                 else pc.coalesce(current, filled.cast(current.type)))
    return table.drop_columns([old for old in sources
                               if columns is not None and old not in columns])
