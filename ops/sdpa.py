"""Scaled dot-product attention through ``F.scaled_dot_product_attention``.

The fused attention kernels (flash / memory-efficient) are the clearest case of the
graphed-callables tutorial's
"native fused kernels": the [seq, seq] score matrix never reaches memory.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import shape_dims


def attention_float64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      causal: bool) -> torch.Tensor:
    """softmax(Q Kᵀ / sqrt(d) [+ causal mask]) V, written out in float64."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        seq_q, seq_k = scores.shape[-2:]
        future = torch.ones(seq_q, seq_k, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def build(ctx: OpContext, causal: bool = False) -> Workload:
    """``F.scaled_dot_product_attention(q, k, v, is_causal=causal)``, q/k/v [b, h, s, d].

    flops = 4·b·h·s²·d (Q Kᵀ and P V, 2·s²·d each per head), halved when causal since half the
    scores are masked (the convention of FlashAttention's benchmarks). The softmax (O(s²) per
    head, not O(s²·d)) is not counted.
    bytes = 4·b·h·s·d · element size: read q, k and v, write the output.
    """
    batch, heads, seq, head_dim = shape_dims(ctx, "sdpa", ("batch", "heads", "seq", "head_dim"))
    q, k, v = (ctx.randn(batch, heads, seq, head_dim) for _ in range(3))
    flops = 4.0 * batch * heads * seq * seq * head_dim
    return Workload(
        fn=lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        flops=flops / 2 if causal else flops,
        bytes_moved=tensor_bytes(q, k, v) + tensor_bytes(q),
        reference=lambda: attention_float64(q, k, v, causal),
        inputs=(q, k, v),
        supports_backward=True,
    )
