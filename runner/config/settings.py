"""The rule of each job setting, declared on the setting's own field.

A setting that is not an axis is one field of :class:`runner.config.schema.RunConfig` (or
of :class:`~runner.config.trial_settings.TimerSettings`, under ``timer.``). Its rule is
declared in that field, with its doc::

    gpu_warmup_s: float = setting(0.0, "seconds of sustained matmul ...", minimum=0)

and :meth:`Rule.enforce` is the one check of it: on each command-line value, before Hydra
composes anything, and through :func:`check_settings` on every composed job, before its first
trial. A number must be finite (``nan``/``inf`` are rejected: ``trial_timeout_s=nan`` would
switch the timeout off) and in range; a choice must be one of its choices. Rules between
settings of one group are :class:`Constraint` entries in the group's ``CONSTRAINTS``
(``TimerSettings.CONSTRAINTS``: ``min_samples <= max_samples``, ...).

Adding a checked setting is one field: ``name: float = setting(default, doc, minimum=...)``;
a rule between settings is one :class:`Constraint` in its group's ``CONSTRAINTS``.

Imports only the standard library, :mod:`runner.core.errors` and the axis registry.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runner.core.axes import INT64_MAX
from runner.core.errors import TEXT_FIX, ConfigError, bad_value, shown, unwritable


@dataclass(frozen=True)
class Rule:
    """What one setting accepts. ``kind``: ``bool``, ``int``, ``float`` or ``str``."""

    kind: type
    minimum: float | None = None
    #: strictly greater than this (``target_rel`` must be > 0)
    above: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] | Callable[[], Iterable[Any]] | None = None
    nullable: bool = False
    #: what 0 or null means, for the message (``0 or null: no limit``)
    meaning: str = ""
    #: a rule of its own, for settings with one (``workers``: an int or ``per_gpu``)
    check: Callable[[str, Any], None] | None = None
    #: a valid command line, for the message
    example: str = ""

    def valid_choices(self) -> list[str]:
        choices = self.choices() if callable(self.choices) else self.choices
        return [str(c) for c in choices or ()]

    def expected(self, key: str = "") -> str:
        """``a finite number of seconds > 0``: the text after "Expected" in a message (the
        unit from the key's name)."""
        unit = {"_s": " of seconds", "_us": " of microseconds"}.get("_" + key.rpartition("_")[2],
                                                                  "")
        if self.kind is int:
            text = "an integer"
        elif self.kind is float:
            text = "a finite number" + unit
        else:
            text = "a string"
        bounds = []
        if self.minimum is not None:
            bounds.append(f">= {self.minimum:g}")
        if self.above is not None:
            bounds.append(f"> {self.above:g}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum:g}")
        text += (" " + " and ".join(bounds)) if bounds else ""
        text += " or null" if self.nullable else ""
        return text + (f" ({self.meaning})" if self.meaning else "")

    def enforce(self, key: str, value: Any) -> None:
        """Raise :class:`ConfigError` naming ``key``, ``value`` and what is expected."""
        if value is None and self.nullable:
            return
        if self.check is not None:
            self.check(key, value)
            return
        if self.kind is bool:
            if not isinstance(value, bool):
                raise bad_value(key, value, ["true", "false"])
            return
        if self.choices is not None:
            if str(value) not in self.valid_choices():
                raise bad_value(key, value, self.valid_choices())
            return
        if self.kind is str:
            return  # OmegaConf turns any scalar into the string
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind is int and not isinstance(value, int):
            number = False
        if not number or not _in_range(self, value):
            example = f", e.g. {self.example}" if self.example else ""
            raise ConfigError(f"invalid value for '{key}': {value!r}. Expected "
                              f"{self.expected(key)}{example}.")


def _in_range(rule: Rule, value: float) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if isinstance(value, int) and abs(value) > INT64_MAX:
        return False
    return not ((rule.minimum is not None and value < rule.minimum)
                or (rule.above is not None and value <= rule.above)
                or (rule.maximum is not None and value > rule.maximum))


def setting(default: Any, doc: str, kind: type | None = None, **rule: Any) -> Any:
    """A settings field: its default, its doc (``--help``) and its rule (:class:`Rule`).
    ``kind`` defaults to the default's type (give it for a ``None`` default)."""
    kind = kind or (type(default) if default is not None else str)
    return dataclasses.field(default=default,
                             metadata={"doc": doc, "rule": Rule(kind=kind, **rule)})


@dataclass(frozen=True)
class Constraint:
    """A rule between settings of one group: ``holds(*values of keys)``, else the message
    (``str.format`` of the group's values and ``{prefix}``, or a function of them)."""

    keys: tuple[str, ...]
    holds: Callable[..., bool]
    message: str | Callable[..., str]

    def enforce(self, values: Mapping[str, Any], prefix: str) -> None:
        if not all(isinstance(values.get(k), (int, float, str)) for k in self.keys):
            return  # a missing or wrongly typed value is its own field's error
        if not self.holds(*(values[k] for k in self.keys)):
            message = self.message
            raise ConfigError(message(prefix=prefix, **values) if callable(message)
                              else message.format(prefix=prefix, **values))


def rules(schema: type) -> dict[str, Rule]:
    """The declared rule of each field of a settings dataclass."""
    return {f.name: f.metadata["rule"] for f in dataclasses.fields(schema)
            if "rule" in f.metadata}


def check_settings(values: Mapping[str, Any], schema: type, prefix: str = "") -> None:
    """Every declared rule of ``schema`` (and of its nested settings groups) against the
    values present in ``values``; then the group's constraints (``CONSTRAINTS`` on the class)."""
    for f in dataclasses.fields(schema):
        if f.name not in values:
            continue
        value = values[f.name]
        if isinstance(value, str) and (problem := unwritable(value)):  # from ${oc.env:...}
            raise ConfigError(f"invalid value for '{prefix}{f.name}': {shown(value)} {problem}. "
                              f"{TEXT_FIX}")
        if "rule" in f.metadata:
            f.metadata["rule"].enforce(prefix + f.name, value)
        elif dataclasses.is_dataclass(f.default_factory) and isinstance(value, Mapping):
            check_settings(value, f.default_factory, f"{prefix}{f.name}.")
    for constraint in getattr(schema, "CONSTRAINTS", ()):
        constraint.enforce(values, prefix)
