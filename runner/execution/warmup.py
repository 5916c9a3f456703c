"""A worker's warm-up: the one-off costs of its first trial, paid before any trial.

Why: the first trial of a fresh worker used to create the CUDA context and the cuBLAS handles,
start NVML and run ``git`` inside its row, and the workers of a pool did it only when their
first trial came. Now each worker does it as soon as it has imported torch, all workers at
once, while the driver is still composing and planning (``runner.execution.worker`` posts the
request; ``runner.execution.timeline`` reports how long it took).
"""

from __future__ import annotations

import time
from typing import Any

#: Seconds the GPU idles at the end of a worker's warm-up (see the hazard in :func:`warm`).
FIRST_IDLE_S = 0.2


def warm(devices: tuple[str, ...]) -> dict[str, Any]:
    """Pay before the first trial what it would otherwise pay inside its row: each CUDA
    device's context, cuBLAS handles and first idle gap, NVML, the environment record and git
    provenance. Runs in every worker at once, while the driver still plans. Nothing here is
    timed by the timer; every trial still warms up its own workload."""
    from runner.execution.environment import environment, git_provenance, gpu_state

    info: dict[str, Any] = {}
    started = time.perf_counter()
    gpu_idle_from: float | None = None
    try:
        for device in devices:
            if device.startswith("cuda"):
                import torch

                if not torch.cuda.is_available():
                    continue  # a guess made before the job was planned; the job will say
                begin = time.perf_counter()
                probe = torch.ones(64, 64, device=device)  # creates the CUDA context
                torch.cuda.synchronize(device)
                info["cuda_context_s"] = info.get("cuda_context_s", 0.0) + \
                    time.perf_counter() - begin
                for dtype in (torch.float32, torch.bfloat16):  # cuBLAS(Lt) handles, workspace
                    probe.to(dtype) @ probe.to(dtype)
                torch.cuda.synchronize(device)
                del probe
                gpu_idle_from = time.perf_counter()
            environment(device)
            gpu_state(device)
        git_provenance()
        if gpu_idle_from is not None:
            # Hazard: until its first idle gap of ~0.1 s, a fresh CUDA process runs small
            # kernels faster than it ever does again (an H200's bf16 256³ matmul: 2.63 µs a
            # call for 2 s back to back from the start; 2.79 µs after one 0.1 s pause, and
            # still after 3 s idle). Every later trial follows gaps like that, so the first
            # one does too: the GPU idles here, overlapping the host work above.
            time.sleep(max(0.0, FIRST_IDLE_S - (time.perf_counter() - gpu_idle_from)))
    except Exception as exc:  # a failing warm-up is the first trial's to report, as a row
        info["warm_error"] = f"{type(exc).__name__}: {exc}"[:300]
    info["warm_s"] = time.perf_counter() - started
    info["warmed_at"] = time.time()
    return info
