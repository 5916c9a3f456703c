"""A sweep says its size before it starts, and refuses one past ``max_trials``.

Why: a sweep of 10^6 trials used to plan (twice, ~35 s each), then show a progress bar of
hours, with no word on the disk its journal would need; ``-m seed=range(0,1000000)`` sat
silent. Here the jobs are counted from the command line's sweeps without enumerating them,
and a job's trials from its axes' lengths before any trial is expanded
(:func:`runner.config.planner.plan_job` calls :func:`check_trials`), so each answer is
bounded work. The estimates are ranges: a sweep costs its start and finish, each job its
launch, and each trial between the harness's overhead and the timer's whole budget
(``warmup_s`` plus ``max_time_s`` twice: a block of samples that a burst of other work mixed
is taken again, once).
"""

from __future__ import annotations

import math
import os
from typing import Any

from runner.core.errors import ConfigError

#: Harness cost per trial besides the op's own time (benchmarks/scale_check.py: 1-3 ms on a
#: 2-core CPU box), the low end of the time estimate.
OVERHEAD_S = 0.003
#: A sweep's cost besides its jobs and trials: Python, Hydra and the checks before the first
#: trial, the worker's torch import beside them, the merge and the summary after the last (the
#: summary's ``start-up`` and ``driver`` parts: 3.1 + 1.2 s on a quiet 2-core CPU box).
FIXED_S = 4.0
#: Each job's launch and its own job file (benchmarks/scale_check.py: ~0.1 s on that box).
JOB_S = 0.1
#: Load per core from which the estimate says the host is busy, and stretches the start and
#: finish by half the load per core. They are CPU work (imports, composing, merging) that other
#: processes slow down: with a load of 8-11 on 2 cores they took 6.5-14 s instead of 4, 1.6-3.5x
#: (half the load per core: 2-2.75x); the trials' sampling is bounded by wall time.
BUSY_LOAD_PER_CORE = 2.0
#: Journal, job file and merged file bytes per trial besides its samples (scale_check: ~3.5 kB
#: of journal, ~1 kB in each Parquet file), and per raw sample (JSON text + two Parquet copies).
BYTES_PER_TRIAL = 6_000
BYTES_PER_SAMPLE = 40
#: Values a message shows of a sweep: the first ones, "...", the last.
LISTED_VALUES = 12


class TooManyTrials(ConfigError):
    """The sweep plans more trials than ``max_trials`` allows."""


def job_count(cmd: Any) -> int:
    """How many jobs ``cmd`` makes (the product of its discrete sweeps' lengths), without
    enumerating them: ``seed=range(0,1000000)`` is counted, not listed."""
    if not cmd.multirun:
        return 1
    count = 1
    for override in cmd.overrides:
        if override.is_discrete_sweep() and not override.is_hydra_override():
            count *= _sweep_length(override)
    return count


def _sweep_length(override: Any) -> int:
    from hydra.core.override_parser.types import RangeSweep

    value = override.value()
    if isinstance(value, RangeSweep):
        start, stop, step = value.start, value.stop, value.step or 1
        return max(0, math.ceil((stop - start) / step))
    return sum(1 for _ in override.sweep_iterator())


def needs_multirun(override: Any, limit: int) -> ConfigError:
    """The error for a discrete sweep (``seed='range(0,10000000)'``) on a command line
    without ``-m``, its fix one that passes: ``-m`` where its jobs fit ``limit`` (the
    ``max_trials`` in force), else a range of at most ``limit`` values. Counted, not listed."""
    from itertools import islice

    text, key = override.input_line, override.key_or_group
    if not override.is_discrete_sweep():  # interval(0,1): a sweeper samples it
        return ConfigError(f"{_shortened(text)!r} is a sweep, which needs -m: add -m "
                           f"(python -m runner -m {_shortened(text)} ...).")
    count = _sweep_length(override)
    shown = [str(v) for v in islice(override.sweep_iterator(), LISTED_VALUES + 1)]
    if len(shown) > LISTED_VALUES:
        shown[LISTED_VALUES - 2:] = ["...", str(_last(override))]
    start = f"{_shortened(text)!r} is a sweep over {count} jobs, which needs -m"
    if count <= limit:
        return ConfigError(f"{start}: add -m (python -m runner -m {_shortened(text)} ...), or "
                           f"write a list to run them in one job: {key}=[{','.join(shown)}].")
    first = _first_range(override, limit)
    fix = (f"python -m runner -m {key}='{first[0]}' ..., then {key}='{first[1]}', and so on"
           if first else f"sweep at most {limit:,} of its values with -m")
    return ConfigError(f"{start}, and more jobs than max_trials={limit} allows (every job runs "
                       f"a trial at least). Run at most {limit:,} of them at a time: {fix}.")


def _last(override: Any) -> Any:
    from hydra.core.override_parser.types import RangeSweep

    value = override.value()
    if isinstance(value, RangeSweep):
        return value.start + (_sweep_length(override) - 1) * (value.step or 1)
    return list(override.sweep_iterator())[-1]


