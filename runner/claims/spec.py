"""The typed form of an experiment's ``expect:`` (claims) and ``pivots:`` (tables).

These dataclasses are fields of the run config (``runner.config.schema.RunConfig``), so Hydra
and OmegaConf reject a misspelt key or a value of the wrong type when the config is composed;
:func:`parse` and :func:`check` do the same with one message naming the key, the value and the
fix, and add the checks a type cannot express (a selector on a column that does not exist, two
comparisons, a ``_target_`` that does not import). Both run before any trial.

A claim reads **rows** (``where``, plus ``numerator``/``denominator`` for a ratio of two row
sets), reduces each row set to one number (its ``time``, or ``metric``, by ``aggregate``), and
compares it with **one** criterion. ``time: device`` reads ``gpu_time_per_op_us`` (what the
GPU did), ``time: loop`` ``time_per_op_us`` (what the host's loop paid, launches included);
without either, the device time when every selected row is a CUDA row that has one, else the
loop time. Selectors name result columns or op parameters by their bare name; ``each`` repeats
over partial selectors and ``combine`` reduces them; ``_target_`` names ``fn(rows, claim)``
for the few claims no selector states (``runner/claims/bespoke.py``). The keys, with an
example: docs/claims.md.

May import: pyarrow/omegaconf, ``runner.core`` and ``runner.storage.columns``. Never torch,
never the run side.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from runner.core.errors import ConfigError
from runner.core.targets import locate


class ClaimSpecError(ValueError):
    """A malformed ``expect:`` or ``pivots:`` entry; the run side reports it as a ConfigError."""


class Aggregate(str, Enum):
    """How a selector's rows become one number (several rows: repeated runs, merged files).
    ``one`` requires exactly one row: a second one is an error, not silently averaged."""

    median = "median"
    min = "min"
    max = "max"
    mean = "mean"
    sum = "sum"
    one = "one"


class Time(str, Enum):
    """Which time a claim or pivot reads (docs/timing.md): ``device`` is the GPU's own time
    per op (``gpu_time_per_op_us``), ``loop`` the host loop's time per op
    (``time_per_op_us``, launch cost included)."""

    device = "device"
    loop = "loop"


#: The column each ``time:`` reads.
TIME_METRICS = {Time.device: "gpu_time_per_op_us", Time.loop: "time_per_op_us"}


class Combine(str, Enum):
    """How the values of ``each`` item become the claim's value."""

    max = "max"
    min = "min"


#: The criteria; a claim states exactly one (a ``_target_`` claim may state none: information).
COMPARISONS: tuple[str, ...] = ("at_least", "at_most", "below", "within", "half_of_claimed_gain")


@dataclass
class Claim:
    """One checked statement of an experiment (see the module docstring)."""

    claim: str = MISSING
    source: str = ""
    where: dict[str, Any] = field(default_factory=dict)
    time: Time | None = None
    metric: str | None = None
    numerator: dict[str, Any] | None = None
    denominator: dict[str, Any] | None = None
    each: list[dict[str, Any]] | None = None
    combine: Combine = Combine.max
    aggregate: Aggregate = Aggregate.median
    at_least: float | None = None
    at_most: float | None = None
    below: float | None = None
    within: list[float] | None = None
    half_of_claimed_gain: float | None = None
    label: str = ""
    _target_: str | None = None

    def comparisons(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in COMPARISONS
                if getattr(self, name) is not None}

    @property
    def is_ratio(self) -> bool:
        return self.numerator is not None or any(
            "numerator" in item for item in self.each or [])


@dataclass
class Pivot:
    """An informational table: ``metric`` of the rows ``where`` selects, one row per distinct
    value of the ``rows`` columns and one column per value of ``columns`` (if given)."""

    title: str = MISSING
    where: dict[str, Any] = field(default_factory=dict)
    rows: list[str] = field(default_factory=lambda: ["shape"])
    columns: str | None = None
    time: Time | None = None
    metric: str | None = None
    aggregate: Aggregate = Aggregate.median


EACH_KEYS = ("where", "numerator", "denominator", "label")


