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


def check_ray_request(target: str | None, ray_cfg: Any) -> None:
    """A Ray task that asks a local cluster for more CPUs or GPUs than it has is never
    scheduled: Ray logs "No available node types can fulfill resource request" every 35 s
    and the driver waits in ``ray.get`` forever. Refused (a ``ValueError`` naming the key,
    what the cluster has and the fix) before Ray starts. A cluster joined by address decides
    for itself (it may add nodes); a GPU count only torch could tell is left to Ray."""
    if launcher_name(target) != "ray" or ray_cfg is None:
        return
    init, remote = ray_cfg.get("init") or {}, ray_cfg.get("remote") or {}
    if init.get("address"):
        return
    from runner.core.gpus import visible_gpus

    gpus = visible_gpus()
    # the CPUs this process may run on (a container's pinned set), as Ray counts them; a
    # cgroup CPU quota below it is not seen here, and Ray's own wait then applies
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    has = {"num_cpus": init.get("num_cpus") or cpus,
           "num_gpus": init.get("num_gpus") if init.get("num_gpus") is not None
           else None if gpus is None else len(gpus)}
    for key, what in (("num_cpus", "CPUs"), ("num_gpus", "GPUs")):
        try:
            wanted = float(remote.get(key) or 0)
        except (TypeError, ValueError):
            continue  # Ray's own check names a value that is not a number
        if has[key] is not None and wanted > float(has[key]):
            raise ValueError(
                f"invalid value for 'hydra.launcher.ray.remote.{key}': {remote.get(key)}. "
                f"Each Ray task asks for {wanted:g} {what}, but the local Ray cluster has "
                f"{has[key]}, so no task could ever start. Ask for at most {has[key]}, or "
                "set hydra.launcher.ray.init.address=HOST:PORT to use a cluster that has "
                "them.")
