"""How the GPUs of one sweep compared: each GPU's rows, busy time, the clock its power-capped
work sustained and its temperature, and in each row how its clock and its device time
compared with the same trial's on the host's other GPUs (``gpu_clock_vs_host``,
``gpu_time_vs_host``).

Why: the same trial's device time differed by up to 6% between GPUs of one host. Part of it
is physical: four H100s, each 20 s back to back on bf16 8192³, sustained 1585-1635 µs at
59-69 °C. A capped op's time per call follows the clock its GPU sustains
(``runner.timing.clock_probe``: the cycles per call stay constant), so a user comparing rows
of a multi-GPU sweep needs to see that clock beside each number, and the summary needs to
say which GPU ran slow or hot (docs/scale-out.md#the-same-number-on-every-gpu).

Only the same trial is compared across GPUs: a smaller op sustains a higher clock at the
same power limit (on an H100, bf16 2048³ ran at 1540 MHz where bf16 4096³ ran at 1404, both
within 1.2% of their 15 s back-to-back references), so the clocks of GPUs that ran different
trials (a split schedule) say nothing about the GPUs. A sweep pinned to every GPU
(``device=[cuda:0,cuda:1,...]``) runs each trial on each, and is compared trial by trial.
Trials that differ only in ``seed`` count as the same trial: a seed changes the inputs'
values, not the work, so a sweep over seeds spread across GPUs is compared too.

The device time is compared as well, not only the clock: at the same clock, one GPU of a
four-H200 host ran tf32 1024³ 5-7% slower than the others, every time, while the other
trials of the sweep agreed within about 3% (docs/scale-out.md#the-same-number-on-every-gpu). The
clock would not show that; the row's ``gpu_time_vs_host`` does.

Read from columns every row already has: ``gpu_index``, ``power_capped``,
``sm_clock_mhz_samples_median`` (the clock the device-time samples really ran at), the
trial's axes, ``temperature_c_end`` and ``worker_trial_wall_s``. Standard library and
pyarrow only.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from runner.core.axes import AXES
from runner.execution import timeline

#: The column this module adds to a job's rows (declared in ``runner.storage.columns``).
COLUMN = "gpu_clock_vs_host"
#: The column of each row's device time over the same trial's on the host's other GPUs.
TIME_COLUMN = "gpu_time_vs_host"
#: A GPU whose sustained capped clock is this far from the host's median is named in the
#: summary: a capped op's device time differs by about as much. A row's device time this far
#: from the other GPUs' is counted under its GPU.
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


#: The columns that name a trial apart from the GPU it ran on and its inputs' seed.
TRIAL_COLUMNS = ("op", "target", "params_json",
                 *(axis.name for axis in AXES if axis.name not in ("device", "seed")))


def _trial(row: Mapping[str, Any]) -> tuple:
    return tuple(str(row.get(column)) for column in TRIAL_COLUMNS)


def _by_trial_and_gpu(rows: list[Mapping[str, Any]], value_of: Callable[[Mapping], Any]
                      ) -> tuple[list[tuple | None], dict[tuple, dict[int, list[float]]]]:
    """Each row's ``(trial, gpu, value)`` (None: no GPU, or no positive value), and the
    values by trial, then by GPU."""
    entries: list[tuple | None] = []
    found: dict[tuple, dict[int, list[float]]] = {}
    for row in rows:
        gpu, value = _number(row.get("gpu_index")), _number(value_of(row))
        if gpu is None or value is None or value <= 0:
            entries.append(None)
            continue
        entry = (_trial(row), int(gpu), value)
        entries.append(entry)
        found.setdefault(entry[0], {}).setdefault(entry[1], []).append(value)
    return entries, found


def _vote(per_gpu: dict[int, list[float]], gpus: Iterable[int]) -> float:
    """The median over ``gpus`` of each one's own median: one vote per GPU, however many
    seeds of the trial it ran."""
    return statistics.median(statistics.median(per_gpu[gpu]) for gpu in gpus)


def row_ratios(rows: list[Mapping[str, Any]]) -> list[float | None]:
    """Per row: its capped samples' clock over the median clock of the same trial on every
    GPU that ran it, one vote per GPU (None: not capped, or the trial ran on one GPU only:
    seeds on one GPU are not compared with each other)."""
    entries, found = _by_trial_and_gpu(rows, lambda row: row.get(
        "sm_clock_mhz_samples_median") if row.get("power_capped") is True else None)
    return [entry[2] / _vote(found[entry[0]], found[entry[0]])
            if entry is not None and len(found[entry[0]]) >= 2 else None for entry in entries]


def time_ratios(rows: list[Mapping[str, Any]]) -> list[float | None]:
    """Per row: its device time (``gpu_time_us``) over the median of the same
    trial's device times on the host's other GPUs, one vote per GPU (None: no device time,
    or no other GPU ran the trial). Capped or not: a GPU can be slower at the same clock."""
    entries, found = _by_trial_and_gpu(rows, lambda row: row.get("gpu_time_us"))
    ratios: list[float | None] = []
    for entry in entries:
        others = [] if entry is None else [gpu for gpu in found[entry[0]] if gpu != entry[1]]
        ratios.append(entry[2] / _vote(found[entry[0]], others) if entry and others else None)
    return ratios


def _ratios_by_gpu(rows: list[Mapping[str, Any]],
                   ratios: list[float | None]) -> dict[int, list[float]]:
    found: dict[int, list[float]] = {}
    for row, ratio in zip(rows, ratios):
        if ratio is not None:
            found.setdefault(int(row["gpu_index"]), []).append(ratio)
    return found


def clock_ratios(rows: Iterable[Mapping[str, Any]]) -> dict[int, float]:
    """Each GPU's median of :func:`row_ratios` over its rows: how its clock compared with
    the other GPUs' on the same trials (GPUs that shared no trial are left out)."""
    rows = list(rows)
    found = _ratios_by_gpu(rows, row_ratios(rows))
    return {gpu: statistics.median(ratios) for gpu, ratios in found.items()}


