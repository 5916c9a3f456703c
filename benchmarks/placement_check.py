"""Does an L2-resident op's time depend on where its bytes live? One process, K placements:

    python benchmarks/placement_check.py [--rows 1024] [--cols 4096] [--placements 8]
    python benchmarks/placement_check.py --op matmul --rows 256 --cols 256 --dtype fp32

Each placement is the same layer_norm (or a matmul of rows×cols by cols×cols) on its own
inputs, allocated while
the earlier placements stay alive (and a pad between them), so each lands on other memory.
Each is captured as one CUDA graph of ``--calls`` calls. Rounds visit every placement in
turn; a placement's timed replay follows one untimed replay of itself, so its bytes are in
L2 when the timed one starts, as in a warm trial. Prints each placement's median µs per
call, the spread between placements (max over min, minus one) and each one's spread over
its own rounds. Torch only: it checks the device, not opsweep.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def placement(args: argparse.Namespace) -> tuple[torch.cuda.CUDAGraph, list]:
    """One placement: its tensors (kept alive by the caller), a pad after them, its graph."""
    dtype, rows, cols = DTYPES[args.dtype], args.rows, args.cols
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    if args.op == "matmul":
        w = torch.randn(cols, cols, device="cuda", dtype=dtype)
        tensors = [x, w]

        def call() -> torch.Tensor:
            return x @ w
    else:
        w = torch.randn(cols, device="cuda", dtype=dtype)
        b = torch.randn(cols, device="cuda", dtype=dtype)
        tensors = [x, w, b]

        def call() -> torch.Tensor:
            return F.layer_norm(x, (cols,), w, b)
    pad = torch.empty(args.pad_mib << 20, dtype=torch.uint8, device="cuda")
    call()  # warm the kernel choice before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(args.calls):
            call()
    return graph, [*tensors, pad]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=("layer_norm", "matmul"), default="layer_norm")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="fp32")
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--placements", type=int, default=8)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--pad-mib", type=int, default=7)
    args = parser.parse_args()
    held = [placement(args) for _ in range(args.placements)]
    times_us: list[list[float]] = [[] for _ in held]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(args.rounds):
        for index, (graph, _) in enumerate(held):
            graph.replay()  # untimed: brings this placement's bytes into L2
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times_us[index].append(start.elapsed_time(end) * 1e3 / args.calls)
    medians = [statistics.median(t) for t in times_us]
    for index, (t, (_, tensors)) in enumerate(zip(times_us, held)):
        own = max(t) / min(t) - 1
        print(f"placement {index}: x at {tensors[0].data_ptr():#x}: median {medians[index]:.3f} "
              f"µs, own rounds {100 * own:.2f}%")
    spread = max(medians) / min(medians) - 1
    print(f"{args.op} {args.rows}x{args.cols} {args.dtype}, {args.placements} placements: "
          "median of medians "
          f"{statistics.median(medians):.3f} µs, spread {100 * spread:.2f}%")


if __name__ == "__main__":
    main()
