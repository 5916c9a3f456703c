"""What the energy window reads from the device: NVML's total-energy counter and its state.

Behind one small protocol (:class:`EnergyReader`) so that :mod:`runner.execution.energy`'s
window runs against a fake counter and a fake clock in tests.
"""

from __future__ import annotations

from typing import Any, Protocol


class EnergyReader(Protocol):
    """What the window reads from the device (NVML in production, a fake in tests)."""

    def energy_mj(self) -> int:
        """The board's total-energy counter, mJ."""

    def state(self) -> dict[str, Any]:
        """``sm_clock_mhz``, ``mem_clock_mhz``, ``temperature_c``, ``throttle_reasons`` and
        ``power_instant_w`` (None where unavailable)."""


class NvmlReader:
    """:class:`EnergyReader` over nvidia-ml-py for one torch device."""

    def __init__(self, device: str) -> None:
        from runner.execution import environment

        self._nvml = environment._nvml()
        if self._nvml is None:
            raise EnergyUnavailable("nvidia-ml-py is not installed or NVML did not start; "
                                    "install the gpu extra: pip install -e '.[gpu]'")
        self._device = device
        self._handle = environment._nvml_handle(device)
        try:
            self.energy_mj()
        except Exception as exc:
            raise EnergyUnavailable(f"NVML total-energy counter unavailable on {device}: "
                                    f"{exc}") from None
        self._instant = getattr(self._nvml, "NVML_FI_DEV_POWER_INSTANT", None)

    def energy_mj(self) -> int:
        return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))

    def state(self) -> dict[str, Any]:
        from runner.execution.environment import gpu_state

        return {**gpu_state(self._device), "power_instant_w": self._power_instant_w()}

    def _power_instant_w(self) -> float | None:
        try:
            value = self._nvml.nvmlDeviceGetFieldValues(self._handle, [self._instant])[0]
            return float(value.value.uiVal) / 1000.0 if value.nvmlReturn == 0 else None
        except Exception:  # no such field on this driver/GPU (or _instant is None)
            return None


class EnergyUnavailable(RuntimeError):
    """Why energy cannot be measured here; becomes ``energy_reason``."""
