"""Does a small op's device time depend on how much memory its process holds? One call on a
CUDA machine:

    python benchmarks/footprint_check.py --out DIR

For each case (a matmul ``dtype:size``), a fresh process captures one CUDA graph of 512 calls
and times its replays (``graph_replays.replay_us``), then allocates ``--step-mb`` more device
memory at a time, kept and written, up to ``--max-mb``, timing the same graph after each
step; last, it times a graph captured anew, and 8 more, one after another. The first graph,
its inputs and its output never move: only the rest of the process's memory grows. On an
H100 a process's first graph ran bf16 256³ at 2.43 µs per call and every graph captured
later at 2.60 µs; fp32 256³'s first graph read 6.26 µs, then 6.61 µs once its process had
reserved ~230 MiB (docs/timing.md#a-small-ops-time-and-its-processs-memory). Two processes
that allocate alike agree; a process that allocates otherwise (an outside reference, a
user's model) can meet the op in another state.

``--prior-graphs N``: each process first captures N throwaway graphs, as an opsweep worker does
(``runner.timing.graph_state.settle_graph_state``). Writes DIR/footprint_prior<N>.json;
the tables come last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

CASES = ("fp32:256", "fp32:512", "bf16:256", "bf16:512", "fp16:256", "fp16:512", "tf32:256",
         "tf32:512", "fp32:1024", "tf32:1024")
#: Calls in the one graph each case times: on the plateau for these ops (graph_size_check.py).
CALLS = 512
#: A step's time moved when it is this far from the first one's.
MOVED_SHARE = 0.01
#: Graphs captured at the end of each case, each timed once.
CAPTURES = 8


def one_case(case: str, step_mb: int, max_mb: int, prior_graphs: int) -> dict:
    """The case's µs per call at each footprint (MiB reserved by the process), in this
    process, after ``prior_graphs`` throwaway graphs; see the module docstring."""
    import torch
    from graph_replays import per_call_us, replay_us
    from long_reference import matmul_inputs

    from runner.timing.cuda_device import capture_graph, settle_graph_state

    dtype, size = case.split(":")
    a, b = matmul_inputs(int(size), dtype, "cuda:0")
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"

    def reserved_mb() -> float:
        return torch.cuda.memory_reserved() / 2**20

    if prior_graphs:  # what an opsweep worker does before its first trial
        settle_graph_state(torch.device("cuda"), prior_graphs)
    replay, _, _ = capture_graph(lambda: a @ b, torch.device("cuda"), CALLS)
    replay_us(replay, CALLS, 0.2)  # warms the graph and the clock
    series = [(reserved_mb(), replay_us(replay, CALLS, 0.2))]
    held = []
    for _ in range(max_mb // step_mb):
        held.append(torch.zeros(step_mb << 20, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        series.append((reserved_mb(), replay_us(replay, CALLS, 0.2)))
    anew = per_call_us(lambda: a @ b, CALLS, 0.2)
    # Later graphs, each with its own memory pool and so its own output place.
    later = []
    for index in range(CAPTURES):
        held.append(torch.empty((7 * index + 1) << 16, dtype=torch.uint8, device="cuda"))
        later.append(per_call_us(lambda: a @ b, CALLS, 0.15))
    return {"case": case, "device": torch.cuda.get_device_name(), "series": series,
            "captured_anew_us": anew, "reserved_end_mb": reserved_mb(), "later_us": later}


def summary(result: dict) -> dict:
    """First and last µs, the range and the footprint where the time first moved."""
    times = [us for _, us in result["series"]]
    first = times[0]
    moved = next((mb for mb, us in result["series"] if abs(us / first - 1) > MOVED_SHARE), None)
    return {"case": result["case"], "first_us": first, "last_us": times[-1],
            "min_us": min(times), "max_us": max(times),
            "spread": (max(times) - min(times)) / min(times), "moved_at_mb": moved,
            "anew_us": result["captured_anew_us"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("footprint_check"))
    parser.add_argument("--cases", nargs="+", default=list(CASES), help="dtype:size")
    parser.add_argument("--step-mb", type=int, default=32)
    parser.add_argument("--max-mb", type=int, default=768)
    parser.add_argument("--prior-graphs", type=int, default=0,
                        help="throwaway graphs each process captures first (opsweep's "
                             "workers: runner.timing.graph_state.SETTLING_GRAPHS)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_case(args.child, args.step_mb, args.max_mb, args.prior_graphs)),
              flush=True)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for case in args.cases:  # one process each: the state under test is the process's own
        done = subprocess.run([sys.executable, __file__, "--child", case, "--step-mb",
                               str(args.step_mb), "--max-mb", str(args.max_mb),
                               "--prior-graphs", str(args.prior_graphs)],
                              capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    (args.out / f"footprint_prior{args.prior_graphs}.json").write_text(
        json.dumps(results, indent=1))
    print(f"{results[0]['device']}: one graph of {CALLS} calls, timed as its process's memory "
          f"grows by {args.step_mb} MiB to {args.max_mb} MiB; {args.prior_graphs} throwaway "
          "graphs first")
    print("| case | first µs | last µs | min µs | max µs | spread | first moved > 1% at | "
          "a graph captured at the end |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in map(summary, results):
        moved = "—" if row["moved_at_mb"] is None else f"{row['moved_at_mb']:.0f} MiB"
        print(f"| {row['case']} | {row['first_us']:.3f} | {row['last_us']:.3f} | "
              f"{row['min_us']:.3f} | {row['max_us']:.3f} | {row['spread']:.2%} | {moved} | "
              f"{row['anew_us']:.3f} |")
    print(f"\n{CAPTURES} more graphs captured at the end, one after another, µs per call")
    print("| case | the process's first graph | min–max (spread), median of the later ones |")
    print("|---|---:|---|")
    for result in results:
        print(f"| {result['case']} | {result['series'][0][1]:.3f} | "
              f"{captures_text(result['later_us'])} |")


def captures_text(times: list[float]) -> str:
    return (f"{min(times):.3f}–{max(times):.3f} ({(max(times) - min(times)) / min(times):.2%}), "
            f"{statistics.median(times):.3f}")


if __name__ == "__main__":
    main()
