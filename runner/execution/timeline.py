"""Where a run's time goes: "command → first trial started" in its parts, and each worker's
busy time.

Why: on a short sweep the start (Python, Hydra, importing torch, the CUDA context, starting
the worker processes), not the GPUs, sets the wall time; and with several workers, a worker
waiting on the driver or on the end of the queue is lost throughput. Neither showed anywhere.

How: the driver marks its steps here (``runner.__main__`` imports this module first, so its
import is the "main" mark); each worker reports its own steps with its ready and warm-up
answers (``runner.execution.worker``); every row carries ``worker_trial_wall_s``, the seconds
its worker spent on it. :func:`startup` turns the marks into the job's ``startup`` metadata;
:func:`startup_line` and :func:`busy_line` are the two lines printed under the summary table.

Standard library only, and cheap to import: it runs before Hydra is imported.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

#: Epoch seconds of the driver's steps (the first occurrence of each: later jobs of a multirun
#: reuse the workers and describe no start-up).
_MARKS: dict[str, float] = {"main": time.time()}
#: Each worker's own report (by process name): spawned_at, main_at, torch_import_s,
#: imports_s, ready_at, bytecode_cache, cuda_context_s, clock_probe_s, warm_s, warmed_at.
_WORKERS: dict[str, dict[str, Any]] = {}
_FIRST_TRIAL: list[float] = []
#: What the driver was like when it sent its first trial to a worker (:func:`trial_sent`).
_SENT: dict[str, bool] = {}
#: What :func:`startup` returned (at most once per process).
_STARTUP: list[dict[str, Any]] = []


def mark(name: str) -> None:
    """Record the first time the driver reaches step ``name``."""
    _MARKS.setdefault(name, time.time())


#: The driver's steps, each with the name of the part that ends there. The workers start
#: before Hydra is imported where the command line plainly says which (``spawned`` before
#: ``parsed``), else once it is parsed: each part runs from the step before it in time.
DRIVER_STEPS = (("spawned", "worker_spawn_s"), ("parsed", "parse_s"), ("checked", "checks_s"),
                ("preflight", "preflight_s"), ("job", "hydra_s"), ("planned", "planning_s"))
#: How :func:`startup_line` names them.
DRIVER_LABELS = {"python_s": "Python", "worker_spawn_s": "starting workers",
                 "parse_s": "importing Hydra and parsing", "checks_s": "checks",
                 "preflight_s": "composing and planning every job", "hydra_s": "Hydra",
                 "planning_s": "planning"}


def job_started() -> None:
    """Hydra has composed the first job's config."""
    mark("job")


def trial_sent() -> None:
    """A trial goes to a worker: the first records whether the driver had imported torch by
    then (``driver_torch_imported``). Under ``isolation=process`` it must not have: its import
    would sit on the path from the command to the first trial, while only the workers use it."""
    _SENT.setdefault("driver_torch_imported", "torch" in sys.modules)


def worker_report(name: str, info: Mapping[str, Any]) -> None:
    """A worker's start-up report; a worker started before the first trial replaces an
    earlier one of that name (a pool replaced before any trial ran), later ones do not."""
    if not _FIRST_TRIAL or name not in _WORKERS:
        _WORKERS[name] = dict(info)


def trial_started(timestamp: Any) -> None:
    """A row came back: its ``timestamp`` (trial start) may be the job's first."""
    if isinstance(timestamp, datetime):
        seconds = timestamp.timestamp()
        if not _FIRST_TRIAL or seconds < _FIRST_TRIAL[0]:
            _FIRST_TRIAL[:] = [seconds]


def process_start() -> float | None:
    """Epoch seconds this process started (Linux: ``/proc``, to 10 ms); None elsewhere."""
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        started_after_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - started_after_boot)


def since_command() -> float:
    """Seconds since this process's command started (its process start where it can be read,
    else the import of this module)."""
    return time.time() - (process_start() or _MARKS["main"])


