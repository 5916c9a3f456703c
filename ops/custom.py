"""Benchmark any user function: ``op=custom op.target=pkg.module:function``.

The function receives ``n_inputs`` random tensors of the trial's shape, dtype and device and
returns a tensor (or a sequence of tensors). Its float64 reference is the same function applied
to float64 copies of the inputs, so it must accept float64 tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import any_shape, as_float64, require_positive
from runner.core.targets import locate

AUTO = -1.0
"""Sentinel for ``flops``/``bytes_moved``: count automatically (params are scalars, no None)."""


def resolve_target(target: str) -> Callable[..., Any]:
    """Import ``"pkg.module:function"`` or ``"pkg.module.function"`` and return the callable.

    The rules (and the errors, ``ValueError``s naming ``op.target``) are
    :func:`runner.core.targets.locate`'s.
    """
    if not target:
        raise ValueError("op custom: no function to benchmark; pass "
                         "op.target=pkg.module:function (e.g. op.target=ops.examples:gelu_mul)")
    return locate(target, "op.target")


def build(ctx: OpContext, target: str = "", n_inputs: int = 2, flops: float = AUTO,
          bytes_moved: float = AUTO) -> Workload:
    """``func(*inputs)`` for ``func = resolve_target(target)`` and ``n_inputs`` N(0,1) tensors.

    flops: ``-1`` (default) lets the runner count them (``Workload.flops=None``, which only
    sees matmul-like ops); otherwise the given number per call.
    bytes_moved: ``-1`` (default) counts the inputs plus the outputs of one call. The outputs'
    sizes come from calling ``func`` once on *meta* tensors (shapes only: nothing is computed
    or warmed up). A function that cannot run on meta tensors (``.item()``, numpy, a deliberate
    error) falls back to the inputs alone, and ``extra['bytes_moved_source']`` says which was
    used; pass ``op.bytes_moved=<bytes>`` to set it exactly.

    Backward mode differentiates through ``func``; a function autograd cannot differentiate
    fails that trial with autograd's own error.
    """
    func = resolve_target(target)
    require_positive("custom", "n_inputs", n_inputs)
    for name, value in (("flops", flops), ("bytes_moved", bytes_moved)):
        if value < 0 and value != AUTO:
            raise ValueError(f"op custom: {name}={value} is negative; pass a count >= 0, "
                             f"or -1 to count automatically")
    shape = any_shape(ctx, "custom")
    inputs = tuple(ctx.randn(*shape) for _ in range(n_inputs))
    # A function that returns no tensor (None, a Python number) does no measurable device work:
    # timing it would record a no-op as if it were the op, and its "accuracy" would compare
    # two numbers. One call here (a warm-up call the timer would make anyway) rejects it; a
    # call that raises is left for the timed path to report, as it would without this check.
    try:
        first = func(*inputs)
    except Exception:
        first = inputs
    if not _tensors_in(first):
        raise TypeError(f"op custom: op.target={target!r} returned no tensor; a benchmarked "
                        "function must return a tensor (or a sequence of tensors)")
    extra: dict[str, Any] = {}
    if bytes_moved == AUTO:
        out_bytes = _meta_output_bytes(func, inputs)
        extra["bytes_moved_source"] = "inputs_only" if out_bytes is None else "meta"
        bytes_moved = float(tensor_bytes(*inputs) + (out_bytes or 0))
    else:
        extra["bytes_moved_source"] = "given"
    return Workload(
        fn=lambda: func(*inputs),
        flops=None if flops == AUTO else float(flops),
        bytes_moved=bytes_moved,
        reference=lambda: func(*as_float64(*inputs)),
        inputs=inputs,
        supports_backward=True,
        extra=extra,
    )


def _meta_output_bytes(func: Callable[..., Any], inputs: tuple[torch.Tensor, ...]) -> int | None:
    """Bytes of ``func``'s outputs, found by running it on meta tensors; None if it cannot."""
    try:
        out = func(*(torch.empty_like(t, device="meta") for t in inputs))
    except Exception:  # any failure only means "size unknown": fn reports the real error
        return None
    return tensor_bytes(*_tensors_in(out))


def _tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_in(v)]
    return []
