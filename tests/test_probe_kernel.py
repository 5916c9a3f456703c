"""The clock probe's PTX kernel and its launch through the CUDA driver, against a fake driver:
what is loaded, what a launch passes, that another device's current context is restored, that
a failing driver call is named, and that without a driver the probe is simply absent."""

from __future__ import annotations

import ctypes
import re
from typing import Any

import pytest

from runner.timing import clock_probe, probe_kernel

OURS, OTHER = 0x1000, 0x2000


class FakeDriver:
    """The driver calls the probe uses, recording what they were given."""

    def __init__(self, current: int | None = None, fail: str | None = None) -> None:
        self.current = current
        self.fail = fail
        self.calls: list[tuple[str, Any]] = []
        self.launches: list[dict[str, Any]] = []

    def _result(self, name: str) -> int:
        return 1 if name == self.fail else 0  # CUDA_ERROR_INVALID_VALUE

    def cuInit(self, flags: int) -> int:
        self.calls.append(("init", flags))
        return self._result("cuInit")

    def cuDeviceGet(self, ref: Any, ordinal: int) -> int:
        ref._obj.value = 100 + ordinal  # a handle, not the ordinal itself
        return self._result("cuDeviceGet")

    def cuDevicePrimaryCtxRetain(self, ref: Any, device: Any) -> int:
        ref._obj.value = OURS
        self.calls.append(("retain", device.value))
        return self._result("cuDevicePrimaryCtxRetain")

    def cuCtxGetCurrent(self, ref: Any) -> int:
        ref._obj.value = self.current
        return self._result("cuCtxGetCurrent")

    def cuCtxSetCurrent(self, context: Any) -> int:
        value = context.value if isinstance(context, ctypes.c_void_p) else context
        self.calls.append(("set", value))
        self.current = value
        return self._result("cuCtxSetCurrent")

    def cuModuleLoadData(self, ref: Any, image: bytes) -> int:
        self.calls.append(("load", self.current, image))
        ref._obj.value = 0x3000
        return self._result("cuModuleLoadData")

    def cuModuleGetFunction(self, ref: Any, module: Any, name: bytes) -> int:
        self.calls.append(("function", name))
        ref._obj.value = 0x4000
        return self._result("cuModuleGetFunction")

    def cuLaunchKernel(self, function: Any, gx: int, gy: int, gz: int, bx: int, by: int,
                       bz: int, shared: int, stream: Any, params: Any, extra: Any) -> int:
        pointer = ctypes.cast(params[0], ctypes.POINTER(ctypes.c_uint64)).contents.value
        slot = ctypes.cast(params[1], ctypes.POINTER(ctypes.c_uint32)).contents.value
        self.launches.append({"grid": (gx, gy, gz), "block": (bx, by, bz), "stream": stream,
                              "pointer": pointer, "slot": slot, "context": self.current})
        return self._result("cuLaunchKernel")

    def cuGetErrorName(self, result: int, ref: Any) -> int:
        ref._obj.value = b"CUDA_ERROR_INVALID_VALUE"
        return 0


def _load(monkeypatch: pytest.MonkeyPatch, driver: FakeDriver) -> probe_kernel.ProbeKernel:
    monkeypatch.setattr(probe_kernel, "_driver", lambda: driver)
    return probe_kernel.load_probe_kernel(3, multiprocessors=132)


def test_the_kernel_is_loaded_into_the_device_s_own_context_and_the_caller_s_restored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    driver = FakeDriver(current=OTHER)
    _load(monkeypatch, driver)
    load = next(call for call in driver.calls if call[0] == "load")
    assert driver.calls[0] == ("init", 0)
    assert ("retain", 103) in driver.calls  # device 3's handle
    assert load[1] == OURS  # loaded where device 3's kernels run
    assert load[2] == probe_kernel.PROBE_PTX
    assert ("function", b"opsweep_clock_probe") in driver.calls
    assert driver.current == OTHER  # torch reads its current device from this


def test_a_launch_covers_every_multiprocessor_on_the_given_stream_and_slot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    driver = FakeDriver(current=OURS)
    kernel = _load(monkeypatch, driver)
    kernel.launch(out_ptr=0xABC000, slot=7, stream=0x55)
    (launch,) = driver.launches
    assert launch["grid"] == (132, 1, 1)  # one block per SM: one of them runs on SM 0
    assert launch["block"] == (probe_kernel.THREADS_PER_BLOCK, 1, 1)
    assert (launch["stream"], launch["pointer"], launch["slot"]) == (0x55, 0xABC000, 7)
    assert launch["context"] == OURS


def test_a_launch_from_another_device_s_context_switches_for_it_and_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    driver = FakeDriver(current=OURS)
    kernel = _load(monkeypatch, driver)
    driver.current = OTHER  # the thread moved on to another GPU
    kernel.launch(out_ptr=1, slot=0, stream=0)
    assert driver.launches[-1]["context"] == OURS
    assert driver.current == OTHER
    driver.calls.clear()
    driver.current = OURS
    kernel.launch(out_ptr=1, slot=1, stream=0)
    assert driver.calls == []  # already current: no switch at all


