"""Where a number was measured: machine, software, GPU state and code version.

A timing without its context cannot be compared with another. Static facts are read once per
job; the GPU's clocks, temperature, power and throttle reasons are read at the start and end of
every trial, because under a sustained load an H200 has been seen to drop from 1980 to
1470 MHz on its power cap, and a number taken at 1470 MHz is a different number.
"""

from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import torch

PROJECT_ROOT = Path(__file__).resolve().parents[2]
GPU_STATE_FIELDS = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w",
                    "throttle_reasons")


@functools.cache
def environment(device: str) -> dict[str, Any]:
    """Static facts about the machine and the device a trial runs on."""
    info: dict[str, Any] = {
        "device_name": None, "compute_capability": None, "sm_count": None,
        "l2_cache_bytes": None, "total_memory_bytes": None, "driver_version": None,
        # a plain str: torch's TorchVersion would make the driver import torch to unpickle a row
        "torch_version": str(torch.__version__), "cuda_version": torch.version.cuda,
        "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(), "python_version": platform.python_version(),
        "platform": platform.platform(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu_index": None, "gpu_uuid": None, "gpu_pci_bus_id": None, "power_limit_w": None,
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(
            device_name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            l2_cache_bytes=getattr(props, "L2_cache_size", None),
            total_memory_bytes=props.total_memory,
            driver_version=_nvml_call(lambda nvml, _h: nvml.nvmlSystemGetDriverVersion(), device),
            power_limit_w=_nvml_call(
                lambda n, h: n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0, device),
            **physical_gpu(device, props),
        )
    else:
        info["device_name"] = info["cpu_model"]
    return info


def physical_gpu(device: str, props: Any) -> dict[str, Any]:
    """Which physical GPU ``device`` is: NVML's index (the host's numbering, not the one
    CUDA_VISIBLE_DEVICES makes), UUID and PCI bus id. Rows of workers on different GPUs, or of
    cluster tasks that SLURM or Ray placed, say where they ran."""
    uuid = str(getattr(props, "uuid", "") or "") or None
    if uuid and not uuid.startswith("GPU-"):
        uuid = f"GPU-{uuid}"
    bus_id = _nvml_call(lambda n, h: n.nvmlDeviceGetPciInfo(h).busId, device)
    if bus_id is None and hasattr(props, "pci_bus_id"):
        bus_id = f"{getattr(props, 'pci_domain_id', 0):08X}:{props.pci_bus_id:02X}:" \
                 f"{getattr(props, 'pci_device_id', 0):02X}.0"
    return {"gpu_index": _nvml_call(lambda n, h: n.nvmlDeviceGetIndex(h), device),
            "gpu_uuid": uuid, "gpu_pci_bus_id": bus_id}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def _nvml() -> Any:
    """The initialised ``pynvml`` module (nvidia-ml-py), or None where it is not installed."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


@functools.cache
def _nvml_handle(device: str) -> Any:
    """NVML handle of a torch device, matched by UUID so CUDA_VISIBLE_DEVICES cannot
    confuse the two numberings."""
    nvml = _nvml()
    props = torch.cuda.get_device_properties(torch.device(device))
    uuid = str(getattr(props, "uuid", ""))
    try:
        return nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:
        return nvml.nvmlDeviceGetHandleByIndex(torch.device(device).index or 0)


def _nvml_call(read: Any, device: str) -> Any:
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        value = read(nvml, _nvml_handle(device))
    except Exception:
        return None
    return value.decode() if isinstance(value, bytes) else value


def gpu_state(device: str) -> dict[str, Any]:
    """SM/memory clocks, temperature, power and throttle reasons now; nulls off-GPU or
    without nvidia-ml-py."""
    if not device.startswith("cuda") or _nvml() is None:
        return dict.fromkeys(GPU_STATE_FIELDS)
    return {
        "sm_clock_mhz": _nvml_call(lambda n, h: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                                   device),
        "mem_clock_mhz": _nvml_call(lambda n, h: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
                                    device),
        "temperature_c": _nvml_call(
            lambda n, h: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU), device),
        "power_w": _nvml_call(lambda n, h: n.nvmlDeviceGetPowerUsage(h) / 1000.0, device),
        "throttle_reasons": _nvml_call(_throttle_reasons, device),
    }


#: The SM clock readers built so far, per device and NVML module: one per process, not one
#: per trial (building one asks NVML for the power limit).
_CLOCK_READERS: dict[tuple[str, int], Any] = {}


def sm_clock_reader(device: str) -> Any:
    """A function reading ``device``'s SM clock (MHz), board power over its enforced limit
    (now, and NVML's one-second average) and temperature (a
    ``runner.timing.series.Reading``), for the timer's settle rule and the samples' clock;
    None off-GPU or without nvidia-ml-py. Power now is NVML's instantaneous field where the
    driver has it: the plain reading is a one-second average on recent GPUs, too slow to
    see a load that began a few milliseconds ago. Built once per device and process (the
    power limit is read then, as ``environment`` reads ``power_limit_w`` once); a device
    NVML could not read is asked again next time."""
    nvml = _nvml()
    if not device.startswith("cuda") or nvml is None:
        return None
    key = (device, id(nvml))  # the reader holds nvml: its id is not reused while cached
    if key not in _CLOCK_READERS:
        reader = _build_clock_reader(device, nvml)
        if reader is None:
            return None
        _CLOCK_READERS[key] = reader
    return _CLOCK_READERS[key]


def _build_clock_reader(device: str, nvml: Any) -> Any:
    from runner.timing.series import Reading

    try:
        handle = _nvml_handle(device)
        nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
        limit_w = nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
    except Exception:
        return None
    try:
        max_mhz: float | None = float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))
    except Exception:
        max_mhz = None
    # NVML's field ids for instantaneous and averaged power (nvml.h), for bindings that do
    # not name them. The average is what the power controller holds to the limit
    # (runner.timing.settle.POWER_RISE_TOL); the instant is what the op draws now.
    fields = [getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", 186),
              getattr(nvml, "NVML_FI_DEV_POWER_AVERAGE", 185)]

    def power_shares() -> list[float | None]:
        """[instantaneous, averaged] board power over its limit; the plain reading where a
        field cannot be read (it is the one-second average on recent GPUs)."""
        try:
            shares = [v.value.uiVal / 1000.0 / limit_w if v.nvmlReturn == 0 and limit_w
                      else None for v in nvml.nvmlDeviceGetFieldValues(handle, fields)]
        except Exception:
            shares = [None, None]
        if None in shares:
            plain = _read(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0 / limit_w)
            shares = [plain if share is None else share for share in shares]
        return shares

    def read() -> Reading:
        instant, average = power_shares()
        return Reading(_read(lambda: float(nvml.nvmlDeviceGetClockInfo(handle,
                                                                       nvml.NVML_CLOCK_SM))),
                       instant, max_mhz, average, _read(lambda: float(
                           nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))))
    return read


def _read(value: Any) -> Any:
    """``value()``, or None where NVML could not read it."""
    try:
        return value()
    except Exception:
        return None


def _throttle_reasons(nvml: Any, handle: Any) -> str:
    """Active clock-event (throttle) reasons as a comma-separated list of names; "" = none."""
    getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = getter(handle)
    if id(nvml) not in _REASON_BITS:
        _REASON_BITS[id(nvml)] = (nvml, _reason_bits(nvml))
    return ",".join(sorted({name for bit, name in _REASON_BITS[id(nvml)][1] if mask & bit}))


#: The clock-event reason bits per NVML module (kept with the module, so its id stays its own):
#: scanning the module's ~2500 names took ~0.5 ms, and ``gpu_state`` runs three times a trial.
_REASON_BITS: dict[int, tuple[Any, tuple[tuple[int, str], ...]]] = {}


def _reason_bits(nvml: Any) -> tuple[tuple[int, str], ...]:
    """The single-bit clock-event reasons NVML's module names, as (bit, name) pairs."""
    bits = []
    for attr in dir(nvml):
        for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason"):
            if attr.startswith(prefix):
                bit = getattr(nvml, attr)
                name = attr[len(prefix):]
                if (isinstance(bit, int) and bit and bit & (bit - 1) == 0
                        and name not in ("None", "All")):
                    bits.append((bit, name))
    return tuple(bits)


def _git(cwd: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@functools.cache
def git_provenance() -> dict[str, Any]:
    """The project's commit and whether the tree had uncommitted changes (null outside git)."""
    # only opsweep's own repository: an installed runner's folder (site-packages) may sit
    # inside some other project's repository, whose commit is not opsweep's
    own = (PROJECT_ROOT / ".git").exists()
    commit = _git(PROJECT_ROOT, "rev-parse", "HEAD") if own else None
    if commit is None:
        # A copy of the tree without .git (e.g. shipped to a GPU machine) can say which
        # commit it is through the environment; dirtiness is then unknown.
        return {"git_commit": os.environ.get("OPSWEEP_GIT_COMMIT"), "git_dirty": None}
    status = _git(PROJECT_ROOT, "status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": bool(status) if status is not None else None}


def user_code_provenance(*targets: str) -> dict[str, Any]:
    """The commit and dirty flag of the repository holding the code a trial runs
    (``op.target``, else the op's ``_target_``), when that is not opsweep's own tree: a user
    benchmarking a function of their own project needs *its* version beside opsweep's."""
    for target in targets:
        if target:
            found = _repository_provenance(_module_of(target))
            if found is not None:
                return found
    return {"user_git_commit": None, "user_git_dirty": None}


def _module_of(target: str) -> str:
    """``pkg.mod:fn`` or ``pkg.mod.fn`` -> ``pkg.mod``."""
    return target.partition(":")[0] if ":" in target else target.rpartition(".")[0]


@functools.cache
def _repository_provenance(module: str) -> dict[str, Any] | None:
    """Read once per module per process (a sweep does not change its code as it runs)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module) if module else None
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    folder = Path(spec.origin).resolve().parent
    if folder.is_relative_to(PROJECT_ROOT):  # opsweep's own ops, even in a copy without .git
        return None
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() == PROJECT_ROOT:
        return None
    status = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return {"user_git_commit": _git(folder, "rev-parse", "HEAD"),
            "user_git_dirty": bool(status) if status is not None else None}
