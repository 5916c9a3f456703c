"""The graph state a process's trials are timed in.

A process's first CUDA graphs run small kernels faster than all its later graphs (on an
H100 up to 8%: docs/timing.md#a-small-ops-time-and-its-processs-memory), so the first
trials of a process would be timed in a state no later trial meets. :func:`settle_graph_state`
moves the process past it, once per device, before its first trial there
(``runner.execution.timed.WorkerTiming.settle_graphs``).
"""

from __future__ import annotations

from typing import Any

from runner.timing.cuda_device import capture_graph

#: Throwaway graphs a process captures on a device before its first trial there.
SETTLING_GRAPHS = 4


def settle_graph_state(device: Any, graphs: int = SETTLING_GRAPHS) -> None:
    """Capture, replay and free ``graphs`` small graphs on ``device``, once per process,
    before its first trial there (~35 ms in a fresh process on an H100, then ~6 ms).

    Hazard: a process's first CUDA graphs run small kernels faster than all its later
    graphs. On an H100 a process's first graph ran bf16 256³ at 2.43 µs per call, bf16 512³
    at 3.10 and fp32 256³ at 6.26, every graph captured later at 2.60, 3.36 and 6.61; a
    bf16 256³ graph read 2.60 once two others had been captured, freed or not. So a trial's
    number depended on how many graphs its process had captured before it, and the plan
    order's first trials read 4-7% fast (benchmarks/footprint_check.py). After these graphs,
    every trial of the process is timed in the later state."""
    import torch

    x = torch.ones(1024, device=device)
    for _ in range(graphs):
        replay, _, _ = capture_graph(lambda: x * 2, device, 8)
        replay()
        del replay
    torch.cuda.synchronize(device)
