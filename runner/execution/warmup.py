"""A worker's warm-up: the one-off costs of its first trial, paid before any trial.

Why: the first trial of a fresh worker used to create the CUDA context and the cuBLAS handles,
start NVML and run ``git`` inside its row, and the workers of a pool did it only when their
first trial came. Now each worker does it as soon as it has imported torch, all workers at
once, while the driver is still composing and planning (``runner.execution.worker`` posts the
request; ``runner.execution.timeline`` reports how long it took).
"""

from __future__ import annotations

import threading
import time
from typing import Any


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
    try:
        for device in devices:
            if device.startswith("cuda"):
                _cuda(device, info)
    except Exception as exc:  # a failing warm-up is the first trial's to report, as a row
        info["warm_error"] = f"{type(exc).__name__}: {exc}"[:300]
    records.join()
    info["warm_s"] = time.perf_counter() - started
    info["warmed_at"] = time.time()
    return info


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
