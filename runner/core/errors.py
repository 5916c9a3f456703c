"""The one error type for bad user input, and the one form of its message.

Every check in opsweep names the key, the bad value and the valid choices (or the fix), and
the command exits with status 2 before any trial runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


class ConfigError(ValueError):
    """Bad user input: a key, value or combination that cannot run. Exit code 2."""


def choices_text(choices: Iterable[Any]) -> str:
    return ", ".join(str(c) for c in choices)


def bad_value(key: str, value: Any, choices: Iterable[Any], hint: str = "") -> ConfigError:
    """The one form of a bad-value message: key, value, valid choices, closest match, hint."""
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(str(value), choices, n=1)
    msg = f"invalid value for '{key}': {value!r}. Valid choices: {choices_text(choices)}."
    if close:
        msg += f" Did you mean '{close[0]}'?"
    if hint:
        msg += f" {hint}"
    return ConfigError(msg)
