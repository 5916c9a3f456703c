"""How the GPUs of one sweep compared: each GPU's rows, busy time, the clock its power-capped
work sustained and its temperature, and in each row how its GPU's sustained clock compared
with the host's (``gpu_clock_vs_host``).

Why: the same trial's device time differed by up to 6% between GPUs of one host. Part of it
is physical: four H100s, each 20 s back to back on bf16 8192³, sustained 1585-1635 µs at
59-69 °C. A capped op's time per call follows the clock its GPU sustains
(``runner.timing.clock_probe``: the cycles per call stay constant), so a user comparing rows
of a multi-GPU sweep needs to see that clock beside each number, and the summary needs to
say which GPU ran slow or hot (docs/scale-out.md#the-same-number-on-every-gpu).

Read from columns every row already has: ``gpu_index``, ``power_capped``,
``sm_clock_mhz_samples_median`` (the clock the device-time samples really ran at),
``temperature_c_end`` and ``worker_trial_wall_s``. Standard library and pyarrow only.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from runner.execution import timeline

#: The column this module adds to a job's rows (declared in ``runner.storage.columns``).
COLUMN = "gpu_clock_vs_host"
#: A GPU whose sustained capped clock is this far from the host's median is named in the
#: summary: a capped op's device time differs by about as much.
CLOCK_SPREAD = 0.03


def _number(value: Any) -> float | None:
    return None if value is None or value != value else float(value)


def capped_clocks(rows: Iterable[Mapping[str, Any]]) -> dict[int, float]:
    """Each GPU's sustained capped clock (MHz): the median ``sm_clock_mhz_samples_median``
    of its power-capped rows; GPUs with none are left out."""
    found: dict[int, list[float]] = {}
    for row in rows:
        gpu, clock = _number(row.get("gpu_index")), _number(row.get("sm_clock_mhz_samples_median"))
        if gpu is not None and clock is not None and row.get("power_capped") is True:
            found.setdefault(int(gpu), []).append(clock)
    return {gpu: statistics.median(clocks) for gpu, clocks in found.items()}


def clock_ratios(rows: Iterable[Mapping[str, Any]]) -> dict[int, float]:
    """Each GPU's sustained capped clock over the median of every GPU's (two or more GPUs
    with capped rows; else empty)."""
    clocks = capped_clocks(rows)
    if len(clocks) < 2:
        return {}
    host = statistics.median(clocks.values())
    return {gpu: clock / host for gpu, clock in clocks.items()}


def annotate(table: Any) -> Any:
    """``table`` (a job's pyarrow table) with :data:`COLUMN` filled for each row whose GPU
    has a ratio (:func:`clock_ratios`), null elsewhere; replaced if it was there."""
    import pyarrow as pa

    wanted = [c for c in ("gpu_index", "power_capped", "sm_clock_mhz_samples_median")
              if c in table.column_names]
    if len(wanted) < 3:
        return table
    rows = table.select(wanted).to_pylist()
    ratios = clock_ratios(rows)
    values = [ratios.get(int(row["gpu_index"])) if row["gpu_index"] is not None else None
              for row in rows]
    if COLUMN in table.column_names:
        table = table.drop_columns([COLUMN])
    return table.append_column(COLUMN, pa.array(values, type=pa.float64()))


def per_gpu(rows: list[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """``{gpu_index: {rows, busy, clock_mhz, ratio, temperature_c}}`` over the sweep: rows
    run on it, its busy fraction of the trial span (``runner.execution.timeline.busy``), its
    sustained capped clock and how it compares, its hottest temperature at a trial's end."""
    busy: dict[int, list[float]] = {}
    for worker in timeline.busy(rows).values():
        for gpu in worker["gpus"]:
            if worker["fraction"] is not None:
                busy.setdefault(gpu, []).append(worker["fraction"])
    clocks, ratios = capped_clocks(rows), clock_ratios(rows)
    out: dict[int, dict[str, Any]] = {}
    for row in rows:
        gpu = _number(row.get("gpu_index"))
        if gpu is None:
            continue
        entry = out.setdefault(int(gpu), {"rows": 0, "temperature_c": None})
        entry["rows"] += 1
        temperature = _number(row.get("temperature_c_end"))
        if temperature is not None:
            entry["temperature_c"] = max(entry["temperature_c"] or temperature, temperature)
    for gpu, entry in out.items():
        entry["busy"] = max(busy[gpu]) if gpu in busy else None
        entry["clock_mhz"], entry["ratio"] = clocks.get(gpu), ratios.get(gpu)
    return out


def per_gpu_lines(rows: list[Mapping[str, Any]]) -> list[str]:
    """The summary's per-GPU lines of a sweep that ran on two GPUs or more (none else)."""
    gpus = per_gpu(rows)
    if len(gpus) < 2:
        return []
    lines = ["per GPU (capped clock: median SM clock of its power-capped trials' samples; "
             f"column {COLUMN}):"]
    for gpu in sorted(gpus):
        entry = gpus[gpu]
        busy = f"busy {entry['busy']:.0%}" if entry["busy"] is not None else "busy n/a"
        clock = "no capped trial" if entry["clock_mhz"] is None else (
            f"capped clock {entry['clock_mhz']:.0f} MHz"
            + (f" ({entry['ratio']:.3f} of the host's median)" if entry["ratio"] else ""))
        heat = (f", up to {entry['temperature_c']:.0f} °C"
                if entry["temperature_c"] is not None else "")
        flag = (" <- differs by more than 3%: its capped trials' times differ about as much"
                if entry["ratio"] and abs(entry["ratio"] - 1) > CLOCK_SPREAD else "")
        lines.append(f"  GPU {gpu}: {entry['rows']} rows, {busy}, {clock}{heat}{flag}")
    return lines
