"""The op's side of a trial: its workloads built on the device, their FLOPs counted, and one
call of the composed callable checked against the op's reference.

Each runs at a fixed point of the trial's order (``runner.execution.trial._measure_trial``
says which, and why); none of them is timed.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ops.base import OpContext, Workload, relative_error
from runner.config.ops import resolve_target
from runner.config.trials import TrialSpec
from runner.execution import modes
from runner.execution.context import DEFAULT_TOLERANCE, TORCH_DTYPES

#: The op's builder by its target, imported once per process (a worker runs many trials).
builder = functools.lru_cache(maxsize=None)(resolve_target)


def build_workloads(spec: TrialSpec, device: torch.device) -> list[Workload]:
    """One workload, or ``streams`` independent ones (seeds seed, seed+1, ...) for an op
    without parts."""
    build_op = builder(spec.target)

    def build(offset: int) -> Workload:
        generator = torch.Generator(device=device)
        generator.manual_seed(spec.seed + offset)
        ctx = OpContext(shape=spec.shape, dtype=TORCH_DTYPES[spec.dtype], device=device,
                        generator=generator, seed=spec.seed + offset,
                        dtype_name=spec.dtype.value)
        workload = build_op(ctx, **spec.params_dict)
        if not isinstance(workload, Workload):
            raise TypeError(f"op '{spec.op}' ({spec.target}) returned "
                            f"{type(workload).__name__}; an op must return ops.base.Workload")
        return workload

    first = build(0)
    if spec.streams == 1 or first.parts:
        return [first]
    return [first] + [build(i) for i in range(1, spec.streams)]


def build_checked(spec: TrialSpec, device: torch.device) -> list[Workload]:
    """:func:`build_workloads`, then the checks before the op is called: an unsupported mode
    is a skip (``modes.check_supported``), and backward makes the leaves require grad before
    anything is counted or composed."""
    workloads = build_workloads(spec, device)
    modes.check_supported(spec, workloads[0])
    for workload in workloads if spec.backward else ():
        modes.enable_grads(workload)
    return workloads


def count_flops(workload: Workload, backward: bool) -> float | None:
    """The op's FLOPs per call; counted with ``FlopCounterMode`` (one eager call) when the op
    gives none, and always in backward mode, where the op's forward formula does not apply.
    FlopCounterMode only sees matmul-like ops: a count of 0 is recorded as unknown."""
    if workload.flops is not None and not backward:
        return float(workload.flops)
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        out = workload.fn()
        if backward and isinstance(out, torch.Tensor) and out.requires_grad:
            out.backward(torch.ones_like(out))
    for leaf in modes.grad_leaves(workload):  # the counted call's grads: not the timed ones'
        leaf.grad = None
    total = counter.get_total_flops()
    return float(total) if total else None


def accuracy(spec: TrialSpec, workloads: list[Workload],
             prepared: modes.Prepared) -> dict[str, Any]:
    """The worst relative error of one call of the composed callable against the float64
    reference of the inputs as they are now, and whether it is within tolerance."""
    with torch.no_grad():
        references = [w.reference() if w.reference is not None else None for w in workloads]
    result = prepared.fn()
    # The call may still be running (or, for a d2h copy into pinned memory, still writing
    # host memory): wait before reading its output.
    device = torch.device(spec.device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    outputs = prepared.split(result)
    errors = []
    for workload, reference, output in zip(workloads, references, outputs):
        if workload.accuracy is not None:
            errors.append(float(workload.accuracy(output)))
        elif reference is not None:
            errors.append(relative_error(output, reference))
    del references, outputs
    tolerance = workloads[0].tolerance or DEFAULT_TOLERANCE[spec.dtype]
    if not errors:
        return {"rel_error": None, "rel_error_tol": None, "accuracy_ok": None}
    worst = max(errors)
    return {"rel_error": worst, "rel_error_tol": tolerance, "accuracy_ok": worst <= tolerance}
