"""Create a random matrix on the device, or on the host and copy it over (the CUDA 101 tutorial,
lesson 1).

The CUDA 101 tutorial's "bad" ``torch.randn(size, size).cuda()`` versus "good" ``torch.randn(size,
size,
device='cuda')``: the first pays for host RNG and a PCIe transfer, the second for one device
kernel. Both are timed here with the random draw inside ``fn``, because creation is the op.
"""

from __future__ import annotations

from typing import Literal

import torch

from ops.base import OpContext, Workload
from ops.common import require_accelerator, shape_dims

Where = Literal["device", "host_then_copy"]


def build(ctx: OpContext, where: Where = "device") -> Workload:
    """``torch.randn(R, C)`` in the storage dtype, made on ``ctx.device`` or made on the host
    and moved with ``.to(device)`` (a blocking copy, as in the tutorial).

    The device path draws from the trial's generator; the host path from a CPU generator
    seeded with the trial's seed (a device generator cannot draw on the host). There is no
    meaningful reference for freshly drawn random numbers, so ``reference`` is None.

    flops = 0 (random-number generation is not counted).
    bytes = R·C · element size for ``device`` (writing the output); twice that for
    ``host_then_copy``: writing the host tensor, plus the same bytes crossing the host–device
    link (counted once, as in the ``copy`` op).
    """
    if where not in ("device", "host_then_copy"):
        raise ValueError(f"op tensor_create: where={where!r} is not 'device' or "
                         "'host_then_copy'; pass e.g. op.where=device")
    rows, cols = shape_dims(ctx, "tensor_create", ("R", "C"))
    device, dtype = ctx.device, ctx.dtype
    out_bytes = rows * cols * ctx.element_size
    if where == "device":
        generator = ctx.generator

        def fn() -> torch.Tensor:
            return torch.randn(rows, cols, generator=generator, device=device, dtype=dtype)
    else:
        require_accelerator(ctx, "where=host_then_copy",
                            "on cpu the .to(device) is a no-op, so use where=device")
        host_generator = torch.Generator(device="cpu").manual_seed(ctx.seed)

        def fn() -> torch.Tensor:
            return torch.randn(rows, cols, generator=host_generator, dtype=dtype).to(device)

    return Workload(
        fn=fn,
        flops=0.0,
        bytes_moved=out_bytes if where == "device" else 2 * out_bytes,
        reference=None,
    )