# ---------------------------------------------------------------------------------------
# Typed parsing: a raw list (YAML, a result file's stored config) into dataclasses
# ---------------------------------------------------------------------------------------

def parse(raw: Any, kind: type, key: str) -> list[Any]:
    """``raw`` (a list of mappings) as ``kind`` instances; :class:`ClaimSpecError` names the
    entry, the key, the value and the fix."""
    if raw is None:
        return []
    if OmegaConf.is_config(raw):
        raw = OmegaConf.to_container(raw, resolve=True)
    if not isinstance(raw, (list, tuple)):
        raise ClaimSpecError(f"invalid value for '{key}': {raw!r}. Expected a list of "
                             f"mappings, one per {kind.__name__.lower()} (see "
                             "docs/experiments.md, 'Writing claims').")
    names = [f.name for f in dataclasses.fields(kind)]
    out = []
    for index, entry in enumerate(raw):
        where = f"{key}[{index}]"
        if not isinstance(entry, Mapping):
            raise ClaimSpecError(f"invalid value for '{where}': {entry!r}. Expected a mapping "
                                 f"with keys among: {', '.join(names)}.")
        for name in entry:
            if name not in names:
                close = difflib.get_close_matches(str(name), names, n=1)
                hint = f" Did you mean '{close[0]}'?" if close else ""
                raise ClaimSpecError(f"unknown key '{where}.{name}' (value {entry[name]!r}).{hint}"
                                     f" Valid keys: {', '.join(names)}.")
        try:
            node = OmegaConf.merge(OmegaConf.structured(kind), dict(entry))
            out.append(OmegaConf.to_object(node))
        except OmegaConfBaseException as exc:
            name = str(getattr(exc, "key", "") or "")
            value = entry.get(name, "(missing)")
            raise ClaimSpecError(f"invalid value for '{where}.{name}': {value!r}. "
                                 f"{_type_fix(kind, name)}") from None
    return out


def _type_fix(kind: type, name: str) -> str:
    enums = {"aggregate": Aggregate, "combine": Combine, "time": Time}
    if name in enums:
        return f"Valid choices: {', '.join(e.value for e in enums[name])}."
    if name in ("claim", "title"):
        return "It is required: a one-line sentence (the claim) or table title."
    if name == "within":
        return "Expected a [low, high] pair of numbers, e.g. within: [8, 32]."
    if name in ("where", "numerator", "denominator"):
        return "Expected a mapping of column to value, e.g. {op: matmul, dtype: bf16}."
    if name in COMPARISONS:
        return "Expected a number."
    return f"See the fields of {kind.__name__} in runner/claims/spec.py."


# ---------------------------------------------------------------------------------------
# Checks a type cannot express
# ---------------------------------------------------------------------------------------

def known_keys(params: Iterable[str] = ()) -> set[str]:
    """Names a selector may use: every result column, and the op parameters ``params`` by
    their bare name or as ``param_<name>``."""
    params = set(params)
    from runner.storage.columns import COLUMNS

    return set(COLUMNS) | params | {f"param_{p}" for p in params}


def numeric_columns() -> set[str]:
    from runner.storage.column_types import numeric_columns as declared_numeric

    return set(declared_numeric())


def check(claims: Sequence[Claim], pivots: Sequence[Pivot], params: Iterable[str] = ()) -> None:
    """Raise :class:`ClaimSpecError` for the first malformed claim or pivot."""
    keys = known_keys(params)
    for index, claim in enumerate(claims):
        _check_claim(claim, f"expect[{index}]", keys)
    for index, pivot in enumerate(pivots):
        where = f"pivots[{index}]"
        _check_selector(pivot.where, f"{where}.where", keys)
        _check_time(pivot, where)
        for name in [*pivot.rows, *([pivot.columns] if pivot.columns else [])]:
            _check_column(name, f"{where}.rows/columns", keys)


