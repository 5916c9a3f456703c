"""Ctrl-C during a sweep: never a traceback, always exit 130, never a lost result.

* Inside a job's trial loop (:class:`GracefulStop`), the first SIGINT lets the trial in flight
  finish (the worker ignores SIGINT) and journal; the second stops at once (every trial already
  journaled stays on disk, ``runner.storage.journal``).
* Everywhere else in a sweep (:func:`install`, from the sweep's start: between jobs, while a
  job file or the merged file is written), a SIGINT is counted and announced, and the write in
  hand completes: raising there would leave a half-merged sweep and a traceback. The sweep
  then stops at the next job boundary or at its end (``runner.execution.callbacks``): it
  merges what finished, prints the resume command and exits 130, however many times Ctrl-C
  was pressed.
* A launcher that runs each job as a child process (:func:`shield_launched_jobs`): the jobs
  stop as above and end normally; the driver then merges, prints the resume command and exits
  130.
* Ray, whose jobs never get the terminal's Ctrl-C: the driver cancels them through Ray
  (``runner.execution.ray_stop``); each stops as above (:func:`unshield_job`), and the driver
  merges, prints the resume command and exits 130.
"""

from __future__ import annotations

import atexit
import signal
import sys
import threading
from types import FrameType
from typing import Any

#: Exit status of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


class _Sweep:
    """Ctrl-C presses of this process's sweep (inside and outside trial loops)."""

    count = 0
    #: this process runs one job of a sweep whose driver is another process (a launcher's)
    launched_job = False


def requested() -> bool:
    """Whether Ctrl-C was pressed since the sweep started."""
    return _Sweep.count > 0


def presses() -> int:
    """How many times Ctrl-C was pressed since the sweep started."""
    return _Sweep.count


def press() -> None:
    """Count one Ctrl-C that a handler of a launcher's own took (``runner.execution.ray_stop``)."""
    _Sweep.count += 1


def install() -> None:
    """From now on, Ctrl-C outside a trial loop is counted, not raised (main thread only)."""
    _Sweep.count = 0  # a new sweep (several can run in one process: tests, notebooks)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _outside_trials)
        atexit.unregister(ignore)  # once, however many sweeps this process runs
        atexit.register(ignore)


def shield_launched_jobs() -> None:
    """The driver of a sweep whose launcher starts each job as a child process (submitit's
    local executor): from now on Ctrl-C is counted here (by a thread, or by the main thread's
    handler where it still receives it), and the processes started from now on inherit SIGINT
    blocked.

    Hazard: the terminal signals its whole process group. submitit's controller process,
    between this driver and the job, answers Ctrl-C with a traceback and kills its job one
    second later (SIGINT, then SIGKILL): the job file would be cut short and the driver's wait
    end in an exception instead of exit 130. Blocked, the controller never sees it; the job unblocks
    it (:func:`unshield_job`) and stops after its trial in flight, as a basic sweep's job
    does; the driver merges what finished and exits 130 with the resume command."""
    install()
    if threading.current_thread() is not threading.main_thread():
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    if not any(t.name == _COUNTER for t in threading.enumerate()):
        threading.Thread(target=_count_blocked, name=_COUNTER, daemon=True).start()


_COUNTER = "opsweep-ctrl-c"


def _count_blocked() -> None:
    """Counts each Ctrl-C while the main thread blocks SIGINT (sigwait takes it)."""
    while True:
        signal.sigwait({signal.SIGINT})
        _outside_trials(signal.SIGINT, None)


def end_shield() -> None:
    """The launched jobs have ended: Ctrl-C reaches the main thread's handler again."""
    if threading.current_thread() is threading.main_thread():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def unshield_job() -> None:
    """In a job a launcher started (:func:`shield_launched_jobs`): Ctrl-C is handled here as
    in a basic sweep's job, and a stop ends the job normally; the driver exits 130."""
    install()
    _Sweep.launched_job = True
    if threading.current_thread() is threading.main_thread():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a pending one: counted


def in_launched_job() -> bool:
    """Whether this process runs one job of a sweep driven from another process."""
    return _Sweep.launched_job


def ignore() -> None:
    """Ignore Ctrl-C from here to the exit: everything is written, and the exit status is
    decided. (Python's shutdown restores the default handler, under which a late Ctrl-C killed
    the process by SIGINT instead of letting it exit 130.)"""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _outside_trials(signum: int, frame: FrameType | None) -> None:
    _Sweep.count += 1
    print("\nopsweep: Ctrl-C: finishing the result file being written, then stopping "
          "(finished trials are kept)", file=sys.stderr, flush=True)


class GracefulStop:
    """Context manager: SIGINT handling for the trial loop of one job."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None
        self._armed = False  # a second Ctrl-C raises only while the trial loop runs

    @property
    def requested(self) -> bool:
        return self.count > 0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        _Sweep.count += 1
        if self.count == 1:
            print("\nopsweep: Ctrl-C: stopping after the trial in flight (Ctrl-C again to stop "
                  "now; finished trials are kept)", file=sys.stderr, flush=True)
            return
        if self.count == 2 and self._armed:
            raise KeyboardInterrupt
        # a third: the stop is under way (the worker being stopped); raising again would
        # interrupt that with a traceback

    def __enter__(self) -> GracefulStop:
        if requested():  # Ctrl-C while the job was being planned: run no trial
            self.count = 1
        if threading.current_thread() is threading.main_thread():
            self._armed = True
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, exc_type: type | None, *exc: object) -> bool:
        # Disarmed first: a second Ctrl-C that lands while the handler is swapped back (the
        # signal call itself runs Python code, where a handler can fire) is counted, not
        # raised; one that landed after the loop's own except clause is swallowed here. Either
        # would otherwise be a traceback and a death by SIGINT instead of exit 130.
        self._armed = False
        if self._previous is not None:
            # in a sweep that is install()'s handler: the job's file write that follows is
            # not interrupted by a Ctrl-C
            signal.signal(signal.SIGINT, self._previous)
        return exc_type is KeyboardInterrupt and self.count >= 2
