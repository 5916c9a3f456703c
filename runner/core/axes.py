"""The axis registry: every trial axis is declared here, once.

An *axis* is a config key whose value may also be a list: inside one Hydra job a list expands
into one trial per element (``dtype=[fp16,bf16]``), and the job's trials are the cartesian
product of all axes. Everything else about an axis is derived from its :class:`Axis` entry:

* its field and default in the structured config (:class:`runner.config.schema.RunConfig`);
* the check of each value, with the key, the bad value and the choices in the message
  (:func:`Axis.check`, called once per value, by the planner in the pre-flight);
* its field in the frozen :class:`runner.config.trials.TrialSpec` and its place in the
  expansion order;
* its Parquet column, Arrow type and documentation (:mod:`runner.storage.columns`, from which
  ``results/README.md`` is generated);
* the axis lists the read side uses: the spec a trial is joined on, the mode axes of plots.

Adding an axis is one :class:`Axis` entry in :data:`AXES` (plus the code that acts on it, e.g.
a mode in :mod:`runner.execution.modes`); ``tests/test_axes.py`` shows it.

Why the structured config types axes as ``Any``: a value *or a list of values* is a union of a
scalar and a container, which OmegaConf 2.3 rejects ("Unions of containers are not
supported"). So the element type lives here, and :func:`Axis.check` enforces it before any
trial runs, with a better message than OmegaConf's.

This module imports only the standard library: ``--help`` and the override checks stay fast.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from runner.core import gpus
from runner.core.errors import ConfigError, bad_value


class DType(str, Enum):
    """Numeric formats a trial can run in.

    ``tf32`` is float32 storage with TensorFloat-32 matmul/conv precision
    (``torch.set_float32_matmul_precision("high")``); ``fp32`` pins the precision to
    ``"highest"`` so that fp32 numbers never silently use tensor cores.
    """

    fp64 = "fp64"
    fp32 = "fp32"
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"


#: Bytes per stored element of each format (its torch dtype's ``itemsize``; a test checks),
#: for the driver's cost estimates, which must not import torch.
DTYPE_BYTES: dict[DType, int] = {DType.fp64: 8, DType.fp32: 4, DType.tf32: 4, DType.fp16: 2,
                                 DType.bf16: 2}


class GraphMode(str, Enum):
    """How the op's callable is launched: eagerly, replayed from a captured CUDA graph, or via
    ``torch.cuda.make_graphed_callables`` (which also graphs the backward pass)."""

    none = "none"
    cuda_graph = "cuda_graph"
    graphed_callable = "graphed_callable"


class CompileMode(str, Enum):
    """``torch.compile`` mode; ``none`` runs eagerly."""

    none = "none"
    default = "default"
    reduce_overhead = "reduce-overhead"
    max_autotune = "max-autotune"
    max_autotune_no_cudagraphs = "max-autotune-no-cudagraphs"


#: The largest value of an int64 column: every integer axis and setting is stored in one.
INT64_MAX = (1 << 63) - 1

#: Parquet column types an axis can have (mapped to Arrow types by runner.storage.columns).
COLUMN_TYPES = ("string", "int64", "bool", "list<int64>")


@dataclass(frozen=True)
class Axis:
    """One trial axis.

    ``kind`` is the element type: an :class:`~enum.Enum` subclass (closed choices), ``int``,
    ``bool``, or ``"device"`` / ``"shape"`` for the two axes with rules of their own (device
    resolution against the GPUs present; a flat list is *one* shape).
    """

    name: str
    kind: Any
    default: Any
    doc: str
    nullable: bool = False
    minimum: int | None = None
    #: an execution mode (eager / graph / compile / streams / backward views group by these)
    is_mode: bool = False
    #: check/normalise for kinds with rules of their own (set for device; shape is planned)
    checker: Callable[[Any], Any] | None = None
    #: the result column's meaning, where it differs from the config key's
    column_doc: str | None = None
    #: the mode axis this one refines (compile_dynamic refines compile): the mode label shows
    #: it beside that mode, when that mode is on
    refines: str | None = None
    #: the largest value, and why (a value past it would spend minutes before it fails)
    maximum: int | None = None
    maximum_why: str = ""

    @property
    def column_type(self) -> str:
        if self.kind == "shape":
            return "list<int64>"
        if self.kind is int:
            return "int64"
        if self.kind is bool:
            return "bool"
        return "string"

    @property
    def spec_type(self) -> Any:
        """The type of the field in :class:`~runner.config.trials.TrialSpec`."""
        base = {"shape": tuple, "device": str}.get(self.kind, self.kind)
        return base | None if self.nullable else base

    @property
    def choices(self) -> list[str] | None:
        """The valid values as text, for closed-choice axes (enums and booleans)."""
        if isinstance(self.kind, type) and issubclass(self.kind, Enum):
            values = [e.value for e in self.kind]
        elif self.kind is bool:
            values = ["true", "false"]
        else:
            return None
        return values + (["null"] if self.nullable else [])

    def check(self, value: Any) -> Any:
        """One user value → the trial's value, or :class:`ConfigError` naming key, value and
        choices. Lists are expanded before this is called."""
        if value is None and self.nullable:
            return None
        if self.checker is not None:
            return self.checker(value)
        if isinstance(self.kind, type) and issubclass(self.kind, Enum):
            try:
                return self.kind(str(value))
            except ValueError:
                raise bad_value(self.name, value, self.choices or []) from None
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            raise bad_value(self.name, value, self.choices or [])
        if self.kind is int:
            null = " or null" if self.nullable else ""
            if (isinstance(value, bool) or not isinstance(value, int)
                    or (self.minimum is not None and value < self.minimum)):
                raise ConfigError(f"invalid value for '{self.name}': {value!r}. Expected an "
                                  f"{self.int_range()}{null}.")
            if self.maximum is not None and value > self.maximum:
                raise ConfigError(f"invalid value for '{self.name}': {value!r}. Expected an "
                                  f"{self.int_range()}: {self.maximum_why}.")
            if value > INT64_MAX:  # no declared maximum: the result column's own
                raise ConfigError(f"invalid value for '{self.name}': {value!r}. Expected an "
                                  f"{self.int_range()} and <= {INT64_MAX} (an int64 column).")
            return value
        raise ConfigError(f"axis '{self.name}' has no check for kind {self.kind!r}")

    def int_range(self) -> str:
        """An integer axis's declared range, as its help and its errors both say it."""
        low = "integer" if self.minimum is None else f"integer >= {self.minimum}"
        return low if self.maximum is None else f"integer from {self.minimum} to {self.maximum}"

    def column_value(self, value: Any) -> Any:
        """The trial's value as stored in its Parquet column."""
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, tuple):
            return list(value)
        return value

    def describe(self) -> str:
        """``dtype: fp64 | fp32 | ... (default fp32)``: one line for ``--help`` and docs."""
        if self.choices:
            values = " | ".join(self.choices)
        elif self.kind is int:
            values = self.int_range() + (" or null" if self.nullable else "")
        elif self.kind == "device":
            values = "auto | cpu | cuda | cuda:N"
        else:
            values = "[d0,d1,...] or a list of such lists"
        return f"{values} (default {yaml_text(self.default)})"


