"""The contract between an op and the runner.

An op is a plain function ``build(ctx: OpContext, **params) -> Workload``. It builds its inputs
on ``ctx.device`` and returns a :class:`Workload`: a zero-argument callable plus what the runner
needs to judge the result (FLOP and byte counts, a float64 reference).

Ops never time themselves, synchronise, warm up or pick streams. Everything about *how* a
callable is executed (streams, CUDA graphs, ``torch.compile``, backward) is applied by
``runner.execution.modes`` to any workload, so that every op gets every mode for free and no op can
measure differently from another.

The keyword parameters of ``build`` are the op's parameters. Their defaults live in
``conf/op/<name>.yaml``; their annotations are the schema: a ``Literal[...]`` annotation is a
closed choice, and the runner rejects other values before any trial runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


class TrialSkipped(Exception):
    """Raised by an op (or a mode) for a combination it does not support.

    The runner records the trial as ``status=skipped`` with this message as the reason and
    goes on with the sweep. Say what is unsupported and why, e.g.
    ``"pinned host memory needs a CUDA device; use direction=d2d on cpu"``.
    """


@dataclass(frozen=True)
class OpContext:
    """Everything an op needs to build its inputs for one trial.

    ``dtype`` is the storage dtype (``tf32`` arrives as ``torch.float32``; the runner sets the
    matmul precision around the trial). ``generator`` is seeded from the trial's seed and
    lives on ``device``; draw every random input from it so that a trial is reproducible.
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    generator: torch.Generator
    seed: int = 0
    dtype_name: str = "fp32"

    def randn(self, *size: int, dtype: torch.dtype | None = None,
              device: torch.device | str | None = None) -> torch.Tensor:
        """Normal random tensor drawn from the trial's generator.

        Draws on ``ctx.device`` with the trial's generator. When another device is asked
        for (``host_then_copy``-style ops), the tensor is drawn on the trial device and moved,
        so the same seed gives the same values wherever the tensor ends up.
        """
        out = torch.randn(size, generator=self.generator, device=self.device,
                          dtype=torch.float32)
        out = out.to(dtype or self.dtype)
        if device is not None and torch.device(device) != self.device:
            out = out.to(device)
        return out

    def rand(self, *size: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Uniform [0, 1) random tensor on ``ctx.device`` from the trial's generator."""
        out = torch.rand(size, generator=self.generator, device=self.device,
                         dtype=torch.float32)
        return out.to(dtype or self.dtype)

    @property
    def element_size(self) -> int:
        """Bytes per element of the storage dtype."""
        return torch.empty((), dtype=self.dtype).element_size()


def relative_error(output: Any, reference: Any) -> float:
    """‖output − reference‖ / ‖reference‖, computed in float64.

    Both sides may be tensors or (nested) sequences of tensors; they are flattened and
    concatenated. A zero reference falls back to the absolute error. NaN or inf in the output
    gives ``inf``, so it can never pass a tolerance.
    """
    out = _flatten(output)
    ref = _flatten(reference)
    if out.numel() != ref.numel():
        raise ValueError(
            f"accuracy check: output has {out.numel()} elements but the reference has "
            f"{ref.numel()}; the op's reference must compute the same result as its callable")
    out = out.to(ref.device)
    if not torch.isfinite(out).all():
        return float("inf")
    diff = torch.linalg.vector_norm(out - ref).item()
    scale = torch.linalg.vector_norm(ref).item()
    return diff / scale if scale > 0 else diff


def _flatten(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach().reshape(-1).to(torch.float64)
    if isinstance(value, (list, tuple)):
        parts = [_flatten(v) for v in value]
        if not parts:
            return torch.zeros(0, dtype=torch.float64)
        device = parts[0].device
        return torch.cat([p.to(device) for p in parts])
    if isinstance(value, (int, float)):
        return torch.tensor([float(value)], dtype=torch.float64)
    raise TypeError(f"cannot compare a {type(value).__name__} for accuracy; "
                    "return tensors (or lists of tensors) from the op and its reference")


@dataclass(frozen=True)
class Workload:
    """One op instance, ready to run: a zero-argument callable and how to judge it.

    fn
        The zero-argument callable that is timed. It returns its output (a tensor or a
        sequence of tensors), which the runner compares against ``reference``.
    flops
        Floating-point operations of one call of ``fn``. ``None`` lets the runner count them
        with ``torch.utils.flop_counter.FlopCounterMode`` (which only sees matmul-like ops).
    bytes_moved
        The fewest bytes one call must move through memory: each input read once plus each
        output written once. Used for GB/s and arithmetic intensity.
    reference
        Zero-argument callable computing the same result in float64 from the *same* inputs
        (as they are when it is called). ``None`` when there is nothing to compare against.
    inputs
        The leaf tensors ``fn`` reads. Backward mode sets ``requires_grad`` on the floating
        ones; ``graphed_callable`` passes them as the static sample args.
    module
        An ``nn.Module`` called by ``fn``, when there is one: its parameters also get grads in
        backward mode, and ``graphed_callable`` graphs the module itself.
    parts
        For composite ops only: independent pieces of work (zero-argument callables) that
        ``streams=N`` spreads over N streams. Ordinary ops leave it empty, and ``streams=N``
        runs N independent copies of the op instead.
    accuracy
        Optional ``(output) -> float`` replacing the reference comparison, for ops whose
        error is not a distance to a float64 result (e.g. a Monte-Carlo estimate of π).
    tolerance
        Optional accuracy tolerance overriding the runner's per-dtype default.
    supports_backward
        Whether ``backward=true`` makes sense for this op.
    extra
        Op-specific measurements to record as ``extra_<key>`` columns (e.g. allocator bytes).
    """

    fn: Callable[[], Any]
    bytes_moved: float
    flops: float | None = 0.0
    reference: Callable[[], Any] | None = None
    inputs: tuple[torch.Tensor, ...] = ()
    module: torch.nn.Module | None = None
    parts: Sequence[Callable[[], Any]] = ()
    accuracy: Callable[[Any], float] | None = None
    tolerance: float | None = None
    supports_backward: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def tensor_bytes(*tensors: torch.Tensor) -> int:
    """Total storage bytes of the given tensors (numel × element size)."""
    return sum(t.numel() * t.element_size() for t in tensors)
