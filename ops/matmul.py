"""Dense matrix multiply ``A[M,K] @ B[K,N]``: the compute-bound baseline of every sweep.

The CUDA-operations and CUDA 101 tutorials time ``torch.mm``/``torch.matmul`` on square matrices
across dtypes; this op
is that computation with a general M, N, K so tensor-core alignment can be swept per dim.
"""

from __future__ import annotations

import torch

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import shape_dims


def build(ctx: OpContext) -> Workload:
    """``A @ B`` with ``A`` of shape [M, K] and ``B`` of shape [K, N].

    flops = 2·M·N·K (one multiply and one add per term of each of the M·N dot products).
    bytes = (M·K + K·N + M·N) · element size: read both operands once, write the product.
    """
    m, n, k = shape_dims(ctx, "matmul", ("M", "N", "K"))
    a = ctx.randn(m, k)
    b = ctx.randn(k, n)
    out_bytes = m * n * ctx.element_size
    return Workload(
        fn=lambda: torch.matmul(a, b),
        flops=2.0 * m * n * k,
        bytes_moved=tensor_bytes(a, b) + out_bytes,
        reference=lambda: a.double() @ b.double(),
        inputs=(a, b),
        supports_backward=True,
    )
