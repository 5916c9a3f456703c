"""Helpers shared by the op builders: shape unpacking, device checks and seeded modules.

Every builder validates its shape the same way and builds its modules the same way, so the
error messages and the initialisation live here once rather than in each op.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ops.base import OpContext, TrialSkipped


def shape_dims(ctx: OpContext, op: str, names: Sequence[str]) -> tuple[int, ...]:
    """Return ``ctx.shape`` as ``len(names)`` positive ints, or raise ``ValueError``.

    ``names`` is the meaning of each dimension (e.g. ``("M", "N", "K")``); it is only used
    to say what was expected when the shape does not fit.
    """
    shape = tuple(ctx.shape)
    if len(shape) != len(names):
        raise ValueError(
            f"op {op}: shape {list(shape)} has {len(shape)} dims but {op} expects "
            f"{len(names)}: [{', '.join(names)}]; pass e.g. shape=[{','.join('8' for _ in names)}]")
    _check_positive(op, shape, names)
    return tuple(int(d) for d in shape)


def any_shape(ctx: OpContext, op: str) -> tuple[int, ...]:
    """Return ``ctx.shape`` for ops that take any rank >= 1, or raise ``ValueError``."""
    shape = tuple(ctx.shape)
    if not shape:
        raise ValueError(f"op {op}: got an empty shape; {op} needs at least one dimension, "
                         "e.g. shape=[1024]")
    _check_positive(op, shape, [f"dim{i}" for i in range(len(shape))])
    return tuple(int(d) for d in shape)


def _check_positive(op: str, shape: tuple[Any, ...], names: Sequence[str]) -> None:
    for name, dim in zip(names, shape, strict=True):
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"op {op}: shape dimension {name}={dim!r} must be a positive "
                             f"integer (shape was {list(shape)})")


def require_positive(op: str, name: str, value: int) -> None:
    """Raise ``ValueError`` unless the integer parameter ``value`` is at least 1."""
    if value < 1:
        raise ValueError(f"op {op}: {name}={value} must be >= 1; pass e.g. op.{name}=1")


def require_accelerator(ctx: OpContext, what: str, fix: str) -> None:
    """Raise :class:`TrialSkipped` when the trial runs on the CPU.

    ``what`` says what needs a device (``"pinned host memory"``), ``fix`` what to run instead.
    """
    if ctx.device.type == "cpu":
        raise TrialSkipped(f"{what} needs an accelerator device but this trial runs on cpu; "
                           f"{fix}")


def scaled_randn(ctx: OpContext, *size: int, fan_in: int) -> torch.Tensor:
    """Normal random tensor divided by ``sqrt(fan_in)``.

    Weights of this scale keep each layer's output near unit variance, so that chains of
    layers neither overflow fp16/bf16 nor underflow into denormals (which are slow on CPUs
    and would skew the timing rather than the numbers).
    """
    return ctx.randn(*size) / math.sqrt(fan_in)


class _UninitialisedLinear(torch.nn.Linear):
    """``nn.Linear`` whose parameters are allocated but not initialised: the trial's
    generator fills them (:func:`seeded_linear`)."""

    def reset_parameters(self) -> None:
        """Nothing: PyTorch's default initialisation would draw from the global RNG (not the
        trial's), and its values would be overwritten at once."""


def seeded_linear(ctx: OpContext, in_features: int, out_features: int,
                  bias: bool) -> torch.nn.Linear:
    """An ``nn.Linear`` on ``ctx.device``/``ctx.dtype`` whose weights come from ``ctx.randn``.

    Not ``torch.nn.utils.skip_init``: it builds the module on the meta device, and its first
    ``to_empty`` in a process imported about 500 modules of PyTorch, 0.35-0.7 s on a CPU and
    1.8-2.9 s on a GPU host beside other workers, inside the first ``linear`` or ``mlp`` trial
    of every worker (docs/timing.md#what-a-trial-costs). Parameters are created with
    ``requires_grad=False`` so that a forward-only trial does not record an autograd graph;
    the runner's backward mode turns gradients on for ``Workload.module``'s parameters.
    """
    layer = _UninitialisedLinear(in_features, out_features, bias=bias, device=ctx.device,
                                 dtype=ctx.dtype)
    with torch.no_grad():
        layer.weight.copy_(scaled_randn(ctx, out_features, in_features, fan_in=in_features))
        if layer.bias is not None:
            layer.bias.copy_(ctx.randn(out_features))
    layer.requires_grad_(False)
    return layer


def as_float64(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """The tensors as detached float64 (a copy unless already float64), for references.

    References only read these, so sharing storage with a float64 input is safe.
    """
    return [t.detach().double() for t in tensors]
