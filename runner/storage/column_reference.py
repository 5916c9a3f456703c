"""What each result column means, for people: its unit, the Parquet field metadata every
result file carries, and the column reference (``opsweep --columns``, ``results/README.md``).

Everything here is derived from :data:`runner.storage.columns.COLUMNS` (type and meaning,
declared once) and from the column's name: names carry their unit (``time_median_us``,
``power_w_start``, ``peak_allocated_bytes``), so a unit is read from the name by
:data:`UNIT_TOKENS`; the few names that do not end in one are in :data:`NAMED_UNITS`.
``python -m runner.storage.column_reference`` prints the Markdown table of
``results/README.md``.
"""

from __future__ import annotations

import textwrap

import pyarrow as pa

from runner.storage.column_types import column_type
from runner.storage.columns import COLUMNS

#: A word of a column's name (split at ``_``) -> the unit of its values. The last such word
#: of the name wins (``sm_clock_mhz_samples_median``: MHz).
UNIT_TOKENS: dict[str, str] = {
    "us": "µs", "ms": "ms", "s": "s", "mhz": "MHz", "w": "W", "mj": "mJ", "c": "°C",
    "bytes": "bytes", "count": "count",
}
#: The unit of a column with none: text, flags, timestamps and ids are not measured in anything.
NO_UNIT = "-"
#: Numeric columns whose name has no unit word: their unit, or what kind of number they are.
NAMED_UNITS: dict[str, str] = {
    "flops": "FLOP", "tflops": "TFLOP/s", "gbps": "GB/s", "arithmetic_intensity": "FLOP/byte",
    "tflops_per_joule": "TFLOP/J", "gb_per_joule": "GB/J", "pct_of_peak": "%",
    "numel": "elements", "shape": "elements per dimension",
    "host_overhead_ratio": "ratio", "ci_rel_halfwidth": "ratio", "gpu_clock_vs_host": "ratio",
    "gpu_time_vs_host": "ratio", "allocation_spread": "ratio",
    "gpu_time_ci_rel_halfwidth": "ratio", "rel_error": "ratio", "rel_error_tol": "ratio",
    "gpu_idle_fraction": "fraction", "top_kernel_share": "fraction",
    "energy_busy_fraction": "fraction", "power_share_samples": "fraction of the power limit",
    "job_num": "index", "trial_index": "index", "shard": "index", "worker": "index",
    "gpu_index": "index", "job_pid": NO_UNIT, "seed": NO_UNIT,
}
#: The field-metadata keys (``pyarrow.parquet.read_schema(path).field(name).metadata``).
DESCRIPTION_KEY, UNIT_KEY = b"description", b"unit"


def _unit_word(words: list[str]) -> str | None:
    return next((UNIT_TOKENS[w] for w in reversed(words) if w in UNIT_TOKENS), None)


def unit_of(name: str, dtype: pa.DataType | None = None) -> str:
    """The unit of column ``name``: from :data:`NAMED_UNITS`, else its last unit word, else
    ``count`` for a whole number and :data:`NO_UNIT` for anything that is not a number."""
    if name in NAMED_UNITS:
        return NAMED_UNITS[name]
    unit = _unit_word(name.lower().split("_"))
    if unit is not None:
        return unit
    if dtype is None:
        dtype = column_type(name)
    return "count" if dtype is not None and pa.types.is_integer(dtype) else NO_UNIT


def describe(name: str, dtype: pa.DataType | None = None) -> tuple[str, str]:
    """``(description, unit)`` of any column a result file can hold: a declared one, an op
    parameter (``param_<name>``) or an op's own measurement (``extra_<name>``), whose unit
    is known only when its name has a unit word."""
    if name in COLUMNS:
        return COLUMNS[name][1], unit_of(name, dtype)
    kind, _, rest = name.partition("_")
    if kind == "param" and rest:
        text = f"the op parameter {rest} (op.{rest})"
    elif kind == "extra" and rest:
        text = f"a measurement the op reports itself: {rest}"
    else:
        text = "a column this opsweep does not declare (written by another version)"
    return text, _unit_word(rest.lower().split("_")) or NO_UNIT


def with_descriptions(table: pa.Table) -> pa.Table:
    """``table`` with each field's description and unit in its metadata, so that
    ``pyarrow.parquet.read_schema`` tells what a column is without opsweep installed."""
    fields = []
    for field in table.schema:
        text, unit = describe(field.name, field.type)
        metadata = dict(field.metadata or {})
        metadata.update({DESCRIPTION_KEY: text.encode(), UNIT_KEY: unit.encode()})
        fields.append(field.with_metadata(metadata))
    return pa.Table.from_arrays(table.columns, schema=pa.schema(fields, table.schema.metadata))


def _escape_pipes(text: str) -> str:
    return text.replace("|", r"\|")


def markdown_table() -> str:
    """The column table of ``results/README.md``."""
    lines = ["| column | type | unit | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{name}` | {dtype} | {_escape_pipes(unit_of(name))} | {_escape_pipes(text)} |"
              for name, (dtype, text) in COLUMNS.items()]
    lines += ["| `param_<name>` | inferred | - | one column per op parameter |",
              "| `extra_<name>` | inferred | - | op-specific measurements (e.g. allocator "
              "bytes) |"]
    return "\n".join(lines)


def text_reference(word: str = "", width: int = 100) -> str:
    """``opsweep --columns [WORD]``: every column (or those whose name holds ``word``), its
    type and unit on one line and its meaning wrapped below. ValueError when no name holds
    ``word``."""
    entries = [(name, str(dtype), unit_of(name), text) for name, (dtype, text) in COLUMNS.items()]
    entries += [("param_<name>", "inferred", NO_UNIT, "one column per op parameter"),
                ("extra_<name>", "inferred", NO_UNIT, "a measurement the op reports itself")]
    shown = [entry for entry in entries if word.lower() in entry[0].lower()]
    if not shown:
        raise ValueError(f"no column name holds {word!r}; opsweep --columns lists them all")
    lines = []
    for name, dtype, unit, text in shown:
        lines.append(f"{name}  [{dtype}, {unit}]")
        lines.append(textwrap.fill(text, width=width, initial_indent="    ",
                                   subsequent_indent="    ", break_on_hyphens=False))
    header = ("Result columns (results/<sweep_id>/results.parquet): name  [type, unit]. "
              "Each file carries the same text in its Parquet field metadata "
              "(pyarrow.parquet.read_schema(path).field(name).metadata).")
    return textwrap.fill(header, width=width) + "\n\n" + "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
