"""``x @ x @ ... @ x``: the CUDA-operations tutorial's floating-point precision example.

The CUDA-operations tutorial computes ``x @ x @ x @ x @ x @ x`` for a 5000×5000 ``randn`` matrix on
CPU, GPU and
numpy and gets three different sums: summation order differs between libraries and devices.
This op times the same chain and, through the runner's float64 reference, measures the error.
"""

from __future__ import annotations

import math

import torch

from ops.base import OpContext, Workload
from ops.common import shape_dims


def chained_power(x: torch.Tensor, power: int) -> torch.Tensor:
    """``x @ x @ ... @ x`` with ``power`` factors, evaluated left to right as Python does."""
    y = x
    for _ in range(power - 1):
        y = y @ x
    return y


def build(ctx: OpContext, power: int = 6) -> Workload:
    """``x`` to the ``power`` by ``power − 1`` chained matmuls, x of shape [n, n].

    Unlike the tutorial, x is ``randn / sqrt(n)``: the tutorial's raw ``randn`` has spectral radius
    ≈ sqrt(n), so x⁶ has entries ~n³ ≈ 10¹¹ at n = 5000, past fp16's 65504 and turning the
    comparison into inf-vs-inf. Scaled, the spectral radius is ≈ 1 and every power stays O(1)
    in every dtype, while the rounding behaviour the tutorial is about is unchanged. The tutorial
    also
    ends with ``.sum().item()``; the matrix itself is returned here so that the accuracy check
    sees every element and no host sync lands inside ``fn``.

    flops = 2·n³·(power − 1). bytes = 2·n² · element size (read x once, write the result).
    """
    if power < 2:
        raise ValueError(f"op matrix_power: power={power} must be >= 2 (power - 1 matmuls); "
                         "pass e.g. op.power=6")
    (n,) = shape_dims(ctx, "matrix_power", ("n",))
    x = ctx.randn(n, n) / math.sqrt(n)
    return Workload(
        fn=lambda: chained_power(x, power),
        flops=2.0 * n**3 * (power - 1),
        bytes_moved=2 * n * n * ctx.element_size,
        reference=lambda: chained_power(x.double(), power),
        inputs=(x,),
        supports_backward=True,
    )
