"""Column sums of a matrix stored row-major or as a transposed view (the CUDA 101 tutorial, lesson
7).

The CUDA 101 tutorial sums ``x.T`` over dim 0, once as the strided view and once after
``.contiguous()``,
and finds (against its own advice) that the view is faster: summing dim 0 of ``x.T`` is a
reduction along x's contiguous rows. The tutorial also times the ``.contiguous()`` copy inside
the "good" variant; here the copy is made at build time, so both layouts time only the sum.
"""

from __future__ import annotations

from typing import Literal

import torch

from ops.base import OpContext, Workload
from ops.common import shape_dims

Layout = Literal["contiguous", "transposed"]


def build(ctx: OpContext, layout: Layout = "contiguous") -> Workload:
    """``v.sum(dim=0)`` for a logical [R, C] matrix ``v``; output shape [C].

    The values come from one draw ``x`` of shape [C, R], so both layouts sum the same numbers:
    ``layout=transposed`` reads ``v = x.T`` (strides (1, R), a view taken inside ``fn`` so that
    the leaf tensor is ``x``); ``layout=contiguous`` reads ``x.T.contiguous()`` (strides (C, 1)),
    copied once at build time.

    flops = R·C (one add per element read; the exact count is (R−1)·C, the convention for
    reductions counts every element). bytes = (R·C + C) · element size.
    """
    if layout not in ("contiguous", "transposed"):
        raise ValueError(f"op sum: layout={layout!r} is not 'contiguous' or 'transposed'; "
                         "pass e.g. op.layout=transposed")
    rows, cols = shape_dims(ctx, "sum", ("R", "C"))
    x = ctx.randn(cols, rows)
    if layout == "transposed":
        leaf = x

        def fn() -> torch.Tensor:
            return torch.sum(leaf.T, dim=0)
    else:
        leaf = x.T.contiguous()
        del x  # keep only the copy alive: the trial should hold one R x C matrix, not two

        def fn() -> torch.Tensor:
            return torch.sum(leaf, dim=0)

    def reference() -> torch.Tensor:
        view = leaf.T if layout == "transposed" else leaf
        return view.double().sum(dim=0)

    return Workload(
        fn=fn,
        flops=float(rows * cols),
        bytes_moved=(rows * cols + cols) * ctx.element_size,
        reference=reference,
        inputs=(leaf,),
        supports_backward=True,
    )
