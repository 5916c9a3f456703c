"""Sum a matrix on the device, or via a round trip through numpy (the CUDA 101 tutorial, lesson 3).

The CUDA 101 tutorial's "bad" pattern copies ``x`` to the host, sums it with numpy and sends the
scalar back
(``torch.tensor(x.cpu().numpy().sum(), device=...)``); the "good" one is ``x.sum()`` on the
device. The host path synchronises and crosses the bus twice, which is the point of the lesson.
"""

from __future__ import annotations

from typing import Literal

import torch

from ops.base import OpContext, TrialSkipped, Workload
from ops.common import shape_dims

Where = Literal["host", "device"]


def build(ctx: OpContext, where: Where = "device") -> Workload:
    """The sum of all elements of ``x[R, C]``, as a 0-dim tensor on ``x``'s device.

    ``host``: ``torch.tensor(x.cpu().numpy().sum(), device=x.device)``; numpy has no bfloat16,
    so that combination is skipped. ``device``: ``x.sum()``. On a cpu trial the host path still
    differs (numpy's reduction and a tensor round trip), so both run there.

    flops = R·C (one add per element). bytes = (R·C + 1) · element size, the same for both
    paths: the minimum for the computation, so the two paths' GB/s compare directly; the
    host path's extra R·C-element copy is the cost being measured, not part of the work.
    """
    if where not in ("host", "device"):
        raise ValueError(f"op cpu_roundtrip: where={where!r} is not 'host' or 'device'; "
                         "pass e.g. op.where=host")
    if where == "host" and ctx.dtype == torch.bfloat16:
        raise TrialSkipped("cpu_roundtrip where=host converts to numpy, which has no "
                           "bfloat16; use dtype=fp16 or fp32 for the host path")
    rows, cols = shape_dims(ctx, "cpu_roundtrip", ("R", "C"))
    x = ctx.randn(rows, cols)

    if where == "host":
        def fn() -> torch.Tensor:
            return torch.tensor(x.cpu().numpy().sum(), device=x.device)
    else:
        def fn() -> torch.Tensor:
            return x.sum()

    return Workload(
        fn=fn,
        flops=float(rows * cols),
        bytes_moved=(rows * cols + 1) * ctx.element_size,
        reference=lambda: x.double().sum(),
        inputs=(x,),
        supports_backward=where == "device",
    )
