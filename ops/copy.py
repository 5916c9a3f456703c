"""Bulk copies device↔device, host→device and device→host (the CUDA-operations tutorial streams,
the CUDA 101 tutorial L1/L3).

Copies are the other half of every seed's advice ("create tensors on the device", "pin host
memory", "keep data on the GPU"): this op measures the bandwidth each of those rests on.
Destinations are allocated at build time, so a call times the transfer and not the allocator.
"""

from __future__ import annotations

from typing import Literal

import torch

from ops.base import OpContext, TrialSkipped, Workload
from ops.common import require_accelerator, shape_dims

Direction = Literal["d2d", "h2d", "d2h"]

_HOST = torch.device("cpu")


def build(ctx: OpContext, direction: Direction = "d2d", pinned: bool = False) -> Workload:
    """``dst.copy_(src)`` of ``numel`` random elements in the direction asked for.

    d2d: both on ``ctx.device`` (on a cpu trial this is a host memcpy, which is valid).
    h2d: ``src`` on the host (page-locked if ``pinned``), ``dst`` on the device.
    d2h: ``src`` on the device, ``dst`` on the host (page-locked if ``pinned``).
    Cross-device copies pass ``non_blocking=True``: from or to pinned memory they are then
    asynchronous DMA transfers (the runner's timer synchronises); from or to pageable memory
    the CUDA driver stages them through its own pinned buffer and the call blocks the host
    whatever the flag, which is the cost ``pinned=true`` removes.

    bytes: d2d = 2 · numel · element size, since device memory is both read and written.
    h2d/d2h = numel · element size: the bytes that cross the host–device link, the quantity
    PCIe/NVLink bandwidth is quoted in (counting both ends would double the link speed).
    flops = 0.
    """
    if direction not in ("d2d", "h2d", "d2h"):
        raise ValueError(f"op copy: direction={direction!r} is not one of d2d, h2d, d2h; "
                         "pass e.g. op.direction=h2d")
    (numel,) = shape_dims(ctx, "copy", ("numel",))
    if direction == "d2d" and pinned:
        raise TrialSkipped("pinned=true only applies to host memory (direction=h2d or d2h); "
                           "a d2d copy has no host buffer to pin; use pinned=false for d2d")
    if direction != "d2d":
        require_accelerator(ctx, f"direction={direction} (a host<->device copy)",
                            "on cpu only direction=d2d (a host memcpy) is meaningful")
    if pinned:
        require_accelerator(ctx, "pinned host memory", "use pinned=false on cpu")

    src_device = _HOST if direction == "h2d" else ctx.device
    dst_device = _HOST if direction == "d2h" else ctx.device
    src = ctx.randn(numel, device=src_device)
    if pinned and direction == "h2d":
        src = src.pin_memory()
    dst = torch.empty(numel, dtype=ctx.dtype, device=dst_device,
                      pin_memory=pinned and direction == "d2h")
    non_blocking = direction != "d2d"
    element_bytes = numel * ctx.element_size
    return Workload(
        fn=lambda: dst.copy_(src, non_blocking=non_blocking),
        flops=0.0,
        bytes_moved=2 * element_bytes if direction == "d2d" else element_bytes,
        reference=lambda: src.double(),
        inputs=(src,),
    )
