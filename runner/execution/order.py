"""The order in which a job runs its trials. The rows are stored in plan order whatever it is
(``runner.storage.attempts``); only the time a sweep takes, and where each trial starts
from, depend on it.

**One worker** (``trial_order=heat``, the default): what a trial leaves the device in is
where the next one starts. A power-capped op that follows capped work starts hot and
settles in about a second; one that follows work at full clock warms up from the top of the
clock for 2.5 s (``runner.timing.heat``, docs/timing.md#what-a-trial-costs). The plan's
order (the cartesian product, ``shape`` outermost) puts light work between capped trials: a
size sweep over bf16, fp16, fp32 and tf32 runs the four dtypes at each size, so every tf32
trial follows an fp32 one at full clock and starts cold. :func:`heat_order` runs the trials
that differ only in shape together, largest first:

* the capped ones follow each other, and each group pays its cold start once;
* each steps *down* in power from the one before, so the controller lets the clock up to
  where the new op holds it, and the settle rule sees it rising. A step *up* overshoots: on
  an H200, fp16 4096³ right after fp16 2048³ was held at 1250 MHz in one process and 1321 in
  another (a 5% gap), against ~1320 sustained;
* the group's light trials come last, after its least capped one, so their clock has the
  least to come back.

``trial_order=plan`` keeps the plan's order, for a study of order effects.

**A pool** (``workers=N``, ``runner.execution.pool``): the same heat groups, cut where one
is longer than a fair share and placed by estimated cost (``runner.execution.schedule``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from runner.core.axes import DTYPE_BYTES

#: per-call cost of fwd+bwd relative to forward only (about two more passes)
BACKWARD_FACTOR = 3


def cost(spec: Any) -> float:
    """Estimated cost of a trial, for ordering only: the product of its shape's sizes times
    the bytes per element of its dtype, times 3 for fwd+bwd. Crude (it ignores the op), but
    within one op the big shapes are the slow trials, and draw the most power."""
    factor = BACKWARD_FACTOR if getattr(spec, "backward", False) else 1
    return math.prod(spec.shape) * DTYPE_BYTES[spec.dtype] * factor


def longest_first(trials: Iterable[Any]) -> list[Any]:
    """Trials by :func:`cost`, descending; equal costs keep the plan's order."""
    return sorted(trials, key=lambda trial: -cost(trial.spec))


def heat_order(trials: Iterable[Any]) -> list[Any]:
    """The trials grouped by everything but their shape, groups in the order of their first
    trial in the plan, each group :func:`longest_first`."""
    groups: dict[str, list[Any]] = {}
    for trial in trials:
        groups.setdefault(heat_key(trial.spec), []).append(trial)
    return [trial for group in groups.values() for trial in longest_first(group)]


def in_order(trials: Iterable[Any], trial_order: str) -> list[Any]:
    """``trials`` in the order one worker runs them: :func:`heat_order` for ``heat``, else the
    plan's (``trial_order``, checked with the job's settings:
    ``runner.config.schema.RunConfig.trial_order``)."""
    return heat_order(trials) if trial_order == "heat" else list(trials)


def heat_key(spec: Any) -> str:
    """What a trial is besides its shape (its heat group), as a key (``repr``: an op
    parameter may be a list)."""
    return repr(tuple(getattr(spec, f.name) for f in fields(spec) if f.name != "shape"))
