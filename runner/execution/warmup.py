"""A worker's warm-up: the one-off costs of its first trial, paid before any trial.

Why: the first trial of a fresh worker used to create the CUDA context and the cuBLAS handles,
start NVML and run ``git`` inside its row, and the workers of a pool did it only when their
first trial came. Now each worker does it as soon as it has imported torch, all workers at
once, while the driver is still composing and planning (``runner.execution.worker`` posts the
request; ``runner.execution.timeline`` reports how long it took). A worker that will warm a
GPU starts the CUDA driver and the device's primary context even earlier, beside its
``import torch`` (:func:`open_driver`).
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from typing import Any

#: CUDA warm-ups started as soon as torch was imported (:func:`start_cuda`), by ordinal:
#: the thread and what it records, joined by :func:`warm`.
_STARTED: dict[int, tuple[threading.Thread, dict[str, Any]]] = {}


def start_cuda(ordinals: tuple[int, ...]) -> None:
    """Start each GPU's context and cuBLAS handles (what :func:`warm` does for it) on a
    thread, right after the worker's ``import torch``, while it imports its trial code.
    Torch's ops release the GIL, so the two overlap: on an H200 host the CUDA part took
    0.18-0.24 s and the imports 0.12-0.15 s, one after the other before. :func:`warm`
    waits for the thread instead of doing the work again."""
    for ordinal in ordinals:
        info: dict[str, Any] = {}
        thread = threading.Thread(target=_cuda_or_error, args=(f"cuda:{ordinal}", info),
                                  name=f"opsweep-cuda-warm-{ordinal}", daemon=True)
        thread.start()
        _STARTED[ordinal] = (thread, info)


def warm(devices: tuple[str, ...]) -> dict[str, Any]:
    """Pay before the first trial what it would otherwise pay inside its row: each CUDA
    device's context and cuBLAS handles, NVML, the environment record and git provenance.
    Runs in every worker at once, while the driver still plans. Nothing here is timed by the
    timer; every trial still warms up its own workload.

    The records (NVML, device properties, ``git``) are read on a thread beside the CUDA
    context and the cuBLAS handles: both wait mostly in the driver or a subprocess, with the
    GIL released, and the first trial waits for the slower of the two, not for their sum."""
    info: dict[str, Any] = {}
    started = time.perf_counter()
    records = threading.Thread(target=_records, args=(devices, info), daemon=True)
    records.start()
    for device in devices:
        started_early = _STARTED.pop(next(iter(cuda_ordinals((device,))), -1), None)
        if started_early is not None:
            started_early[0].join()
            _merge(info, started_early[1])
        elif device.startswith("cuda") and "warm_error" not in info:
            _cuda_or_error(device, info)
    records.join()
    info["warm_s"] = time.perf_counter() - started
    info["warmed_at"] = time.time()
    return info


def open_driver(ordinals: tuple[int, ...]) -> threading.Thread | None:
    """Start the CUDA driver (``cuInit``) and the primary context of each device ordinal on a
    thread, and return it (None: nothing to open). Called by a worker that will warm a GPU,
    right before it imports torch.

    Why: ``import torch`` does not touch the GPU, and the CUDA runtime that torch's first CUDA
    call starts uses the device's *primary* context. Made here, by the driver API, with the
    GIL released, it is made while torch imports: on an H200 host the two took 0.39 s beside
    a 2.8 s import, and torch's first CUDA call then took 0.02 s instead of 0.44 s. The
    worker's environment (``CUDA_VISIBLE_DEVICES``) is applied before, so the driver sees
    the same devices torch will. The context is retained for the life of the process, as
    torch's runtime retains it too. Any failure (no driver, no such device) is left for
    torch's own first call to report, in a row."""
    if not ordinals:
        return None
    # The driver fixes its module loading at cuInit: torch asks for lazy loading (a context
    # of ~0.3 GB, not ~0.7) only at its own first CUDA call, which now comes after.
    os.environ.setdefault("CUDA_MODULE_LOADING", "LAZY")
    thread = threading.Thread(target=_retain_primary_contexts, args=(ordinals,),
                              name="opsweep-cuda-driver", daemon=True)
    thread.start()
    return thread


def _retain_primary_contexts(ordinals: tuple[int, ...]) -> None:
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return  # no CUDA driver here: torch says so when a trial asks for cuda
    if driver.cuInit(0) != 0:
        return
    for ordinal in ordinals:
        device, context = ctypes.c_int(), ctypes.c_void_p()
        if driver.cuDeviceGet(ctypes.byref(device), ordinal) == 0:
            driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)


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
    info["cuda_context_s"] = info.get("cuda_context_s", 0.0) + early.get("cuda_context_s", 0.0)
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
