"""One writer per sweep: an advisory lock on the sweep folder.

Why: two processes writing one sweep (two ``runner.resume`` at once, two runs started together
with one fixed ``sweep_id``, a resume beside an orphaned run) ran the same trials twice and
left trials with several ``ok`` attempts. ``python -m runner``, ``runner.resume`` and
``runner.collect`` take this lock before they plan or write; a second process is told who holds
it (pid, command, since when) and waits up to ``lock_wait_s`` seconds or exits 2.

The lock is ``flock`` on ``<sweep>/.opsweep.lock``: the kernel releases it when its holder dies
(SIGKILL included), so a lock left by a killed process is simply taken over; the pid it names
is only reported. It is held by the process, once, until that process exits (a multirun's jobs
and the final merge run under the one lock). The file descriptor is not inherited: worker
processes never hold it.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shlex
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

LOCK_FILE = ".opsweep.lock"
#: How often a waiting process tries again.
POLL_S = 0.2

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one writer is then the user's care
    fcntl = None  # type: ignore[assignment]


class SweepBusy(RuntimeError):
    """Another live process holds the sweep's lock (the message names it)."""


#: sweep folder (resolved) → open, locked file descriptor of this process
_HELD: dict[Path, int] = {}
#: folders this process made only to hold a lock: removed at exit if nothing else was written
_MADE: dict[Path, list[Path]] = {}


def holder(sweep_dir: Path) -> dict[str, object]:
    """What the lock file says about its (last) holder: pid, host, command, since."""
    try:
        return json.loads((Path(sweep_dir) / LOCK_FILE).read_text() or "{}")
    except (OSError, ValueError):
        return {}


def describe(info: dict[str, object]) -> str:
    if not info:
        return "another process"
    return (f"pid {info.get('pid')} on {info.get('host')} ({info.get('command')}, since "
            f"{info.get('since')})")


def hold(sweep_dir: Path, wait_s: float = 0.0, *, what: str = "") -> bool:
    """Take the sweep's lock for the rest of this process (a no-op when it already holds it).

    ``wait_s``: seconds to wait for another holder (0: do not wait). Raises
    :class:`SweepBusy` naming the holder when it is still held after that. Returns whether
    the lock was taken over from a process that is gone.
    """
    if fcntl is None:
        return False
    if math.isnan(wait_s) or wait_s < 0:
        raise ValueError(f"invalid lock wait {wait_s!r}: expected seconds >= 0")
    folder = Path(sweep_dir).resolve()
    if folder in _HELD:
        return False
    made = _make_dirs(folder)
    deadline = time.monotonic() + wait_s
    told = False
    while True:
        fd = _try_lock(folder)
        if fd is not None:
            break
        info = holder(folder)
        if time.monotonic() >= deadline:
            raise SweepBusy(
                f"{folder} is being written by {describe(info)}: one process writes a sweep "
                f"at a time. Wait for it to end (or stop it), or wait here with "
                f"{what or 'lock_wait_s=SECONDS'}.")
        if not told:
            print(f"opsweep: waiting up to {wait_s:g} s for {describe(info)}, which is writing "
                  f"{folder}", file=sys.stderr, flush=True)
            told = True
        time.sleep(POLL_S)
    previous = holder(folder)
    stale = bool(previous.get("pid")) and not _alive(previous, folder)
    if stale:
        print(f"opsweep: note: taking over the lock of {folder} from {describe(previous)}, "
              "which is no longer running", file=sys.stderr, flush=True)
    _write_holder(fd)
    _HELD[folder] = fd
    if made:
        _MADE[folder] = made
    return stale


def release(sweep_dir: Path) -> None:
    """Give the lock back (normally it is held until the process exits)."""
    folder = Path(sweep_dir).resolve()
    fd = _HELD.pop(folder, None)
    if fd is None:
        return
    made = _MADE.pop(folder, [])
    if made and _only_the_lock(folder):
        # a failed start (bad input) made this folder only for the lock: leave nothing
        (folder / LOCK_FILE).unlink(missing_ok=True)
        os.close(fd)
        for path in made:
            try:
                path.rmdir()
            except OSError:
                break
        return
    try:
        os.ftruncate(fd, 0)  # a clean end names no holder: only a killed one is "stale"
    except OSError:
        pass
    os.close(fd)


def made_here(sweep_dir: Path) -> bool:
    """Whether this process made ``sweep_dir`` when it took its lock (a fresh start)."""
    return Path(sweep_dir).resolve() in _MADE


def held(sweep_dir: Path) -> bool:
    return Path(sweep_dir).resolve() in _HELD


@atexit.register
def _release_all() -> None:
    for folder in list(_HELD):
        release(folder)


def _try_lock(folder: Path) -> int | None:
    """An open descriptor holding the lock, or None while another process holds it."""
    path = folder / LOCK_FILE
    for _ in range(100):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the file was removed (a released failed start) after we opened it
    return None


def _write_holder(fd: int) -> None:
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "command": shlex.join([Path(sys.executable).name, *sys.argv])[:500],
            "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(info).encode(), 0)


def _alive(info: dict[str, object], folder: Path) -> bool:
    """Whether the process a lock file names still runs (on this host; elsewhere: unknown,
    taken as gone since the kernel released its lock)."""
    if info.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(info["pid"]), 0)  # type: ignore[arg-type]
    except (ProcessLookupError, ValueError, TypeError):
        return False
    except PermissionError:
        return True
    return int(info["pid"]) != os.getpid()  # type: ignore[arg-type]


def _make_dirs(folder: Path) -> list[Path]:
    """Make ``folder`` (and parents); the ones made, deepest first."""
    made = []
    probe = folder
    while not probe.exists() and probe != probe.parent:
        made.append(probe)
        probe = probe.parent
    folder.mkdir(parents=True, exist_ok=True)
    return made


def _only_the_lock(folder: Path) -> bool:
    try:
        return [p.name for p in folder.iterdir()] == [LOCK_FILE]
    except OSError:
        return False
