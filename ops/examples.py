"""Example user functions for ``op=custom`` (``op.target=ops.examples:gelu_mul``).

They double as test fixtures: ``always_fails`` proves that an exception inside a benchmarked
function becomes an error row rather than ending the sweep.
"""

from __future__ import annotations

import torch


def gelu_mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``gelu(x) * y``: a two-kernel pointwise function that ``torch.compile`` can fuse."""
    return torch.nn.functional.gelu(x) * y


def always_fails(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Raise on every call, to test how the runner records a failing op."""
    raise RuntimeError("ops.examples.always_fails: this example function fails on purpose")
