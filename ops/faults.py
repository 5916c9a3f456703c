"""User functions that misbehave on purpose, for ``op=custom``: they prove that a trial which
kills, poisons or hangs its worker process is a row and the sweep goes on
(``runner.execution.worker``). Never use them for measurements.

``op.target=ops.faults:exits`` ends the process (``os._exit``), ``ops.faults:sleeps`` hangs
on the host, ``ops.faults:device_assert`` triggers a CUDA device-side assert (an
out-of-range gather), ``ops.faults:gpu_spin`` keeps the GPU busy for ``SPIN_S`` seconds, and
``ops.faults:oom`` asks for far more device memory than exists. Each returns its input
untouched on meta tensors, which ``ops.custom`` uses to size the outputs.
"""

from __future__ import annotations

import os
import time

import torch

#: seconds ``sleeps`` and ``gpu_spin`` take per call
SPIN_S = float(os.environ.get("OPSWEEP_FAULT_SPIN_S", "60"))


def exits(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``os._exit(3)``: the process ends with no exception and no clean-up."""
    if x.device.type != "meta":
        os._exit(3)
    return x


def sleeps(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Sleep ``SPIN_S`` seconds on the host: a hung trial."""
    if x.device.type != "meta":
        time.sleep(SPIN_S)
    return x


def device_assert(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """An out-of-range gather: on CUDA a device-side assert that poisons the context."""
    if x.device.type == "meta":
        return x
    index = torch.full_like(x, x.shape[-1] * 1000, dtype=torch.int64)
    out = torch.gather(x, -1, index)
    if x.device.type == "cuda":
        torch.cuda.synchronize(x.device)
    return out


def gpu_spin(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Keep the GPU busy for ``SPIN_S`` seconds (``torch.cuda._sleep``): a hung kernel."""
    if x.device.type == "cuda":
        cycles = int(SPIN_S * torch.cuda.get_device_properties(x.device).clock_rate * 1e3)
        torch.cuda._sleep(cycles)
        torch.cuda.synchronize(x.device)
    return x


def oom(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Ask for 1 PiB on the device: an out-of-memory error (recoverable, unlike the others)."""
    if x.device.type == "meta":
        return x
    return torch.empty(1 << 50, dtype=torch.uint8, device=x.device)[: x.numel()].view_as(x)


def returns_none(x: torch.Tensor, y: torch.Tensor) -> None:
    """Does nothing measurable: must be an error row, never a timed no-op."""
    return None


def returns_int(x: torch.Tensor, y: torch.Tensor) -> int:
    """Returns a Python number: must be an error row, never a timed no-op."""
    return 1
