"""The few claims no selector can state, named by ``_target_`` in their experiment's YAML.

Each is ``fn(rows, claim)``: ``rows`` are all of the experiment's rows, ``claim`` its
:class:`~runner.claims.spec.Claim` (its ``where`` and thresholds). A function returns a
:class:`~runner.claims.engine.Measurement` (judged by the claim's own comparison) or, for a
compound claim, a finished :class:`~runner.claims.engine.Verdict`. None catches exceptions:
the engine turns one into an ``error`` verdict.
"""

from __future__ import annotations

import re

import pandas as pd

from runner.analysis.selection import ok_rows, select
from runner.analysis.values import fmt_num, fmt_ratio, fmt_time_us, is_missing
from runner.claims.engine import (
    HELD,
    MIB,
    NOT_HELD,
    NOT_MEASURED,
    Measurement,
    Verdict,
    aggregate,
    ratio,
)
from runner.claims.spec import Claim


def _shape(row: pd.Series) -> tuple[int, ...]:
    return tuple(int(d) for d in str(row["shape_str"]).split("x"))


def streams_help_underused_kernels(rows: pd.DataFrame, claim: Claim) -> Verdict:
    """The streams lesson's "streams only help kernels that under-use the GPU" is two facts at
    once: the 256³ matmul gains at least ``claim.at_least`` with 2 or 4 streams (the better
    of the two) AND the 4096³ one gains less than that with 2."""
    ok = select(ok_rows(rows), claim.where)
    gain = claim.at_least if claim.at_least is not None else 1.1

    def speedup(n: int, streams: int) -> float | None:
        at = select(ok, {"shape": [n, n, n]})
        return ratio(aggregate(select(at, {"streams": 1}), claim.metric),
                     aggregate(select(at, {"streams": streams}), claim.metric))

    gains = [g for g in (speedup(256, 2), speedup(256, 4)) if g is not None]
    small, large = (max(gains) if gains else None), speedup(4096, 2)
    words = (f"held if 256³ gains ≥ {fmt_ratio(gain)} with streams and 4096³ gains "
             f"< {fmt_ratio(gain)}")
    if small is None or large is None:
        return Verdict(claim.claim, NOT_MEASURED, "256³ or 4096³ rows missing", words)
    status = HELD if small >= gain and large < gain else NOT_HELD
    return Verdict(claim.claim, status, f"256³: {fmt_ratio(small)} (the better of 2 and 4 "
                   f"streams); 4096³: {fmt_ratio(large)} with 2", words, small)


def batching_loop(rows: pd.DataFrame, claim: Claim) -> Measurement:
    """opsweep has no "loop of B matmuls" op: the loop is estimated as the bmm's batch size
    times one matmul of the same size, and compared with the bmm."""
    ok = select(ok_rows(rows), claim.where)
    bmm = select(ok, {"op": "bmm"})
    t_mm, t_bmm = aggregate(select(ok, {"op": "matmul"}), claim.metric), aggregate(
        bmm, claim.metric)
    batch = _shape(bmm.iloc[0])[0] if not bmm.empty else 32
    value = ratio(None if t_mm is None else batch * t_mm, t_bmm)
    note = ("; the loop is estimated as the batch size times one matmul's time: opsweep has no "
            "loop-of-mm op")
    return Measurement(value, f"estimated loop ({batch} × one matmul) / bmm = "
                              f"{fmt_ratio(value)}" + note)


def overlap_ideal(rows: pd.DataFrame, claim: Claim) -> Measurement:
    """The best overlap the two parts allow, ``(matmul + N·copy) / max(matmul, N·copy)``,
    from the baseline matmul row and one copy row scaled to each case's copy size."""
    ok = select(ok_rows(rows), claim.where)
    overlap = select(ok, {"op": "copy_compute_overlap"})
    t_mm = aggregate(select(ok, {"op": "matmul"}), claim.metric)
    copies = select(ok, {"op": "copy"})
    t_copy, copy_numel = aggregate(copies, claim.metric), aggregate(copies, "numel")
    if overlap.empty:
        return Measurement(None, "no copy_compute_overlap rows")
    parts = []
    for shape_str in dict.fromkeys(overlap["shape_str"].astype(str)):
        at = select(overlap, {"shape_str": shape_str})
        _, size, count = (int(d) for d in shape_str.split("x"))
        sequential, overlapped = (aggregate(select(at, {"streams": k}), claim.metric)
                                  for k in (1, 2))
        text = f"{count} copies: {fmt_ratio(ratio(sequential, overlapped))}"
        if t_mm is not None and t_copy is not None and copy_numel:
            all_copies = count * t_copy * size ** 2 / copy_numel
            ideal = (t_mm + all_copies) / max(t_mm, all_copies)
            text += (f", ideal {fmt_ratio(ideal)} (matmul {fmt_time_us(t_mm)}, {count} copies "
                     f"{fmt_time_us(all_copies)})")
        parts.append(text)
    return Measurement(None, "; ".join(parts))


