"""Layer normalisation over the last dim of an [R, C] matrix, with weight and bias."""

from __future__ import annotations

import torch.nn.functional as F

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import shape_dims

FLOPS_PER_ELEMENT = 7
"""sum for the mean (1), subtract the mean (1), square (1), sum of squares (1), multiply by
1/std (1), scale by the weight (1), add the bias (1). Per-row work (the divisions by C, +eps,
rsqrt) is O(R) and not counted."""

EPS = 1e-5


def build(ctx: OpContext) -> Workload:
    """``F.layer_norm(x, (C,), weight, bias, eps=1e-5)`` for x [R, C], weight and bias [C].

    weight and bias are N(0, 1) draws, not the module's ones/zeros, so the affine step does
    real arithmetic on real data.

    flops = 7·R·C (:data:`FLOPS_PER_ELEMENT`).
    bytes = (2·R·C + 2·C) · element size: read x, weight and bias, write the output.
    """
    rows, cols = shape_dims(ctx, "layer_norm", ("R", "C"))
    x = ctx.randn(rows, cols)
    weight = ctx.randn(cols)
    bias = ctx.randn(cols)
    return Workload(
        fn=lambda: F.layer_norm(x, (cols,), weight, bias, eps=EPS),
        flops=float(FLOPS_PER_ELEMENT * rows * cols),
        bytes_moved=tensor_bytes(x, weight, bias) + tensor_bytes(x),  # inputs + output
        reference=lambda: F.layer_norm(x.double(), (cols,), weight.double(), bias.double(),
                                       eps=EPS),
        inputs=(x, weight, bias),
        supports_backward=True,
    )
