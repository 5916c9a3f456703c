"""The CUDA-operations tutorial's ``slow_function``: a long chain of tiny pointwise kernels (the
CUDA-graphs demo).

Each iteration is ``y = x*2; z = sigmoid(y); a = z + 5.0; b = relu(a); x = b``. Eagerly that is
4 kernel launches per iteration on a 5-element tensor, so the time is almost all launch
overhead; CUDA graphs and ``torch.compile`` remove it. The output converges to ~6.0 (as printed
in the tutorial), whatever the input.
"""

from __future__ import annotations

import torch

from ops.base import OpContext, Workload
from ops.common import any_shape, require_positive


def slow_function(x: torch.Tensor, iterations: int) -> torch.Tensor:
    """The tutorial's loop, verbatim apart from the iteration count being a parameter."""
    b = x
    for _ in range(iterations):
        y = x * 2
        z = torch.sigmoid(y)
        a = z + 5.0
        b = torch.nn.functional.relu(a)
        x = b
    return b


def build(ctx: OpContext, iterations: int = 500) -> Workload:
    """``slow_function(x)`` with ``iterations`` rounds, on x ~ N(0, 1) of any shape.

    flops = 4 · iterations · numel: one each for the multiply, the sigmoid, the add and the
    relu. Counting sigmoid (really an exp, an add and a divide) as 1 is a convention: this op
    is about launch overhead, and the count only has to be comparable across modes.
    bytes = 2 · numel · element size: the fused minimum, reading x once and writing the
    result once. Eager execution moves 8 · iterations · numel elements; the gap between the
    two is exactly what fusion (``torch.compile``) can win.
    """
    require_positive("pointwise_chain", "iterations", iterations)
    shape = any_shape(ctx, "pointwise_chain")
    x = ctx.randn(*shape)
    numel = x.numel()
    return Workload(
        fn=lambda: slow_function(x, iterations),
        flops=4.0 * iterations * numel,
        bytes_moved=2 * numel * ctx.element_size,
        reference=lambda: slow_function(x.double(), iterations),
        inputs=(x,),
        supports_backward=True,
    )
