"""The order in which a job runs its trials. The rows are stored in plan order whatever it is
(``runner.storage.attempts``); only the time a sweep takes, and where each trial starts
from, depend on it.

**One worker** (``trial_order=heat``, the default): what a trial leaves the device in is
where the next one starts. A power-capped op that follows capped work starts hot and
settles in about a second; one that follows work at full clock warms up from the top of the
clock for 2.5 s (``runner.timing.heat``, docs/timing.md#what-a-trial-costs), and on an H100
its samples then still read 3-4% faster than the op sustains back to back. The plan's order
(the cartesian product, ``shape`` outermost) puts light work between capped trials: a size
sweep over bf16, fp16, fp32 and tf32 runs the four dtypes at each size, so every tf32 trial
follows an fp32 one at full clock and starts cold. :func:`heat_order` runs the capped
trials first, those that differ only in shape together and largest first, then the light
ones longest first (:func:`capped_first`; on a CPU every trial is a light one):

* the capped ones follow each other, so only the job's first starts cold. Grouping alone
  left each group's light tail (bf16 1024³ to 256³ at full clock) between one group's last
  capped trial and the next group's first, and that first trial (fp16 and tf32 8192³) read
  3.3-4.4% fast on an H100;
* within a group, each steps *down* in power from the one before, so the controller lets
  the clock up to where the new op holds it, and the settle rule sees it rising. A step *up*
  overshoots: on an H200, fp16 4096³ right after fp16 2048³ was held at 1250 MHz in one
  process and 1321 in another (a 5% gap), against ~1320 sustained. Between groups the step
  is up (the last capped trial of one, to the largest of the next), and starts hot;
* the trials that *may* be capped come next, the most work first (:func:`most_work_first`):
  a bf16 or fp16 matmul of 1024³ is held down by the power cap on an H100 and not on an
  H200, and a tf32 one now and then (``runner.execution.costs.MAYBE_CAPPED_FLOPS``).
  Among the light trials, after fp32 work at full clock, each of bf16 and fp16 1024³
  warmed up from cold on an H100 for 2.8-3.0 s; right after capped work it starts hot
  where it is capped, and costs a light trial's warm-up where it is not;
* the light trials come last, longest first across groups, so each steps down in load
  from the one before. Kept in their groups, a 1024³ matmul followed the group before's
  256³ one, and read 3-4% slower than back to back on an H100 (a light op after a tiny one
  warms up from a clock the tiny one let fall); longest first, 46 of 48 trials of the two
  sweeps were within 3% of 15 s back to back there (the gates tables of docs/timing.md).

Which trials are capped is estimated before any runs (``runner.execution.costs.estimate``:
a tensor-core dtype, compute-bound, 2·2048³ FLOPs or more; from 2·1024³ it may be), in the
driver.

``trial_order=plan`` keeps the plan's order, for a study of order effects.

**A pool** (``workers=N``, ``runner.execution.pool``): the same heat groups, cut where one
is longer than a fair share and placed by estimated cost (``runner.execution.schedule``),
then each worker's list capped first.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from typing import Any

from runner.core.axes import DTYPE_BYTES
from runner.execution.costs import power_estimates, work

#: per-call cost of fwd+bwd relative to forward only (about two more passes)
BACKWARD_FACTOR = 3


def cost(spec: Any) -> float:
    """Estimated cost of a trial, for ordering only: the product of its shape's sizes times
    the bytes per element of its dtype, times 3 for fwd+bwd. Crude (it ignores the op), but
    within one op the big shapes are the slow trials, and draw the most power."""
    factor = BACKWARD_FACTOR if getattr(spec, "backward", False) else 1
    return math.prod(spec.shape) * DTYPE_BYTES[spec.dtype] * factor


def longest_first(trials: Iterable[Any]) -> list[Any]:
    """Trials by :func:`cost`, descending; equal costs keep the order they had."""
    return sorted(trials, key=lambda trial: -cost(trial.spec))


def heat_order(trials: Iterable[Any], capped: Callable[[Any], bool] | None = None,
               maybe_capped: Callable[[Any], bool] | None = None) -> list[Any]:
    """The trials grouped by everything but their shape, groups in the order of their first
    trial in the plan, each group :func:`longest_first`; with ``capped`` (whether a trial
    is estimated power-capped) and ``maybe_capped`` (whether it may be), :func:`capped_first`."""
    groups: dict[str, list[Any]] = {}
    for trial in trials:
        groups.setdefault(heat_key(trial.spec), []).append(trial)
    grouped = [trial for group in groups.values() for trial in longest_first(group)]
    return capped_first(grouped, capped, maybe_capped) if capped is not None else grouped


def capped_first(ordered: Sequence[Any], capped: Callable[[Any], bool],
                 maybe_capped: Callable[[Any], bool] | None = None) -> list[Any]:
    """``ordered`` with the ``capped`` trials first, in the order they had, then those that
    are ``maybe_capped`` (:func:`most_work_first`), then the rest (:func:`longest_first`): no
    light trial between two capped ones lets the clock back up, one that may be capped starts
    hot where it is, and each steps down in load from the one before."""
    first: list[Any] = []
    maybe: list[Any] = []
    light: list[Any] = []
    for trial in ordered:
        if capped(trial):
            first.append(trial)
        else:
            (maybe if maybe_capped is not None and maybe_capped(trial) else light).append(trial)
    return first + most_work_first(maybe) + longest_first(light)


def most_work_first(trials: Iterable[Any]) -> list[Any]:
    """Trials by FLOPs at once (one call's, times the streams that run a copy each side by
    side), descending, then the narrower dtype first (equal: the order they had). Those
    that may be capped are compute-bound, so their FLOPs say which draws the most power, not
    their bytes; at equal FLOPs a narrower dtype runs the tensor cores at a higher rate
    (bf16 1024³ drew 97% of an H100's limit, tf32 1024³ 71%). So each steps down in power
    from the one before, as within a heat group. A backward pass is not counted: it runs
    more calls of the same kind, one after another, at the same rate."""
    def key(trial: Any) -> tuple[float, int]:
        spec = trial.spec
        element_bytes = DTYPE_BYTES[spec.dtype]
        streams = getattr(spec, "streams", 1)
        return -streams * work(spec.op, tuple(spec.shape), element_bytes)[0], element_bytes

    return sorted(trials, key=key)


def in_order(trials: Iterable[Any], trial_order: str,
             capped: Callable[[Any], bool] | None = None,
             maybe_capped: Callable[[Any], bool] | None = None) -> list[Any]:
    """``trials`` in the order one worker runs them: :func:`heat_order` for ``heat``, else the
    plan's (``trial_order``, checked with the job's settings:
    ``runner.config.schema.RunConfig.trial_order``). ``capped``, ``maybe_capped``: as for
    :func:`heat_order`."""
    return (heat_order(trials, capped, maybe_capped) if trial_order == "heat"
            else list(trials))


def one_worker_order(trials: Iterable[Any], trial_order: str) -> list[Any]:
    """The order one worker runs a job's trials in: :func:`in_order`, with which trials are
    capped, and which may be, estimated on each trial's own device
    (``runner.execution.costs.power_estimates``)."""
    return in_order(trials, trial_order, *power_estimates())


def heat_key(spec: Any) -> str:
    """What a trial is besides its shape (its heat group), as a key (``repr``: an op
    parameter may be a list)."""
    return repr(tuple(getattr(spec, f.name) for f in fields(spec) if f.name != "shape"))