def yaml_text(value: Any) -> str:
    """A default as a user would type it: ``null``, ``true``, ``fp32``."""
    if value is None:
        return "null"
    return str(value).lower() if isinstance(value, bool) else str(value)


def cuda_device_count() -> int:
    """GPUs visible to torch (0 without CUDA): counted without torch where that is certain
    (:mod:`runner.core.gpus`), else by torch (imported only then)."""
    visible = gpus.visible_gpus()
    if visible is not None:
        return len(visible)
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(value: Any) -> str:
    """``auto`` → ``cuda:0`` when a GPU is present, else ``cpu``; ``cuda`` → ``cuda:0``."""
    text = str(value)
    if text == "cpu":
        return "cpu"
    n_gpus = cuda_device_count()
    valid = ["auto", "cpu"] + (["cuda"] + [f"cuda:{i}" for i in range(n_gpus)] if n_gpus else [])
    if text == "auto":
        return "cuda:0" if n_gpus else "cpu"
    match = re.fullmatch(r"cuda(?::(\d+))?", text)
    if match is None:
        raise bad_value("device", value, valid)
    if n_gpus == 0:
        raise bad_value("device", value, valid,
                        "No CUDA device is available on this machine (torch.cuda.is_available() "
                        "is False); use device=cpu or device=auto.")
    index = int(match.group(1) or 0)
    if index >= n_gpus:
        raise bad_value("device", value, valid, f"This machine has {n_gpus} CUDA device(s).")
    return f"cuda:{index}"


