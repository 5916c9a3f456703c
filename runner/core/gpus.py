"""The GPUs CUDA would show this process, counted without importing torch.

Why: the driver of a sweep checks ``device=cuda:N`` and places its workers, but never runs
CUDA itself; importing torch only to count GPUs put seconds on the path from the command to
the first trial. The NVIDIA driver lists its GPUs in ``/proc/driver/nvidia/gpus``
(microseconds; NVML where there is no ``/proc``, a tenth of a second), and
``CUDA_VISIBLE_DEVICES`` picks from them as CUDA does. Where that is not certain to match what
torch would say (entries that are UUIDs or MIG devices, a repeated or unknown entry, a torch
whose build is not plain CUDA), :func:`visible_gpus` returns None and the caller asks torch.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path


def visible_gpus() -> list[str] | None:
    """The ``CUDA_VISIBLE_DEVICES`` entry of each GPU torch would count, in CUDA's order
    (all of them when it is unset); None when only torch can tell."""
    count = _driver_gpu_count()
    if count is None:
        return None
    if count == 0:
        return []  # no NVIDIA GPU: torch counts none, whatever CUDA_VISIBLE_DEVICES says
    if _torch_cuda_build() is not True:
        return None  # a CPU or ROCm torch on a machine with NVIDIA GPUs sees none / others
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(count)]
    if not listed.strip():
        return []  # set and empty: CUDA shows no device
    entries = [entry.strip() for entry in listed.split(",")]
    visible: list[str] = []
    for entry in entries:
        if not entry.isdigit() or entry in visible:
            return None  # a UUID, MIG device, repeat or sign: CUDA's own rules
        if int(entry) >= count:
            break  # CUDA shows the devices listed before the first that does not exist
        visible.append(entry)
    return visible


def _driver_gpu_count() -> int | None:
    """GPUs the NVIDIA driver has (0 on Linux without it); None where that is unknown."""
    driver = Path("/proc/driver/nvidia/gpus")
    if driver.is_dir():
        return len(list(driver.iterdir()))
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0 if Path("/proc/self").is_dir() else None  # Linux without the NVIDIA driver


def _torch_cuda_build() -> bool | None:
    """Whether the installed torch was built for CUDA (its ``torch/version.py``, read as
    text: finding a top-level package imports nothing); None when unknown."""
    try:
        spec = importlib.util.find_spec("torch")
        text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
    except (ImportError, ValueError, TypeError, AttributeError, OSError):
        return None
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*(.+)$", text, re.MULTILINE)
    hip = re.search(r"^hip\s*(?::[^=]*)?=\s*(.+)$", text, re.MULTILINE)
    if cuda is None or hip is None:
        return None
    return cuda.group(1).strip() != "None" and hip.group(1).strip() == "None"
