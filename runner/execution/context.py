"""Process-wide PyTorch settings that belong to one trial, applied and restored around it.

Matmul precision and the intra-op thread count are global in PyTorch. A trial that changed
them and did not put them back would silently change the numbers of every later trial in the
job, so they are only ever set through :func:`trial_settings`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from runner.core.axes import DType

TORCH_DTYPES: dict[DType, torch.dtype] = {
    DType.fp64: torch.float64,
    DType.fp32: torch.float32,
    DType.tf32: torch.float32,
    DType.fp16: torch.float16,
    DType.bf16: torch.bfloat16,
}

#: ``torch.set_float32_matmul_precision`` value per dtype. Only tf32 may use TF32 tensor
#: cores; fp32 pins "highest" so an fp32 number never quietly means tf32.
MATMUL_PRECISION: dict[DType, str] = {dtype: "highest" for dtype in DType} | {DType.tf32: "high"}

#: Default accuracy tolerance (relative L2 error against float64) per dtype: a few ulps of
#: accumulated rounding for the format, as in METHOD.md (tf32 near 3e-4, bf16 1e-3..1e-2).
DEFAULT_TOLERANCE: dict[DType, float] = {
    DType.fp64: 1e-9,
    DType.fp32: 1e-4,
    DType.tf32: 5e-3,
    DType.fp16: 1e-2,
    DType.bf16: 5e-2,
}


@contextlib.contextmanager
def trial_settings(dtype: DType, num_threads: int | None) -> Iterator[None]:
    """Set matmul precision and thread count for one trial; restore them afterwards."""
    old_precision = torch.get_float32_matmul_precision()
    old_cudnn_tf32 = torch.backends.cudnn.allow_tf32
    old_threads = torch.get_num_threads()
    try:
        torch.set_float32_matmul_precision(MATMUL_PRECISION[dtype])
        torch.backends.cudnn.allow_tf32 = dtype is DType.tf32
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        yield
    finally:
        torch.set_float32_matmul_precision(old_precision)
        torch.backends.cudnn.allow_tf32 = old_cudnn_tf32
        torch.set_num_threads(old_threads)
