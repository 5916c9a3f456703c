"""The journal's append-only trial log: one JSON line per finished trial, the job's metadata
(its config, overrides, argv) once per writer.

Why not one Parquet file per trial: a one-row Parquet file of ~140 columns costs 15-40 kB of
footer, and the job's config used to ride in every file's metadata, so a journal grew as the
square of the trials (730 MB at 5000). A line here is the row alone (~3 kB with a smoke timer's
samples; more with many samples).

Durability: each line is handed to the kernel (``os.write`` on an ``O_APPEND`` descriptor)
before :func:`append` returns, so a SIGKILL of this process, the OOM killer or a pre-emption
loses nothing that was written. The fsync that guards against a crash of the *machine* is
batched: at most every :data:`FSYNC_EVERY_S` seconds, and when the log is closed. A writer never
appends to a file another process wrote: it starts a segment of its own (``O_EXCL``), so a
line torn by a kill stays the last line of a closed segment, where the reader names and skips
it. A segment holds at most :data:`SEGMENT_BYTES` (then the next one starts), so one damaged
file costs few rows.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import date, datetime
from pathlib import Path
from typing import Any

from runner.storage.files import fsync_dir

#: Segment files: ``<journal>/log-<n>.jsonl``.
SEGMENT_GLOB = "log-*.jsonl"
SEGMENT_BYTES = 32 * 1024
FSYNC_EVERY_S = 0.5
_ROW, _META = "r", "m"


class _Segment:
    """The open segment one process appends to, for one job."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.fd = -1
        self.size = 0
        self.meta_json: str | None = None  # the metadata line this writer wrote last
        self.meta_of: Any = None  # ... and the object it came from (a job passes the same)
        self.synced_at = time.monotonic()
        self.lock = threading.Lock()

    def _open_next(self) -> None:
        self._close_fd()
        self.folder.mkdir(parents=True, exist_ok=True)
        taken = [int(p.stem.partition("-")[2]) for p in self.folder.glob(SEGMENT_GLOB)
                 if p.stem.partition("-")[2].isdigit()]
        number = max(taken, default=-1) + 1
        while True:
            try:
                self.fd = os.open(self.folder / f"log-{number:06d}.jsonl",
                                  os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
                break
            except FileExistsError:  # another writer took this number: take the next
                number += 1
        fsync_dir(self.folder)  # the new name is durable before a line counts on it
        self.size = 0

    def _write_line(self, text: str) -> None:
        data = (text + "\n").encode()
        view = memoryview(data)
        while view:  # a short write (a signal, a nearly full disk) goes on where it stopped
            view = view[os.write(self.fd, view):]
        self.size += len(data)

    def append(self, row: dict[str, Any], metadata: dict[str, Any]) -> None:
        line = json.dumps({_ROW: row}, default=_plain, allow_nan=True)
        with self.lock:
            if self.fd < 0 or (self.size and self.size + len(line) > SEGMENT_BYTES):
                self._open_next()
            if metadata is not self.meta_of:
                meta = json.dumps({_META: metadata}, default=_plain)
                self.meta_of = metadata
                if meta != self.meta_json:
                    self.meta_json = meta
                    self._write_line(meta)
            self._write_line(line)
            if time.monotonic() - self.synced_at >= FSYNC_EVERY_S:
                self._sync()

    def _sync(self) -> None:
        os.fsync(self.fd)
        self.synced_at = time.monotonic()

    def _close_fd(self) -> None:
        if self.fd >= 0:
            try:
                self._sync()
            finally:
                os.close(self.fd)
                self.fd = -1

    def close(self) -> None:
        with self.lock:
            self._close_fd()


_OPEN: dict[Path, _Segment] = {}
_OPEN_LOCK = threading.Lock()


def append(folder: Path, row: dict[str, Any], metadata: dict[str, Any]) -> None:
    """Append one finished trial's row to the job's log in ``folder``."""
    key = Path(folder).resolve()
    with _OPEN_LOCK:
        segment = _OPEN.setdefault(key, _Segment(key))
    segment.append(row, metadata)


def close(folder: Path | None = None) -> None:
    """fsync and close the log of ``folder`` (every open log when ``None``)."""
    with _OPEN_LOCK:
        keys = list(_OPEN) if folder is None else [Path(folder).resolve()]
        segments = [_OPEN.pop(k) for k in keys if k in _OPEN]
    for segment in segments:
        segment.close()


def read(path: Path, metadata: dict[str, Any] | None = None, *,
         warn: bool = True) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], dict[str, Any]]:
    """``(row, metadata)`` of each row line of one segment, and the metadata in force at its
    end; ``metadata`` is the one in force where the segment starts (a writer writes it once,
    not in each segment). A line that does not parse (torn by a kill, damaged) is named on
    stderr and skipped; the others count."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        _warn(warn, path, f"{type(exc).__name__}: {exc}")
        return [], metadata or {}
    rows: list[tuple[dict[str, Any], dict[str, Any]]] = []
    metadata = metadata or {}
    for number, line in enumerate(text.splitlines(), 1):
        try:
            record = json.loads(line)
            if _META in record:
                metadata = dict(record[_META])
            else:
                rows.append((_typed(dict(record[_ROW])), metadata))
        except (ValueError, TypeError, KeyError):
            _warn(warn, path, f"line {number} is not a complete entry")
    return rows, metadata


def metadata_lines(path: Path) -> list[dict[str, Any]]:
    """The metadata lines of one segment (a few per file: cheap for thousands of trials)."""
    marker = ('{"' + _META + '":').encode()
    found = []
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return []
    for line in lines:
        if line.startswith(marker):
            try:
                found.append(dict(json.loads(line)[_META]))
            except (ValueError, TypeError, KeyError):
                continue
    return found


def count_rows(folder: Path) -> int:
    """How many rows the logs in ``folder`` hold (without parsing them: cheap to poll)."""
    marker = ('{"' + _ROW + '":').encode()
    total = 0
    for path in Path(folder).glob(SEGMENT_GLOB):
        try:
            total += sum(line.startswith(marker) and line.endswith(b"\n")
                         for line in path.read_bytes().splitlines(keepends=True))
        except OSError:
            continue
    return total


def segments(folder: Path) -> list[Path]:
    """The log segments of a journal folder, oldest first."""
    return sorted(Path(folder).glob(SEGMENT_GLOB))


def _warn(warn: bool, path: Path, what: str) -> None:
    if warn:
        print(f"opsweep: warning: skipping damaged result file {path} ({what})", file=sys.stderr)


def _plain(value: Any) -> Any:
    """JSON for what a row holds besides JSON's own types: times, numpy scalars, tuples."""
    if isinstance(value, (datetime, date)):
        return {"$t": value.isoformat()}
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


def _typed(row: dict[str, Any]) -> dict[str, Any]:
    for key, value in row.items():
        if isinstance(value, dict) and set(value) == {"$t"}:
            row[key] = datetime.fromisoformat(value["$t"])
    return row
