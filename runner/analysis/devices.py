"""Fallback ceilings of known GPUs, for trials on a device that was never calibrated.

The table itself is data, in ``devices.yaml`` beside this file; this module loads and matches it.

Why: the roofline needs a device's ceilings (matmul peak per dtype, memory bandwidth,
launch-latency floor). The right numbers are *measured* ones (``calibrate`` experiment),
because datasheet peaks are rarely reached (an H100 SXM's bf16 matmul peaks near 780
TFLOP/s through PyTorch, against 989 on the datasheet). Until a device is calibrated, this
table gives the best numbers we have, each with its source, and every trial that uses it
says so (``roofline_source="fallback:<device>"``). Never a silent guess.

Sources, by kind:

* ``measured``: this project's device machines (one H100 80GB HBM3 SXM, one H200), PyTorch
  2.11+cu130, driver 580.159.04. Matmul and copy ceilings are the best of three runs: a
  standalone script (best of 10 CUDA-event-timed ``x @ y`` at 8192^3 for bf16/fp16/tf32 and
  4096^3 for fp32/fp64; 1 GiB fp32 ``copy_`` counting bytes read plus written; pinned 1 GiB
  host<->device copies counting bytes transferred) and two runs of the calibrate sweep
  through ``python -m runner`` (``timer=quick`` and ``timer=default``; the rows listed in
  :func:`runner.analysis.calibration.store_calibration`). Run-to-run spread was up to 10%
  (tf32, fp16), which is why the maximum is kept. The launch floors are the runner's own
  median for a one-element ``add`` (``timer=default``), eager and replayed as a CUDA graph,
  because that is what the runner's timer measures for any tiny op.
* ``datasheet``: NVIDIA's product datasheets, dense (not 2:4-sparse) tensor-core figures.
  Leads only: measured peaks come out 15-25% lower.

Dtype ``fp64`` uses the FP64 tensor-core figure where the part has one (A100, H100, H200),
since cuBLAS DGEMM runs on it; ``fp32`` is the non-tensor-core FP32 figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

#: Launch floor assumed when a fallback device has no measured one (µs): a one-element eager
#: ``add`` as the runner times it took 10.9 µs (H200) and 13.9 µs (H100) here.
DEFAULT_LAUNCH_US = 10.0

H100_H200_MEASURED = ("measured: PyTorch 2.11+cu130, driver 580.159.04, best of three runs; "
                      "see runner/analysis/devices.yaml")


@dataclass(frozen=True)
class DeviceSpec:
    """Ceilings of one known device. ``None`` where no trustworthy number exists."""

    name: str
    pattern: str  # regular expression matched (case-insensitively) against device_name
    matmul_tflops: dict[str, float]
    copy_gbps: float | None  # device memory, bytes read + written
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    launch_us: float | None = None
    graph_launch_us: float | None = None
    source: str = "datasheet"
    urls: tuple[str, ...] = ()
    datasheet: dict[str, float] = field(default_factory=dict)


DEVICES_FILE = Path(__file__).with_name("devices.yaml")


def load_devices(path: Path = DEVICES_FILE) -> tuple[DeviceSpec, ...]:
    """The fallback table from its data file, most specific entry first."""
    entries = yaml.safe_load(path.read_text())["devices"]
    specs = []
    for entry in entries:
        entry = dict(entry)
        if entry.get("source") == "measured":
            entry["source"] = H100_H200_MEASURED
        entry["urls"] = tuple(entry.get("urls", ()))
        specs.append(DeviceSpec(**entry))
    return tuple(specs)


#: Ordered most specific first: the first pattern that matches wins.
FALLBACK_DEVICES: tuple[DeviceSpec, ...] = load_devices()


def match_device(device_name: str | None) -> DeviceSpec | None:
    """The fallback entry for a CUDA device name (``torch.cuda.get_device_name``), if any."""
    if not device_name:
        return None
    for spec in FALLBACK_DEVICES:
        if re.search(spec.pattern, device_name, flags=re.IGNORECASE):
            return spec
    return None
