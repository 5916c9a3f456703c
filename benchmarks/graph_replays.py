"""Graph replays of a few-µs op, timed back to back between events: the loop
benchmarks/graph_size_check.py, benchmarks/tiny_op_check.py and benchmarks/footprint_check.py
share, and the 1-element add's placement spread that benchmarks/sustained_check.py prints."""

from __future__ import annotations

import statistics


def per_call_us(fn, calls: int, seconds: float = 0.3) -> float:
    """µs per call of ``fn`` in a CUDA graph of ``calls`` calls, captured for this call
    (:func:`replay_us`)."""
    import torch

    from runner.timing.cuda_device import capture_graph

    replay, _, _ = capture_graph(fn, torch.device("cuda"), calls)
    us = replay_us(replay, calls, seconds)
    del replay
    return us


def replay_us(replay, calls: int, seconds: float = 0.3) -> float:
    """µs per call of a captured graph of ``calls`` calls: replays back to back for
    ``seconds``, each between two events, eight per sync; the median."""
    import time

    import torch

    times = []
    begin = time.perf_counter()
    while time.perf_counter() - begin < seconds:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(9)]
        events[0].record()
        for e in events[1:]:
            replay()
            e.record()
        events[-1].synchronize()
        times += [a.elapsed_time(b) * 1e3 / calls for a, b in zip(events, events[1:])]
    return statistics.median(times)


def placement_us(places: int = 48, calls: int = 512, rounds: int = 3) -> dict[str, float]:
    """The 1-element in-place add's µs per call (graph replays of ``calls`` calls) with the
    element it writes at ``places`` places 264 kB apart in one 256 MiB buffer, then with the
    element it reads moved instead, ``rounds`` rounds over the places (after one untimed
    pass). Min, median and max over the places of each place's median, and ``*_rounds``: the
    median over places of the spread between rounds (small against the spread between
    places: the place sets the time, not the moment)."""
    import torch

    buffer = torch.zeros(64 << 20, device="cuda")
    fixed = torch.ones(1, device="cuda")
    offsets = [i * 1031 * 64 for i in range(places)]
    out: dict[str, float] = {}
    for moved in ("written", "read"):
        times: dict[int, list[float]] = {offset: [] for offset in offsets}
        for round_index in range(rounds + 1):
            for offset in offsets:
                here = buffer[offset:offset + 1]
                dst, src = (here, fixed) if moved == "written" else (fixed, here)
                us = per_call_us(lambda d=dst, s=src: d.add_(s), calls, seconds=0.03)
                if round_index:  # the first pass warms up
                    times[offset].append(us)
        medians = [statistics.median(v) for v in times.values()]
        out.update({f"{moved}_min": min(medians), f"{moved}_median": statistics.median(medians),
                    f"{moved}_max": max(medians),
                    f"{moved}_rounds": statistics.median(max(v) - min(v)
                                                         for v in times.values())})
    return out


def placement_text(place: dict[str, float], moved: str) -> str:
    return (f"{place[f'{moved}_min']:.3f} / {place[f'{moved}_median']:.3f} / "
            f"{place[f'{moved}_max']:.3f} ({place[f'{moved}_rounds']:.3f})")
