"""The job's end is loaded while the worker imports torch (``runner.execution.job_file``).

Its file's roofline columns need pandas, which nothing before them does. With the trials in
a worker process the driver imports them before the first trial, while it only waits for
the worker; with ``isolation=none`` the trials run in the driver itself, and nothing is
imported ahead (it would delay the first trial there). A wrapper around the runner records,
at each runner's first trial, whether the roofline module was already loaded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

WRAPPER = """
import runpy, sys
from runner.execution import worker

seen = []
for runner_type in (worker.Supervisor, worker.InProcess):
    def wrapped(self, *args, _original=runner_type.run, **kwargs):
        seen.append("runner.analysis.roofline" in sys.modules)
        return _original(self, *args, **kwargs)
    runner_type.run = wrapped
try:
    sys.argv = ["runner"] + sys.argv[1:]
    runpy.run_module("runner", run_name="__main__", alter_sys=True)
finally:
    print("FIRST TRIAL SAW THE END LOADED:", seen[:1], file=sys.stderr)
"""


@pytest.mark.slow
@pytest.mark.cli
@pytest.mark.parametrize(("isolation", "loaded"), [("process", True), ("none", False)])
def test_the_end_is_loaded_before_the_first_trial_only_when_a_worker_runs_it(
        tmp_path: Path, isolation: str, loaded: bool) -> None:
    from conftest import cli_env

    script = tmp_path / "wrapper.py"
    script.write_text(WRAPPER)
    done = subprocess.run(
        [sys.executable, str(script), "op=vector_add", "shape=[8]", "timer=smoke",
         f"isolation={isolation}", f"results_dir={tmp_path / 'results'}"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"FIRST TRIAL SAW THE END LOADED: [{loaded}]" in done.stderr, done.stderr[-3000:]
