"""A big matmul and a train of pinned host→device copies: the CUDA-operations tutorial's streams
example.

The CUDA-operations tutorial runs ``torch.matmul(A, A)`` (A: 10240²) and 100 ``pinned.to("cuda",
non_blocking=True)``
copies of 4096² matrices, first one after the other (1.03 s on a T4), then on a compute stream
and a copy stream (551 ms): the copy engine works while the SMs multiply. The two halves are
exposed as ``parts`` so that ``streams=2`` puts each on its own stream; ``fn`` runs them in
sequence, which is the tutorial's ``sequential_execution``.
"""

from __future__ import annotations

import torch

from ops.base import OpContext, Workload
from ops.common import require_accelerator, shape_dims


def build(ctx: OpContext) -> Workload:
    """Shape [matmul size S, copy size C, n_copies]: ``A[S,S] @ A`` plus n_copies copies of
    pinned host [C, C] matrices to the device.

    The tutorial's ``.to("cuda")`` allocates a fresh device tensor per copy; here every copy
    writes into one destination allocated at build time (stream-ordered, so the writes do not
    race), which keeps the allocator out of the timing and device memory at one C² buffer.
    ``fn`` returns ``(A @ A, destination)``: the destination then holds the last matrix.

    flops = 2·S³. bytes = (2·S² + n_copies·C²) · element size: read A once and write the
    product in device memory, plus the bytes that cross the host–device link (counted once,
    as in the ``copy`` op). The two terms are different memories; the sum is the work's
    total traffic, not a single-bus bandwidth.
    """
    size, copy_size, n_copies = shape_dims(ctx, "copy_compute_overlap",
                                           ("matmul_size", "copy_size", "n_copies"))
    require_accelerator(ctx, "copy_compute_overlap (pinned host memory and host->device "
                        "copies)", "run it with device=cuda")
    a = ctx.randn(size, size)
    host = [ctx.randn(copy_size, copy_size, device="cpu").pin_memory()
            for _ in range(n_copies)]
    dst = torch.empty(copy_size, copy_size, dtype=ctx.dtype, device=ctx.device)

    def matmul_part() -> torch.Tensor:
        return torch.matmul(a, a)

    def copies_part() -> torch.Tensor:
        for matrix in host:
            dst.copy_(matrix, non_blocking=True)
        return dst

    def reference() -> tuple[torch.Tensor, torch.Tensor]:
        a64 = a.double()
        return a64 @ a64, host[-1].double()

    return Workload(
        fn=lambda: (matmul_part(), copies_part()),
        flops=2.0 * size**3,
        bytes_moved=(2 * size * size + n_copies * copy_size * copy_size) * ctx.element_size,
        reference=reference,
        inputs=(a,),
        parts=(matmul_part, copies_part),
    )
