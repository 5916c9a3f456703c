"""A worker's warm-up: the one-off costs of its first trial, paid before any trial.

Why: the first trial of a fresh worker used to create the CUDA context and the cuBLAS handles,
start NVML and run ``git`` inside its row, and the workers of a pool did it only when their
first trial came. Now each worker does it as soon as it has imported torch, all workers at
once, while the driver is still composing and planning (``runner.execution.worker`` posts the
request; ``runner.execution.timeline`` reports how long it took). The CUDA part starts on a
thread right after the import, beside the worker's other imports (:func:`start_cuda`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: CUDA warm-ups started as soon as torch was imported (:func:`start_cuda`), by ordinal: the
#: thread and what it records. The worker holds them and hands them to :func:`warm`.
EarlyWarmups = dict[int, tuple[threading.Thread, dict[str, Any]]]


def start_cuda(ordinals: tuple[int, ...]) -> EarlyWarmups:
    """Start each GPU's context and cuBLAS handles (what :func:`warm` does for it) on a
    thread, right after the worker's ``import torch``, while it imports its trial code.
    Torch's ops release the GIL, so the two overlap (on an H200 host the imports took
    0.12-0.15 s). :func:`warm`, given what this returns, waits for the thread instead of
    doing the work again.

    Not before the import: the CUDA driver opened on a thread beside ``import torch`` made
    the import slower by more than the context it saved. On an H200 host, eight processes
    each way, alternating: ready (torch imported, context and cuBLAS up) at a median 4.82 s
    with the driver opened before the import (3.56-4.74 s of it the import), 4.48 s after
    it (3.29-4.87 s the import)."""
    started: EarlyWarmups = {}
    for ordinal in ordinals:
        info: dict[str, Any] = {}
        thread = threading.Thread(target=_cuda_or_error, args=(f"cuda:{ordinal}", info),
                                  name=f"opsweep-cuda-warm-{ordinal}", daemon=True)
        thread.start()
        started[ordinal] = (thread, info)
    return started


def warm(devices: tuple[str, ...], early: EarlyWarmups | None = None) -> dict[str, Any]:
    """Pay before the first trial what it would otherwise pay inside its row: each CUDA
    device's context and cuBLAS handles, NVML, the environment record and git provenance.
    Runs in every worker at once, while the driver still plans. Nothing here is timed by the
    timer; every trial still warms up its own workload. ``early``: the warm-ups
    :func:`start_cuda` started, each joined and taken out of it here.

    The records (NVML, device properties, ``git``) are read on a thread beside the CUDA
    context and the cuBLAS handles: both wait mostly in the driver or a subprocess, with the
    GIL released, and the first trial waits for the slower of the two, not for their sum."""
    info: dict[str, Any] = {}
    started = time.perf_counter()
    records = threading.Thread(target=_records, args=(devices, info), daemon=True)
    records.start()
    # Every warm-up started after the import is waited for, even one no device here names:
    # none runs on beside the trials, and its error is reported.
    joined = {ordinal: early.pop(ordinal) for ordinal in list(early or {})}
    for thread, early_info in joined.values():
        thread.join()
        _merge(info, early_info)
    for device in devices:
        if (device.startswith("cuda") and "warm_error" not in info
                and not set(cuda_ordinals((device,))) & joined.keys()):
            _cuda_or_error(device, info)
    records.join()
    info["warm_s"] = time.perf_counter() - started
    info["warmed_at"] = time.time()
    return info


def cuda_ordinals(devices: tuple[str, ...]) -> tuple[int, ...]:
    """The CUDA device ordinals among ``devices`` (``cuda`` is 0), each once."""
    ordinals = [0 if d == "cuda" else int(d.partition(":")[2]) for d in devices
                if d == "cuda" or (d.startswith("cuda:") and d.partition(":")[2].isdigit())]
    return tuple(dict.fromkeys(ordinals))


def _cuda_or_error(device: str, info: dict[str, Any]) -> None:
    try:
        _cuda(device, info)
    except Exception as exc:  # a failing warm-up is the first trial's to report, as a row
        info["warm_error"] = f"{type(exc).__name__}: {exc}"[:300]


def _merge(info: dict[str, Any], early: dict[str, Any]) -> None:
    """What a CUDA warm-up started early recorded, into the warm-up's ``info``."""
    for key in ("cuda_context_s", "clock_probe_s"):
        info[key] = info.get(key, 0.0) + early.get(key, 0.0)
    if "warm_error" in early:
        info.setdefault("warm_error", early["warm_error"])


def _cuda(device: str, info: dict[str, Any]) -> None:
    """The CUDA context and the cuBLAS(Lt) handles and workspace of ``device``."""
    import torch

    if not torch.cuda.is_available():
        return  # a guess made before the job was planned; the job will say
    begin = time.perf_counter()
    probe = torch.ones(64, 64, device=device)  # creates the CUDA context
    torch.cuda.synchronize(device)
    info["cuda_context_s"] = info.get("cuda_context_s", 0.0) + time.perf_counter() - begin
    for dtype in (torch.float32, torch.bfloat16):
        probe.to(dtype) @ probe.to(dtype)
    torch.cuda.synchronize(device)
    _clock_probe(device, info)


def _clock_probe(device: str, info: dict[str, Any]) -> None:
    """Build the device's clock probe (``runner.timing.clock_probe``: the driver loads its
    kernel and one probe pair is read, a few milliseconds) here, not inside the first trial,
    where it would be part of that trial's ``cost_other_s`` in every worker."""
    from runner.timing.clock_probe import clock_probe

    begin = time.perf_counter()
    clock_probe(device)
    info["clock_probe_s"] = info.get("clock_probe_s", 0.0) + time.perf_counter() - begin


def heat_while_idle(device: str, max_s: float, asked: Callable[[], bool],
                    heat: Callable[[str, float], Any] | None = None,
                    wall: Callable[[], float] = time.perf_counter) -> float:
    """Keep ``device`` under sustained load (``runner.timing.heat.heat_device``, in chunks of
    :data:`HEAT_CHUNK_S`) until ``asked()`` (a request is waiting) or ``max_s``; the seconds
    it heated. A CPU device is not heated.

    Why: a worker of a pool waits between its warm-up and its first trial (for the other
    workers to be ready, for the driver) and between the jobs of a multirun, and a GPU left
    idle cools: its first power-capped trial would start from another state than the rest
    of the sweep, and than the same trial on the other GPUs. With ``gpu_warmup_s`` the pool
    asks each worker to keep its GPU warm through these waits (docs/scale-out.md)."""
    if not device.startswith("cuda") or max_s <= 0:
        return 0.0
    if heat is None:
        from runner.timing.heat import heat_device as heat
    start = wall()
    while wall() - start < max_s and not asked():
        heat(device, HEAT_CHUNK_S)
    return wall() - start


#: Seconds of one chunk of :func:`heat_while_idle`: how long a trial that arrives may wait.
HEAT_CHUNK_S = 0.05


def _records(devices: tuple[str, ...], info: dict[str, Any]) -> None:
    """The records every row carries, read once: the environment, NVML's state, git."""
    from runner.execution.environment import environment, git_provenance, gpu_state

    try:
        for device in devices:
            if device.startswith("cuda"):
                import torch

                if not torch.cuda.is_available():
                    continue  # as in _cuda: the job will say
            environment(device)
            gpu_state(device)
        git_provenance()
    except Exception as exc:  # as above: the first trial reports it
        info.setdefault("warm_error", f"{type(exc).__name__}: {exc}"[:300])
