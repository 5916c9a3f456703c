"""The chunk stream's limits, and what it hands out and is watched by
(:class:`runner.timing.back_to_back.ChunkStream`): how many launches may wait behind a hold,
how long a hold may be, how long a chunk is, how many chunks may be retaken, the error when
the host cannot keep up, and the :class:`Watch` protocol an energy window implements."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

#: Launches the host may queue behind a spin kernel. CUDA's pending-launch queue holds about
#: 1024 launches on current drivers (benchmarks/device_time_check.py measures it: queueing
#: launches behind a long spin, the host's time per launch jumps at the depth); a quarter of
#: it leaves room for the events, the spin and the copies a call may also enqueue.
LAUNCH_QUEUE_BUDGET = 256
#: Launches each sample adds around its work: the clock probe, two events, a graph replay.
SAMPLE_LAUNCHES = 4
#: Shortest spin, seconds: covers enqueueing two events and a graph launch (~10-20 µs).
SPIN_MIN_S = 50e-6
#: Longest spin, seconds (a sanity cap: a blocked K that needs longer is host-bound anyway).
SPIN_MAX_S = 0.2
#: Shortest sample (s) whose chunks are held by more of the same work, not a low-power spin
#: that let an H100 run the samples 7-13% fast (docs/timing.md, "The H100 fast state"): a
#: replay this long costs its host one launch, a tenth of what it gives the device.
FILL_MIN_SAMPLE_S = 100e-6
#: Seconds of samples per back-to-back chunk (one sync per chunk) and the most samples in one.
CHUNK_S, MAX_CHUNK_SAMPLES = 0.005, 64
#: While a ``Watch`` polls NVML between chunks: longer chunks, more of them queued ahead. An
#: NVML energy read can take milliseconds, and with 5 ms chunks one ahead the device starved
#: (an H200 was busy 6-45% of the window). With 50 ms chunks a power-capped bmm and linear
#: still fell behind; with 20 ms, bmm alone did once (then retried without the watch).
WATCHED_CHUNK_S, WATCHED_AHEAD = 0.02, 3
#: Rejected samples in a row after which a method is abandoned.
MAX_RETAKES = 3
#: Times the warm-up (and a filled stream's samples) may grow the hold, at least. A host that
#: still outlasts it is waiting on the device (a sync or a pageable copy inside the call),
#: and no hold will ever cover it.
MAX_SPIN_GROWTHS = 4


class HostBlocked(RuntimeError):
    """The host's enqueue outlasted the spin kernel: the GPU may have waited on the host."""


class Watch(Protocol):
    """Something that watches the samples' window as it runs (the energy counter:
    ``runner.execution.energy_samples.SampleWindow``), so that one settled window gives the time,
    the clock and the energy. ``window_s`` is the shortest span of samples it needs."""

    window_s: float

    def begin(self) -> None:
        """The first sampled chunk has completed: the window starts now."""

    def poll(self) -> None:
        """Called again and again while the host waits for a chunk: read, then pause."""

    def chunk(self, calls: int, busy_s: float) -> None:
        """A chunk completed inside the window: ``calls`` calls in ``busy_s`` of device time."""

    def discard(self) -> None:
        """The samples it watched were not used: forget the window."""


class Queued(NamedTuple):
    """A chunk in flight, as the host queued it."""

    chunk: Any
    #: the device had not reached its first event once the host had queued all of it
    valid: bool
    samples: int
    #: the spin per sample that held it (the stream's ``spin_s`` then); 0.0: not held
    spun_s: float
    #: unsampled samples' worth of the op's work that held it (a replay's fill; 0: none)
    filled: int = 0
    #: host seconds from its hold to its last sample queued (``Device.queued_s``), said when
    #: no hold covered the host (HostBlocked)
    queued_s: float = 0.0
