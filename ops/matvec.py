"""Matrix–vector product ``A[N,M] @ v[M]`` (the GPU-devices tutorial, ``cu_mv_product`` /
``torch.matmul``).

The GPU-devices tutorial writes this kernel by hand in Numba (one thread per output row) and
compares it with
``torch.matmul(x, y)`` on a tall, thin 100000×100 matrix. It is memory-bound: every element of
A is used once.
"""

from __future__ import annotations

import torch

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import shape_dims


def build(ctx: OpContext) -> Workload:
    """``torch.matmul(a, v)`` with a of shape [N, M] and v of shape [M]; output [N].

    flops = 2·N·M. bytes = (N·M + M + N) · element size.
    """
    n, m = shape_dims(ctx, "matvec", ("N", "M"))
    a = ctx.randn(n, m)
    v = ctx.randn(m)
    return Workload(
        fn=lambda: torch.matmul(a, v),
        flops=2.0 * n * m,
        bytes_moved=tensor_bytes(a, v) + n * ctx.element_size,
        reference=lambda: a.double() @ v.double(),
        inputs=(a, v),
        supports_backward=True,
    )
