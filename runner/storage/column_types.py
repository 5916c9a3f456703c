"""The Arrow types of the result columns, from the names :mod:`runner.storage.columns`
declares them by (as Arrow prints them: ``double``, ``list<item: double>``).

Apart so that the columns' names cost a worker no pyarrow import: the driver writes the
results (one writer per sweep), and only the read side and the writer need these types."""

from __future__ import annotations

import pyarrow as pa

from runner.storage.columns import COLUMNS

#: Every type name a declared column uses, and its Arrow type.
ARROW_TYPES: dict[str, pa.DataType] = {str(t): t for t in (
    pa.string(), pa.int64(), pa.float64(), pa.bool_(), pa.timestamp("us", tz="UTC"),
    pa.list_(pa.float64()), pa.list_(pa.int64()))}


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type of a declared column's type name; ``ValueError`` for any other name."""
    try:
        return ARROW_TYPES[name]
    except KeyError:
        raise ValueError(f"column type {name!r} is not one of the declared types "
                         f"({', '.join(ARROW_TYPES)}): add it to ARROW_TYPES") from None


def column_type(name: str) -> pa.DataType | None:
    """The Arrow type of the declared column ``name`` (None: not a declared column)."""
    known = COLUMNS.get(name)
    return None if known is None else arrow_type(known[0])


def numeric_columns() -> list[str]:
    """The declared columns that hold numbers (integers or floats), in declaration order."""
    return [name for name, (kind, _) in COLUMNS.items()
            if pa.types.is_integer(arrow_type(kind)) or pa.types.is_floating(arrow_type(kind))]
