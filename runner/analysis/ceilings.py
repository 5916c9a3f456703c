"""A device's ceilings for the roofline: its calibration, else the fallback table, else why not.

Why a module of its own: where a ceiling comes from decides how far a trial's
``pct_of_peak`` can be trusted. A measured calibration (:mod:`runner.analysis.calibration`)
comes first, then the fallback table of known GPUs (:mod:`runner.analysis.devices`), each
marked in ``source`` and with its caveats in ``notes``; a device with neither gets ``None``
and the sentence that says how to calibrate it. Never a silent guess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pandas as pd

from runner.analysis.calibration import group_by_device, load_calibration
from runner.analysis.devices import DEFAULT_LAUNCH_US, match_device
from runner.analysis.values import finite_positive


@dataclass(frozen=True)
class Ceilings:
    """A device's ceilings and where they came from."""

    device_name: str
    source: str  # "calibration:<slug>" or "fallback:<device>"
    matmul_tflops: dict[str, float] = field(default_factory=dict)
    copy_gbps: float | None = None  # device memory, bytes read + written
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    launch_us: float | None = None
    graph_launch_us: float | None = None  # floor of a replayed CUDA graph, when calibrated
    notes: tuple[str, ...] = ()  # caveats repeated in roofline_reason

    def memory_gbps(self, direction: str | None) -> float | None:
        """Bandwidth ceiling for a trial: host-device link for h2d/d2h copies, else memory."""
        if direction == "h2d":
            return self.h2d_gbps
        if direction == "d2h":
            return self.d2h_gbps
        return self.copy_gbps


def resolve_ceilings(kind: str, name: str, driver: str | None,
                     results_root: str | os.PathLike | None = None
                     ) -> tuple[Ceilings | None, str]:
    """This device's ceilings (calibration, else fallback table), or ``None`` and why not."""
    data, note = load_calibration(kind, name, driver, results_root)
    if data:
        notes = tuple(n for n in (note,) if n)
        launch = data.get("launch_us")
        if launch is None:
            notes += ("no launch floor in the calibration: overhead regime not tested",)
        return Ceilings(
            device_name=name, source=f"calibration:{data.get('slug')}",
            matmul_tflops={k: float(v) for k, v in (data.get("matmul_tflops") or {}).items()
                           if finite_positive(v)},
            copy_gbps=data.get("copy_gbps"), h2d_gbps=data.get("h2d_gbps"),
            d2h_gbps=data.get("d2h_gbps"), launch_us=launch,
            graph_launch_us=data.get("graph_launch_us"), notes=notes), ""
    if kind == "cpu":
        return None, (f"no CPU calibration for {name!r}: run the calibrate experiment on "
                      "this CPU (python -m runner experiment=calibrate device=cpu)")
    spec = match_device(name)
    if spec is None:
        shown = name or "(no device_name)"
        return None, (f"no calibration and no fallback entry for {shown!r}: run the "
                      "calibrate experiment on this device")
    notes: tuple[str, ...] = ("fallback ceilings (" + spec.source.split(":")[0]
                              + "), calibrate to measure",)
    launch = spec.launch_us
    if launch is None:
        launch = DEFAULT_LAUNCH_US
        notes += (f"launch floor {DEFAULT_LAUNCH_US:g} us assumed",)
    return Ceilings(device_name=name, source=f"fallback:{spec.name}",
                    matmul_tflops=dict(spec.matmul_tflops), copy_gbps=spec.copy_gbps,
                    h2d_gbps=spec.h2d_gbps, d2h_gbps=spec.d2h_gbps, launch_us=launch,
                    graph_launch_us=spec.graph_launch_us, notes=notes), ""


def ceilings_for(df: pd.DataFrame, results_root: str | os.PathLike | None = None
                 ) -> list[Ceilings]:
    """The ceilings of every device in ``df`` that has some (for plots)."""
    out = []
    if df.empty:
        return out
    for (kind, name, driver), _ in group_by_device(df):
        ceil, _why = resolve_ceilings(kind, name, driver, results_root)
        if ceil is not None:
            out.append(ceil)
    return out