#: What the allocator claims read (a verdict names it in place of a time).
ALLOCATOR_READS = "reserved bytes after each allocation (extra_reserved_bytes_*)"
#: The alloc op's per-step readings: extra_{allocated,reserved}_bytes_step<k>_cols<c>.
ALLOCATOR_COLUMN = re.compile(r"extra_(allocated|reserved)_bytes_step(\d+)_cols(\d+)$")


def allocator_steps(row: pd.Series) -> dict[int, dict[str, float]]:
    """``{step: {"cols": c, "allocated": bytes, "reserved": bytes}}`` from a row's extra_*."""
    steps: dict[int, dict[str, float]] = {}
    for col, v in row.items():
        match = ALLOCATOR_COLUMN.match(str(col))
        if match and not is_missing(v):
            step = steps.setdefault(int(match.group(2)), {"cols": float(match.group(3))})
            step[match.group(1)] = float(v)
    return steps


def _allocator(rows: pd.DataFrame, claim: Claim) -> tuple[pd.Series, dict] | None:
    ok = select(ok_rows(rows), claim.where)
    if ok.empty:
        return None
    row = ok.iloc[0]
    steps = allocator_steps(row)
    if not all(s in steps and "reserved" in steps[s] for s in (1, 2, 3)):
        return None
    return row, steps


def allocator_reuse(rows: pd.DataFrame, claim: Claim) -> Measurement:
    """The alloc op reads the allocator after each of three allocations (columns named by
    step), a layout no selector addresses: reserved after step 2 / reserved after step 1."""
    found = _allocator(rows, claim)
    if found is None:
        return Measurement(None, "no extra_reserved_bytes_* columns (CUDA only)")
    _, steps = found
    reserved = ", ".join(f"step {s} ({int(steps[s]['cols'])} cols) "
                         f"{fmt_num(steps[s]['reserved'] / MIB)} MiB" for s in (1, 2, 3))
    value = steps[2]["reserved"] / steps[1]["reserved"]
    return Measurement(value, f"reserved after step 2 / step 1 = {fmt_ratio(value)} "
                              f"(reserved: {reserved})", reads=ALLOCATOR_READS)


def allocator_growth(rows: pd.DataFrame, claim: Claim) -> Measurement:
    """Reserved growth from step 1 to step 3 over the step-3 tensor's size (rows × cols ×
    element size): at least 1 when a new segment was reserved and the old one kept."""
    found = _allocator(rows, claim)
    if found is None:
        return Measurement(None, "no extra_reserved_bytes_* columns (CUDA only)")
    row, steps = found
    esize = ELEMENT_BYTES.get(str(row.get("dtype")), 2)
    size3 = _shape(row)[0] * steps[3]["cols"] * esize
    grown = steps[3]["reserved"] - steps[1]["reserved"]
    value = grown / size3
    return Measurement(value, f"reserved grew by {fmt_num(grown / MIB)} MiB for a "
                              f"{fmt_num(size3 / MIB)} MiB tensor: {fmt_ratio(value)} of it",
                       reads=ALLOCATOR_READS)


#: Bytes per element of each dtype axis value (tf32 is stored as float32).
ELEMENT_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2}


def peak_saving(rows: pd.DataFrame, claim: Claim) -> Measurement:
    """How many output tensors of peak memory the ``denominator`` rows save against the
    ``numerator`` rows: (peak numerator − peak denominator) / (numel × element size). A
    difference, not a ratio: the peak also holds what the harness keeps allocated while it
    times, which a ratio of peaks would mix into the answer."""
    ok = select(ok_rows(rows), claim.where)
    metric = claim.metric or "peak_allocated_bytes"
    top = aggregate(select(ok, claim.numerator or {}), metric)
    bottom = aggregate(select(ok, claim.denominator or {}), metric)
    if top is None or bottom is None:
        return Measurement(None, f"no {metric} rows (CUDA only)")
    row = ok.iloc[0]
    size = float(row["numel"]) * ELEMENT_BYTES.get(str(row.get("dtype")), 4)
    value = (top - bottom) / size
    return Measurement(value, f"peak {fmt_num(top / MIB)} − {fmt_num(bottom / MIB)} MiB = "
                              f"{fmt_num((top - bottom) / MIB)} MiB saved, "
                              f"{fmt_ratio(value)} the {fmt_num(size / MIB)} MiB output",
                       reads=metric)
