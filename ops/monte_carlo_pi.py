"""Monte-Carlo estimate of π, vectorised (the GPU-computation tutorial, ``monte_carlo_pi_pytorch``).

The GPU-computation tutorial uses it to show Python-loop overhead versus vectorised torch versus
``torch.compile``
(which fuses the random draws, squares, compare and sum into one kernel). Drawing the random
numbers inside ``fn`` is the op: the generator's work is part of what is timed.
"""

from __future__ import annotations

import math

import torch

from ops.base import OpContext, Workload
from ops.common import shape_dims

FLOPS_PER_SAMPLE = 9
"""x·2−1 and y·2−1 (4), x² and y² (2), the add (1), the ≤ compare (1), the count (1)."""

TOLERANCE_SIGMAS = 10.0
"""The estimate's standard deviation is 4·sqrt(p(1−p)/n) ≈ 1.64/sqrt(n) with p = π/4; the
statistical part of the tolerance, 10/sqrt(n), is about 6 standard deviations."""


def tolerance(n_samples: int, dtype: torch.dtype) -> float:
    """Allowed |estimate − π|: sampling noise plus the dtype's rounding bias.

    In low precision ``x² + y² <= 1`` rounds sums just above 1 down to 1, counting a ring of
    relative width ≈ eps/2 around the circle as inside: a bias of ≈ π·eps/2 (0.012 in bf16,
    seen as 3.1545 at n = 10⁷). The tolerance allows twice that on top of the noise term.
    """
    return TOLERANCE_SIGMAS / math.sqrt(n_samples) + math.pi * torch.finfo(dtype).eps


def monte_carlo_pi(n_samples: int, generator: torch.Generator, device: torch.device,
                   dtype: torch.dtype) -> torch.Tensor:
    """The tutorial's function, with the trial's generator and dtype passed in."""
    x = torch.rand(n_samples, generator=generator, device=device, dtype=dtype) * 2 - 1
    y = torch.rand(n_samples, generator=generator, device=device, dtype=dtype) * 2 - 1
    inside_circle = (x**2 + y**2 <= 1).sum()
    return 4 * inside_circle.float() / n_samples


def build(ctx: OpContext) -> Workload:
    """π ≈ 4 · (fraction of n uniform points of [−1, 1]² inside the unit circle).

    The draws are made in the storage dtype, as in the tutorial. There is no float64 reference for
    a random result: ``accuracy`` is |estimate − π| and the tolerance is :func:`tolerance`
    (about 6 standard deviations of sampling noise plus the dtype's rounding bias).

    flops = 9 · n (:data:`FLOPS_PER_SAMPLE`; generating the random numbers is not counted).
    bytes = 4: the fused minimum is writing the float32 result, since the samples need never
    reach memory. GB/s is therefore meaningless for this op; it is generator- and launch-bound.
    """
    (n,) = shape_dims(ctx, "monte_carlo_pi", ("n_samples",))
    generator, device, dtype = ctx.generator, ctx.device, ctx.dtype
    return Workload(
        fn=lambda: monte_carlo_pi(n, generator, device, dtype),
        flops=float(FLOPS_PER_SAMPLE * n),
        bytes_moved=4,
        reference=None,
        accuracy=lambda out: abs(out.item() - math.pi),
        tolerance=tolerance(n, dtype),
    )
