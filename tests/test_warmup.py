"""A worker's warm-up (runner.execution.warmup): the records beside the CUDA work."""

from __future__ import annotations

import threading

import pytest
from fakes import ManualClock

from runner.execution import environment, warmup, worker_loop


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
    early = warmup.start_cuda((0,))
    assert entered.wait(5)
    assert calls[0][1] != threading.main_thread().name  # beside the imports
    threading.Timer(0.05, release.set).start()
    info = warmup.warm(("cuda:0", "cpu"), early)
    # warm waited for the thread and took its record; it did not warm cuda:0 again
    assert calls == [("cuda:0", calls[0][1])]
    assert info["cuda_context_s"] == pytest.approx(0.25) and "warm_error" not in info
    # a device nobody started early is warmed here, as before
    warmup.warm(("cuda:1",))
    assert calls[-1] == ("cuda:1", threading.main_thread().name)
    # one started early that no request names is still waited for, not left running
    early = warmup.start_cuda((3,))
    warmup.warm(("cpu",), early)
    assert ("cuda:3", calls[-1][1]) == calls[-1] and not early


def test_the_worker_s_warm_request_joins_the_warm_ups_it_started(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker keeps what ``start_cuda`` started and hands it to ``warm``: no module
    global carries it from the import to the request."""
    calls: list[str] = []
    monkeypatch.setattr(warmup, "_cuda", lambda device, info: calls.append(device))
    monkeypatch.setattr(warmup, "_records", lambda devices, info: None)
    early = warmup.start_cuda((0,))
    kind, info, retire = worker_loop.handle("warm", ("cuda:0",), None, early)
    assert (kind, retire, calls, early) == ("warmed", False, ["cuda:0"], {})
    assert "warm_error" not in info


def test_serve_hands_the_warm_ups_its_start_began_to_its_requests(
        monkeypatch: pytest.MonkeyPatch) -> None:
    started = {0: "the early thread"}
    handed: list = []
    monkeypatch.setattr(worker_loop, "_start", lambda conn, env, threads, ordinals: started)
    monkeypatch.setattr(worker_loop, "answer_requests",
                        lambda conn, heat_while_idle=None, early=None: handed.append(early))
    worker_loop.serve(object(), cuda_ordinals=(0,))
    assert handed == [started] and handed[0] is started


def test_an_early_cuda_warm_up_that_fails_is_the_first_trial_s_to_report(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(device: str, info: dict) -> None:
        raise RuntimeError("CUDA driver version is insufficient")

    monkeypatch.setattr(warmup, "_cuda", broken)
    monkeypatch.setattr(warmup, "_records", lambda devices, info: None)
    early = warmup.start_cuda((0,))
    info = warmup.warm(("cuda",), early)  # "cuda" is ordinal 0: the early thread's
    assert info["warm_error"] == "RuntimeError: CUDA driver version is insufficient"


def test_the_clock_probe_is_built_in_the_warm_up_not_in_the_first_trial(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the clock probe inside the first trial would put it in every worker's first
    ``cost_other_s``; the warm-up builds it, and its early thread's record is kept."""
    import torch

    from runner.timing import clock_probe

    built: list[str] = []
    monkeypatch.setattr(clock_probe, "clock_probe", lambda device: built.append(device))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch, "ones", lambda *a, **k: torch.zeros(2, 2))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    info: dict = {}
    warmup._cuda("cuda:0", info)
    assert built == ["cuda:0"] and info["clock_probe_s"] >= 0
    merged: dict = {}
    warmup._merge(merged, {"cuda_context_s": 0.5, "clock_probe_s": 1.25})
    assert merged == {"cuda_context_s": 0.5, "clock_probe_s": 1.25}


def test_a_gpu_is_kept_warm_until_a_request_comes_and_a_cpu_never() -> None:
    clock, chunks = ManualClock(), []

    def heat(device: str, seconds: float) -> None:
        chunks.append(device)
        clock.now += seconds

    asked = iter([False, False, False, True])
    heated = warmup.heat_while_idle("cuda:0", 30.0, lambda: next(asked), heat, clock)
    assert chunks == ["cuda:0"] * 3 and heated == pytest.approx(3 * warmup.HEAT_CHUNK_S)
    clock.now, chunks[:] = 0.0, []
    assert warmup.heat_while_idle("cuda:0", 0.2, lambda: False, heat, clock) >= 0.2
    assert len(chunks) == round(0.2 / warmup.HEAT_CHUNK_S), "heated past its longest"
    chunks.clear()
    assert warmup.heat_while_idle("cpu", 30.0, lambda: False, heat, clock) == 0.0
    assert not chunks


class FakeConn:
    """The worker's end of the pipe: the driver's requests, and what it sent back."""

    def __init__(self, requests: list[tuple]) -> None:
        self.requests, self.sent = list(requests), []

    def recv(self) -> tuple:
        if not self.requests:
            raise EOFError
        return self.requests.pop(0)

    def poll(self, timeout: float = 0.0) -> bool:
        return bool(self.requests)

    def send(self, answer: tuple) -> None:
        self.sent.append(answer)


def test_keep_warm_is_answered_at_once_then_heats_until_the_next_request(
        monkeypatch: pytest.MonkeyPatch) -> None:

    heats: list[tuple] = []

    def heat_while_idle(device: str, max_s: float, asked: object) -> float:
        heats.append((device, max_s, list(conn.sent), asked()))
        return 0.0

    monkeypatch.setattr(worker_loop, "handle",
                        lambda kind, payload, state, early: ("done", kind, False))
    conn = FakeConn([("keep_warm", ("cuda:0", 30.0)), ("heat", ("cuda:0", 1.0)),
                     ("keep_warm", ("cuda:0", 30.0))])
    worker_loop.answer_requests(conn, heat_while_idle)
    # answered before heating (the driver reads it without waiting); stopped by the next
    # request; the last one heats until the driver hangs up
    assert heats[0] == ("cuda:0", 30.0, [("keeping", {}, False)], True)
    assert heats[1][3] is False
    assert conn.sent == [("keeping", {}, False), ("done", "heat", False),
                         ("keeping", {}, False)]


def test_gpu_warmup_counts_the_heat_given_while_the_driver_planned() -> None:
    from runner.execution.worker_loop import HEAT_GAP_S, still_to_heat

    heated = ("cuda:0", 3.0, 100.0)  # kept warm 3 s, until t=100
    assert still_to_heat(("cuda:0", 5.0), heated, now_s=100.1) == ("cuda:0", 2.0)
    assert still_to_heat(("cuda:0", 2.0), heated, now_s=100.1) == ("cuda:0", 0.0)
    assert still_to_heat(("cuda:1", 5.0), heated, now_s=100.1) == ("cuda:1", 5.0)
    late = 100.0 + 2 * HEAT_GAP_S  # cooled since: the whole heat again
    assert still_to_heat(("cuda:0", 5.0), heated, now_s=late) == ("cuda:0", 5.0)


def test_a_heat_request_right_after_keep_warm_heats_only_the_rest(
        monkeypatch: pytest.MonkeyPatch) -> None:

    handled: list[tuple] = []
    monkeypatch.setattr(worker_loop, "handle",
                        lambda kind, payload, state, early: handled.append((kind, payload)) or
                        ("done", None, False))
    conn = FakeConn([("keep_warm", ("cuda:0", 30.0)), ("heat", ("cuda:0", 5.0)),
                     ("heat", ("cuda:0", 5.0))])
    worker_loop.answer_requests(conn, lambda device, max_s, asked: 4.0)
    assert handled == [("heat", ("cuda:0", 1.0)), ("heat", ("cuda:0", 5.0))]
