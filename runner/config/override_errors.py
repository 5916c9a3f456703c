"""Why Hydra's override grammar refused an override, in one line that names the key, the
value and the fix: its own message ("no viable alternative at input",
"LexerNoViableAltException") says none of them (``runner.config.commandline`` asks)."""

from __future__ import annotations

import os
from collections.abc import Sequence


def explain(texts: Sequence[str], exc: Exception) -> str:
    """The line for overrides ``texts`` that the grammar refused with ``exc``: the first
    rule that recognises the mistake, else the grammar's own first line."""
    return (home(texts) or look_alike(texts) or unbalanced(texts) or too_deep(texts, exc)
            or str(exc).splitlines()[0])


def home(texts: Sequence[str]) -> str | None:
    """``results_dir=~/x`` where the shell left the ``~`` alone (sh and zsh do after ``=``):
    the grammar refuses it unquoted, with a bare "LexerNoViableAltException"."""
    for text in texts:
        key, _, value = text.partition("=")
        if value == "~" or value.startswith("~/"):
            return (f"invalid value for {key.lstrip('+~')!r} on the command line: {text!r}: "
                    "the shell did not expand '~' (sh and zsh leave it after '='), and opsweep "
                    f"does not either. Write the path out: {key}={os.path.expanduser(value)}")
    return None


def too_deep(texts: Sequence[str], exc: Exception) -> str | None:
    """A value nested thousands of lists deep overflows the parser's recursion."""
    if not isinstance(exc, RecursionError):
        return None

    def depth(text: str) -> int:
        level = deepest = 0
        for char in text:
            level += (char in "[{") - (char in "]}")
            deepest = max(deepest, level)
        return deepest

    text = max(texts, key=depth)
    return (f"invalid value for {text.partition('=')[0]!r} on the command line: its lists "
            f"nest {depth(text)} levels deep, too deep to read. Flatten the value.")


def look_alike(texts: Sequence[str]) -> str | None:
    """The first character outside ASCII in an override the grammar refused, by name and
    position: Hydra's own message ("LexerNoViableAltException") does not say that ``８``
    is a full-width 8 or that an invisible zero-width space sits in ``fp32``."""
    import unicodedata

    for text in texts:
        for position, char in enumerate(text, 1):
            if char.isascii():
                continue
            key = text.partition("=")[0]
            name = unicodedata.name(char, "an unnamed character")
            plain = unicodedata.normalize("NFKC", char)
            if not plain.isascii():  # ä → a: the letter without its accent
                plain = "".join(c for c in unicodedata.normalize("NFKD", char)
                                if not unicodedata.combining(c))
            fix = (f"type {plain!r} instead" if plain.isascii() and plain.strip()
                   else "delete it" if unicodedata.category(char) in ("Cf", "Zs", "Cc")
                   else "type the value in ASCII, or quote it if it is meant (key='...')")
            return (f"invalid value for {key!r} on the command line: {text!r} has "
                    f"U+{ord(char):04X} {name} at character {position}, which the "
                    f"override grammar does not accept: {fix}.")
    return None


#: The brackets of the override grammar: a list, a mapping, a sweep function's arguments.
_CLOSING = {"[": "]", "{": "}", "(": ")"}


def unbalanced(texts: Sequence[str]) -> str | None:
    """The first override whose brackets do not pair up (``dtype=[fp32,bf16``), named with the
    fix: Hydra's grammar says only "no viable alternative at input". Quoted text is skipped.
    A space inside the brackets is the usual cause: the shell splits the override in two."""
    for text in texts:
        opened: list[str] = []
        quote = None
        for char in text:
            if quote or char in "'\"":
                quote = None if char == quote else (quote or char)
            elif char in _CLOSING:
                opened.append(char)
            elif char in _CLOSING.values() and (not opened or _CLOSING[opened.pop()] != char):
                opened = [char]  # a closing bracket that closes nothing it opened
                break
        if opened:
            what = (f"an unclosed {opened[-1]!r}" if opened[-1] in _CLOSING
                    else f"a {opened[-1]!r} that closes no bracket")
            return (f"invalid override {text!r}: it has {what}. Close each [ with ], {{ with }} "
                    "and ( with ), and quote the whole override so that the shell passes it "
                    "as one argument, e.g. 'dtype=[fp32,bf16]' (a space inside the brackets "
                    "splits it in two).")
    return None
