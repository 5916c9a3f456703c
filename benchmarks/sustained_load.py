"""The references' warm-up: an op back to back for a while, with the device never idle.

Why not ``for _ in range(20): fn()`` then ``torch.cuda.synchronize()``: every sync drains the
queue, and the device idles until the host has launched the next call. For a 26 µs bf16
2048³ matmul, 20 calls are 0.5 ms of work, so the GPU idles once every half millisecond, and
a power-capped GPU turns idle into clock: the warm-up would not be the back-to-back load it
claims to be. Here the host waits on the event of a batch only once
two later batches are queued behind it, so the device always has work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def back_to_back_for(fn: Callable[[], Any], seconds: float, batch: int = 20) -> int:
    """Run ``fn`` back to back for ``seconds`` of host time, ``batch`` calls between two waits,
    two batches queued behind the one waited on; returns the calls run."""
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
            queued.pop(0).synchronize()  # two later batches are still queued
    torch.cuda.synchronize()
    return calls