def _first_range(override: Any, limit: int) -> tuple[str, str] | None:
    """``range(0,100000)`` and ``range(100000,200000)`` for a range of ints past ``limit``."""
    from hydra.core.override_parser.types import RangeSweep

    value = override.value()
    if not isinstance(value, RangeSweep) or value.shuffle or not all(
            isinstance(n, int) for n in (value.start, value.stop, value.step or 1)):
        return None
    step = value.step or 1
    bounds = [value.start + n * limit * step for n in range(3)]
    tail = "" if step == 1 else f",{step}"
    return (f"range({bounds[0]},{bounds[1]}{tail})", f"range({bounds[1]},{bounds[2]}{tail})")


def _shortened(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def trial_limit(cmd: Any) -> int:
    """The ``max_trials`` in force: the command line's, else the declared default (an
    experiment's own is read when its jobs are planned)."""
    from runner.config.schema import RunConfig

    return max_trials_given(cmd) or RunConfig.max_trials


def max_trials_given(cmd: Any) -> int | None:
    """``max_trials=N`` from the command line, if given as one int."""
    override = cmd.last("max_trials")
    if override is None or override.is_sweep_override():
        return None
    value = override.value()
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_trials(count: int, limit: Any, timer: Any, *, jobs: int = 1,
                 estimated: bool = False, fix: str = "") -> None:
    """:class:`TooManyTrials` when ``count`` (the sweep's trials) exceeds ``limit``; ``fix``:
    the way out, where one fits better than raising the limit."""
    if not isinstance(limit, int) or count <= limit:
        return
    about = "about " if estimated else ""
    where = f" in {jobs} jobs" if jobs > 1 else ""
    raise TooManyTrials(
        f"invalid value for 'max_trials': {limit}. The sweep plans {about}{count:,} "
        f"trials{where} ({estimate(count, timer, jobs)}), more than max_trials={limit}. "
        + (fix or f"Cut an axis or a sweep, or allow it with max_trials={count}."))


def jobs_fix(cmd: Any, limit: int, jobs: int) -> str:
    """For a multirun of ``jobs`` jobs, more than ``limit``, with one range sweep past it:
    the ranges that fit beside its other sweeps, one run each (raising ``max_trials`` to
    millions of jobs would list them all before the first ran; Hydra launches each in ~0.1 s).
    """
    longest = max((o for o in cmd.overrides if o.is_discrete_sweep()
                   and not o.is_hydra_override()), key=_sweep_length, default=None)
    if longest is None:
        return ""
    fits = limit // (jobs // max(_sweep_length(longest), 1))  # beside the other sweeps' jobs
    ranges = _first_range(longest, fits) if fits >= 1 else None
    if ranges is None:
        return ""
    key = longest.key_or_group
    return (f"Run at most {fits:,} {key} values at a time: -m {key}='{ranges[0]}', "
            f"then {key}='{ranges[1]}', and so on; or sweep the values inside a job, as a "
            "list in an experiment file (docs/scale-out.md).")


def estimate(count: int, timer: Any, jobs: int = 1) -> str:
    """``time 5 s – 17 min, disk ~30 MB`` for ``count`` trials in ``jobs`` jobs with
    ``timer``'s budget. An op slower than the budget (one call past ``max_time_s``) still
    takes its warm-up and ``min_samples`` calls: the estimate cannot know that before it runs."""
    budget_s = _number(timer, "warmup_s") + 2 * _number(timer, "max_time_s")
    samples = _number(timer, "max_samples") or 0
    load, cores = host_load()
    busy = load / cores >= BUSY_LOAD_PER_CORE
    fixed_s = (FIXED_S + jobs * JOB_S) * (load / cores / 2 if busy else 1.0)
    low, high = fixed_s + count * OVERHEAD_S, fixed_s + count * (OVERHEAD_S + budget_s)
    disk = count * (BYTES_PER_TRIAL + samples * BYTES_PER_SAMPLE)
    why = f" (a busy host: load {load:.1f} on {cores} cores)" if busy else ""
    if not budget_s:  # the timer is not known yet
        return f"time at least {duration(low)}{why}, disk at least ~{size(disk)}"
    return f"time {duration(low)} – {duration(high)}{why}, disk up to ~{size(disk)}"


def host_load() -> tuple[float, int]:
    """The host's load (runnable processes, the last minute's average) and the cores this
    process may use; a load of 0 where the system does not say."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        return os.getloadavg()[0], max(cores, 1)
    except (AttributeError, OSError):
        return 0.0, max(cores, 1)


def _number(timer: Any, key: str) -> float:
    try:
        return float((timer or {}).get(key) or 0.0)
    except (TypeError, ValueError, AttributeError):
        return 0.0


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def size(nbytes: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if nbytes < 1000 or unit == "TB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1000
    return f"{nbytes:.1f} TB"


def size_line(counts: list[int], timer: Any, *, estimated: bool = False) -> str:
    """The line a sweep prints before it starts: trials, jobs, per-job counts, estimates."""
    total = sum(counts)
    about = "about " if estimated else ""
    if len(counts) == 1:
        jobs = "1 job"
    else:
        shown = ", ".join(str(n) for n in counts[:8]) + (", …" if len(counts) > 8 else "")
        jobs = f"{len(counts)} jobs ({shown} trials)"
    trials = "trial" if total == 1 else "trials"
    return f"sweep: {about}{total:,} {trials} in {jobs}; {estimate(total, timer, len(counts))}"
