"""Arrow's names of the column types, as ``str(pa_type)`` prints them (``str(pa.float64())
== "double"``): the column tables name types with these, so a worker reads them without
importing pyarrow (``runner.storage.column_types`` makes the types)."""

from __future__ import annotations

ARROW_STRING, ARROW_INT, ARROW_FLOAT, ARROW_BOOL = "string", "int64", "double", "bool"
ARROW_TIMESTAMP, ARROW_LIST_FLOAT = "timestamp[us, tz=UTC]", "list<item: double>"