def startup(command_at: float | None = None) -> dict[str, Any] | None:
    """The parts of "command → first trial started", in seconds, for the first job of this
    process (None for later jobs, or when no trial ran). ``*_at_s`` are offsets from the
    command; the others are durations, but for ``worker_bytecode_cache``, the folder torch's
    bytecode came from (:mod:`runner.core.bytecode`). Driver and workers run at once: the
    parts overlap."""
    if _STARTUP or not _FIRST_TRIAL:
        return None
    start = command_at or process_start() or _MARKS["main"]
    marks = _MARKS
    parts: dict[str, Any] = {
        "first_trial_at_s": _FIRST_TRIAL[0] - start,
        "python_s": marks["main"] - start,
    }
    previous = marks["main"]
    steps = sorted((marks[step], part) for step, part in DRIVER_STEPS if step in marks)
    for at, part in steps:  # each part: from the step before it in time, in that order
        parts[part], previous = at - previous, at
    if "planned" in marks:
        parts["planned_at_s"] = marks["planned"] - start
    parts.update(_SENT)
    reports = [w for w in _WORKERS.values() if "ready_at" in w]
    if reports:
        parts["workers"] = len(reports)
        parts["workers_started_at_s"] = min(w["spawned_at"] for w in reports) - start

        def slowest(key: str) -> float | None:
            values = [w[key] for w in reports if w.get(key) is not None]
            return max(values) if values else None

        parts["worker_process_s"] = max(w["main_at"] - w["spawned_at"] for w in reports)
        for key in ("torch_import_s", "imports_s", "cuda_context_s", "clock_probe_s",
                    "warm_s"):
            value = slowest(key)
            if value is not None:
                parts[f"worker_{key}"] = value
        caches = {w["bytecode_cache"] for w in reports if w.get("bytecode_cache")}
        if caches:
            parts["worker_bytecode_cache"] = ", ".join(sorted(caches))
        parts["workers_ready_at_s"] = max(w.get("warmed_at", w["ready_at"])
                                          for w in reports) - start
    _STARTUP.append({k: (round(v, 3) if isinstance(v, float) else v)
                     for k, v in parts.items()})
    return _STARTUP[0]


def reported_startup() -> dict[str, Any] | None:
    """What :func:`startup` gave this process's first job (None before, or elsewhere)."""
    return _STARTUP[0] if _STARTUP else None


def startup_line(parts: Mapping[str, Any] | None) -> str | None:
    """``startup``'s parts as one sentence (None when there are none)."""
    if not parts:
        return None
    text = f"start-up: first trial {parts['first_trial_at_s']:.2f} s after the command."
    shown = ", ".join(f"{DRIVER_LABELS[key]} {value:.2f}" for key, value in parts.items()
                      if key in DRIVER_LABELS)  # in the order they happened
    text += f" Driver: {shown}"
    if "planned_at_s" in parts:
        text += f" (planned at {parts['planned_at_s']:.2f} s)"
    if parts.get("driver_torch_imported"):
        text += " (imported torch before the first trial)"
    if "workers" in parts:
        worker = [("process start", "worker_process_s"), ("torch import",
                  "worker_torch_import_s"), ("other imports", "worker_imports_s"),
                  ("CUDA context", "worker_cuda_context_s"),
                  ("clock probe", "worker_clock_probe_s"), ("warm-up", "worker_warm_s")]
        shown = ", ".join(f"{label} {parts[key]:.2f}" for label, key in worker if key in parts)
        text += (f"; {parts['workers']} worker(s) started at {parts['workers_started_at_s']:.2f}"
                 f" s: {shown} (slowest; ready at {parts['workers_ready_at_s']:.2f} s)")
        if parts.get("worker_bytecode_cache"):
            text += f"; torch's bytecode from {parts['worker_bytecode_cache']}"
    return text + "."


