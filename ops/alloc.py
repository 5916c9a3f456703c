"""Short-lived allocations through PyTorch's caching allocator (the CUDA-operations tutorial,
"Memory allocation").

The CUDA-operations tutorial allocates ``torch.empty(4096, cols)`` inside a function (so it is
freed on return)
for cols = 2048, then 1024, then 3072, and watches ``memory_reserved``: the 1024-column tensor
reuses the cached 32 MiB block, the 3072-column one does not fit and a second segment is
reserved (80 MiB in all). This op repeats that sequence and times it.
"""

from __future__ import annotations

from typing import Any

import torch

from ops.base import OpContext, Workload
from ops.common import shape_dims


def column_sequence(max_cols: int) -> tuple[int, ...]:
    """The tutorial's widths scaled to ``max_cols``: 2/3, 1/3, then all of it (2048, 1024, 3072).

    Medium, then smaller (fits the cached block), then larger (does not): the order is the
    lesson, so it is kept for any ``max_cols``. Widths are at least one column.
    """
    return (max(1, 2 * max_cols // 3), max(1, max_cols // 3), max_cols)


def build(ctx: OpContext) -> Workload:
    """Shape [rows, max_cols]: allocate ``torch.empty(rows, cols)`` for each width of
    :func:`column_sequence` and drop it at once; ``fn`` returns ``()`` (there is no output).

    On a CUDA device the first call records ``memory_allocated`` and ``memory_reserved`` into
    ``extra`` (``allocated_bytes_step<i>_cols<cols>`` and ``reserved_bytes_step<i>_cols<cols>``,
    read while the i-th tensor is alive). Those are host-side counters (no synchronisation),
    but reading them makes the first call slower, which the runner's warm-up absorbs. The
    numbers depend on what the process had cached before the trial, so compare them within a
    run. On other devices nothing is recorded.

    flops = 0, bytes = 0: ``torch.empty`` neither computes nor touches the memory it returns.
    """
    rows, max_cols = shape_dims(ctx, "alloc", ("rows", "max_cols"))
    widths = column_sequence(max_cols)
    device, dtype = ctx.device, ctx.dtype
    extra: dict[str, Any] = {}
    pending = [device.type == "cuda"]  # record on the first call only, and only on CUDA

    def fn() -> tuple[()]:
        for step, cols in enumerate(widths, start=1):
            block = torch.empty(rows, cols, dtype=dtype, device=device)
            if pending[0]:
                tag = f"step{step}_cols{cols}"
                extra[f"allocated_bytes_{tag}"] = torch.cuda.memory_allocated(device)
                extra[f"reserved_bytes_{tag}"] = torch.cuda.memory_reserved(device)
            del block  # freed here, like the tutorial's function-local tensor
        pending[0] = False
        return ()

    return Workload(fn=fn, flops=0.0, bytes_moved=0, reference=None, extra=extra)
