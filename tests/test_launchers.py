"""The cluster presets in ``conf/hydra/launcher/``, tested without a cluster, and the local
launchers (submitit_local; Ray where it is installed) run for real.

``slurm`` and ``slurm_node`` are composed by Hydra onto hydra-submitit-launcher's schema (a
typo in a preset fails here), turned into a submitit executor exactly as the plugin does in
``BaseSubmititLauncher.launch``, and rendered into the sbatch script SLURM would receive.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

CONF = Path(__file__).resolve().parent.parent / "conf"

submitit = pytest.importorskip("submitit", reason="pip install -e .[slurm]")


def _launcher_params(preset: str, *overrides: str) -> dict:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from runner.config import schema

    schema.register()
    # composed only: nothing is written under results_dir
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True,
                      overrides=[f"hydra/launcher={preset}", "results_dir=r",
                                 "sweep_id=s", *overrides])
    params = OmegaConf.to_container(cfg.hydra.launcher, resolve=False)
    params.pop("_target_")
    return params


@pytest.fixture(autouse=True)
def srun_on_path(tmp_path, monkeypatch) -> None:
    """submitit's SlurmExecutor refuses to exist without an ``srun`` on PATH; nothing runs it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def _sbatch_text(params: dict, folder: Path) -> str:
    """The plugin's mapping of its config onto submitit (submitit_launcher.py, ``launch``)."""
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from omegaconf import OmegaConf

    executor = submitit.AutoExecutor(cluster="slurm", folder=str(folder),
                                     slurm_max_num_timeout=params.pop("max_num_timeout"))
    params.pop("submitit_folder")
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    params["name"] = "runner"  # ${hydra.job.name}, resolved by Hydra at launch time
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v
                                  for k, v in params.items()})
    return executor._executor._make_submission_file_text("python -m runner", "uid")


def test_slurm_preset_asks_one_gpu_per_task(tmp_path) -> None:
    text = _sbatch_text(_launcher_params("slurm", "hydra.launcher.partition=gpu"), tmp_path)
    assert "#SBATCH --gpus-per-task=1" in text
    assert "#SBATCH --ntasks-per-node=1" in text
    assert "#SBATCH --cpus-per-task=8" in text
    assert "#SBATCH --partition=gpu" in text
    assert "#SBATCH --time=120" in text
    assert "#SBATCH --array=0-" not in text  # arrays are made per launch, from the jobs
    assert "srun" in text


def test_slurm_node_preset_takes_whole_exclusive_nodes(tmp_path) -> None:
    text = _sbatch_text(_launcher_params("slurm_node"), tmp_path)
    assert "#SBATCH --gpus-per-node=8" in text
    assert "#SBATCH --exclusive" in text
    assert "--gpus-per-task" not in text


def test_a_typo_in_a_preset_key_fails_at_composition(tmp_path) -> None:
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import ConfigKeyError

    with pytest.raises((ConfigCompositionException, ConfigKeyError)):
        _launcher_params("slurm", "hydra.launcher.gpus_per_tsak=2")


# ---------------------------------------------------------------------------------------
# Launchers run for real, on this machine
# ---------------------------------------------------------------------------------------

LAUNCHED = ["op=add", "device=cpu", "timer=smoke", "shape=[[1],[2]]", "seed=1,2", "-m"]


def _launched_rows(run: Any) -> Any:
    assert run.returncode == 0, run.explain()
    (sweep,) = (run.cwd / "results").iterdir()
    return pd.read_parquet(sweep / "results.parquet")


