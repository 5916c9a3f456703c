"""The call a trial timed, as the passes after its timed samples see it (profile, energy).

Built once by the trial from its prepared callable and its measured times, and handed
unchanged through ``runner.execution.insight.insight_columns`` to the passes, so each pass
reads the same callable, times and sizes as the row it adds columns to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TimedCall:
    """One call of the timed callable and what the timer learned of it."""

    #: the callable the timer timed
    fn: Callable[[], Any]
    #: the timed median per call: sizes the energy window's chunks and the profile's period
    per_call_s: float
    #: the work and the memory traffic of one call (None: unknown), for per-joule rates
    flops: float | None
    bytes_moved: float | None
    #: ``fn`` is the plain eager call: the energy window may capture it in a graph of its own
    capturable: bool
    #: runs before every call, outside the measured work (grad reset in backward mode)
    before_call: Callable[[], None] | None = None
    #: the steady-state device time per call, which the energy per call is taken at (one
    #: time under every derived column); None: no device time was taken
    device_time_s: float | None = None
