"""2-D convolution with "same" padding (the graphed-callables tutorial's fused-kernel and
tensor-core examples).

The graphed-callables tutorial names ``nn.functional.conv2d`` with bias as the example of a fused
kernel and of an op
that uses tensor cores in the right dtypes. The default shape is a ResNet stage-1 layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import scaled_randn, shape_dims


def build(ctx: OpContext, bias: bool = True) -> Workload:
    """``F.conv2d(x, w, b, padding=k // 2)`` with x [N, C_in, H, W], w [C_out, C_in, k, k].

    Weights are ``randn / sqrt(C_in·k²)`` so outputs stay O(1); the bias is ``randn``.
    With an odd kernel the output is [N, C_out, H, W]; an even kernel gives one more row and
    column (padding k//2 on both sides), and the counts below use the real output size.

    flops = 2·N·C_out·H_out·W_out·C_in·k² (+ N·C_out·H_out·W_out for the bias add).
    bytes = (x + w [+ b] + output) elements · element size.
    """
    n, c_in, height, width, c_out, kernel = shape_dims(
        ctx, "conv2d", ("N", "C_in", "H", "W", "C_out", "kernel"))
    padding = kernel // 2
    h_out = height + 2 * padding - kernel + 1
    w_out = width + 2 * padding - kernel + 1
    if h_out < 1 or w_out < 1:
        raise ValueError(f"op conv2d: kernel={kernel} is larger than the padded image "
                         f"{height}x{width}; use kernel <= H and W")
    x = ctx.randn(n, c_in, height, width)
    w = scaled_randn(ctx, c_out, c_in, kernel, kernel, fan_in=c_in * kernel * kernel)
    b = ctx.randn(c_out) if bias else None
    params = (w,) if b is None else (w, b)
    out_elements = n * c_out * h_out * w_out

    def reference() -> torch.Tensor:
        b64 = None if b is None else b.double()
        return F.conv2d(x.double(), w.double(), b64, padding=padding)

    return Workload(
        fn=lambda: F.conv2d(x, w, b, padding=padding),
        flops=2.0 * out_elements * c_in * kernel * kernel + (out_elements if bias else 0),
        bytes_moved=tensor_bytes(x, *params) + out_elements * ctx.element_size,
        reference=reference,
        inputs=(x, *params),
        supports_backward=True,
    )
