"""Binary elementwise ``x + y`` and ``x * y``, out of place or in place (the CUDA 101 tutorial,
lesson 5).

The CUDA 101 tutorial contrasts ``z = x + y`` (a new tensor per call) with ``x.add_(y)`` (no
allocation).
The same builders serve the GPU-devices tutorial's ``vector_add`` (``u = a + b`` on 1-D vectors):
that op is
only a different shape, so ``conf/op/vector_add.yaml`` points at :func:`build_add`.

Measurement hazard of the in-place variants: every call updates ``x``, so after warm-up and
timing ``x`` is no longer its initial value. ``reference`` therefore reads ``x`` and ``y`` as
they are when it is called (right before the checked call), and the inputs are chosen so that
repeated calls stay finite and out of the denormal range, whose slow paths on CPUs would change
the timing: ``x += y`` is a random walk (its size grows like sqrt(calls)), and for ``x *= y``
the factor ``y`` is a random sign (±1), so ``|x|`` never changes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import any_shape

BinaryOp = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def build_add(ctx: OpContext, inplace: bool = False) -> Workload:
    """``x + y`` (``inplace=False``) or ``x.add_(y)`` (``inplace=True``), x and y ~ N(0, 1).

    flops = numel (one add per element). bytes = 3 · numel · element size (read x and y,
    write the result, which is x itself when in place).
    """
    shape = any_shape(ctx, "add")
    x, y = ctx.randn(*shape), ctx.randn(*shape)
    return _binary(x, y, torch.add, torch.Tensor.add_, inplace)


def build_mul(ctx: OpContext, inplace: bool = False) -> Workload:
    """``x * y`` (``inplace=False``) or ``x.mul_(y)`` (``inplace=True``).

    x ~ N(0, 1); y is a random sign (±1) in both variants, so that repeated in-place calls
    keep ``|x|`` fixed (random N(0, 1) factors would drive x to zero through the denormals)
    and both variants read the same data.

    flops = numel (one multiply per element). bytes = 3 · numel · element size.
    """
    shape = any_shape(ctx, "mul")
    x = ctx.randn(*shape)
    y = ctx.rand(*shape).round() * 2 - 1
    return _binary(x, y, torch.mul, torch.Tensor.mul_, inplace)


def _binary(x: torch.Tensor, y: torch.Tensor, op: BinaryOp, op_: BinaryOp,
            inplace: bool) -> Workload:
    """The workload of ``op(x, y)``, or of ``op_(x, y)`` (which writes into x) in place.

    In-place ops do not support backward: autograd refuses to modify a leaf that requires grad.
    """
    fn = (lambda: op_(x, y)) if inplace else (lambda: op(x, y))
    return Workload(
        fn=fn,
        flops=float(x.numel()),
        bytes_moved=3 * tensor_bytes(x),
        reference=lambda: op(x.double(), y.double()),
        inputs=(x, y),
        supports_backward=not inplace,
    )
