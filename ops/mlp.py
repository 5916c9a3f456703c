"""A stack of square ``Linear`` + activation layers: a small model for the execution modes.

Used by the execution-modes experiments (CUDA graphs, ``torch.compile``, streams) as the
smallest workload that is a real ``nn.Module`` with several kernels per call.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import require_positive, seeded_linear, shape_dims

Activation = Literal["relu", "gelu"]

_MODULES: dict[str, type[torch.nn.Module]] = {"relu": torch.nn.ReLU, "gelu": torch.nn.GELU}
_FUNCTIONS = {"relu": F.relu, "gelu": F.gelu}


def build(ctx: OpContext, layers: int = 4, activation: Activation = "gelu") -> Workload:
    """``layers`` × (``Linear(width, width, bias=False)`` → activation) on ``x[batch, width]``.

    Weights are ``randn / sqrt(width)`` from the trial's generator, which keeps activations
    O(1) through the stack in every dtype.

    flops = 2·batch·width²·layers: the matmuls only. Activations (batch·width per layer) are
    left out, the usual convention for model FLOPs, and the layers have no bias so nothing
    else is omitted.
    bytes = (2·batch·width + layers·width²) · element size: read the input and every weight
    once, write the output; intermediate activations could stay on chip in a fused kernel.
    """
    if activation not in _MODULES:
        raise ValueError(f"op mlp: activation={activation!r} is not one of "
                         f"{sorted(_MODULES)}; pass e.g. op.activation=gelu")
    require_positive("mlp", "layers", layers)
    batch, width = shape_dims(ctx, "mlp", ("batch", "width"))
    linears = [seeded_linear(ctx, width, width, bias=False) for _ in range(layers)]
    model = torch.nn.Sequential(*(m for lin in linears for m in (lin, _MODULES[activation]())))
    x = ctx.randn(batch, width)
    act = _FUNCTIONS[activation]

    def reference() -> torch.Tensor:
        h = x.double()
        for lin in linears:
            h = act(h @ lin.weight.double().T)
        return h

    return Workload(
        fn=lambda: model(x),
        flops=2.0 * batch * width * width * layers,
        bytes_moved=tensor_bytes(x, *model.parameters()) + batch * width * ctx.element_size,
        reference=reference,
        inputs=(x,),
        module=model,
        supports_backward=True,
    )
