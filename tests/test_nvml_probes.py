"""The per-trial NVML probes (runner.execution.environment) against a fake NVML module: what
they read, and that the one-time work (the clock reader, the clock-event reason table) is
done once per process, not once per trial."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from runner.execution import environment


class FakeNvml:
    """The parts of nvidia-ml-py the probes use, counting what is costly to repeat."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0
    NVML_FI_DEV_POWER_INSTANT, NVML_FI_DEV_POWER_AVERAGE = 186, 185
    nvmlClocksEventReasonGpuIdle = 0x1
    nvmlClocksEventReasonSwPowerCap = 0x4
    nvmlClocksThrottleReasonSwPowerCap = 0x4  # the old name of the same bit
    nvmlClocksEventReasonHwSlowdown = 0x8
    nvmlClocksEventReasonAll = 0xF  # not a single reason
    nvmlClocksEventReasonNone = 0

    def __init__(self) -> None:
        self.sm_mhz, self.power_mw, self.mask = 1980, 350_000, 0x4
        self.average_mw: int | None = None  # None: the average field cannot be read
        self.limit_reads = self.dir_calls = 0

    def __dir__(self) -> list[str]:
        self.dir_calls += 1
        return list(super().__dir__())

    def nvmlDeviceGetClockInfo(self, handle: Any, which: int) -> int:
        return self.sm_mhz if which == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetMaxClockInfo(self, handle: Any, which: int) -> int:
        return 1980 if which == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        self.limit_reads += 1
        return 700_000

    def nvmlDeviceGetFieldValues(self, handle: Any, fields: list[int]) -> list[Any]:
        assert fields == [self.NVML_FI_DEV_POWER_INSTANT, self.NVML_FI_DEV_POWER_AVERAGE]
        average = (SimpleNamespace(nvmlReturn=3, value=None) if self.average_mw is None
                   else SimpleNamespace(nvmlReturn=0,
                                        value=SimpleNamespace(uiVal=self.average_mw)))
        return [SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(uiVal=self.power_mw)),
                average]

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return self.power_mw

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        return 40

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return self.mask


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setattr(environment, "_nvml", lambda: fake)
    monkeypatch.setattr(environment, "_nvml_handle", lambda device: f"handle {device}")
    monkeypatch.setattr(environment, "_CLOCK_READERS", {})
    monkeypatch.setattr(environment, "_REASON_BITS", {})
    return fake


def test_the_clock_reader_is_built_once_per_device_and_reads_live(nvml: FakeNvml):
    read = environment.sm_clock_reader("cuda:0")
    assert environment.sm_clock_reader("cuda:0") is read
    assert nvml.limit_reads == 1  # the power limit is read when the reader is built
    assert read().clock_mhz == 1980 and read().power_share == pytest.approx(0.5)
    nvml.sm_mhz, nvml.power_mw = 1470, 693_000
    assert read().clock_mhz == 1470 and read().power_share == pytest.approx(0.99)
    assert read().max_clock_mhz == 1980
    assert environment.sm_clock_reader("cuda:1") is not read
    assert nvml.limit_reads == 2


def test_the_clock_reader_reads_the_averaged_power_the_controller_holds(nvml: FakeNvml):
    read = environment.sm_clock_reader("cuda:0")
    # no average field: the plain reading (itself an average on recent GPUs)
    assert read().power_avg_share == pytest.approx(0.5)
    nvml.power_mw, nvml.average_mw = 700_000, 420_000  # after an idle gap: the average lags
    reading = read()
    assert reading.power_share == pytest.approx(1.0)
    assert reading.power_avg_share == pytest.approx(0.6)


def test_a_reader_nvml_could_not_build_is_asked_for_again(nvml: FakeNvml,
                                                          monkeypatch: pytest.MonkeyPatch):
    limit = nvml.nvmlDeviceGetEnforcedPowerLimit

    def busy_once(handle: Any) -> int:
        if nvml.limit_reads == 0:
            nvml.limit_reads += 1
            raise RuntimeError("NVML busy")
        return limit(handle)

    monkeypatch.setattr(nvml, "nvmlDeviceGetEnforcedPowerLimit", busy_once)
    assert environment.sm_clock_reader("cuda:0") is None
    assert environment.sm_clock_reader("cuda:0")().clock_mhz == 1980


def test_throttle_reasons_are_named_and_the_module_is_scanned_once(nvml: FakeNvml):
    assert environment.gpu_state("cuda:0")["throttle_reasons"] == "SwPowerCap"
    nvml.mask = 0x1 | 0x4 | 0x8 | 0x2  # 0x2: a bit the module has no name for
    state = environment.gpu_state("cuda:0")
    assert state["throttle_reasons"] == "GpuIdle,HwSlowdown,SwPowerCap"
    assert state["sm_clock_mhz"] == 1980 and state["power_w"] == 350.0
    nvml.mask = 0
    assert environment.gpu_state("cuda:0")["throttle_reasons"] == ""
    assert nvml.dir_calls == 1
    assert environment.gpu_state("cpu") == dict.fromkeys(environment.GPU_STATE_FIELDS)
