"""A worker's warm-up (runner.execution.warmup): the records beside the CUDA work."""

from __future__ import annotations

import threading

import pytest

from runner.execution import environment, warmup


def test_warm_reads_the_records_on_a_thread_of_their_own_and_waits_for_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def git() -> dict:
        seen.append(threading.current_thread().name)
        return {}

    monkeypatch.setattr(environment, "git_provenance", git)
    info = warmup.warm(("cpu",))
    # read beside the context and cuBLAS handles, and done before the warm-up answers
    assert seen and seen[0] != threading.main_thread().name
    assert "warm_error" not in info and info["warm_s"] >= 0 and "warmed_at" in info


def test_a_failing_record_is_the_first_trial_s_to_report(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    def broken() -> dict:
        raise OSError("git is gone")

    monkeypatch.setattr(environment, "git_provenance", broken)
    assert warmup.warm(("cpu",))["warm_error"] == "OSError: git is gone"


class FakeDriver:
    """libcuda's four calls that :func:`warmup.open_driver` makes, recorded."""

    def __init__(self, init_status: int = 0) -> None:
        self.calls: list[tuple] = []
        self.init_status = init_status
        self.thread = ""

    def cuInit(self, flags: int) -> int:  # noqa: N802 (the driver's names)
        self.thread = threading.current_thread().name
        self.calls.append(("cuInit", flags))
        return self.init_status

    def cuDeviceGet(self, device: object, ordinal: int) -> int:  # noqa: N802
        self.calls.append(("cuDeviceGet", ordinal))
        return 0 if ordinal < 2 else 101  # CUDA_ERROR_INVALID_DEVICE past two GPUs

    def cuDevicePrimaryCtxRetain(self, context: object, device: object) -> int:  # noqa: N802
        self.calls.append(("retain",))
        return 0


def test_the_driver_and_each_primary_context_open_on_a_thread_beside_the_import(
        monkeypatch: pytest.MonkeyPatch) -> None:
    driver = FakeDriver()
    monkeypatch.setattr(warmup.ctypes, "CDLL", lambda name: driver)
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    assert warmup.open_driver(()) is None  # a CPU worker opens nothing
    assert driver.calls == [] and "CUDA_MODULE_LOADING" not in warmup.os.environ
    monkeypatch.setenv("CUDA_MODULE_LOADING", "EAGER")  # the user's choice is kept
    warmup.open_driver((0,)).join(5)
    assert warmup.os.environ["CUDA_MODULE_LOADING"] == "EAGER"
    monkeypatch.delenv("CUDA_MODULE_LOADING")
    driver.calls.clear()
    thread = warmup.open_driver((0, 1, 5))
    assert thread is not None
    thread.join(5)
    assert driver.thread not in ("", threading.main_thread().name)
    # the driver fixes its module loading at cuInit: lazy, as torch would have asked
    assert warmup.os.environ["CUDA_MODULE_LOADING"] == "LAZY"
    # device 5 does not exist: no context is asked for it, and nothing raises
    assert driver.calls == [("cuInit", 0), ("cuDeviceGet", 0), ("retain",),
                            ("cuDeviceGet", 1), ("retain",), ("cuDeviceGet", 5)]


def test_no_driver_or_a_failing_init_leaves_it_to_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(warmup.ctypes, "CDLL", missing)
    thread = warmup.open_driver((0,))
    assert thread is not None
    thread.join(5)
    failing = FakeDriver(init_status=100)  # CUDA_ERROR_NO_DEVICE
    monkeypatch.setattr(warmup.ctypes, "CDLL", lambda name: failing)
    thread = warmup.open_driver((0,))
    assert thread is not None
    thread.join(5)
    assert failing.calls == [("cuInit", 0)]


def test_a_worker_that_will_warm_a_gpu_is_told_its_ordinals_at_spawn(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.execution import worker

    spawned: list[tuple] = []

    class Spawned:
        warmed: tuple = ()

        def __init__(self, env: object, threads: object, name: str,
                     cuda_ordinals: tuple = ()) -> None:
            spawned.append(cuda_ordinals)

        def alive(self) -> bool:
            return True

        def post(self, message: tuple) -> None:
            pass

    monkeypatch.setattr(worker, "Worker", Spawned)
    worker.Supervisor().prestart(("cuda:1", "cpu"))
    worker.Supervisor().prestart(("cpu",))
    worker.Supervisor().prestart()
    assert spawned == [(1,), (), ()]
    assert warmup.cuda_ordinals(("cuda", "cuda:0", "cuda:2", "cpu")) == (0, 2)


def test_a_cuda_warm_up_started_after_the_import_is_waited_for_not_done_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []
    release = threading.Event()

    def cuda(device: str, info: dict) -> None:
        calls.append((device, threading.current_thread().name))
        release.wait(5)  # still running when the warm request comes
        info["cuda_context_s"] = 0.25

    monkeypatch.setattr(warmup, "_cuda", cuda)
    monkeypatch.setattr(environment, "git_provenance", dict)
    monkeypatch.setattr(warmup, "_records", lambda devices, info: None)
    warmup.start_cuda((0,))
    assert calls and calls[0][1] != threading.main_thread().name  # beside the imports
    threading.Timer(0.05, release.set).start()
    info = warmup.warm(("cuda:0", "cpu"))
    # warm waited for the thread and took its record; it did not warm cuda:0 again
    assert calls == [("cuda:0", calls[0][1])]
    assert info["cuda_context_s"] == pytest.approx(0.25) and "warm_error" not in info
    # a device nobody started early is warmed here, as before
    warmup.warm(("cuda:1",))
    assert calls[-1] == ("cuda:1", threading.main_thread().name)


def test_an_early_cuda_warm_up_that_fails_is_the_first_trial_s_to_report(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(device: str, info: dict) -> None:
        raise RuntimeError("CUDA driver version is insufficient")

    monkeypatch.setattr(warmup, "_cuda", broken)
    monkeypatch.setattr(warmup, "_records", lambda devices, info: None)
    warmup.start_cuda((0,))
    info = warmup.warm(("cuda",))  # "cuda" is ordinal 0: the early thread's
    assert info["warm_error"] == "RuntimeError: CUDA driver version is insufficient"
