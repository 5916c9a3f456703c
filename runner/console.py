"""What the user sees in the terminal: a progress bar over trials (the summary table is
:mod:`runner.summary_table`).

Everything goes to stderr but that table (``... > table.txt`` keeps just the table).
Without a terminal (``nohup``, CI, a batch log) progress is plain lines, flushed, at most one
per :data:`PLAIN_EVERY_S` (every trial's with ``hydra.verbose``); all of it also goes to the
sweep folder's :data:`LOG_NAME` once :func:`start_log` has named it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: The sweep folder's copy of what the console showed (plain text, no colours or bars).
LOG_NAME = "opsweep.log"
#: Without a terminal, the shortest time between two progress lines (a sweep of thousands of
#: quick trials must not bury its log in them); the last trial always has its line.
PLAIN_EVERY_S = 2.0


class _Log:  # where start_log sends a copy of the console's output (None: nowhere yet)
    path: Path | None = None
    console: Console | None = None
    verbose: bool = False

    @classmethod
    def open(cls) -> Console | None:
        """The log, created at its first line: a run rejected before it prints leaves none."""
        if cls.console is None and cls.path is not None:
            try:  # a sweep folder that is gone or unwritable: the console goes on, unlogged
                handle = open(cls.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
            except OSError:
                return None
            cls.console = Console(file=handle, width=160, color_system=None,
                                  force_terminal=False, highlight=False)
        return cls.console


class _TeeConsole(Console):  # what it prints is also written, as plain text, to the log

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*objects, **kwargs)
        if _Log.open() is not None:
            _Log.console.print(*objects, **kwargs)


def _console(stderr: bool) -> Console:
    """A console that is at least 160 columns wide when output is not a terminal (CI, pipes,
    notebooks), so the summary table is not folded into unreadable slivers."""
    probe = _TeeConsole(stderr=stderr)
    return probe if probe.is_terminal else _TeeConsole(stderr=stderr, width=160)


stderr = _console(stderr=True)
stdout = _console(stderr=False)


def start_log(sweep_dir: Path, verbose: Any = False) -> Path:
    """From now on, copy the console's output into ``sweep_dir/opsweep.log`` (appended: every
    job of a multirun, and a resumed sweep, add to the same file; each line is written whole,
    so jobs in other processes do too). ``verbose`` is ``hydra.verbose``: true or names of
    loggers (``runner.analysis``) show their debug records and every trial's line."""
    path = Path(sweep_dir).absolute() / LOG_NAME
    if _Log.path != path:
        _Log.path, _Log.console = path, None
    _Log.verbose = bool(verbose)
    logger = logging.getLogger("runner")
    if not any(isinstance(h, _ConsoleHandler) for h in logger.handlers):
        logger.addHandler(_ConsoleHandler())
    return path


class _ConsoleHandler(logging.Handler):
    """``runner`` loggers' records (level: Hydra's; debug where ``hydra.verbose`` says)."""

    def emit(self, record: logging.LogRecord) -> None:
        stderr.print(f"{record.levelname.lower()}: {record.name}: {record.getMessage()}",
                     markup=False, highlight=False)


def _plain_line(line: str) -> None:
    """One progress line: on stderr without a terminal (flushed), and in the log."""
    if not stderr.is_terminal:
        stderr.print(line, markup=False, highlight=False, soft_wrap=True)
        stderr.file.flush()
    elif _Log.open() is not None:
        _Log.console.print(line, markup=False, soft_wrap=True)


class _PlainProgress:
    """``title: 10 trials``, then ``job 0: 3/10 trials, 0:00:04, eta 0:00:03: label``. The eta
    is paced by the trials after the first, which absorbs one-off costs (a worker importing
    torch) and, in the heat order, is the largest; ``–`` until a second trial ends."""

    def __init__(self, total: int, title: str, name: str = "") -> None:
        self.total, self.title, self.name, self.done = total, str(title), str(name or title), 0
        self.start = self.last = self.first_end = time.monotonic()
        _plain_line(f"{self.title}: {total} trials")

    def advance(self, label: str) -> None:
        self.done, now = self.done + 1, time.monotonic()
        self.first_end = self.first_end if self.done > 1 else now
        if self.done < self.total and now - self.last < PLAIN_EVERY_S and not _Log.verbose:
            return
        self.last, left = now, self.total - self.done
        pace_s = (now - self.first_end) / max(self.done - 1, 1)
        _plain_line(f"{self.name}: {self.done}/{self.total} trials, {_clock(now - self.start)}, "
                    f"eta {'–' if self.done < 2 and left else _clock(pace_s * left)}: {label}")


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 3600}:{int(seconds) // 60 % 60:02d}:{int(seconds) % 60:02d}"


def _bar_columns() -> tuple[Any, ...]:
    # a fixed bar width: a long label must not squeeze the bar to nothing
    return (TextColumn("[bold]{task.description}"), BarColumn(bar_width=24),
            MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
            TimeRemainingColumn(), TextColumn("{task.fields[current]}"))


#: Longest progress title / trial label shown (the full text is in the row and the table).
MAX_LABEL = 70


def plain(text: object, limit: int = MAX_LABEL) -> str:
    """``text`` as rich shows it literally: markup escaped, so ``op.impl=[mul_sum,bmm]``
    stays visible, and cut to ``limit`` characters."""
    text = str(text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return escape(text)


def distinct_parts(labels: Sequence[str]) -> list[str]:
    """Labels with the words every label shares left out (``matmul fp32 64x64x64 streams=2``
    and ``... streams=4`` become ``streams=2`` and ``streams=4``): what tells items apart
    is what a progress line has room for. A label left empty keeps its full text."""
    if len(labels) < 2:
        return list(labels)
    common = set.intersection(*(set(label.split()) for label in labels))
    return [" ".join(w for w in label.split() if w not in common) or label for label in labels]


@contextmanager
def progress(total: int, title: str, name: str = "") -> Iterator[Callable[[str], None]]:
    """A progress bar for work that finishes out of order (``workers=N``): yields
    ``advance(label)``, to call as each item finishes (under the caller's lock)."""
    lines = _PlainProgress(total, title, name)
    with Progress(*_bar_columns(), console=stderr, disable=not stderr.is_terminal) as bar:
        task = bar.add_task(plain(title), total=total, current="")
        yield lambda label: (bar.update(task, current=plain(label), advance=1),
                             lines.advance(label))
        bar.update(task, current="done")


def track(items: Sequence[Any], title: str, label: Any = str, name: str = "") -> Iterator[Any]:
    """Yield ``items`` under a progress bar whose text shows the current item's label (the
    words that tell it from the other items)."""
    labels = distinct_parts([str(label(item)) for item in items])
    lines = _PlainProgress(len(items), title, name)
    with Progress(*_bar_columns(), console=stderr, disable=not stderr.is_terminal) as progress:
        task = progress.add_task(plain(title), total=len(items), current="")
        for item, text in zip(items, labels, strict=True):
            progress.update(task, current=plain(text))
            yield item
            progress.advance(task)
            lines.advance(text)
        progress.update(task, current="done")
