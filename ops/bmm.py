"""Batched matrix multiply ``A[B,M,K] @ B[B,K,N]`` (the CUDA 101 tutorial, lesson 4).

The CUDA 101 tutorial contrasts a Python loop of 32 small ``torch.mm`` calls with one
``torch.bmm``: batching
raises arithmetic intensity and removes per-launch overhead. This op is the batched side.
"""

from __future__ import annotations

import torch

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import shape_dims


def build(ctx: OpContext) -> Workload:
    """``torch.bmm(a, b)`` with ``a`` of shape [B, M, K] and ``b`` of shape [B, K, N].

    flops = 2·B·M·N·K. bytes = B·(M·K + K·N + M·N) · element size.
    """
    batch, m, n, k = shape_dims(ctx, "bmm", ("B", "M", "N", "K"))
    a = ctx.randn(batch, m, k)
    b = ctx.randn(batch, k, n)
    out_bytes = batch * m * n * ctx.element_size
    return Workload(
        fn=lambda: torch.bmm(a, b),
        flops=2.0 * batch * m * n * k,
        bytes_moved=tensor_bytes(a, b) + out_bytes,
        reference=lambda: torch.bmm(a.double(), b.double()),
        inputs=(a, b),
        supports_backward=True,
    )
