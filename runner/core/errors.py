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


#: The fix for text :func:`unwritable` names.
TEXT_FIX = "Write the value in UTF-8 (set the terminal's or the file's encoding to UTF-8), " \
           "or leave the character out."


def unwritable(text: str) -> str | None:
    """What keeps ``text`` out of a UTF-8 file, or None. A byte that is not UTF-8 (a Latin-1
    ``é`` is 0xE9) reaches Python as a lone surrogate (U+DCE9); a YAML escape ``\\udce9``
    makes one too. Either reads, and failed only once opsweep wrote the job's record."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        where = f"at character {exc.start + 1}"
        if 0xDC80 <= code <= 0xDCFF:  # the byte itself, as the operating system handed it
            byte = bytes([code - 0xDC00])
            return (f"has the byte 0x{byte[0]:02X} {where}, which is not UTF-8 text (in "
                    f"Latin-1 it is {byte.decode('latin-1')!r})")
        return f"has U+{code:04X} {where}, half of a surrogate pair, which no text file holds"
    return None


def shown(text: str) -> str:
    """``repr(text)`` with each byte that was not UTF-8 written as that byte (``'caf\\xe9'``),
    not as the surrogate Python keeps it in (``'caf\\udce9'``)."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that stands for no byte: as it is
        return repr(text)
    return repr(raw.decode("utf-8", "backslashreplace")).replace("\\\\x", "\\x")
