"""Where a job runs: the launcher that started it, its job id there, the node and the process.

Why: a sweep spread by submitit (SLURM) or Ray merges rows from many machines into one file;
without these columns a slow or odd row cannot be traced to the node or the scheduler job that
produced it. The columns are declared once, in ``runner.storage.columns``.
"""

from __future__ import annotations

import os
import socket
from typing import Any

#: Hydra launcher classes → the short name the ``launcher`` column holds.
LAUNCHER_NAMES = {
    "BasicLauncher": "basic",
    "LocalLauncher": "submitit_local",
    "SlurmLauncher": "submitit_slurm",
    "RayLauncher": "ray",
    "RayAWSLauncher": "ray_aws",
}
#: Launchers that run each job as a child process of the driver, in the terminal's process
#: group (Ctrl-C: ``runner.execution.interrupt.shield_launched_jobs``).
CHILD_JOB_LAUNCHERS = ("submitit_local",)
#: Where each scheduler puts the id of the job that runs this process, first found first.
JOB_ID_ENV = ("SLURM_ARRAY_JOB_ID", "SLURM_JOB_ID", "SUBMITIT_JOB_ID")


def launcher_name(target: str | None) -> str:
    """``hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher`` →
    ``submitit_local``; an unknown launcher keeps its class name."""
    if not target:
        return "basic"
    name = str(target).rpartition(".")[2]
    return LAUNCHER_NAMES.get(name, name)


def starts_child_jobs(target: str | None) -> bool:
    """Whether the launcher ``target`` runs each job as a child process of the driver."""
    return launcher_name(target) in CHILD_JOB_LAUNCHERS


def prestart_worker(cfg: Any, launcher: str) -> None:
    """A job that a launcher (submitit, Ray) started in a process of its own has no worker
    yet (``python -m runner`` starts one before Hydra runs): start it first, before this
    process imports the job's code (~0.5 s) and plans, so its torch import overlaps both, as
    it does for the basic launcher's jobs."""
    if cfg.isolation != "process" or launcher == "basic":
        return
    from omegaconf import OmegaConf

    from runner.execution import pool, worker

    if worker.supervisor().worker is not None or pool._POOL is not None:
        return
    pool.prestart(cfg.workers, [OmegaConf.to_container(cfg.device)
                                if OmegaConf.is_list(cfg.device) else cfg.device])


def where(target: str | None) -> dict[str, Any]:
    """The ``launcher``, ``launcher_job_id``, ``node`` and ``job_pid`` of this job's rows."""
    name = launcher_name(target)
    return {"launcher": name, "launcher_job_id": _job_id(name), "node": _node(name),
            "job_pid": os.getpid()}


def _job_id(name: str) -> str | None:
    array_task = os.environ.get("SLURM_ARRAY_TASK_ID")
    for key in JOB_ID_ENV:
        if os.environ.get(key):
            value = os.environ[key]
            return f"{value}_{array_task}" if key == "SLURM_ARRAY_JOB_ID" and array_task \
                else value
    if name.startswith("submitit"):
        try:
            import submitit

            return str(submitit.JobEnvironment().job_id)
        except Exception:  # not inside a submitit job after all
            return None
    if name.startswith("ray"):
        context = _ray_context()
        return None if context is None else str(context.get_task_id() or context.get_job_id())
    return None


def _node(name: str) -> str:
    host = socket.gethostname()
    if name.startswith("ray"):
        context = _ray_context()
        if context is not None:
            return f"{host} (ray node {context.get_node_id()[:12]})"
    return host


def _ray_context() -> Any | None:
    import sys

    ray = sys.modules.get("ray")  # only when Ray runs this process: never import it here
    if ray is None or not ray.is_initialized():
        return None
    try:
        return ray.get_runtime_context()
    except Exception:
        return None

