"""A multirun's jobs that differ from a checked job only in trial-axis values are checked
value by value, and each is planned when Hydra launches it.

Why: the pre-flight check (``runner.config.preflight``) composed and planned every job before
the first one ran, ~5 ms a job on a 2-core box even with one composition per group
(``runner.config.hydra_reuse``): ``-m seed='range(0,10000)'`` said its size, then sat silent
for 55 s before its first trial. Such a job's plan differs from the checked job's only in
those axes, so each of its values is checked by the planner's own rule
(:func:`runner.config.planner.axis_choices`: a bad value in job 9999 still exits 2 before any
trial and any folder), its trial count follows from the axes' lengths, and the job plans
itself when it is launched (``runner.execution.job``), as the check would have.

A job is checked whole, as before, where this would not be exact: a value that is not a trial
axis (a setting, an op parameter), ``shape`` (its rank is the op's) and ``device`` (the
workers' placement reads it), a config with ``cases`` or shards, and an axis that an
interpolation reads (``notes: run ${seed}``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from runner.core.axes import AXIS_NAMES

#: The axes whose values are checked one by one: each value's check needs nothing else.
BY_VALUE = tuple(name for name in AXIS_NAMES if name not in ("shape", "device"))


@dataclass(frozen=True)
class CheckedJob:
    """A job checked whole, that later jobs of its group are compared with: its plain values
    (key → the override's text), the number of choices of each axis in :data:`BY_VALUE`, and what
    its check returned (trial count, ``max_trials``, timer settings)."""

    values: dict[str, str]
    lengths: dict[str, int]
    count: int | None
    limit: Any
    timer: Any
    #: axes of :data:`BY_VALUE` that an interpolation of the config reads
    interpolated: frozenset[str]


def checked_job(cfg: DictConfig, plain: list[Any], count: int | None, limit: Any,
                timer: Any) -> CheckedJob | None:
    """The record of a job just checked whole (``cfg``: its config, ``hydra`` removed), or
    None where its group's other jobs must be checked whole too (``cases``, shards)."""
    from runner.config.planner import axis_choices

    if cfg.get("cases") is not None or cfg.get("num_shards", 1) != 1:
        return None
    lengths = {key: len(axis_choices(key, _value(cfg, key), None)) for key in BY_VALUE}
    texts = _interpolations(OmegaConf.to_container(cfg, resolve=False))
    interpolated = frozenset(key for key in BY_VALUE
                             if any(re.search(rf"\b{key}\b", text) for text in texts))
    return CheckedJob({o.key_or_group: o.input_line for o in plain}, lengths, count, limit, timer,
                      interpolated)


def check_alike(checked: CheckedJob, cfg: DictConfig,
                plain: list[Any]) -> tuple[int | None, Any, Any, list[str]] | None:
    """The check of a job of ``checked``'s group whose plain values are set in ``cfg``:
    (trial count, ``max_trials``, timer settings, no empty shard), as a whole check returns
    it; None where it differs from ``checked`` in more than :data:`BY_VALUE` axes."""
    from runner.config.guards import check_threads
    from runner.config.planner import axis_choices
    from runner.config.sweep_size import check_trials

    changed = [o.key_or_group for o in plain
               if checked.values.get(o.key_or_group) != o.input_line]
    if any(key not in BY_VALUE or key in checked.interpolated for key in changed):
        return None
    count = checked.count
    for key in changed:
        choices = axis_choices(key, _value(cfg, key), None)  # as the config holds it
        if key == "num_threads":
            for threads in choices:
                check_threads(threads)
        if count is not None:
            count = count // checked.lengths[key] * len(choices)
    if count is not None:
        check_trials(count, checked.limit, checked.timer)
    return count, checked.limit, checked.timer, []


def _value(cfg: DictConfig, key: str) -> Any:
    node = cfg[key]
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def _interpolations(node: Any) -> list[str]:
    """Every string of ``node`` (a plain container) that holds an interpolation."""
    if isinstance(node, dict):
        return [text for value in node.values() for text in _interpolations(value)]
    if isinstance(node, list):
        return [text for value in node for text in _interpolations(value)]
    return [node] if isinstance(node, str) and "${" in node else []

