"""Row-wise softmax of an [R, C] matrix: a memory-bound reduction plus pointwise pass."""

from __future__ import annotations

import torch

from ops.base import OpContext, Workload
from ops.common import shape_dims

FLOPS_PER_ELEMENT = 5
"""max (1 compare), subtract the max (1), exp (1, by convention), sum (1), divide (1)."""


def build(ctx: OpContext) -> Workload:
    """``torch.softmax(x, dim=-1)`` for x ~ N(0, 1) of shape [R, C].

    flops = 5·R·C (:data:`FLOPS_PER_ELEMENT`). bytes = 2·R·C · element size (read x, write
    the result; a fused kernel keeps each row on chip between its passes).
    """
    rows, cols = shape_dims(ctx, "softmax", ("R", "C"))
    x = ctx.randn(rows, cols)
    return Workload(
        fn=lambda: torch.softmax(x, dim=-1),
        flops=float(FLOPS_PER_ELEMENT * rows * cols),
        bytes_moved=2 * rows * cols * ctx.element_size,
        reference=lambda: torch.softmax(x.double(), dim=-1),
        inputs=(x,),
        supports_backward=True,
    )