@pytest.mark.parametrize("call", ["cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
                                  "cuCtxGetCurrent", "cuCtxSetCurrent", "cuModuleLoadData",
                                  "cuModuleGetFunction", "cuLaunchKernel"])
def test_a_failing_driver_call_is_named(monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    driver = FakeDriver(current=OTHER, fail=call)
    with pytest.raises(RuntimeError, match=rf"{call} failed .*CUDA_ERROR_INVALID_VALUE.*"
                                           r"sm_70 or newer.*NVML"):
        _load(monkeypatch, driver).launch(out_ptr=1, slot=0, stream=0)


@pytest.mark.parametrize("call", ["cuModuleLoadData", "cuModuleGetFunction", "cuLaunchKernel"])
def test_the_caller_s_context_is_restored_when_loading_or_launching_fails(
        monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    driver = FakeDriver(current=OTHER, fail=call)
    with pytest.raises(RuntimeError):
        _load(monkeypatch, driver).launch(out_ptr=1, slot=0, stream=0)
    assert driver.current == OTHER


class FakeKernel:
    def __init__(self) -> None:
        self.launches: list[tuple[int, int, int]] = []

    def launch(self, out_ptr: int, slot: int, stream: int) -> None:
        self.launches.append((out_ptr, slot, stream))


def _fake_cuda(monkeypatch: pytest.MonkeyPatch, current: int) -> tuple[list, FakeKernel]:
    """torch.cuda as a probe sees it, on a host whose current device is ``current``."""
    import torch

    kernel, loaded, streams = FakeKernel(), [], []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda ordinal: type("P", (), {"multi_processor_count": 132})())

    def load(ordinal: int, multiprocessors: int) -> FakeKernel:
        loaded.append((ordinal, multiprocessors))
        return kernel

    def current_stream(device: Any) -> Any:
        streams.append(device)
        return type("S", (), {"cuda_stream": 0x77})()

    monkeypatch.setattr(probe_kernel, "load_probe_kernel", load)
    monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
    return [loaded, streams], kernel


def test_a_probe_records_into_its_buffer_on_its_own_device_s_current_stream(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Built from plain ``cuda`` while device 2 is current, the probe stays device 2's: its
    kernel is loaded there and it launches on that device's stream, whatever is current
    later."""
    import torch

    (loaded, streams), kernel = _fake_cuda(monkeypatch, current=2)
    probe = clock_probe.ClockProbe("cuda")
    assert loaded == [(2, 132)]
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)  # the thread moved on
    stamps = torch.zeros(8, dtype=torch.int64)
    probe.record(stamps, 3)
    assert kernel.launches == [(stamps.data_ptr(), 3, 0x77)]
    assert streams == [torch.device("cuda", 2)]


def test_plain_cuda_and_its_index_share_one_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []
    monkeypatch.setattr(clock_probe, "_PROBES", {})
    monkeypatch.setattr(clock_probe, "_try_probe", lambda device: tried.append(device))
    import torch

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    clock_probe.clock_probe("cuda")
    clock_probe.clock_probe(torch.device("cuda", 1))
    clock_probe.clock_probe("cuda:0")
    assert tried == ["cuda:1", "cuda:0"]


def test_the_ptx_reads_the_timer_and_cycles_of_sm_0_into_the_slot() -> None:
    """The kernel's text: both counters read, only SM 0's thread 0 writes, 16 bytes a slot,
    and NUL-terminated (the driver reads it as a C string)."""
    ptx = probe_kernel.PROBE_PTX.decode()
    assert ptx.endswith("\0")
    for needle in ("%globaltimer", "%clock64", "%smid", "%tid.x", "mul.wide.u32 %rd4, %r4, 16",
                   "st.global.u64 [%rd5], %rd1", "st.global.u64 [%rd5+8], %rd2"):
        assert needle in ptx
    assert re.search(r"\.entry opsweep_clock_probe\(", ptx)
    assert probe_kernel._NAME.decode() in ptx


def test_without_a_cuda_driver_there_is_no_probe_and_the_callers_use_nvml(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU-only host (or one whose driver will not load the kernel): None, not an error."""
    monkeypatch.setattr(clock_probe, "_PROBES", {})
    assert clock_probe.clock_probe("cpu") is None

    asked: list[str] = []

    def no_driver() -> Any:
        asked.append("libcuda.so.1")
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(probe_kernel, "_driver", no_driver)
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda ordinal: type("P", (), {"multi_processor_count": 132})())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert clock_probe.clock_probe("cuda:0") is None
    assert asked == ["libcuda.so.1"]  # the driver was asked: the probe was really tried
