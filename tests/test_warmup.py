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
