"""Fallback ceilings of known GPUs, for trials on a device that was never calibrated.

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
  :func:`runner.analysis.roofline.store_calibration`). Run-to-run spread was up to 10% (tf32, fp16),
  which is why the maximum is kept. The launch floors are the runner's own median for a
  one-element ``add`` (``timer=default``), eager and replayed as a CUDA graph, because that
  is what the runner's timer measures for any tiny op.
* ``datasheet``: NVIDIA's product datasheets, dense (not 2:4-sparse) tensor-core figures.
  Leads only: measured peaks come out 15-25% lower.

Dtype ``fp64`` uses the FP64 tensor-core figure where the part has one (A100, H100, H200),
since cuBLAS DGEMM runs on it; ``fp32`` is the non-tensor-core FP32 figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Launch floor assumed when a fallback device has no measured one (µs): a one-element eager
#: ``add`` as the runner times it took 10.9 µs (H200) and 13.9 µs (H100) here.
DEFAULT_LAUNCH_US = 10.0

H100_H200_MEASURED = ("measured: PyTorch 2.11+cu130, driver 580.159.04, best of three runs; "
                      "see runner/analysis_devices.py")


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


#: Ordered most specific first: the first pattern that matches wins.
FALLBACK_DEVICES: tuple[DeviceSpec, ...] = (
    DeviceSpec(
        name="H200", pattern=r"\bH200\b(?!.*NVL)",
        matmul_tflops={"bf16": 784.0, "fp16": 752.0, "tf32": 407.0, "fp32": 51.2, "fp64": 62.5},
        copy_gbps=4232.0, h2d_gbps=55.6, d2h_gbps=55.5, launch_us=10.9, graph_launch_us=2.4,
        source=H100_H200_MEASURED,
        urls=("https://www.nvidia.com/en-us/data-center/h200/",),
        datasheet={"bf16": 989.5, "fp16": 989.5, "tf32": 494.7, "fp32": 67.0, "fp64": 67.0,
                   "memory_gbps": 4800.0}),
    DeviceSpec(
        name="H100 SXM", pattern=r"\bH100\b.*(SXM|HBM3)",
        matmul_tflops={"bf16": 781.0, "fp16": 755.0, "tf32": 407.0, "fp32": 51.6, "fp64": 62.6},
        copy_gbps=2997.0, h2d_gbps=55.4, d2h_gbps=55.3, launch_us=13.9, graph_launch_us=3.3,
        source=H100_H200_MEASURED,
        urls=("https://www.nvidia.com/en-us/data-center/h100/",),
        datasheet={"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9, "fp64": 66.9,
                   "memory_gbps": 3350.0}),
    DeviceSpec(
        name="H100 NVL", pattern=r"\bH100\b.*NVL",
        matmul_tflops={"bf16": 835.0, "fp16": 835.0, "tf32": 417.5, "fp32": 60.0, "fp64": 60.0},
        copy_gbps=3900.0,
        urls=("https://www.nvidia.com/en-us/data-center/h100/",)),
    DeviceSpec(
        name="H100 PCIe", pattern=r"\bH100\b.*PCIe",
        matmul_tflops={"bf16": 756.5, "fp16": 756.5, "tf32": 378.0, "fp32": 51.0, "fp64": 51.0},
        copy_gbps=2000.0,
        urls=("https://www.nvidia.com/en-us/data-center/h100/",)),
    DeviceSpec(
        name="A100 SXM4 80GB", pattern=r"\bA100\b.*SXM.*80",
        matmul_tflops={"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 19.5},
        copy_gbps=2039.0,
        urls=("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
              "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",)),
    DeviceSpec(
        name="A100 PCIe 80GB", pattern=r"\bA100\b.*80GB.*PCIe|\bA100\b.*PCIE.*80",
        matmul_tflops={"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 19.5},
        copy_gbps=1935.0,
        urls=("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
              "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",)),
    DeviceSpec(
        name="A100 40GB", pattern=r"\bA100\b",
        matmul_tflops={"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 19.5},
        copy_gbps=1555.0,
        urls=("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
              "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",)),
    DeviceSpec(
        name="L40S", pattern=r"\bL40S\b",
        matmul_tflops={"bf16": 362.05, "fp16": 362.05, "tf32": 183.0, "fp32": 91.6},
        copy_gbps=864.0,
        urls=("https://www.nvidia.com/en-us/data-center/l40s/",)),
    DeviceSpec(
        name="L4", pattern=r"\bL4\b",
        matmul_tflops={"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3},
        copy_gbps=300.0,
        urls=("https://www.nvidia.com/en-us/data-center/l4/",)),
    DeviceSpec(
        name="A10", pattern=r"\bA10\b",
        matmul_tflops={"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2},
        copy_gbps=600.0,
        urls=("https://www.nvidia.com/en-us/data-center/products/a10-gpu/",)),
    DeviceSpec(
        name="V100", pattern=r"\bV100\b",
        matmul_tflops={"fp16": 125.0, "fp32": 15.7, "fp64": 7.8},
        copy_gbps=900.0,
        urls=("https://images.nvidia.com/content/technologies/volta/pdf/"
              "volta-v100-datasheet-update-us-1165301-r5.pdf",)),
    DeviceSpec(
        name="T4", pattern=r"\bT4\b",
        matmul_tflops={"fp16": 65.0, "fp32": 8.1},
        copy_gbps=320.0,
        urls=("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
              "t4-tensor-core-datasheet-951643.pdf",)),
)


def match_device(device_name: str | None) -> DeviceSpec | None:
    """The fallback entry for a CUDA device name (``torch.cuda.get_device_name``), if any."""
    if not device_name:
        return None
    for spec in FALLBACK_DEVICES:
        if re.search(spec.pattern, device_name, flags=re.IGNORECASE):
            return spec
    return None
