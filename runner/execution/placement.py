"""Placement of ``workers=N`` / ``workers=per_gpu``: which worker owns which GPU, which trials
are pinned to one, and (before Hydra composes the job) what the command line will most likely
ask for. No processes here: ``runner.execution.pool`` runs what this places.

* Worker *i* owns the *i*-th GPU visible to the driver (its ``CUDA_VISIBLE_DEVICES`` entry;
  the driver's own list is respected). Nothing assumes a GPU count: N GPUs, N workers.
* A trial whose device was written as ``cuda:N`` is pinned to the worker owning visible GPU N.
* N > 1 workers split the CPU's cores (``cpu_count // N`` intra-op threads each).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from runner.core.errors import ConfigError
from runner.core.gpus import visible_gpus as gpus_without_torch

PER_GPU = "per_gpu"
_PINNED = re.compile(r"cuda:(\d+)")
_DEVICE_NAME = re.compile(r"auto|cpu|cuda(?::\d+)?")


@dataclass(frozen=True)
class Slot:
    """One worker: its number (the ``worker`` column), the visible GPU it owns (the driver's
    numbering; None: no GPU), its environment and its intra-op thread count."""

    index: int
    gpu: int | None
    env: tuple[tuple[str, str], ...]
    threads: int | None


@dataclass(frozen=True)
class WorkerPlan:
    """The job's workers and which trials are pinned to a visible GPU (trial index → GPU)."""

    slots: tuple[Slot, ...]
    pinned: dict[int, int]


def visible_gpus() -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` entry of each GPU the driver sees, in CUDA's order.

    Counted without torch where that is certain (:func:`runner.core.gpus.visible_gpus`), else
    by ``torch.cuda.device_count()`` (NVML / cudaGetDeviceCount): no CUDA context is made in
    the driver."""
    visible = gpus_without_torch()
    if visible is not None:
        return visible
    from runner.core.axes import cuda_device_count

    count = cuda_device_count()
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(count)]
    return [entry.strip() for entry in listed.split(",") if entry.strip()][:count]


def explicit_gpus(values: dict[str, Any]) -> set[str]:
    """Devices written as ``cuda:N`` in the job's config (its ``device`` and its cases'): the
    only ones that pin. ``cuda`` and ``auto`` resolve to ``cuda:0`` too but do not pin."""
    from runner.config.trials import as_choices

    raws = list(as_choices(values.get("device")))
    for case in values.get("cases") or []:
        if isinstance(case, dict) and "device" in case:
            raws += list(as_choices(case["device"]))
    return {str(raw) for raw in raws if _PINNED.fullmatch(str(raw))}


def plan_workers(workers: Any, isolation: str, planned: list, explicit: set[str],
                 gpus: list[str] | None = None, cpu_count: int | None = None) -> WorkerPlan:
    """The workers of one job; :class:`ConfigError` (exit 2) for a placement that cannot
    work. ``gpus``/``cpu_count`` default to this machine's (tests inject them)."""
    gpus = visible_gpus() if gpus is None else gpus
    cpu_count = cpu_count or os.cpu_count() or 1
    if workers == PER_GPU:
        if not gpus:
            raise ConfigError("invalid value for 'workers': 'per_gpu' makes one worker per GPU, "
                              "but no CUDA device is visible on this machine. Use workers=N to "
                              "split the CPU's cores over N workers, or workers=1.")
        n = len(gpus)
    else:
        n = int(workers)
    if n > 1 and isolation != "process":
        raise ConfigError(f"invalid value for 'workers': {workers!r} with isolation="
                          f"{isolation}: trials in the driver process cannot run in parallel. "
                          "Use isolation=process, or workers=1.")
    uses_cuda = any(t.spec.device.startswith("cuda") for t in planned)
    if uses_cuda and n > len(gpus):
        raise ConfigError(f"invalid value for 'workers': {workers!r}. This machine has "
                          f"{len(gpus)} visible CUDA device(s) and each worker owns one; use "
                          f"workers={max(len(gpus), 1)} or workers=per_gpu.")
    slots = make_slots(n, gpus, uses_cuda or n <= len(gpus), cpu_count)
    pinned = {}
    for trial in planned:
        if n > 1 and trial.spec.device in explicit:
            gpu = int(trial.spec.device.partition(":")[2])
            if gpu >= n:
                raise ConfigError(f"invalid value for 'device': {trial.spec.device!r} pins "
                                  f"trials to visible GPU {gpu}, but workers={workers} runs on "
                                  f"visible GPUs 0..{n - 1}. Use workers=per_gpu, or "
                                  "device=cuda (any worker's GPU).")
            pinned[trial.index] = gpu
    return WorkerPlan(slots, pinned)


#: CPU workers that may start before the job is checked, whatever the core count.
EARLY_CPU_WORKERS = 4


def make_slots(n: int, gpus: list[str], pin: bool, cpu_count: int) -> tuple[Slot, ...]:
    """N workers: worker *i* owns visible GPU *i* when ``pin``; N > 1 split the cores."""
    threads = max(1, cpu_count // n) if n > 1 else None
    return tuple(Slot(i, i if pin else None,
                      (("CUDA_VISIBLE_DEVICES", gpus[i]),) if pin else (), threads)
                 for i in range(n))


def predicted_slots(workers: str, gpus: list[str], cpu_count: int) -> tuple[Slot, ...] | None:
    """The slots :func:`plan_workers` gives ``workers=<value>`` when the job's trials use
    the GPUs (or, with no GPU, the CPU); None when that is not a pool of 2 or more, or more
    CPU workers than cores (and than :data:`EARLY_CPU_WORKERS`): started before the job is
    checked, a typo such as ``workers=200`` would import torch 200 times; the job starts
    what it accepts."""
    try:
        n = len(gpus) if workers == PER_GPU else int(workers)
    except ValueError:
        return None  # the job's own check says what is wrong with it
    if n < 2 or n > len(gpus) > 0 or (not gpus and n > max(cpu_count, EARLY_CPU_WORKERS)):
        return None
    return make_slots(n, gpus, bool(gpus), cpu_count)


def guess_devices(given: list[Any] | None, gpus: list[str]) -> tuple[str, ...]:
    """The devices the ``device`` values ``given`` on the command line name (``auto`` and
    ``cuda`` as the job resolves them; not given is ``auto``), to warm before the job is
    planned. A value the job will refuse warms nothing."""
    from runner.config.trials import as_choices

    names = ["auto"] if given is None else [
        str(item) for value in given for item in as_choices(value)
        if _DEVICE_NAME.fullmatch(str(item))]
    resolved = [("cuda:0" if gpus else "cpu") if name == "auto" else
                "cuda:0" if name == "cuda" else name for name in names]
    return tuple(dict.fromkeys(resolved))
