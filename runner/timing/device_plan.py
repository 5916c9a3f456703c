"""What a device-time measurement is given, frozen: how it is taken
(:class:`DeviceTimeOptions`: the clocks, the L2 flush, the watch and the warm-up floors the
heat sets) and what one sample runs (:class:`SampleWork`). ``runner.timing.device_time``
chooses the method; ``runner.timing.back_to_back`` and ``runner.timing.gapped`` take the
samples: each reads what it needs from these two, not from a list of a dozen arguments."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.timing.series import Reading
from runner.timing.settle import CAPPED_MIN_S

#: Shortest warm-up (s) of the device time (and the whole warm-up of the burst time): a few
#: chunks, so the settle rule has two windows to compare. A power-capped op is told by the
#: clock its first samples ran at (``runner.timing.clock_probe``) and warms up for longer
#: (``runner.timing.settle.CAPPED_MIN_S``); small and memory-bound ops pay only this.
DEVICE_WARMUP_S = 0.02


@dataclass(frozen=True)
class DeviceTimeOptions:
    """How the device time of one op is taken (``runner.timing.device_time``)."""

    #: what one call allocates (bounds K: a graph keeps every call's outputs); None: unknown
    bytes_per_call: int | None = None
    #: why the op must not be captured (the replay method is skipped with it); None: it may
    capture_blocker: str | None = None
    #: run before every sample, outside the timed region (backward mode resets grads there)
    before_sample: Callable[[], None] | None = None
    #: flush L2 before every sample: the cold protocol, K = 1, gapped
    flush: Callable[[], None] | None = None
    #: the wall clock that enforces warm-up and sampling times (tests inject a fake)
    wall: Callable[[], float] = time.perf_counter
    #: back to back (the sustained state); False: the burst time's gapped samples
    steady: bool = True
    #: reads the SM clock, power and temperature for the settle rule (None: time alone)
    read_clock: Callable[[], Reading | None] | None = None
    #: watches the steady samples' window (``runner.timing.chunks.Watch``: energy)
    watch: Any = None
    #: the shortest warm-up of a power-capped op, and of any (``runner.timing.heat``)
    min_capped_s: float = CAPPED_MIN_S
    min_s: float = DEVICE_WARMUP_S


@dataclass(frozen=True)
class SampleWork:
    """What one device-time sample runs: ``work`` (``calls`` calls of the op, or a replay of
    them), held behind a spin of ``spin_s`` while the host enqueues it; ``sample_s``: what it
    is expected to take; ``launches``: the kernels it launches (0 for a graph replay);
    ``before``: run before it, outside the timed region; ``fill``: hold it behind more of
    ``work`` (unsampled) instead of a spin, where one ``work`` costs the host a single
    launch (a graph replay: ``runner.timing.chunks.FILL_MIN_SAMPLE_S``)."""

    work: Callable[[], Any]
    calls: int
    spin_s: float
    sample_s: float = 0.0
    launches: int = 0
    before: Callable[[], None] | None = None
    fill: bool = False