def test_submitit_local_runs_a_multirun_and_every_row_names_where_it_ran(
        start_cli: Any, tmp_path: Path) -> None:
    """Each job in a process submitit starts: its rows name the launcher, the submitit job,
    the node and that process, and merge into the one sweep file."""
    df = _launched_rows(start_cli([*LAUNCHED, "hydra/launcher=submitit_local"],
                                  tmp_path).wait())
    assert sorted(zip(df["job_num"], df["trial_index"])) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert set(df["status"]) == {"ok"} and set(df["launcher"]) == {"submitit_local"}
    assert df["launcher_job_id"].notna().all() and df["node"].notna().all()
    per_job = df.groupby("job_num")[["launcher_job_id", "job_pid"]].nunique()
    assert (per_job == 1).all().all()  # one submitit job, one process per Hydra job
    assert df["launcher_job_id"].nunique() == 2 and df["job_pid"].nunique() == 2
    _assert_worker_started_before_the_job_code(tmp_path)


def _assert_worker_started_before_the_job_code(tmp_path: Path) -> None:
    """Each launched job started its worker before Hydra handed it the job (the "job" mark:
    python_s + hydra_s after the process started), so the worker's torch import overlaps the
    import of the job's code and its planning."""
    from runner.storage.files import read_metadata

    (sweep,) = (tmp_path / "results").iterdir()
    for job_file in sorted(sweep.glob("jobs/*/trials.parquet")):
        startup = read_metadata(job_file)["startup"]
        assert startup["workers_started_at_s"] < startup["python_s"] + startup["hydra_s"], \
            (job_file, startup)


#: Set by CI (.ci/run), which installs the ray extra: there a missing Ray fails the Ray tests
#: instead of skipping them, so they cannot stop running unnoticed.
REQUIRE_RAY = "OPSWEEP_REQUIRE_RAY"


@pytest.fixture
def ray_env(tmp_path: Path) -> Any:
    """Ray installed (else a skip, or a failure under CI), and the environment of a local Ray
    cluster that keeps to the test's own folders: its session files and sockets in a short
    temporary folder (a socket's path must stay under 108 bytes, which ``tmp_path`` is too
    deep for), its auth token under a HOME in ``tmp_path``."""
    for module in ("ray", "hydra_plugins.hydra_ray_launcher"):
        if os.environ.get(REQUIRE_RAY) == "1":
            importlib.import_module(module)
        else:
            pytest.importorskip(module, reason="pip install -e .[ray]")
    short = Path(tempfile.mkdtemp(prefix="ray"))
    yield {"HOME": str(tmp_path / "home"), "RAY_TMPDIR": str(short)}
    shutil.rmtree(short, ignore_errors=True)


def test_ray_runs_a_multirun_and_every_row_names_where_it_ran(
        start_cli: Any, tmp_path: Path, ray_env: dict[str, str]) -> None:
    """Each job a Ray task on a local cluster: its rows name the launcher, the Ray task,
    the Ray node, and merge into the one sweep file."""
    run = start_cli([*LAUNCHED, "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2",
                     "+hydra.launcher.ray.init.include_dashboard=false"], tmp_path / "run",
                    env=ray_env)
    df = _launched_rows(run.wait())
    assert sorted(zip(df["job_num"], df["trial_index"])) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert set(df["status"]) == {"ok"} and set(df["launcher"]) == {"ray"}
    assert df["launcher_job_id"].notna().all() and df["node"].str.contains("ray node").all()
    assert (df.groupby("job_num")["launcher_job_id"].nunique() == 1).all()
    assert df["launcher_job_id"].nunique() == 2  # one Ray task per Hydra job


def test_a_ray_request_the_local_cluster_cannot_meet_exits_2_before_ray_starts(
        start_cli: Any, tmp_path: Path, ray_env: dict[str, str]) -> None:
    """More CPUs per task than the local cluster has: Ray would wait forever."""
    run = start_cli([*LAUNCHED, "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2",
                     "+hydra.launcher.ray.remote.num_cpus=3"], tmp_path, env=ray_env).wait()
    assert run.returncode == 2, run.explain()
    assert "'hydra.launcher.ray.remote.num_cpus': 3" in run.err and "has 2" in run.err
    assert "Traceback" not in run.err and not (tmp_path / "results").exists()


