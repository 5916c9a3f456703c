"""Row-wise dot products of two [B, D] matrices, three ways (the CUDA-operations tutorial,
"Benchmarking intro").

The CUDA-operations tutorial shows that the same result, ``out[i] = a[i] · b[i]``, costs very
different amounts of
time depending on how it is phrased: ``mul`` + ``sum`` (two kernels and a [B, D] temporary)
versus reshaping into a ``bmm`` of [B,1,D] @ [B,D,1]. ``einsum`` is added as the third phrasing,
since it lets PyTorch pick the contraction itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import shape_dims

Impl = Literal["mul_sum", "bmm", "einsum"]


def batched_dot_mul_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The CUDA-operations tutorial's ``batched_dot_mul_sum``: elementwise product, then a sum over
    the last dim."""
    return a.mul(b).sum(-1)


def batched_dot_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The CUDA-operations tutorial's ``batched_dot_bmm``: B independent [1,D] @ [D,1] products
    through ``bmm``."""
    a = a.reshape(-1, 1, a.shape[-1])
    b = b.reshape(-1, b.shape[-1], 1)
    return torch.bmm(a, b).flatten(-3)


def batched_dot_einsum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The same contraction written as ``einsum('bd,bd->b')``."""
    return torch.einsum("bd,bd->b", a, b)


IMPLS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mul_sum": batched_dot_mul_sum,
    "bmm": batched_dot_bmm,
    "einsum": batched_dot_einsum,
}


def build(ctx: OpContext, impl: Impl = "mul_sum") -> Workload:
    """``out[i] = sum_d a[i, d] * b[i, d]`` for a, b of shape [B, D]; output shape [B].

    The tutorial passes the same tensor twice (``f(x, x)``); two distinct inputs are used here so
    that the bytes read really are 2·B·D elements. With one tensor the second read would be
    served from cache and the reported bandwidth would be inflated.

    flops = 2·B·D (D multiplies and D adds per row, the usual dot-product count).
    bytes = (2·B·D + B) · element size.
    """
    if impl not in IMPLS:
        raise ValueError(f"op batched_dot: impl={impl!r} is not one of {sorted(IMPLS)}; "
                         "pass e.g. op.impl=mul_sum")
    batch, dim = shape_dims(ctx, "batched_dot", ("B", "D"))
    func = IMPLS[impl]
    a = ctx.randn(batch, dim)
    b = ctx.randn(batch, dim)
    return Workload(
        fn=lambda: func(a, b),
        flops=2.0 * batch * dim,
        bytes_moved=tensor_bytes(a, b) + batch * ctx.element_size,
        reference=lambda: (a.double() * b.double()).sum(-1),
        inputs=(a, b),
        supports_backward=True,
    )
