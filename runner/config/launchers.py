"""What a Hydra launcher means for the checks before a sweep: whether its jobs run on this
machine (so their devices resolve against its GPUs), and whether a Ray request can be met."""

from __future__ import annotations

import os
from typing import Any

from runner.core.errors import ConfigError


def runs_here(launcher: Any, ray_address: Any) -> bool:
    """Whether the launcher runs the job on this machine (basic, submitit_local, a local Ray
    cluster), whose GPUs its devices resolve against; SLURM and a Ray cluster joined by
    address resolve them on their own nodes."""
    name = str(launcher or "").rpartition(".")[2]
    return name in ("", "BasicLauncher", "LocalLauncher") or (name == "RayLauncher"
                                                              and not ray_address)


def check_ray_request(launcher: Any, ray_cfg: Any) -> None:
    """A Ray task that asks a local cluster for more CPUs or GPUs than it has is never
    scheduled: Ray logs "No available node types can fulfill resource request" every 35 s
    and ``ray.get`` waits forever, swallowing Ctrl-C. Refused before anything starts. A
    cluster joined by address decides for itself (it may add nodes); a GPU count only torch
    could tell is left to Ray."""
    if not str(launcher or "").endswith("RayLauncher") or ray_cfg is None:
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
    for key, what in (("num_cpus", "CPU"), ("num_gpus", "GPU")):
        try:
            wanted = float(remote.get(key) or 0)
        except (TypeError, ValueError):
            continue  # Ray's own check names a value that is not a number
        if has[key] is not None and wanted > float(has[key]):
            fix = f"Ask for at most {has[key]}" if has[key] else "Use device=cpu with num_gpus=0"
            raise ConfigError(
                f"invalid value for 'hydra.launcher.ray.remote.{key}': {remote.get(key)}. "
                f"Each Ray task asks for {wanted:g} {what}{'' if wanted == 1 else 's'}, but "
                f"the local Ray cluster has {has[key]}, so no task could ever start. {fix}, or set "
                "hydra.launcher.ray.init.address=HOST:PORT to use a cluster that has them.")