def _check_claim(claim: Claim, where: str, keys: set[str]) -> None:
    comparisons = claim.comparisons()
    if len(comparisons) > 1:
        raise ClaimSpecError(
            f"'{where}' states {len(comparisons)} comparisons ({', '.join(comparisons)}). "
            f"Keep exactly one of: {', '.join(COMPARISONS)}.")
    if claim._target_ is not None:
        resolve(claim._target_, f"{where}._target_")
    elif not comparisons:
        raise ClaimSpecError(
            f"'{where}' ({claim.claim!r}) has no threshold. Add one of: "
            f"{', '.join(COMPARISONS)}, e.g. at_least: 1.5 or half_of_claimed_gain: 2.0.")
    if claim.within is not None and (len(claim.within) != 2 or claim.within[0] > claim.within[1]):
        raise ClaimSpecError(f"invalid value for '{where}.within': {list(claim.within)}. "
                             "Expected [low, high] with low <= high, e.g. within: [8, 32].")
    _check_time(claim, where)
    _check_selector(claim.where, f"{where}.where", keys)
    items = claim.each if claim.each is not None else [{}]
    if claim.each is not None and not claim.each:
        raise ClaimSpecError(f"'{where}.each' is empty. Give at least one partial selector, "
                             "or leave 'each' out.")
    for number, item in enumerate(items):
        at = f"{where}.each[{number}]" if claim.each is not None else where
        for name, value in item.items():
            if name not in EACH_KEYS:
                raise ClaimSpecError(f"unknown key '{at}.{name}' (value {value!r}). An 'each' "
                                     f"item may set: {', '.join(EACH_KEYS)}.")
            if name != "label":
                _check_selector(value, f"{at}.{name}", keys)
        has_num = claim.numerator is not None or "numerator" in item
        has_den = claim.denominator is not None or "denominator" in item
        if has_num != has_den and claim._target_ is None:
            missing = "denominator" if has_num else "numerator"
            raise ClaimSpecError(f"'{at}' has a {'numerator' if has_num else 'denominator'} but "
                                 f"no {missing}. A ratio needs both, e.g. numerator: "
                                 "{graph: none}, denominator: {graph: cuda_graph}.")


def _check_selector(selector: Any, where: str, keys: set[str]) -> None:
    if not isinstance(selector, Mapping):
        raise ClaimSpecError(f"invalid value for '{where}': {selector!r}. Expected a mapping of "
                             "column to value, e.g. {op: matmul, dtype: bf16}.")
    for name in selector:
        _check_column(name, f"{where}.{name}", keys)


def _check_column(name: str, where: str, keys: set[str]) -> None:
    if name in keys or str(name).startswith("extra_"):
        return
    close = difflib.get_close_matches(str(name), sorted(keys), n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    raise ClaimSpecError(f"invalid key in '{where}': {name!r} is neither a result column "
                         f"(runner/storage/columns.py) nor a parameter of an op in this "
                         f"experiment.{hint}")


def _check_time(spec: Claim | Pivot, where: str) -> None:
    if spec.metric is not None and spec.time is not None:
        raise ClaimSpecError(
            f"'{where}' states both time: {spec.time.value} and metric: {spec.metric}. Keep "
            f"one: time: device|loop reads {TIME_METRICS[Time.device]} or "
            f"{TIME_METRICS[Time.loop]}; metric: names any other numeric column.")
    if spec.metric is not None:
        _check_metric(spec.metric, f"{where}.metric")


def _check_metric(metric: str, where: str) -> None:
    numeric = numeric_columns()
    if metric in numeric or metric.startswith("extra_"):
        return
    close = difflib.get_close_matches(metric, sorted(numeric), n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    raise ClaimSpecError(f"invalid value for '{where}': {metric!r} is not a numeric result "
                         f"column.{hint} Use e.g. time_per_op_us, tflops, gbps, "
                         "peak_reserved_bytes, recompile_count, rel_error or an extra_* column.")


def resolve(target: str, where: str = "_target_") -> Any:
    """Import ``pkg.module.function`` (or ``pkg.module:function``); must be callable."""
    try:
        return locate(target, where)
    except ConfigError as exc:
        raise ClaimSpecError(f"{exc} Give a dotted path to a function fn(rows, claim), e.g. "
                             "runner.claims.bespoke.batching_loop.") from None
