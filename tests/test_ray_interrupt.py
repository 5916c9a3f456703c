"""Ctrl-C of a sweep that Ray runs (``hydra/launcher=ray`` on a local cluster), for real.

Ray starts its workers in process groups of their own with SIGINT blocked: the terminal's
Ctrl-C reaches only the driver (and Ray's own daemons), never a job. The driver stops the jobs
through Ray (``runner.execution.ray_stop``); these tests check that the sweep then ends as a
basic one does, and that the resume completes it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pandas as pd
from test_launchers import ray_env  # noqa: F401  (a fixture: Ray installed, its own folders)

#: trials per job (a few ms each): the Ctrl-C lands while the jobs run, never as they end
TRIALS = 1000
RAY = ["hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2",
       "+hydra.launcher.ray.init.include_dashboard=false"]


def test_ctrl_c_ends_a_ray_sweep_with_exit_130_and_a_resume_that_completes_it(
        start_cli: Any, tmp_path: Path, ray_env: dict[str, str]) -> None:  # noqa: F811
    """The terminal's Ctrl-C (SIGINT to the whole process group: the driver and Ray's
    daemons; Ray's workers, in groups of their own, get nothing) ends a Ray sweep as it ends
    a basic one: each job stops after its trial in flight, the driver merges what finished,
    exits 130 without a traceback and names the resume command, which then completes the
    sweep, every trial once."""
    shape = "shape=[" + ",".join(f"[{n}]" for n in range(1, TRIALS + 1)) + "]"
    run = start_cli(["op=vector_add", "device=cpu", "timer=smoke", shape, "seed=1,2", "-m",
                     *RAY, "sweep_id=s"], tmp_path, env=ray_env, new_session=True)
    sweep = tmp_path / "results" / "s"
    run.ctrl_c_after_rows(sweep)
    assert run.returncode == 130, run.explain()
    assert "Traceback" not in run.output
    assert f"Continue with: python -m runner.resume results{os.sep}s" in run.output
    stopped = pd.read_parquet(sweep / "results.parquet")
    assert set(stopped["status"]) == {"ok"} and set(stopped["launcher"]) == {"ray"}
    per_job = stopped.groupby("job_num").size()
    assert 0 < len(stopped) and (per_job < TRIALS).all(), per_job  # no job ran to its end
    resumed = start_cli([str(sweep)], tmp_path, module="runner.resume", env=ray_env).wait()
    assert resumed.returncode == 0, resumed.explain()
    rows = pd.read_parquet(sweep / "results.parquet")
    assert sorted(zip(rows["job_num"], rows["trial_index"])) == \
        [(j, i) for j in (0, 1) for i in range(TRIALS)]  # every trial once


# ---------------------------------------------------------------------------------------
# The driver's side, with a fake Ray: which jobs are cancelled, how, and what Hydra gets
# ---------------------------------------------------------------------------------------

class _Cancelled(Exception):
    pass


class _FakeRay:
    """Jobs ``"a"``, ``"b"`` (running: end once cancelled) and ``"c"`` (queued: a cancel
    drops it); ``"done"`` had ended before the Ctrl-C and is never cancelled."""

    def __init__(self) -> None:
        self.cancels: list[tuple[str, bool]] = []
        self.ended = {"done"}

    def cancel(self, ref: str, force: bool = False) -> None:
        assert ref not in self.ended, "a job whose result is in is never cancelled"
        self.cancels.append((ref, force))
        self.ended.add(ref)

    def wait(self, refs: list[str], num_returns: int, timeout: float) -> tuple[list, list]:
        return [r for r in refs if r in self.ended], [r for r in refs if r not in self.ended]

    def get(self, ref: str) -> str:
        if ref == "c":
            raise _Cancelled(ref)
        return f"return of {ref}"


def test_ctrl_c_in_a_ray_launch_cancels_the_jobs_and_hands_hydra_those_that_ended(
        monkeypatch: Any) -> None:
    import sys
    import types

    from runner.execution import interrupt, ray_stop

    fake = _FakeRay()
    exceptions = types.SimpleNamespace(TaskCancelledError=_Cancelled,
                                       WorkerCrashedError=_Cancelled)
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(
        cancel=fake.cancel, wait=fake.wait, get=fake.get, exceptions=exceptions))
    monkeypatch.setitem(sys.modules, "ray.exceptions", exceptions)

    def plugin_launch(launcher: Any, overrides: Any, first: int) -> list[str]:
        for ref in ("done", "a", "b", "c"):
            ray_stop._submit(ref)
        signal.raise_signal(signal.SIGINT)  # the Ctrl-C, while the plugin waits in ray.get
        raise AssertionError("the Ctrl-C did not stop the plugin's wait")

    monkeypatch.setattr(ray_stop, "_PLUGIN", {"launch": plugin_launch, "submit": str})
    previous = signal.getsignal(signal.SIGINT)
    try:
        interrupt.install()
        assert ray_stop._launch(None, [], 0) == ["return of done", "return of a",
                                                  "return of b"]
        assert fake.cancels == [("a", False), ("b", False), ("c", False)]  # not forced
        assert interrupt.presses() == 1
        assert ray_stop._launch(None, [], 0) == []  # a later batch: nothing starts
    finally:
        interrupt.install()  # no Ctrl-C counted for the tests that follow
        signal.signal(signal.SIGINT, previous)
