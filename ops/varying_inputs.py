"""``x * y`` on inputs that change between calls: the GPU-computation tutorial's recompilation
lesson.

The GPU-computation tutorial compiles ``element_wise_mult(A, B)`` and then calls it with int64
tensors (a new
dtype: recompiles), with CPU tensors (a new device: recompiles) and with 2000², 500² and
20000² tensors (a new shape: one recompile into a *dynamic* graph, after which other sizes
reuse it). The runner resets dynamo before and after every trial, so those recompiles have to
happen *inside* one trial: this op builds a few input pairs and each call of ``fn`` uses the
next one, cycling. Under ``compile=default`` the ``recompile_count`` column (graphs dynamo
made after the first call) then counts them; with ``compile_dynamic=true`` a shape change no
longer recompiles, with ``compile_dynamic=false`` every new shape does.

How the cycling stays out of the compiled graph: the pair is picked by a small function
wrapped in ``torch._dynamo.disable``, so dynamo breaks the graph there, runs the pick eagerly,
and compiles the rest (``x * y``) as a function of the two tensors it receives, guarded on
their shape and dtype, exactly like the GPU-computation tutorial's compiled function receiving new
arguments. The
price is one graph break per compiled trial (``graph_break_count`` = 1, and ``fullgraph=true``
fails by design). Had the index lived inside the traced code, dynamo would specialise on its
value and recompile on every call even for ``vary=none``.

Not meant for ``graph=cuda_graph`` or ``graphed_callable``: a captured graph replays the one
pair it saw during capture, which defeats the point (and the accuracy check would compare the
replayed output with a different pair's product).
"""

from __future__ import annotations

from typing import Literal

import torch

from ops.base import OpContext, Workload, tensor_bytes
from ops.common import any_shape

Vary = Literal["none", "shape", "dtype"]

#: Number of input pairs the calls cycle through.
N_PAIRS = 3

#: Float dtypes used by ``vary=dtype`` after the trial's own, in order of preference. All are
#: floating point so that the float64 reference and ``rel_error`` stay meaningful (the
#: GPU-computation tutorial's
#: int64 example would only change the guard, not the lesson).
_OTHER_DTYPES = (torch.float64, torch.float16, torch.bfloat16, torch.float32)

#: Relative-error tolerance of a product in each storage dtype (one rounding per element, so a
#: few units in the last place); a ``vary=dtype`` cycle is held to the loosest one it uses.
_TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 1e-3,
              torch.bfloat16: 1e-2}


def pair_shapes(shape: tuple[int, ...], vary: str) -> list[tuple[int, ...]]:
    """The shape of each pair: ``shape`` three times, or for ``vary=shape`` the shape with its
    first dimension whole, halved and quartered (at least 1; small first dims may repeat)."""
    if vary != "shape":
        return [shape] * N_PAIRS
    first, rest = shape[0], shape[1:]
    return [(max(1, first // div),) + rest for div in (1, 2, 4)]


def pair_dtypes(dtype: torch.dtype, vary: str) -> list[torch.dtype]:
    """The dtype of each pair: the trial's dtype three times, or for ``vary=dtype`` the trial's
    dtype then the first two of float64, float16, bfloat16, float32 that differ from it
    (fp32 trial: fp32, fp64, fp16; fp64 trial: fp64, fp16, bf16; fp16 trial: fp16, fp64, bf16)."""
    if vary != "dtype":
        return [dtype] * N_PAIRS
    others = [d for d in _OTHER_DTYPES if d != dtype]
    return [dtype] + others[:N_PAIRS - 1]


def build(ctx: OpContext, vary: Vary = "none") -> Workload:
    """``x * y`` where successive calls of ``fn`` cycle through three (x, y) pairs.

    ``vary=none``: three pairs of the trial's shape and dtype (distinct tensors, so only the
    tensors change: dynamo must not recompile). ``vary=shape``: the first dimension whole,
    1/2 and 1/4 (:func:`pair_shapes`). ``vary=dtype``: three float dtypes (:func:`pair_dtypes`).
    Values are N(0, 1), drawn in float32 from the trial's generator and cast.

    reference: the runner calls ``reference()`` right before *one* call of ``fn`` and compares
    the two. ``fn`` advances the cycle as it runs, so ``reference`` computes the float64
    product of the pair the *next* call will use (it reads the cycle position without moving
    it). This holds however many calls came before (compile's first call, warm-up): both read
    the same position. For ``vary=dtype`` the tolerance is that of the loosest dtype in the
    cycle; otherwise the runner's default for the trial's dtype applies.

    flops and bytes are those of the *first* pair (numel multiplies; read x and y, write the
    product: 3 · numel · element size). For ``vary=shape`` or ``dtype`` the later pairs are
    smaller or use other element sizes, so TFLOP/s and GB/s are only indicative there, and the
    median time mixes the pairs; the lesson is in ``recompile_count`` and ``compile_time_s``.
    """
    if vary not in ("none", "shape", "dtype"):
        raise ValueError(f"op varying_inputs: vary={vary!r} is not one of none, shape, dtype; "
                         "pass e.g. op.vary=shape")
    shape = any_shape(ctx, "varying_inputs")
    pairs = [(ctx.randn(*s, dtype=d), ctx.randn(*s, dtype=d))
             for s, d in zip(pair_shapes(shape, vary), pair_dtypes(ctx.dtype, vary))]
    position = [0]

    @torch._dynamo.disable
    def next_pair() -> tuple[torch.Tensor, torch.Tensor]:
        pair = pairs[position[0]]
        position[0] = (position[0] + 1) % len(pairs)
        return pair

    def fn() -> torch.Tensor:
        x, y = next_pair()
        return x * y

    def reference() -> torch.Tensor:
        x, y = pairs[position[0]]
        return x.double() * y.double()

    first_x, first_y = pairs[0]
    return Workload(
        fn=fn,
        flops=float(first_x.numel()),
        bytes_moved=3 * tensor_bytes(first_x),
        reference=reference,
        inputs=(first_x, first_y),
        tolerance=(max(_TOLERANCE[x.dtype] for x, _ in pairs) if vary == "dtype" else None),
    )
