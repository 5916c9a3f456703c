"""One trial as the job hands it over: what to run and how to time it, frozen.

The job builds one :class:`TrialTask` per trial, once, from its composed config
(``runner.execution.job``); whoever runs the trial gets exactly that object: this process
(``isolation=none``), the supervised worker (``runner.execution.worker``) or a pool's worker
(``runner.execution.pool``), pickled across the process boundary unchanged. Nothing on the way
converts the timer settings: the frozen :class:`TrialTimer` the job chose (``smoke=true``
swaps in the smoke preset) is the one that times the trial, and the one the job's file
records (:meth:`TrialTimer.settings`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from runner.config.trial_settings import TimerSettings
from runner.config.trials import TrialSpec
from runner.execution.insight import InsightOptions
from runner.timing.measurement import TimerPlan


@dataclass(frozen=True)
class TrialTimer:
    """The timer settings a trial is timed with (``timer.*``, :class:`TimerSettings`), frozen:
    the sampling plan the timer runs (:class:`TimerPlan`) and the choices around it."""

    #: the preset's name (the ``timer_preset`` column)
    preset: str
    #: warm-up, stop rule and batching: what ``runner.timing.timer`` runs
    plan: TimerPlan
    #: cuda: ``event`` (CUDA events) or ``host`` (perf_counter around a sync)
    clock: str
    #: flush L2 before every sample (cold cache)
    flush_l2: bool
    #: cuda: also take the device time (``gpu_time_*`` columns)
    device_time: bool
    #: cuda: also take the burst (boost-clock) device time
    burst: bool
    #: cuda, warm L2: allocations of an L2-resident memory-bound op's inputs it is timed on
    allocations: int

    @classmethod
    def from_settings(cls, settings: Any) -> TrialTimer:
        """From the job's ``timer`` node (a DictConfig) or a :class:`TimerSettings`."""
        own = {f.name: getattr(settings, f.name) for f in dataclasses.fields(cls)
               if f.name != "plan"}
        return cls(plan=TimerPlan.from_settings(settings), **own)

    def settings(self) -> dict[str, Any]:
        """Every ``timer.*`` setting, by name, in the schema's order: what the file records."""
        return {f.name: getattr(self.plan if f.name in _PLAN_FIELDS else self, f.name)
                for f in dataclasses.fields(TimerSettings)}


_PLAN_FIELDS = frozenset(f.name for f in dataclasses.fields(TimerPlan))


@dataclass(frozen=True)
class TrialTask:
    """Everything the process running a trial needs, and nothing it must convert."""

    #: the trial's position in the job's plan (the ``trial_index`` column)
    index: int
    #: what to run; its ``target`` names the op's builder (imported where the trial runs)
    spec: TrialSpec
    timer: TrialTimer
    #: compare one call of the timed callable with the op's reference first
    check_accuracy: bool = True
    #: the profile/energy passes after timing (None: neither)
    insight: InsightOptions | None = None
    #: how long the supervisor waits for the row (``trial_timeout_s``; None: forever)
    timeout_s: float | None = None
