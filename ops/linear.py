"""``nn.Linear`` applied to a batch (the CUDA-operations tutorial, "Benchmarking GPU code").

The CUDA-operations tutorial times ``torch.nn.Linear(512, 1024, bias=False)`` on ``x[10000, 512]``
to show that
an unsynchronised timer measures launch time, not work. This op is that module, seeded.
"""

from __future__ import annotations

import torch

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import seeded_linear, shape_dims


def build(ctx: OpContext, bias: bool = False) -> Workload:
    """``linear(x)`` with ``x`` of shape [N, IN] and ``linear = nn.Linear(IN, OUT, bias)``.

    The module lives on ``ctx.device`` in ``ctx.dtype``; its weight is ``randn / sqrt(IN)``
    from the trial's generator (and its bias, if any, ``randn``), so a trial is reproducible.

    flops = 2·N·IN·OUT, plus N·OUT for the bias add when ``bias`` is set.
    bytes = (N·IN + OUT·IN + N·OUT [+ OUT]) · element size: input, weight, output (and bias).
    """
    n, in_features, out_features = shape_dims(ctx, "linear", ("N", "IN", "OUT"))
    layer = seeded_linear(ctx, in_features, out_features, bias)
    x = ctx.randn(n, in_features)

    def reference() -> torch.Tensor:
        out = x.double() @ layer.weight.double().T
        return out + layer.bias.double() if layer.bias is not None else out

    flops = 2.0 * n * in_features * out_features + (n * out_features if bias else 0)
    params = tuple(layer.parameters())
    return Workload(
        fn=lambda: layer(x),
        flops=flops,
        bytes_moved=tensor_bytes(x, *params) + n * out_features * ctx.element_size,
        reference=reference,
        inputs=(x,),
        module=layer,
        supports_backward=True,
    )
