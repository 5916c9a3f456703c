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
    entered, release = threading.Event(), threading.Event()

    def cuda(device: str, info: dict) -> None:
        calls.append((device, threading.current_thread().name))
        entered.set()
        release.wait(5)  # still running when the warm request comes
        info["cuda_context_s"] = 0.25

    monkeypatch.setattr(warmup, "_cuda", cuda)
    monkeypatch.setattr(environment, "git_provenance", dict)
    monkeypatch.setattr(warmup, "_records", lambda devices, info: None)
    warmup.start_cuda((0,))
    assert entered.wait(5)
    assert calls[0][1] != threading.main_thread().name  # beside the imports
    threading.Timer(0.05, release.set).start()
    info = warmup.warm(("cuda:0", "cpu"))
    # warm waited for the thread and took its record; it did not warm cuda:0 again
    assert calls == [("cuda:0", calls[0][1])]
    assert info["cuda_context_s"] == pytest.approx(0.25) and "warm_error" not in info
    # a device nobody started early is warmed here, as before
    warmup.warm(("cuda:1",))
    assert calls[-1] == ("cuda:1", threading.main_thread().name)
    # one started early that no request names is still waited for, not left running
    warmup.start_cuda((3,))
    warmup.warm(("cpu",))
    assert ("cuda:3", calls[-1][1]) == calls[-1] and not warmup._STARTED


def test_an_early_cuda_warm_up_that_fails_is_the_first_trial_s_to_report(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(device: str, info: dict) -> None:
        raise RuntimeError("CUDA driver version is insufficient")

    monkeypatch.setattr(warmup, "_cuda", broken)
    monkeypatch.setattr(warmup, "_records", lambda devices, info: None)
    warmup.start_cuda((0,))
    info = warmup.warm(("cuda",))  # "cuda" is ordinal 0: the early thread's
    assert info["warm_error"] == "RuntimeError: CUDA driver version is insufficient"
