"""What earlier work left the device in, and how the warm-ups that follow use it.

A power-capped op needs seconds of load before its time per call stops moving
(``runner.timing.settle.CAPPED_MIN_S``). A trial that follows power-capped work starts *hot*:
the controller has already pulled the clock down, and the gap between two trials (tens of ms
of set-up) gives only part of the headroom back. So its capped warm-up is shorter
(:func:`capped_min_s`): settling is paid once per heat, not once per trial. The heat also
carries the clock that capped work last sustained, for the row (it is no settle rule: a
smaller op sustains a higher clock at the same power limit, so clocks of two ops do not
compare; the device's own word is its averaged power, ``runner.timing.settle``). Work that ran at
full clock leaves the clock up, however much power it drew (:func:`heat_left`). Any op that
starts hot, capped or not, warms up long enough to see the clock come back up
(:func:`min_warmup_s`). Within a trial, the loop time follows the device time's back-to-back
samples at once (``runner.execution.timed.time_trial``) and only checks that the op is still
there. Before a job, :func:`heat_device` puts the device in its sustained-load
state (``gpu_warmup_s``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.timing.settle import CAPPED_MIN_S

#: Shortest warm-up (s) of a power-capped series that starts *hot*: within :data:`HOT_GAP_S`
#: of the end of earlier hot work on the same device (the trial before). The
#: controller has already pulled the clock down; the gap between two trials (tens of ms of
#: set-up) gives some headroom back, which a second of the new op's load takes again.
HOT_CAPPED_MIN_S = 1.0
#: Longest gap (s) after hot work (:class:`Heat`) for a warm-up to count as starting hot.
HOT_GAP_S = 1.0
#: Seconds after the end of power-capped work in which the clock may still be coming back,
#: whatever ran since: on an H200 a light op's clock rose in steps for 80 ms after a capped
#: one, and the trials between take tens of ms each. Within it, even after an uncapped
#: trial, an op warms up for :data:`HOT_MIN_S` (:func:`min_warmup_s`).
RECOVERY_S = 0.2
#: Shortest device-time warm-up (s) of *any* op that starts hot, capped or not: the clock the
#: work before pulled down takes ~0.1 s to come back. On an H200, fp32 2048³ right after fp16
#: 2048³ ran 381 µs a call in its first 10 ms, 364 at 80-100 ms and 358 from 0.4 s on; a
#: 20 ms warm-up read it 2-5% slow. The settle rule then judges the series as usual.
HOT_MIN_S = 0.09
#: Shortest warm-up (s) of a power-capped loop time taken right after the device time's
#: back-to-back samples (``runner.execution.timed.time_trial``): the op is at its sustained
#: state already, so the warm-up only checks that the loop's own regime (a sync per sample)
#: holds it there.
HANDOVER_CAPPED_MIN_S = 0.1
#: Shortest span (s) of the loop time's samples of a power-capped op once the device time has
#: sampled it (``runner.timing.settle.CAPPED_SAMPLE_S`` there): the device time is the headline;
#: the loop time says what the host pays and sets ``bound``, which a shorter span tells too.
LOOP_CAPPED_SAMPLE_S = 0.2
#: Once the device time has sampled the op, the loop time's CI target is this multiple of the
#: timer's ``target_rel``, and its samples stop after :data:`LOOP_HANDOVER_MAX_S`: the device
#: time is the headline, and the loop time's own job (what the host pays, ``bound``) is told
#: as well at ±2%. A power-capped op's clock swings ±1-2% once settled, so its loop samples
#: (a sync each) took 1-2 s to reach ±1% on an H100, a second longer than its device time.
LOOP_HANDOVER_TARGET_SHARE = 2.0
LOOP_HANDOVER_MAX_S = 0.5
#: A timer that samples for longer than :data:`LOOP_HANDOVER_MAX_S` four times over
#: (``timer=precise``: 10 s) gives the loop time this share of its ``max_time_s`` instead: in
#: 0.5 s its 50 samples of an 8192³ matmul, or a 1% CI of a capped 4096³ one, did not fit,
#: and the loop times of the large trials were flagged noisy.
LOOP_HANDOVER_TIME_SHARE = 0.25


@dataclass(frozen=True)
class Heat:
    """When the device's last work ended (s, on the same wall clock as the warm-up's), and
    when its last power-capped work did (None: none yet): :func:`heat_left`. How a warm-up
    knows that it starts hot, or while the clock may still be coming back."""

    ended_s: float
    capped_ended_s: float | None = None
    #: the effective SM clock (MHz) the last settled power-capped samples ran at: what capped
    #: work sustains on this device now (None: no capped work yet)
    sustained_mhz: float | None = None

    @property
    def hot(self) -> bool:
        """Whether the last work left the device hot: it was power-capped, or held at the
        power limit (``runner.execution.timed.WorkerTiming.record_heat``)."""
        return self.capped_ended_s == self.ended_s


@dataclass(frozen=True)
class HeatSeen:
    """What a trial found the device in as it began, for its row: ``label`` (cold, hot or
    recovering: :func:`seen`) and the clock capped work sustained there before it."""

    label: str
    sustained_mhz: float | None = None


def seen(heat: Heat | None, now_s: float) -> HeatSeen:
    """How a trial that begins at ``now_s`` after ``heat`` finds the device: ``hot`` right
    after power-capped work (:func:`starts_hot`), ``recovering`` within :data:`RECOVERY_S` of
    its end, else ``cold``."""
    if heat is None:
        return HeatSeen("cold")
    if starts_hot(heat, now_s):
        label = "hot"
    elif heat.capped_ended_s is not None and 0 <= now_s - heat.capped_ended_s <= RECOVERY_S:
        label = "recovering"
    else:
        label = "cold"
    return HeatSeen(label, heat.sustained_mhz)


def heat_left(capped: bool | None, ended_s: float, before: Heat | None = None,
              sustained_mhz: float | None = None) -> Heat:
    """What a trial that ended at ``ended_s`` leaves the device in, after ``before`` (what the
    trial before it left): hot only where its op was power-capped, or held by the cap
    (``runner.execution.timed.WorkerTiming.record_heat`` tells; None: could not be told,
    not hot). Every trial records it, so a trial at full clock between two capped ones lets
    the next one start cold. Power drawn is not heat here: a large fp32 matmul runs at full
    clock at 600-680 W of 700, and an H200's tf32 4096³ right after fp32 4096³, warmed up as
    if hot (1 s), read 4.3% fast: the controller pulls the clock down from the top, as from a
    cold board. When capped work last ended carries over an uncapped trial: one that took
    0.14 s after bf16 2048³ left the clock still coming back, and bf16 512³ after it, warmed
    up for 80 ms, read 3.5% slow (:func:`min_warmup_s`, :data:`RECOVERY_S`).
    ``sustained_mhz``: the clock a capped trial's settled samples ran at; the clock capped
    work sustained carries over every other trial."""
    last_capped = ended_s if capped else (before.capped_ended_s if before else None)
    sustained = sustained_mhz if capped and sustained_mhz else (
        before.sustained_mhz if before else None)
    return Heat(ended_s, last_capped, sustained)


def starts_hot(heat: Heat | None, now_s: float) -> bool:
    """Whether a warm-up at ``now_s`` follows hot work closely enough to start hot."""
    return heat is not None and heat.hot and 0 <= now_s - heat.ended_s <= HOT_GAP_S


def min_warmup_s(heat: Heat | None, now_s: float, cool_s: float) -> float:
    """The shortest device-time warm-up of any op at ``now_s`` after ``heat``: ``cool_s``
    (the method's own minimum), or :data:`HOT_MIN_S` when it starts hot, or within
    :data:`RECOVERY_S` of the end of power-capped work, whatever ran in between."""
    return max(cool_s, HOT_MIN_S) if seen(heat, now_s).label != "cold" else cool_s


def capped_min_s(heat: Heat | None, now_s: float) -> float:
    """The shortest warm-up of a power-capped series that starts at ``now_s`` after ``heat``:
    :data:`HOT_CAPPED_MIN_S` right after power-capped work, else :data:`CAPPED_MIN_S` (cold,
    or after a gap long enough for the controller to give its headroom back). The settle
    rule then waits for the averaged power and the temperature to stop rising."""
    return HOT_CAPPED_MIN_S if starts_hot(heat, now_s) else CAPPED_MIN_S


class DeviceHeat:
    """What each device's last trial left it in (:class:`Heat`), as the process that runs
    trials one after another saw it: the state one trial hands to the next. Owned by that
    process (a worker, or the driver with ``isolation=none``) and passed into every trial, so
    two workers, or two tests, never share it."""

    def __init__(self) -> None:
        self._by_device: dict[str, Heat] = {}

    def before(self, device_key: str) -> Heat | None:
        """What the trial before left ``device_key`` in (None: nothing ran on it yet)."""
        return self._by_device.get(device_key)

    def record(self, device_key: str, capped: bool | None, ended_s: float,
               sustained_mhz: float | None = None) -> Heat:
        """Record what a trial that ended at ``ended_s`` left ``device_key`` in
        (:func:`heat_left`); returns it."""
        heat = heat_left(capped, ended_s, self.before(device_key), sustained_mhz)
        self._by_device[device_key] = heat
        return heat


def heat_device(device: Any, seconds: float, wall: Callable[[], float] = time.perf_counter,
                size: int = 8192) -> int:
    """Run back-to-back bf16 matmuls on ``device`` for ``seconds``; return how many ran.

    An H200 under sustained matmul load drops from 1980 MHz towards 1470 MHz on its power cap,
    and how far it has dropped depends on what ran in the minute before. Two runs of the same
    sweep therefore differ by several percent if one follows heavy work and the other does
    not. Heating the GPU to its sustained-load state before a job (``gpu_warmup_s``) makes
    every run start from the same state. Synchronises every 20 launches so the host never
    queues far beyond ``seconds``.

    The job's first trial still warms up as from cold (:data:`CAPPED_MIN_S`), not as after
    hot work: from this deep cap to another capped op the clock moves for seconds (an H200's
    tf32 4096³ read 3% fast after a 1.3 s warm-up that followed 10 s of this load).
    """
    import torch

    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    start, launched = wall(), 0
    while wall() - start < seconds:
        for _ in range(20):
            torch.mm(a, b)
        launched += 20
        torch.cuda.synchronize(device)
    return launched
