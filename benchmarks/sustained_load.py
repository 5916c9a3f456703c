"""The references' warm-up: an op back to back for a while, with the device never idle.

Why not ``for _ in range(20): fn()`` then ``torch.cuda.synchronize()``: every sync drains the
queue, and the device idles until the host has launched the next call. For a 26 µs bf16
2048³ matmul, 20 calls are 0.5 ms of work, and each sync's gap of tens of µs leaves the GPU
idle 5-10% of the time. A power-capped GPU turns that idle into clock, so the reference ran
faster than the op does back to back (an H200's capped 2048³ matmuls read 3-5% fast). Here
the host waits only on the event of the batch before last, so one batch is always queued.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def back_to_back_for(fn: Callable[[], Any], seconds: float, batch: int = 20) -> int:
    """Run ``fn`` back to back for ``seconds`` of host time, ``batch`` calls between two waits,
    and always one batch queued ahead of the one waited on; returns the calls run."""
    import torch

    start, calls, queued = time.perf_counter(), 0, []
    while time.perf_counter() - start < seconds:
        for _ in range(batch):
            fn()
        calls += batch
        done = torch.cuda.Event()
        done.record()
        queued.append(done)
        if len(queued) > 2:
            queued.pop(0).synchronize()  # the batch before last: the last is still queued
    torch.cuda.synchronize()
    return calls