def test_ctrl_c_ends_a_submitit_local_sweep_with_exit_130_and_a_resume_that_completes_it(
        start_cli: Any, tmp_path: Path) -> None:
    """The terminal's Ctrl-C (SIGINT to the whole process group: the driver, submitit's
    controllers, the jobs and their workers) ends a launched sweep as it ends a basic one:
    each job stops after its trial in flight, the driver merges what finished, exits 130
    without a traceback and names the resume command, which then completes the sweep."""
    from runner.storage import journal

    shape = "shape=[" + ",".join(f"[{n}]" for n in range(1, 101)) + "]"
    run = start_cli(["op=vector_add", "device=cpu", "timer=smoke", shape, "seed=1,2", "-m",
                     "hydra/launcher=submitit_local", "sweep_id=s"], tmp_path,
                    new_session=True)
    sweep = tmp_path / "results" / "s"
    deadline = time.monotonic() + 200
    while (run.running and time.monotonic() < deadline
           and sum(journal.count_entries(job) for job in sweep.glob("jobs/*")) < 2):
        time.sleep(0.05)
    run.group_signal(signal.SIGINT)
    run.wait()
    assert run.returncode == 130, run.explain()
    assert "Traceback" not in run.output
    assert f"Continue with: python -m runner.resume results{os.sep}s" in run.output
    stopped = pd.read_parquet(sweep / "results.parquet")
    assert 0 < len(stopped) < 200 and set(stopped["status"]) == {"ok"}
    resumed = start_cli([str(sweep)], tmp_path, module="runner.resume").wait()
    assert resumed.returncode == 0, resumed.explain()
    rows = pd.read_parquet(sweep / "results.parquet")
    assert sorted(zip(rows["job_num"], rows["trial_index"])) == \
        [(j, i) for j in (0, 1) for i in range(100)]  # every trial once


def test_launcher_names_are_short() -> None:
    from runner.execution.launched import launcher_name

    assert launcher_name("hydra_plugins.hydra_submitit_launcher.submitit_launcher."
                         "LocalLauncher") == "submitit_local"
    assert launcher_name("hydra._internal.core_plugins.basic_launcher.BasicLauncher") == "basic"
    assert launcher_name(None) == "basic" and launcher_name("x.MyLauncher") == "MyLauncher"


def test_a_ray_request_beyond_the_local_cluster_is_refused() -> None:
    from runner.config.launchers import check_ray_request

    ray = "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"
    local = {"init": {"address": None, "num_cpus": 2, "num_gpus": 1}}
    with pytest.raises(ValueError, match=r"remote.num_cpus': 4\. .* has 2, so no task"):
        check_ray_request(ray, {**local, "remote": {"num_cpus": 4}})
    with pytest.raises(ValueError, match=r"remote.num_gpus': 2\. .* has 1, so no task"):
        check_ray_request(ray, {**local, "remote": {"num_gpus": 2}})
    check_ray_request(ray, {**local, "remote": {"num_cpus": 2, "num_gpus": 1}})
    check_ray_request(ray, {"init": {"address": "head:6379"}, "remote": {"num_cpus": 999}})
    check_ray_request("x.BasicLauncher", {**local, "remote": {"num_cpus": 999}})


def test_a_ray_gpu_request_without_gpus_is_refused_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray would wait forever for a GPU a local cluster cannot have."""
    from runner.config import launchers
    from runner.core import gpus
    from runner.core.errors import ConfigError

    ray = "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"
    monkeypatch.setattr(gpus, "visible_gpus", lambda: [])
    with pytest.raises(ConfigError, match="num_gpus.*no task could ever start.*device=cpu"):
        launchers.check_ray_request(ray, {"remote": {"num_gpus": 1}})
    # a cluster decides for itself
    launchers.check_ray_request(ray, {"init": {"address": "head:6379"},
                                      "remote": {"num_gpus": 1}})
    launchers.check_ray_request(ray, {"remote": {"num_gpus": 0}})
    monkeypatch.setattr(gpus, "visible_gpus", lambda: None)  # unknown: Ray decides
    launchers.check_ray_request(ray, {"remote": {"num_gpus": 1}})
