"""The clock probe's kernel, in PTX, loaded and launched through the CUDA driver.

Why not Triton: a probe written in Triton cost every worker Triton's import and a compile of
its kernel (a ``ptxas`` run) before its first trial, 0.7-2.7 s a process, on a thread that held
the GIL beside the worker's other imports (docs/scale-out.md). The kernel is a dozen
instructions. As PTX the driver compiles it in milliseconds, with no Triton at all; a launch
through ``ctypes`` costs the host about what Triton's launcher did.

A :class:`ProbeKernel` is used from one thread at a time (the one timing the trial).

The kernel reads the global timer (ns) and the cycle counter of the multiprocessor it runs on.
``%clock64`` counts one multiprocessor's cycles, so every probe must read the same one: the
grid covers every multiprocessor and only thread 0 of a block on SM 0 writes. Launched on the
current stream, it is captured into a CUDA graph like any kernel.
"""

from __future__ import annotations

import ctypes
from typing import Any

#: One thread per block does the work; a block of 32 keeps the grid a single wave.
THREADS_PER_BLOCK = 32

#: ``out[2*slot] = %globaltimer; out[2*slot+1] = %clock64``, from thread 0 of a block on SM 0.
#: PTX 6.0 for sm_70: the driver compiles it for the GPU at hand (Volta or newer) when the
#: module is loaded. Older GPUs, or a driver with its PTX compiler off
#: (``CUDA_DISABLE_PTX_JIT=1``), refuse it, and the callers use NVML's clock.
PROBE_PTX = b"""
.version 6.0
.target sm_70
.address_size 64

.visible .entry opsweep_clock_probe(.param .u64 out_ptr, .param .u32 slot)
{
    .reg .pred %p<2>;
    .reg .b32 %r<5>;
    .reg .b64 %rd<6>;

    mov.u32 %r1, %smid;
    mov.u32 %r2, %tid.x;
    or.b32 %r3, %r1, %r2;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra DONE;
    mov.u64 %rd1, %globaltimer;
    mov.u64 %rd2, %clock64;
    ld.param.u64 %rd3, [out_ptr];
    cvta.to.global.u64 %rd3, %rd3;
    ld.param.u32 %r4, [slot];
    mul.wide.u32 %rd4, %r4, 16;
    add.s64 %rd5, %rd3, %rd4;
    st.global.u64 [%rd5], %rd1;
    st.global.u64 [%rd5+8], %rd2;
DONE:
    ret;
}
\0"""

_NAME = b"opsweep_clock_probe"


class ProbeKernel:
    """The probe's kernel loaded into one device's primary context (the one torch uses).

    ``launch(out_ptr, slot, stream)`` queues it on ``stream`` (a raw ``cudaStream_t`` such as
    ``torch.cuda.current_stream().cuda_stream``). Raises ``RuntimeError`` naming the driver
    call that failed, so the caller can fall back to NVML's clock."""

    def __init__(self, driver: Any, context: Any, multiprocessors: int) -> None:
        self._driver = driver
        self._context = context
        self._grid = multiprocessors
        module = ctypes.c_void_p()
        _check(driver, driver.cuModuleLoadData(ctypes.byref(module), PROBE_PTX),
               "cuModuleLoadData")
        function = ctypes.c_void_p()
        _check(driver, driver.cuModuleGetFunction(ctypes.byref(function), module, _NAME),
               "cuModuleGetFunction")
        self._function = function

    def launch(self, out_ptr: int, slot: int, stream: int) -> None:
        # The function belongs to this device's context. Where another device's context is
        # current on this thread, switch for the launch and back: torch reads its current
        # device from the current context.
        current = ctypes.c_void_p()
        _check(self._driver, self._driver.cuCtxGetCurrent(ctypes.byref(current)),
               "cuCtxGetCurrent")
        switch = current.value != self._context.value
        if switch:
            _check(self._driver, self._driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
        try:
            pointer, index = ctypes.c_uint64(out_ptr), ctypes.c_uint32(slot)
            params = (ctypes.c_void_p * 2)(ctypes.addressof(pointer), ctypes.addressof(index))
            _check(self._driver,
                   self._driver.cuLaunchKernel(self._function, self._grid, 1, 1,
                                               THREADS_PER_BLOCK, 1, 1, 0, stream, params, None),
                   "cuLaunchKernel")
        finally:
            if switch:
                self._driver.cuCtxSetCurrent(current)


def load_probe_kernel(ordinal: int, multiprocessors: int) -> ProbeKernel:
    """The probe's kernel in the primary context of CUDA device ``ordinal``: the context torch
    uses (retained here, so made if torch has not made it yet)."""
    driver = _driver()
    _check(driver, driver.cuInit(0), "cuInit")  # a no-op once torch has initialised CUDA
    device, context = ctypes.c_int(), ctypes.c_void_p()
    _check(driver, driver.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
    _check(driver, driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device),
           "cuDevicePrimaryCtxRetain")
    # Retained, never released: the context lives as long as the process, as torch's does.
    current = ctypes.c_void_p()
    _check(driver, driver.cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
    _check(driver, driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    try:
        return ProbeKernel(driver, context, multiprocessors)  # the module loads into `context`
    finally:
        driver.cuCtxSetCurrent(current)


def _driver() -> Any:
    driver = ctypes.CDLL("libcuda.so.1")
    driver.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    driver.cuModuleLoadData.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    driver.cuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
    driver.cuInit.argtypes = [ctypes.c_uint]
    driver.cuDeviceGet.argtypes = [ctypes.c_void_p, ctypes.c_int]
    driver.cuDevicePrimaryCtxRetain.argtypes = [ctypes.c_void_p, ctypes.c_int]
    driver.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    driver.cuCtxGetCurrent.argtypes = [ctypes.c_void_p]
    return driver


def _check(driver: Any, result: int, call: str) -> None:
    if result != 0:
        name = ctypes.c_char_p()
        driver.cuGetErrorName(result, ctypes.byref(name))
        raise RuntimeError(f"{call} failed with CUDA error {result} "
                           f"({(name.value or b'?').decode()}): the clock probe needs a CUDA "
                           "driver that compiles PTX for sm_70 or newer (Volta on, PTX JIT "
                           "not disabled); without it NVML's clock is used instead")