def annotate(table: Any) -> Any:
    """``table`` (a job's pyarrow table) with :data:`COLUMN` filled for each capped row whose
    trial ran on another GPU too (:func:`row_ratios`) and :data:`TIME_COLUMN` for each row
    with a device time whose trial did (:func:`time_ratios`), null elsewhere; replaced if
    they were there. A column whose inputs the table lacks is left out."""
    import pyarrow as pa

    inputs = {COLUMN: ("gpu_index", "power_capped", "sm_clock_mhz_samples_median"),
              TIME_COLUMN: ("gpu_index", "gpu_time_us")}
    for column, ratios in ((COLUMN, row_ratios), (TIME_COLUMN, time_ratios)):
        if not all(c in table.column_names for c in inputs[column]):
            continue
        wanted = [c for c in (*inputs[column], *TRIAL_COLUMNS) if c in table.column_names]
        values = ratios(table.select(wanted).to_pylist())
        if column in table.column_names:
            table = table.drop_columns([column])
        table = table.append_column(column, pa.array(values, type=pa.float64()))
    return table


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
    times = _ratios_by_gpu(rows, time_ratios(rows))
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
        compared = times.get(gpu, [])
        entry["time_ratio"] = statistics.median(compared) if compared else None
        entry["time_apart"] = sum(abs(ratio - 1) > CLOCK_SPREAD for ratio in compared)
    return out


def per_gpu_lines(rows: list[Mapping[str, Any]]) -> list[str]:
    """The summary's per-GPU lines of a sweep that ran on two GPUs or more (none else)."""
    gpus = per_gpu(rows)
    if len(gpus) < 2:
        return []
    lines = ["per GPU (capped clock: median SM clock of its power-capped trials' samples; "
             f"against the other GPUs on the same trials, column {COLUMN}):"]
    for gpu in sorted(gpus):
        entry = gpus[gpu]
        busy = f"busy {entry['busy']:.0%}" if entry["busy"] is not None else "busy n/a"
        clock = "no capped trial" if entry["clock_mhz"] is None else (
            f"capped clock {entry['clock_mhz']:.0f} MHz"
            + (f" ({entry['ratio']:.3f} of the other GPUs' on the same trials)"
               if entry["ratio"] else " (its trials ran on no other GPU: not compared)"))
        heat = (f", up to {entry['temperature_c']:.0f} °C"
                if entry["temperature_c"] is not None else "")
        flag = (" <- differs by more than 3%: its capped trials' times differ about as much"
                if entry["ratio"] and abs(entry["ratio"] - 1) > CLOCK_SPREAD else "")
        lines.append(f"  GPU {gpu}: {entry['rows']} rows, {busy}, {clock}{heat}{flag}"
                     + _time_part(entry))
    return lines


def _time_part(entry: Mapping[str, Any]) -> str:
    """The per-GPU line's device-time comparison (column ``gpu_time_vs_host``)."""
    if entry["time_ratio"] is None:
        return ""
    apart = (f"; {entry['time_apart']} beyond {CLOCK_SPREAD:.0%} (column {TIME_COLUMN})"
             if entry["time_apart"] else "")
    return f"; device time {entry['time_ratio']:.3f} of the other GPUs' on the same trials{apart}"
