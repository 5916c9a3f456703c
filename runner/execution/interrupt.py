"""Ctrl-C during a sweep: the first stops after the trial in flight, the second at once.

Why: a ``KeyboardInterrupt`` traceback in the middle of a trial used to lose the job's rows.
Now the first SIGINT only sets :attr:`GracefulStop.requested`; the job finishes the trial in
flight (the worker ignores SIGINT), journals it, merges what finished, says where it is and
exits 130. A second SIGINT raises ``KeyboardInterrupt`` at once; every trial already journaled
stays on disk (``runner.storage.journal``).
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

#: Exit status of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


class GracefulStop:
    """Context manager: SIGINT handling for the trial loop of one job."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None

    @property
    def requested(self) -> bool:
        return self.count > 0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count == 1:
            print("\nopsweep: Ctrl-C: stopping after the trial in flight (Ctrl-C again to stop "
                  "now; finished trials are kept)", file=sys.stderr, flush=True)
            return
        raise KeyboardInterrupt

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