#: Every trial axis, in expansion order (the last varies fastest).
AXES: tuple[Axis, ...] = (
    Axis("shape", "shape", None,
         "the op's shape, e.g. [M, N, K] for matmul; null: the op's default_shape",
         column_doc="the op's shape, e.g. [M, N, K] for matmul"),
    Axis("dtype", DType, "fp32", "numeric format (tf32: fp32 storage, TF32 matmul math)"),
    Axis("device", "device", "auto", "auto = cuda:0 when a GPU is present, else cpu",
         checker=resolve_device, column_doc="resolved device: cpu or cuda:N"),
    Axis("seed", int, 0, "seed of the trial's random inputs", minimum=0),
    Axis("num_threads", int, None, "torch intra-op CPU threads (null keeps torch's default)",
         nullable=True, minimum=1),
    Axis("streams", int, 1, "CUDA streams the op runs on (N copies, or a composite's parts)",
         minimum=1, is_mode=True, maximum=1024,
         maximum_why="each stream holds its own copy of the op's inputs, and a GPU runs at "
                     "most 128 kernels at once, so more streams measure only the queue; "
                     "use fewer"),
    Axis("graph", GraphMode, "none", "replay from a captured CUDA graph", is_mode=True),
    Axis("compile", CompileMode, "none", "torch.compile mode", is_mode=True),
    Axis("compile_dynamic", bool, None, "torch.compile's dynamic argument (null = automatic)",
         nullable=True, refines="compile"),
    Axis("fullgraph", bool, False, "torch.compile's fullgraph argument", refines="compile"),
    Axis("backward", bool, False, "each call runs forward and backward", is_mode=True),
)

AXIS_NAMES: tuple[str, ...] = tuple(axis.name for axis in AXES)
AXES_BY_NAME: dict[str, Axis] = {axis.name: axis for axis in AXES}
MODE_AXES: tuple[str, ...] = tuple(axis.name for axis in AXES if axis.is_mode)
#: The mode label of a trial whose mode axes are all at their defaults.
EAGER = "eager"


def label_text(value: Any) -> str | None:
    """An axis value as the command line spells it (``cuda_graph``, ``2``, ``true``), from a
    spec (enums, tuples) or a results row (numpy scalars, pandas' missing values); ``None``
    for a missing value."""
    if isinstance(value, Enum):
        value = value.value
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar -> Python
    if value is None or str(value) in ("<NA>", "nan", "None", "NaT"):
        return None
    return yaml_text(value).lower() if isinstance(value, (bool, str)) else str(value)


def mode_label(values: Any) -> str:
    """How a trial ran, as the user would type it: each mode axis that is not at its default,
    then what refines it, as ``key=value`` in registry order, space-joined (``streams=2
    graph=cuda_graph``, ``compile=default compile_dynamic=true``); :data:`EAGER` when none is.

    ``values`` is anything with ``.get(name)``: a dict of spec values, a results row."""
    def changed(axis: Axis) -> str | None:
        text = label_text(values.get(axis.name))
        return None if text is None or text == label_text(axis.default) else text

    parts = []
    for axis in AXES:
        shown = axis.is_mode or (axis.refines is not None
                                 and changed(AXES_BY_NAME[axis.refines]) is not None)
        text = changed(axis) if shown else None
        if text is not None:
            parts.append(f"{axis.name}={text}")
    return " ".join(parts) or EAGER