def busy(rows: Iterable[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Each worker's busy time over the sweep: ``{worker: {busy_s, trials, gpus, fraction}}``.

    A job's trial span runs from its first trial's start (``timestamp``) to its last trial's
    end (``timestamp + worker_trial_wall_s``); a worker's fraction is the sum of its
    ``worker_trial_wall_s`` over the sum of the spans of the jobs (jobs run one after another).
    ``worker`` None is the driver (``isolation=none``)."""
    jobs: dict[Any, list[float]] = {}
    workers: dict[Any, dict[str, Any]] = {}
    for row in rows:
        wall, stamp = row.get("worker_trial_wall_s"), row.get("timestamp")
        if wall is None or wall != wall or not isinstance(stamp, datetime):
            continue
        start = stamp.timestamp()
        span = jobs.setdefault(row.get("job_num"), [start, start + wall])
        span[0], span[1] = min(span[0], start), max(span[1], start + wall)
        number = row.get("worker")
        number = None if number is None or number != number else int(number)
        worker = workers.setdefault(number, {"busy_s": 0.0, "trials": 0, "gpus": set()})
        worker["busy_s"] += wall
        worker["trials"] += 1
        gpu = row.get("gpu_index")
        if gpu is not None and gpu == gpu:  # NaN: a CPU row read through pandas
            worker["gpus"].add(int(gpu))
    total = sum(end - start for start, end in jobs.values())
    for worker in workers.values():
        worker["span_s"] = total
        worker["fraction"] = worker["busy_s"] / total if total > 0 else None
    return workers


def busy_line(rows: Iterable[Mapping[str, Any]]) -> str | None:
    """"busy: worker 0 (GPU 0) 94%, worker 1 (GPU 1) 91% of 12.1 s of trials" (None without
    the column)."""
    workers = busy(rows)
    if not workers:
        return None
    parts = []
    for number in sorted(workers, key=lambda w: (w is None, w)):
        worker = workers[number]
        gpus = ",".join(str(g) for g in sorted(worker["gpus"]))
        where = f"GPU {gpus}" if gpus else "cpu"
        name = "driver" if number is None else f"worker {number}"
        fraction = worker["fraction"]
        shown = f"{fraction:.0%}" if fraction is not None else "n/a"
        parts.append(f"{name} ({where}) {shown} ({worker['trials']} trials)")
    span = next(iter(workers.values()))["span_s"]
    return (f"busy: {', '.join(parts)} of {span:.3g} s of trials (first start to last end, "
            "per job; column worker_trial_wall_s)")


#: The parts of a sweep's time, in the summary's order: (label, the rows' column).
COST_PARTS = (("setup", "cost_setup_s"), ("settling", "cost_settle_s"),
              ("loop time", "cost_loop_s"),
              ("device time", "cost_device_s"), ("accuracy", "cost_accuracy_s"),
              ("other", "cost_other_s"))


def cost_line(rows: Iterable[Mapping[str, Any]], startup: Mapping[str, float] | None,
              wall_s: float | None) -> str | None:
    """"time: 31.2 s = start-up 4.1 + settling 12.0 + loop time 5.2 + ... (columns cost_*_s)":
    where the sweep's time went, from each trial's ``cost_*_s`` columns and the start-up. The
    trials' parts add up to their own wall; what is left of ``wall_s`` (the command's time so
    far) is the driver's: planning, writing, waiting on workers. None without the columns."""
    totals = dict.fromkeys((column for _, column in COST_PARTS), 0.0)
    seen = False
    for row in rows:
        for column in totals:
            value = row.get(column)
            if value is not None and value == value:
                totals[column] += float(value)
                seen = True
    if not seen:
        return None
    first_trial_s = (startup or {}).get("first_trial_at_s")
    parts = [("start-up", first_trial_s)] if first_trial_s is not None else []
    parts += [(label, totals[column]) for label, column in COST_PARTS]
    if wall_s is not None:
        driver_s = wall_s - sum(value for _, value in parts)
        if driver_s > 0:
            parts.append(("driver", driver_s))
    total = wall_s if wall_s is not None else sum(value for _, value in parts)
    shown = " + ".join(f"{label} {value:.1f}" for label, value in parts)
    return f"time: {total:.1f} s = {shown} (columns cost_*_s)"
