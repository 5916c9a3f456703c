"""Ctrl-C of a sweep that Ray runs (``hydra/launcher=ray`` on a local cluster), for real.

Ray starts its workers in process groups of their own with SIGINT blocked: the terminal's
Ctrl-C reaches only the driver (and Ray's own daemons), never a job. The driver stops the jobs
through Ray (``runner.execution.ray_stop``); these tests check that the sweep then ends as a
basic one does, and that the resume completes it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
from test_launchers import ray_env  # noqa: F401  (a fixture: Ray installed, its own folders)

#: trials per job: more than a quiet machine runs between the first row and the Ctrl-C
TRIALS = 200
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
